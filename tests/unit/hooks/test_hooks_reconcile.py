"""Reconcile: the pure rules (table and properties) and three concurrent gates through the request path.

Source: docs/hooks.md#reconcile-several-gates-one-decision, docs/hooks.md#native-strategies; docs/configuration.md,
docs/hooks.md#configuring.
"""
from __future__ import annotations

import time

import pytest
from busbar.hooks.reconcile import Decision, Verdict, reconcile
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.hooks.conftest import body_of

TAGS = {0: frozenset({"opus"}), 1: frozenset({"sonnet", "baa"}), 2: frozenset({"baa", "eu"}), 3: frozenset()}


@pytest.mark.parametrize("verdicts,base,expect", [
    ([], None, Decision()),
    ([], ("cheapest", (2, 1, 0, 3)), Decision(policy="cheapest", order=(2, 1, 0, 3))),
    ([Verdict("a", order=(1, 0))], ("cheapest", (2, 1, 0, 3)), Decision(policy="a", order=(1, 0))),
    ([Verdict("a", reject=(451, "x")), Verdict("b", reject=(429, "y"))], None,
     Decision(reject=(451, "x"), policy="a")),
    ([Verdict("a", order=(0,)), Verdict("b", reject=(429, "y"))], None, Decision(reject=(429, "y"), policy="b")),
    ([Verdict("a", restrict=frozenset({"baa"})), Verdict("b", restrict=frozenset({"eu", "opus"}))], None,
     Decision(allowed=frozenset({2}))),
    ([Verdict("a", restrict=frozenset({"baa"})), Verdict("b", order=(0, 3, 2, 1))], None,
     Decision(policy="b", allowed=frozenset({1, 2}), order=(2, 1))),
    ([Verdict("a", order=(2,)), Verdict("b", order=(0, 1))], None, Decision(policy="b", order=(0, 1))),
    ([Verdict("a", order=(2,)), Verdict("r", restrict=frozenset({"opus"})), Verdict("b", order=(1,))],
     ("cheapest", (3, 2, 1, 0)), Decision(policy="cheapest", allowed=frozenset({0}), order=(0,))),
    ([Verdict("a", order=(0,)), Verdict("r", restrict=frozenset({"opus"})), Verdict("b", order=(1,))], None,
     Decision(policy="a", allowed=frozenset({0}), order=(0,))),
    ([Verdict("a", restrict=frozenset({"opus"})), Verdict("b", restrict=frozenset({"eu"}), on_empty="weighted")],
     None, Decision(allowed=frozenset({0}))),
    ([Verdict("a", restrict=frozenset({"opus"})), Verdict("b", restrict=frozenset({"eu"}))], None,
     Decision(reject=(503, "hook 'b' restricted this request to members tagged eu, and no member left can serve it"),
              policy="b", empty=True)),
], ids=["nothing", "base-only", "gate-order-beats-base", "first-reject-surfaces", "reject-beats-order",
        "restricts-intersect", "order-revalidated", "last-order-wins", "all-orders-empty-base",
        "earlier-order-survives", "on-empty-weighted", "on-empty-reject"])
def test_reconcile_table(verdicts, base, expect):
    assert reconcile(verdicts, TAGS, base) == expect


verdict = st.builds(
    Verdict, policy=st.sampled_from(["a", "b", "c", "d"]),
    reject=st.none() | st.tuples(st.integers(400, 499), st.text(max_size=5)),
    restrict=st.none() | st.frozensets(st.sampled_from(["opus", "sonnet", "baa", "eu", "zz"]), min_size=1),
    order=st.none() | st.lists(st.integers(0, 3), min_size=1, max_size=6).map(tuple),
    on_empty=st.sampled_from(["reject", "weighted"]))


@given(st.lists(verdict, max_size=6), st.none() | st.permutations([0, 1, 2, 3]).map(tuple))
def test_reconcile_properties(verdicts, ranking):
    base = ("cheapest", ranking) if ranking else None
    d = reconcile(verdicts, TAGS, base)
    rejects = [v for v in verdicts if v.reject is not None]
    if rejects:                                                   # any reject wins, the first surfaces
        assert d.reject == rejects[0].reject and d.policy == rejects[0].policy
        return
    if d.reject is not None:                                      # only an empty restriction rejects
        assert d.empty and d.reject[0] == 503
        return
    assert d.allowed is None or d.allowed                         # never an empty allowed set
    if d.order is not None:                                       # an order stays inside the restriction
        assert d.allowed is None or set(d.order) <= d.allowed
    assert reconcile(verdicts, TAGS, base) == d                   # deterministic


POOL = """
pools:
  p:
    hooks:
      - { module: a, timeout_ms: 1000, priority: 1 }
      - { module: b, timeout_ms: 1000, priority: 2 }
      - { module: c, timeout_ms: 1000, priority: 0 }
    members:
      - { model: big, tags: [opus] }
      - { model: mid, tags: [sonnet, baa] }
      - { model: small, tags: [baa] }
"""


def after(delay, arm):
    def fn(payload, settings):
        time.sleep(delay)
        return arm
    return fn


async def test_three_concurrent_gates_reject_wins_lowest_priority_surfaces(bed_factory):
    bed = bed_factory(POOL, {"a": after(0.1, {"reject": {"status": 451, "message": "from a"}}),
                             "b": after(0.1, {"reject": {"status": 429, "message": "from b"}}),
                             "c": after(0.1, {"order": [0]})})
    t = time.monotonic()
    r = await bed.send("p")
    took = time.monotonic() - t
    assert (r.status, body_of(r)["error"]["message"], r.headers["x-busbar-route-policy"]) == (451, "from a", "a")
    assert 0.1 <= took < 0.25                                       # the slowest gate, not the sum (0.3)
    assert bed.upstream == []


async def test_three_concurrent_gates_restrict_then_last_order_revalidated(bed_factory):
    # chain order by priority: c (0), a (1), b (2). a restricts to baa; c and b order; b is last and wins,
    # re-validated against the restriction (big, idx 0, is dropped from it).
    bed = bed_factory(POOL, {"a": after(0.05, {"restrict": {"tags_any": ["baa"]}}),
                             "b": after(0.02, {"order": [0, 2, 1]}),
                             "c": after(0.0, {"order": [1]})})
    r = await bed.send("p")
    assert (r.status, r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == (200, "small", "b")


async def test_ties_keep_globals_first_then_config_order(bed_factory):
    cfg = """
global_hooks:
  - { module: g, kind: gate, timeout_ms: 1000 }
pools:
  p:
    hooks:
      - { module: a, timeout_ms: 1000 }
      - { module: b, timeout_ms: 1000 }
    members: [ { model: big }, { model: mid }, { model: small } ]
"""
    bed = bed_factory(cfg, {"g": after(0, {"order": [0]}), "a": after(0, {"order": [1]}),
                            "b": after(0, {"order": [2]})})
    r = await bed.send("p")
    assert r.headers["x-busbar-route-policy"] == "b" and r.headers["x-busbar-route-target"] == "small"
    bed2 = bed_factory(cfg, {"g": after(0, {"reject": {"status": 403, "message": "global"}}),
                             "a": after(0, {"reject": {"status": 403, "message": "pool"}}), "b": after(0, {})})
    r2 = await bed2.send("p")
    assert body_of(r2)["error"]["message"] == "global"


async def test_gate_order_layers_over_the_base_strategy(bed_factory):
    cfg = """
pools:
  p:
    hooks: [ cheapest, { module: a, timeout_ms: 1000 } ]
    members: [ { model: big }, { model: mid }, { model: small } ]
"""
    bed = bed_factory(cfg, {"a": after(0, {})})
    r = await bed.send("p")
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == ("small", "cheapest")
    bed.plugins["a"].fn = after(0, {"order": [1]})
    r = await bed.send("p")
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == ("mid", "a")
