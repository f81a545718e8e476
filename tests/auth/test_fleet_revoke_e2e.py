"""Two busbar processes sharing one SQLite store: a key minted through one node's admin API works on
the other (the fleet shares the signing key through the store), and a revocation through the first
node is refused by the second within a second."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tests.auth.shapes import assert_refused, post
from tests.auth.test_admin_keys_e2e import Gateway
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path) -> str:
    plugins = tmp_path / "plugins"
    if not plugins.exists():
        plugins.mkdir()
        shutil.copy(ROOT / "dist" / "plugins" / "busbar-store-sqlite-1.5.0.tar.gz", plugins)
    return f"""listen: "127.0.0.1:{{port}}"
plugins: {{ enabled: true, dir: {plugins} }}
store: {{ module: sqlite, settings: {{ db_path: "{tmp_path / 'fleet.db'}" }} }}
auth:
  chain: [keys]
providers:
  up-openai: {{ protocol: openai, base_url: MOCK, api_key: {{ env: KEY_OPENAI }} }}
models:
  m-openai: {{ provider: up-openai }}
pools:
  to-openai: {{ members: [ {{ model: m-openai }} ] }}
"""


@pytest.fixture
def fleet(tmp_path, mock):
    text = _config(tmp_path)
    for i in range(2):
        (tmp_path / f"n{i}").mkdir()
    nodes = [Gateway(text, tmp_path / f"n{i}", mock.url) for i in range(2)]
    started = []
    try:
        for n in nodes:
            started.append(n.start())
        yield nodes
    finally:
        for n in started:
            n.stop()


def test_mint_on_one_node_revoke_is_enforced_on_the_other_within_a_second(fleet):
    a, b = fleet
    key = a.mint()
    wait_until(lambda: post(b.url, "openai", {"authorization": f"Bearer {key['token']}"}).status_code == 200,
               timeout=1.0)
    t0 = time.monotonic()
    assert a.admin.post(f"/keys/{key['id']}/revoke").status_code == 200
    wait_until(lambda: post(b.url, "openai", {"authorization": f"Bearer {key['token']}"}).status_code == 401,
               timeout=1.0)
    assert time.monotonic() - t0 < 1.0
    assert_refused(post(b.url, "openai", {"authorization": f"Bearer {key['token']}"}), "openai")
    assert_refused(post(a.url, "openai", {"authorization": f"Bearer {key['token']}"}), "openai")
