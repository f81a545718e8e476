"""Limits with minted keys, on every store: C027 and C028 end to end through a real busbar process.

Each gateway runs the built-in ``keys`` chain and the admin API; keys are minted with
``POST /api/v1/admin/keys`` bound to a group and used by the official OpenAI SDK. On memory,
sqlite, postgres and valkey: C027 (5 simultaneous requests against $0.0100 with a $0.004 worst
case: exactly 2 admitted, 3 refused with ``insufficient_quota``, no upstream call for them) and C028
(a chain of requests limits: 2 admitted, the 3rd refused naming the bucket; the refused request uses
no quota). On the durable stores the gateway is then restarted on the same store: its counters are
seeded from the flushed ledger, so $0.0070 left admits one more worst case, not two. A key bound to a
group the config does not have is refused 403 naming it. docs/limits.md.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.fleet.conftest import plugins_dir, store_config  # noqa: F401 - fixtures
from tests.limits.test_limits_e2e import PROMPT, _openai_body, _together
from tests.support.gateway import BIN, BusbarProcess, free_port
from tests.support.groupkey import mint_key

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ADMIN_TOKEN = "adm-limits-7c1f"
CONFIG = """
listen: "127.0.0.1:{port}"
admin_listen: "127.0.0.1:ADMIN_PORT"
auth:
  chain: [ keys ]
  admin_auth: [ { admin-tokens: { token: { env: T_ADMIN_TOKEN } } } ]
STORE
advanced: { usage_flush_interval_ms: 50 }
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  gpt: { provider: oa }
pools:
  p: { members: [ { model: gpt } ] }
rate_card:
  gpt: { input_utok: 1.0, output_utok: 3.0 }
groups:
  g27: { limits: [ { budget: 10000, per: month } ] }
  acme: { limits: [ { requests: 100, per: minute } ] }
  growth: { parent: acme, limits: [ { requests: 2, per: hour } ] }
  bob: { parent: growth, limits: [ { requests: 10, per: minute } ] }
"""


class Gw(BusbarProcess):
    def __init__(self, tmp: Path, mock_url: str, store_yaml: str, admin_port: int) -> None:
        text = CONFIG.replace("MOCK", mock_url).replace("STORE", store_yaml).replace("ADMIN_PORT", str(admin_port))
        super().__init__(text, tmp, env={"T_OPENAI_KEY": "sk-test", "T_ADMIN_TOKEN": ADMIN_TOKEN})
        self.admin = httpx.Client(base_url=f"http://127.0.0.1:{admin_port}/api/v1/admin", timeout=30,
                                  headers={"authorization": f"Bearer {ADMIN_TOKEN}"})

    def mint(self, group: str) -> tuple[str, str]:
        return mint_key(self.admin, [self.url], group)

    def stop(self) -> None:
        self.admin.close()
        super().stop()


def _store_yaml(backend: str, make_store, plugins: Path) -> str:  # noqa: ANN001 - the fixture's callable
    if backend == "memory":
        return ""
    module, settings = make_store(backend)
    return f"plugins: {{ enabled: true, dir: {plugins} }}\nstore: {{ module: {module}, settings: {json.dumps(settings)} }}"


def _c027(gw: Gw, mock, token: str) -> None:  # noqa: ANN001
    mock.script([{"match": {"protocol": "openai"}, "times": 5,
                  "response": {"body": _openai_body(900, 200), "delay_ms": 700}}])
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=token, max_retries=0)
    outcomes = _together(5, lambda: client.chat.completions.create(
        model="p", max_tokens=1000, messages=[{"role": "user", "content": PROMPT}]))
    refused = [o for o in outcomes if isinstance(o, openai.RateLimitError)]
    assert sum(isinstance(o, openai.types.chat.ChatCompletion) for o in outcomes) == 2
    assert len(refused) == 3
    assert {e.body["code"] for e in refused} == {"insufficient_quota"}
    assert refused[0].body["message"] == "group 'g27': budget per month is exhausted (budget 10000)"
    assert len(mock.requests()) == 2


def _c028(gw: Gw, mock, token: str) -> None:  # noqa: ANN001
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=token, max_retries=0)
    for _ in range(2):
        assert client.chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}]).choices
    with pytest.raises(openai.RateLimitError) as exc:
        client.chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}])
    assert exc.value.body["message"] == "group 'growth': requests per hour exceeded (limit 2)"
    assert 1 <= int(exc.value.response.headers["retry-after"]) <= 3600


def _reports(gw: Gw, id27: str) -> None:
    """The admin usage and groups reports after C027 (2 × 1 500 µ) and C028 (2 default replies)."""
    g = gw.admin.get("/groups/g27").json()
    assert g == {"name": "g27", "parent": None, "enabled": True, "runtime": False, "chain": ["g27"],
                 "limits": [{"metric": "budget", "amount": 10000, "per": "month", "pool": None, "shadow": False, "strict": False,
                             "bucket": "group:g27@month", "used": 3000, "reserved": 0, "remaining": 7000}]}
    growth = gw.admin.get("/groups/growth").json()["limits"][0]
    assert (growth["bucket"], growth["used"], growth["remaining"]) == ("group:growth@hour", 2, 0)
    assert gw.admin.get("/groups/nope").status_code == 404
    mine = gw.admin.get(f"/keys/{id27}/usage").json()
    assert {k: mine[k] for k in ("group", "input", "output", "billable_requests", "spend_micros",
                                 "budget_remaining")} == {"group": "g27", "input": 1800, "output": 400,
                                                          "billable_requests": 2, "spend_micros": 3000,
                                                          "budget_remaining": 7000}
    day = gw.admin.get("/usage").json()
    assert [m["model"] for m in day["by_model"]] == ["gpt"]
    assert day["by_model"][0]["spend_micros"] == sum(k["spend_micros"] for k in day["by_key"]) \
        == day["totals"]["spend_micros"]
    assert (day["by_key"][0]["key_id"], day["by_key"][0]["spend_micros"]) == (id27, 3000)
    assert len(day["by_key"]) == 2 and day["others"] is None
    assert gw.admin.get("/usage", params={"day": "2026-13-01"}).status_code == 400
    # `busbar admin --json usage` prints the same report
    out = subprocess.run([str(BIN / "busbar"), "admin", "--json", "usage"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "BUSBAR_ADMIN_URL": str(gw.admin.base_url).removesuffix("/api/v1/admin/"),
                              "BUSBAR_ADMIN_TOKEN": ADMIN_TOKEN})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == gw.admin.get("/usage").json()


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres", "valkey"])
def test_c027_and_c028_with_minted_keys(backend, mock, store_config, plugins_dir, tmp_path) -> None:  # noqa: ANN001, F811
    store_yaml = _store_yaml(backend, store_config, plugins_dir)
    gw = Gw(tmp_path, mock.url, store_yaml, free_port()).start()
    try:
        (id27, k27), (_, kbob) = gw.mint("g27"), gw.mint("bob")
        mock.clear()
        _c027(gw, mock, k27)
        mock.clear()
        _c028(gw, mock, kbob)
        time.sleep(0.3)                                  # flush intervals: the ledger is in the store
        _reports(gw, id27)
    finally:
        gw.stop()
    if backend == "memory":
        return
    again = Gw(tmp_path, mock.url, store_yaml, free_port()).start()     # the same store, a new node
    try:
        mock.clear()
        mock.script([{"match": {"protocol": "openai"}, "times": 2,
                      "response": {"body": _openai_body(900, 200), "delay_ms": 700}}])
        client = openai.OpenAI(base_url=again.url + "/v1", api_key=k27, max_retries=0)
        outcomes = _together(2, lambda: client.chat.completions.create(
            model="p", max_tokens=1000, messages=[{"role": "user", "content": PROMPT}]))
        # $0.0030 spent is in the ledger: $0.0070 left holds one $0.004 worst case, not two
        assert sum(isinstance(o, openai.types.chat.ChatCompletion) for o in outcomes) == 1
        assert sum(isinstance(o, openai.RateLimitError) for o in outcomes) == 1
        bob = openai.OpenAI(base_url=again.url + "/v1", api_key=kbob, max_retries=0)
        with pytest.raises(openai.RateLimitError):      # growth's 2 of this hour are in the ledger too
            bob.chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}])
    finally:
        again.stop()
