"""The single-inline-gate fast path keeps every guarantee of the general decide pass.

A pool whose only decide gate declares ``busbar_inline`` is decided by ``fire_inline`` (no task,
future or wait; its candidate list handed over, not copied). Same outcomes as the worker path for
every failure and ``on_error``, same isolation of what later hooks see, same reject and restrict
handling. Source: docs/hooks.md#fail-safety, docs/hooks.md#what-a-gate-may-answer.
"""
from __future__ import annotations

import pytest

from tests.unit.hooks.conftest import body_of
from tests.unit.hooks.test_hooks_on_error import FAILURES, REASON, WHAT, pool
from tests.unit.hooks.test_hooks_taps import wait_for


def _inline(bed):
    facade = bed.gw.hooks.facade("g")
    facade.inline = True                      # what declares_inline() finds on a declaring plugin
    chain = bed.gw.hooks.chains["p"]
    assert chain.solo is not None and chain.solo.facade is facade
    return facade


@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("on_error, target, policy", [("nothing", "mid", "weighted"), ("first", "big", "first"),
                                                      ("cheapest", "small", "cheapest")])
async def test_inline_failures_follow_on_error(bed_factory, failure, on_error, target, policy):
    bed = bed_factory(pool(on_error), {"g": FAILURES[failure]})
    _inline(bed)
    r = await bed.send("p")
    assert (r.status, r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == \
        (200, target, policy)


@pytest.mark.parametrize("failure", list(FAILURES))
async def test_inline_failure_under_reject_fails_closed(bed_factory, failure):
    bed = bed_factory(pool("reject"), {"g": FAILURES[failure]})
    _inline(bed)
    r = await bed.send("p")
    assert r.status == 503 and r.headers["x-busbar-hook-error"] == REASON[failure]
    assert body_of(r)["error"]["message"] == f"hook 'g' {WHAT[failure]} and its on_error is reject; the " \
                                              f"request was not routed"
    assert bed.upstream == []


async def test_inline_counts_like_the_worker_path(bed_factory):
    bed = bed_factory(pool("nothing"), {"g": FAILURES["crash"]})
    facade = _inline(bed)
    for _ in range(3):
        await bed.send("p")
    assert (facade.calls, facade.errors, facade.timeouts) == (3, 3, 0)


async def test_inline_reject_order_and_restrict(bed_factory):
    replies = iter([{"reject": {"status": 451, "message": "no"}}, {"order": [2, 9, 2, 0]},
                    {"restrict": {"tags_any": ["cheap"]}, "order": [0, 2]}, {}])
    cfg = pool("nothing").replace("{ model: small, weight: 1 }", "{ model: small, weight: 1, tags: [cheap] }")
    bed = bed_factory(cfg, {"g": lambda p, s: next(replies)})
    _inline(bed)
    r = await bed.send("p")
    assert (r.status, body_of(r)["error"]["message"], r.headers["x-busbar-route-policy"]) == (451, "no", "g")
    r = await bed.send("p")
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == ("small", "g")
    r = await bed.send("p")
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == ("small", "g")
    r = await bed.send("p")                                         # abstain: SWRR
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == ("mid", "weighted")


async def test_a_mutating_inline_gate_changes_nothing_later_hooks_see(bed_factory):
    """The gate owns its candidate list; the cached request view it was sent a copy of stays intact
    for the taps of the same request."""
    def vandal(payload, settings):
        payload["request"]["total_chars"] = -1
        payload["request"]["pool"] = "hacked"
        for c in payload["candidates"]:
            c["idx"] = 99
            c.setdefault("tags", []).append("x")
        payload["candidates"].clear()
        return {"order": [2]}
    cfg = pool("nothing", extra=", { module: t, kind: tap, at: attempt }")
    bed = bed_factory(cfg, {"g": vandal, "t": lambda p, s: {}})
    _inline(bed)
    for _ in range(2):
        r = await bed.send("p", "hello world")
        assert r.headers["x-busbar-route-target"] == "small"
    assert wait_for(lambda: len(bed.seen("t")) == 2)
    taps = bed.seen("t")
    assert all(m["request"]["total_chars"] == 11 and m["request"]["pool"] == "p" for m in taps)
    cands = bed.gw.hooks.chains["p"].statics
    assert [c["idx"] for c in cands.values()] == [0, 1, 2] and all("tags" not in c for c in cands.values())


async def test_the_prompt_view_handed_to_an_inline_gate_is_rebuilt_for_its_fallback(bed_factory):
    """The solo gate gets the cached prompt view itself (no copy); when it fails after mutating it,
    its ``on_error`` fallback is sent a freshly built view, never the mutated one."""
    def vandal(payload, settings):
        payload["request"]["messages"][0]["text"] = "clean"
        payload["request"]["messages"].append({"role": "user", "text": "injected"})
        raise RuntimeError("boom")
    cfg = """
pools:
  p:
    hooks:
      - { module: g, timeout_ms: 50, prompt: ro, on_error: { hook: backup } }
      - { module: backup, kind: gate, timeout_ms: 500, prompt: ro, on_error: nothing, shadow: false }
    members: [ { model: big }, { model: mid }, { model: small } ]
"""
    bed = bed_factory(cfg, {"g": vandal, "backup": lambda p, s: {"order": [2]}})
    chain = bed.gw.hooks.chains["p"]
    chain.solo = chain.gates[0]                  # the fallback is a decide gate too: pin the solo path
    _inline(bed)
    r = await bed.send("p", "my secret")
    assert r.headers["x-busbar-route-target"] == "small"
    (seen,) = bed.seen("backup")
    assert seen["request"]["messages"] == [{"role": "user", "text": "my secret"}]
    assert bed.seen("g")[0]["request"]["messages"] == [{"role": "user", "text": "my secret"}]
