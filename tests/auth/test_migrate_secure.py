"""A 1.x deployment that required client tokens migrates to a closed front door.

``busbar --migrate-config`` turns ``auth.client_tokens`` (with or without ``auth.mode``) into
``auth.chain: [keys]`` with a TODO naming ``busbar admin keys mint``; the migrated config boots and a
request without a minted key, or with the old static token, is refused natively.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.auth.shapes import assert_refused, post
from tests.support.gateway import BusbarProcess

BUSBAR = str(Path(sys.executable).parent / "busbar")
OLD = """listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key_env: KEY_OPENAI }
models:
  m-openai: { provider: up-openai }
pools:
  to-openai:
    members:
      - { target: m-openai }
"""
TODO = ("# TODO(migrate): static tokens are gone in 1.5.0: mint a signed key for every caller with 'busbar admin "
        "keys mint --name <caller>' (docs/auth.md#minting-keys); 1.x bearer tokens stop working")


def _migrate(tmp_path, auth: str) -> str:
    old = tmp_path / "old.yaml"
    old.write_text(OLD + auth)
    r = subprocess.run([BUSBAR, "--migrate-config", str(old)], capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = lines.index("auth:")
    assert lines[at + 1:at + 3] == [f"  {TODO}", "  chain: [keys]"]
    return r.stdout


def test_a_bearer_mode_deployment_migrates_to_the_keys_chain(tmp_path):
    _migrate(tmp_path, "auth:\n  mode: bearer\n  client_tokens: [team-token-1]\n")


def test_migrated_token_deployment_refuses_callers_without_a_minted_key(tmp_path, mock):
    new = _migrate(tmp_path, "auth:\n  client_tokens: [team-token-1]\n")
    gw = BusbarProcess(new.replace("MOCK", mock.url), tmp_path, env={"KEY_OPENAI": "sk-o"})
    with gw:
        for headers in ({}, {"authorization": "Bearer team-token-1"}):
            assert_refused(post(gw.url, "openai", headers), "openai")
    assert mock.requests() == []
