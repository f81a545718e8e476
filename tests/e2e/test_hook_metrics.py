"""The hook decision latency histogram through a real busbar (docs/operations.md#prometheus-metrics,
docs/hooks.md#metrics): ``busbar_hook_decision_duration_seconds{pool,hook,outcome}`` observes every
gate call, replies and failures alike, and its count equals the number of requests that called the gate."""
from __future__ import annotations

import re

import httpx
import pytest
from busbar.hooks.fire import WALL_ALLOWANCE_S

from tests.e2e.test_hooks_e2e import HEAD, hook_plugins  # noqa: F401 - the scripted hook, packed once

POOLS = """
pools:
  ordered:
    hooks: [ { module: scripted, timeout_ms: 2000, settings: { mode: order, order: [1, 0] } } ]
    members: [ { model: oa-a }, { model: oa-b } ]
  slow-open:
    hooks: [ { module: scripted, timeout_ms: 100, on_error: nothing, settings: { mode: sleep, sleep_s: 1 } } ]
    members: [ { model: oa-a } ]
  crashy:
    hooks: [ { module: scripted, timeout_ms: 2000, on_error: first, settings: { mode: crash } } ]
    members: [ { model: oa-a } ]
  rewritten:
    hooks: [ { module: scripted, timeout_ms: 2000, prompt: rw, settings: { mode: rewrite, text: "compressed" } } ]
    members: [ { model: oa-a } ]
  plain: { members: [ { model: oa-a } ] }
"""
FAMILY = "busbar_hook_decision_duration_seconds"


def _series(text: str) -> dict[str, float]:
    """Every sample of the hook decision histogram: ``{series: value}``."""
    return {m.group(1): float(m.group(2))
            for m in re.finditer(rf"^({FAMILY}_\w+\{{[^}}]*\}}) (\S+)$", text, re.MULTILINE)}


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, hook_plugins):  # noqa: F811 - the imported fixture
    _, trust = hook_plugins
    return gateway_factory(HEAD + trust + POOLS, mock.url, env={"BUSBAR_STATE_FILE": ""})


def _chat(gw, pool: str) -> httpx.Response:
    return httpx.post(gw.url + "/v1/chat/completions", timeout=30,
                      json={"model": pool, "messages": [{"role": "user", "content": "hi"}]})


def test_every_gate_call_is_observed_with_its_outcome(gw):
    assert [_chat(gw, "ordered").status_code for _ in range(3)] == [200, 200, 200]
    assert [_chat(gw, "slow-open").status_code for _ in range(2)] == [200, 200]
    assert _chat(gw, "crashy").status_code == 200
    assert [_chat(gw, "rewritten").status_code for _ in range(2)] == [200, 200]   # the transform pass
    assert _chat(gw, "plain").status_code == 200            # no gate: nothing observed
    text = httpx.get(gw.url + "/metrics").text
    s = _series(text)
    counts = {k: v for k, v in s.items() if k.startswith(FAMILY + "_count")}
    assert counts == {
        f'{FAMILY}_count{{hook="scripted",outcome="ok",pool="ordered"}}': 3.0,
        f'{FAMILY}_count{{hook="scripted",outcome="timeout",pool="slow-open"}}': 2.0,
        f'{FAMILY}_count{{hook="scripted",outcome="error",pool="crashy"}}': 1.0,
        f'{FAMILY}_count{{hook="scripted",outcome="ok",pool="rewritten"}}': 2.0,
    }
    assert f"# TYPE {FAMILY} histogram" in text
    # a timed-out call is observed at its cut: at least timeout_ms, within the hard deadline (+ slack)
    timeout_sum = s[f'{FAMILY}_sum{{hook="scripted",outcome="timeout",pool="slow-open"}}']
    assert 2 * 0.1 <= timeout_sum <= 2 * (0.1 + WALL_ALLOWANCE_S + 0.3)
    assert s[f'{FAMILY}_bucket{{hook="scripted",le="0.05",outcome="timeout",pool="slow-open"}}'] == 0.0
    assert s[f'{FAMILY}_bucket{{hook="scripted",le="+Inf",outcome="timeout",pool="slow-open"}}'] == 2.0
    assert s[f'{FAMILY}_bucket{{hook="scripted",le="+Inf",outcome="ok",pool="ordered"}}'] == 3.0
    assert 0 < s[f'{FAMILY}_sum{{hook="scripted",outcome="ok",pool="ordered"}}'] < 3 * 2.0
