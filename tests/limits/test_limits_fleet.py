"""Three busbar nodes on one PostgreSQL store, default (per-node) limits: the overshoot stays within
the bound docs/limits.md#fleets states, and a node that starts later is seeded from the ledger.

Group ``g`` has ``requests: 10, per: hour``. The three nodes start together (each seeds 0 from the
ledger) and take 60 requests round robin: each admits its own 10, so the fleet admits 30, an
overshoot of 20 = (N - 1) × cap, the stated worst case, never more. A fourth node started after the
flushes loads the 30 admitted requests from the ledger and admits none. Every request sends one key
bound to ``g``, minted on the first node and synced to the others through the store.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.fleet.conftest import plugins_dir, store_config  # noqa: F401 - fixtures
from tests.limits.test_limits_stores import _store_yaml
from tests.support.groupkey import GroupKeyProcess, await_key

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CONFIG = """
listen: "127.0.0.1:{port}"
STORE
advanced: { usage_flush_interval_ms: 50 }
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  gpt: { provider: oa }
groups:
  g: { limits: [ { requests: 10, per: hour } ] }
"""


def _node(tmp, mock_url: str, store_yaml: str) -> GroupKeyProcess:  # noqa: ANN001
    text = CONFIG.replace("MOCK", mock_url).replace("STORE", store_yaml)
    return GroupKeyProcess(text, tmp, env={"T_OPENAI_KEY": "sk-test"}, mint=False)


def test_three_nodes_overshoot_within_the_stated_bound(mock, store_config, plugins_dir, tmp_path) -> None:  # noqa: ANN001, F811
    store_yaml = _store_yaml("postgres", store_config, plugins_dir)
    nodes = [_node(tmp_path, mock.url, store_yaml) for _ in range(3)]
    nodes[0].start()                                 # creates the schema
    with ThreadPoolExecutor(2) as pool:              # the other two boot together
        list(pool.map(lambda n: n.start(), nodes[1:]))
    body = {"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}
    try:
        headers = {"authorization": f"Bearer {nodes[0].mint('g', nodes=nodes)[1]}"}
        statuses = [httpx.post(nodes[i % 3].url + "/v1/chat/completions", json=body, timeout=30,
                               headers=headers).status_code
                    for i in range(60)]
        per_node = [sum(1 for j, s in enumerate(statuses) if j % 3 == n and s == 200) for n in range(3)]
        assert per_node == [10, 10, 10]
        assert statuses.count(429) == 30
        assert 30 - 10 <= (3 - 1) * 10               # overshoot within (N - 1) × cap
        time.sleep(0.3)
    finally:
        for n in nodes:
            n.stop()                                 # each drains and flushes its ledger at shutdown
    late = _node(tmp_path, mock.url, store_yaml).start()
    try:
        await_key([late.url], headers["authorization"][7:])
        r = httpx.post(late.url + "/v1/chat/completions", json=body, timeout=30, headers=headers)
        assert r.status_code == 429
        assert r.json()["error"]["message"] == "group 'g': requests per hour exceeded (limit 10)"
    finally:
        late.stop()
