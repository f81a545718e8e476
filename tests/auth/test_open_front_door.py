"""The quickstart runs with no auth chain: it keeps serving without a key (``/v1/models`` and
``/healthz?pool=`` included), and the boot says the front door is open."""
from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.gateway import BusbarProcess

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_config_serves_without_a_key_and_warns(tmp_path, mock):
    text = (ROOT / "examples" / "quickstart" / "config.yaml").read_text()
    text = text.replace('listen: "127.0.0.1:8080"', 'listen: "127.0.0.1:{port}"').replace("http://127.0.0.1:9100",
                                                                                         mock.url)
    gw = BusbarProcess(text, tmp_path, env={"MOCK_OPENAI_KEY": "sk-o", "MOCK_ANTHROPIC_KEY": "sk-ant-api-a",
                                            "BUSBAR_LOG": "warn"})
    with gw:
        r = httpx.post(gw.url + "/v1/chat/completions", timeout=10,
                       json={"model": "assistant", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200
        models = httpx.get(gw.url + "/v1/models", timeout=10)            # the catalog stays open too
        assert [m["id"] for m in models.json()["data"]] == ["assistant", "gpt-4o-mini", "claude-haiku"]
        health = httpx.get(gw.url + "/healthz", params={"pool": "assistant"}, timeout=10)
        assert (health.status_code, health.text) == (200, "ok")
    assert "auth.chain: [] is an open front door: no client authentication (development only)" in gw.logs()
    assert not (tmp_path / "busbar-signing.key").exists()          # no keys verifier: no key generated
