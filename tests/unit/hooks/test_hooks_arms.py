"""Every reply arm through the real request path (``forward``): exact status, body, headers,
upstream traffic and metrics.

Source: docs/hooks.md#what-a-gate-may-answer, docs/hooks.md#what-a-hook-receives,
docs/hooks.md#observability.
"""
from __future__ import annotations

import time

import pytest

from tests.unit.hooks.conftest import body_of

POOL = """
pools:
  smart:
    hooks: [ { module: g, timeout_ms: 500 } ]
    members:
      - { model: big, tier: large, tags: [opus] }
      - { model: mid, tags: [sonnet, baa] }
      - { model: small }
"""


def reply_with(arm):
    return lambda payload, settings: arm


async def test_abstain_empty_object_routes_by_swrr_and_names_weighted(bed_factory):
    bed = bed_factory(POOL, {"g": reply_with({})})
    r = await bed.send("smart")
    assert r.status == 200
    assert r.headers["x-busbar-route-policy"] == "weighted"
    assert r.headers["x-busbar-route-target"] == "big"     # SWRR's first pick with equal weights
    assert "busbar_route_policy_selections_total{" not in bed.gw.metrics.render().decode()   # no selection


@pytest.mark.parametrize("arm", [{}, {"abstain": True}, {"order": []}, {"order": None}, {"order": [99, -1]},
                                 {"abstain": True, "order": [2]}, {"report": {"x": 1}}, {"unknown": 1}],
                         ids=["empty", "abstain-true", "empty-order", "null-order", "unknown-idx",
                              "abstain-beats-order", "reserved-report", "unknown-field"])
async def test_abstain_spellings(bed_factory, arm):
    bed = bed_factory(POOL, {"g": reply_with(arm)})
    r = await bed.send("smart")
    assert (r.status, r.headers["x-busbar-route-policy"], r.headers["x-busbar-route-target"]) == \
        (200, "weighted", "big")


async def test_order_is_the_walk_and_is_counted(bed_factory):
    bed = bed_factory(POOL, {"g": reply_with({"order": [2, 2, 7, 0]})})
    r = await bed.send("smart")
    assert r.status == 200
    assert r.headers["x-busbar-route-policy"] == "g"
    assert r.headers["x-busbar-route-target"] == "small"
    text = bed.gw.metrics.render().decode()
    assert 'busbar_route_policy_selections_total{policy="g",pool="smart"} 1.0' in text


async def test_order_omitted_members_are_demoted_not_excluded(bed_factory):
    cfg = POOL.replace("{ model: big, tier: large, tags: [opus] }", "{ model: fail-a }").replace(
        "{ model: mid, tags: [sonnet, baa] }", "{ model: fail-b }")
    bed = bed_factory(cfg, {"g": reply_with({"order": [0, 1]})})
    r = await bed.send("smart")
    assert r.status == 200 and r.headers["x-busbar-route-target"] == "small"
    assert [m for m, _ in bed.upstream] == ["fail-a", "fail-b", "small"]


@pytest.mark.parametrize("reject,status,message", [
    ({"status": 451, "message": "Request blocked: contains an unredacted SSN."}, 451,
     "Request blocked: contains an unredacted SSN."),
    ({"status": 200, "message": "x"}, 403, "x"),
    ({"status": 503}, 403, "Request rejected by the routing policy."),
    ({"status": 399}, 403, "Request rejected by the routing policy."),
    ({"status": 500}, 403, "Request rejected by the routing policy."),
    ({"status": "451"}, 403, "Request rejected by the routing policy."),
    ({"status": 451.0}, 403, "Request rejected by the routing policy."),
    ({"status": True}, 403, "Request rejected by the routing policy."),
    (True, 403, "Request rejected by the routing policy."),
    ("no", 403, "Request rejected by the routing policy."),
    (0, 403, "Request rejected by the routing policy."),
    ([], 403, "Request rejected by the routing policy."),
    ({"message": 42}, 403, "Request rejected by the routing policy."),
    ({"message": "a\u202eb\u200bc\nd\x00e\u2028f"}, 403, "abcdef"),
    ({"message": "x" * 500}, 403, "x" * 300),
    ({"status": 429, "message": "   "}, 429, "Request rejected by the routing policy."),
], ids=["451", "2xx", "5xx", "399", "500", "str-status", "float-status", "bool-status", "true", "string",
        "zero", "list", "int-message", "sanitized", "capped", "blank-message"])
async def test_reject_is_fail_closed_clamped_and_sanitized(bed_factory, reject, status, message):
    bed = bed_factory(POOL, {"g": reply_with({"reject": reject, "order": [2]})})
    r = await bed.send("smart")
    assert r.status == status
    assert body_of(r)["error"]["message"] == message
    assert r.headers["x-busbar-route-policy"] == "g"
    assert "x-busbar-route-target" not in r.headers
    assert bed.upstream == []                           # no upstream dispatched
    text = bed.gw.metrics.render().decode()
    assert f'busbar_route_policy_rejections_total{{policy="g",pool="smart",status="{status}"}} 1.0' in text


@pytest.mark.parametrize("value", [False, None])
async def test_reject_false_or_null_is_not_a_reject(bed_factory, value):
    bed = bed_factory(POOL, {"g": reply_with({"reject": value, "order": [1]})})
    r = await bed.send("smart")
    assert r.status == 200 and r.headers["x-busbar-route-target"] == "mid"


@pytest.mark.parametrize("ingress,status,expect", [
    ("openai", 403, {"error": {"message": "no", "type": "permission_error"}}),
    ("openai", 429, {"error": {"message": "no", "type": "rate_limit_error"}}),
    ("openai", 401, {"error": {"message": "no", "type": "authentication_error"}}),
    ("anthropic", 403, {"type": "error", "error": {"type": "permission_error", "message": "no"}}),
    ("anthropic", 429, {"type": "error", "error": {"type": "rate_limit_error", "message": "no"}}),
    ("anthropic", 451, {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}),
])
async def test_reject_answers_in_the_callers_dialect(bed_factory, ingress, status, expect):
    bed = bed_factory(POOL, {"g": reply_with({"reject": {"status": status, "message": "no"}})})
    r = await bed.send("smart", ingress=ingress)
    assert r.status == status
    got = body_of(r)
    for k, v in expect.items():
        if isinstance(v, dict):
            assert {kk: got[k].get(kk) for kk in v} == v
        else:
            assert got[k] == v


async def test_reject_on_a_streaming_request_is_a_plain_json_error(bed_factory):
    """C054 (a): a gate's reject on stream: true is an HTTP 403 JSON error, no event stream."""
    def gate(payload, settings):
        if any("forbidden" in m["text"] for m in payload["request"]["messages"]):
            return {"reject": {"status": 403, "message": "policy: forbidden topic"}}
        return {}
    cfg = POOL.replace("{ module: g, timeout_ms: 500 }", "{ module: g, timeout_ms: 500, prompt: ro }")
    bed = bed_factory(cfg, {"g": gate})
    for ingress, envelope in (("openai", {"error"}), ("anthropic", {"type", "error"})):
        r = await bed.send("smart", "a forbidden thing", ingress=ingress, stream=True)
        assert r.status == 403 and r.stream is None
        assert r.headers["content-type"] == "application/json"
        got = body_of(r)
        assert set(got) == envelope and got["error"]["message"] == "policy: forbidden topic"
    assert bed.upstream == []
    ok = await bed.send("smart", "harmless", stream=True)
    assert ok.status == 200 and ok.body.endswith(b"data: [DONE]\n\n")


async def test_restrict_pins_the_set_and_persists_across_failover(bed_factory):
    cfg = """
pools:
  smart:
    hooks: [ { module: g, timeout_ms: 500 } ]
    failover: { max_hops: 5 }
    members:
      - { model: fail-a, tags: [baa] }
      - { model: big }
      - { model: fail-b, tags: [baa, eu] }
      - { model: mid }
"""
    bed = bed_factory(cfg, {"g": reply_with({"restrict": {"tags_any": ["baa"]}})})
    r = await bed.send("smart")
    assert r.status == 503                               # every baa member failed; never big or mid
    assert sorted(m for m, _ in bed.upstream) == ["fail-a", "fail-b"]
    assert r.headers["x-busbar-route-policy"] == "weighted"


async def test_restrict_with_order_ranks_inside_the_restriction(bed_factory):
    bed = bed_factory(POOL, {"g": reply_with({"restrict": {"tags_any": ["sonnet", "opus"]}, "order": [2, 1, 0]})})
    r = await bed.send("smart")
    assert r.headers["x-busbar-route-target"] == "mid"   # small is outside the restriction
    assert r.headers["x-busbar-route-policy"] == "g"


@pytest.mark.parametrize("on_empty,status,target", [("reject", 503, None), ("weighted", 200, "big")])
async def test_restrict_empty_intersection_follows_on_empty(bed_factory, on_empty, status, target):
    cfg = POOL.replace("{ module: g, timeout_ms: 500 }", f"{{ module: g, timeout_ms: 500, on_empty: {on_empty} }}")
    bed = bed_factory(cfg, {"g": reply_with({"restrict": {"tags_any": ["nobody-has-this"]}})})
    r = await bed.send("smart")
    assert r.status == status
    assert r.headers.get("x-busbar-route-target") == target
    if status == 503:
        assert body_of(r)["error"]["message"] == ("hook 'g' restricted this request to members tagged "
                                                  "nobody-has-this, and no member left can serve it")
        assert bed.upstream == []


@pytest.mark.parametrize("arm", [{"restrict": {"tags_any": []}}, {"restrict": {"tags_any": [""]}},
                                 {"restrict": ["baa"]}, {"restrict": {"tags_any": "baa"}},
                                 {"restrict": {"tags_any": [1]}}, {"order": "0,1"}, {"order": {"0": 1}}],
                         ids=["empty-tags", "blank-tag", "list", "str-tags", "int-tag", "str-order", "dict-order"])
async def test_malformed_arm_is_garbage_and_applies_on_error(bed_factory, arm):
    cfg = POOL.replace("{ module: g, timeout_ms: 500 }", "{ module: g, timeout_ms: 500, on_error: reject }")
    bed = bed_factory(cfg, {"g": reply_with(arm)})
    r = await bed.send("smart")
    assert r.status == 503
    assert body_of(r)["error"]["message"] == ("hook 'g' returned a malformed reply and its on_error is reject; "
                                              "the request was not routed")
    assert r.headers["x-busbar-hook-error"] == "garbage"


# ----------------------------------------------------------------------------------- rewrite

REWRITE_POOL = """
pools:
  rw:
    hooks: [ { module: g, timeout_ms: 500, prompt: rw } ]
    failover: { max_hops: 3 }
    members:
      - { model: fail-a }
      - { model: big }
      - { model: claude }
"""


async def test_rewrite_replaces_the_body_and_persists_across_failover(bed_factory):
    def g(payload, settings):
        assert payload["op"] == "transform"
        return {"rewrite": {"messages": [{"role": "user", "content": "short"}]}}
    bed = bed_factory(REWRITE_POOL, {"g": g})
    r = await bed.send("rw", "a very long prompt " * 20, body={
        "model": "rw", "temperature": 0.5, "messages": [{"role": "user", "content": "a very long prompt " * 20}]})
    assert r.status == 200 and r.headers["x-busbar-route-target"] == "big"
    (m1, b1), (m2, b2) = bed.upstream
    assert (m1, m2) == ("fail-a", "big")
    for b in (b1, b2):                                   # same-protocol hops re-serialized, knobs kept
        assert b["messages"] == [{"role": "user", "content": "short"}] and b["temperature"] == 0.5


async def test_rewrite_reaches_a_cross_protocol_hop(bed_factory):
    bed = bed_factory(REWRITE_POOL.replace("{ model: big }", "{ model: fail-b }"),
                      {"g": reply_with({"rewrite": {"messages": [{"role": "user", "content": [
                          {"type": "text", "text": "short"}]}]}})})
    r = await bed.send("rw", "long text")
    assert r.status == 200 and r.headers["x-busbar-route-target"] == "claude"
    assert bed.upstream[-1][0] == "claude"
    assert bed.upstream[-1][1]["messages"] == [{"role": "user", "content": "short"}]


@pytest.mark.parametrize("arm", [{"rewrite": {"messages": []}}, {"rewrite": {"messages": [{"role": "system",
                                                                                        "content": "x"}]}},
                                 {"rewrite": {"messages": "short"}}, {"rewrite": ["x"]},
                                 {"rewrite": {"messages": [{"role": "user", "content": "x" * 300}]}}],
                         ids=["empty", "system-role", "str", "list", "oversized"])
async def test_malformed_or_oversized_rewrite_proceeds_unmodified(bed_factory, arm):
    cfg = REWRITE_POOL + "limits: { request_body_max_bytes: 200 }\n"
    bed = bed_factory(cfg, {"g": reply_with(arm)})
    r = await bed.send("rw", "original")
    assert r.status == 200
    assert bed.upstream[-1][1]["messages"] == [{"role": "user", "content": "original"}]
    assert bed.plugins["g"].instances[0].plugin.seen  # the gate was asked


async def test_transform_precedence_reject_over_rewrite_and_order_ignored(bed_factory):
    bed = bed_factory(REWRITE_POOL, {"g": reply_with({"reject": {"status": 451, "message": "pii"},
                                                      "rewrite": {"messages": [{"role": "user", "content": "x"}]}})})
    r = await bed.send("rw")
    assert r.status == 451 and body_of(r)["error"]["message"] == "pii" and bed.upstream == []
    bed2 = bed_factory(REWRITE_POOL, {"g": reply_with({"order": [2], "restrict": {"tags_any": ["zz"]}})})
    r2 = await bed2.send("rw")
    assert r2.status == 200 and r2.headers["x-busbar-route-target"] == "big"   # decide verbs ignored


async def test_rewrite_chain_runs_in_priority_order_each_seeing_the_previous(bed_factory):
    def first(payload, settings):
        return {"rewrite": {"messages": [{"role": "user", "content": payload["request"]["messages"][0]["text"] + "+1"}]}}

    def second(payload, settings):
        return {"rewrite": {"messages": [{"role": "user", "content": payload["request"]["messages"][0]["text"] + "+2"}]}}
    cfg = """
pools:
  rw:
    hooks:
      - { module: second, timeout_ms: 500, prompt: rw, priority: 5 }
      - { module: first, timeout_ms: 500, prompt: rw, priority: 1 }
    members: [ { model: big } ]
"""
    bed = bed_factory(cfg, {"first": first, "second": second})
    r = await bed.send("rw", "x")
    assert r.status == 200
    assert bed.upstream[0][1]["messages"] == [{"role": "user", "content": "x+1+2"}]


async def test_decide_gates_see_the_rewritten_body(bed_factory):
    cfg = """
pools:
  rw:
    hooks:
      - { module: rw, timeout_ms: 500, prompt: rw }
      - { module: screen, timeout_ms: 500, prompt: ro }
    members: [ { model: big } ]
"""
    bed = bed_factory(cfg, {"rw": reply_with({"rewrite": {"messages": [{"role": "user", "content": "clean"}]}}),
                            "screen": reply_with({})})
    await bed.send("rw", "secret 123-45-6789")
    (msg,) = bed.seen("screen")
    assert msg["op"] == "decide" and msg["request"]["messages"] == [{"role": "user", "text": "clean"}]
    assert msg["request"]["total_chars"] == 5


async def test_three_concurrent_gates_add_the_slowest_not_the_sum(bed_factory):
    def sleeper(delay):
        def fn(payload, settings):
            time.sleep(delay)
            return {}
        return fn
    cfg = """
pools:
  p:
    hooks:
      - { module: a, timeout_ms: 2000 }
      - { module: b, timeout_ms: 2000 }
      - { module: c, timeout_ms: 2000 }
    members: [ { model: big } ]
"""
    bed = bed_factory(cfg, {"a": sleeper(0.2), "b": sleeper(0.2), "c": sleeper(0.2)})
    t = time.monotonic()
    r = await bed.send("p")
    took = time.monotonic() - t
    assert r.status == 200 and 0.2 <= took < 0.35



def test_a_routers_explanation_becomes_the_span_summary_with_the_model_only_when_it_was_asked() -> None:
    """docs/router.md: the trace's ``busbar.hook.verdict`` names who served, and, when a model was
    asked, which one and what it said (the generative engine's ``reason``, or the last ``error``)."""
    from busbar.hooks.chain import _explained
    from busbar.hooks.reply import Abstain, Arms

    asked = Arms(order=(1,), note={"engine": "generative", "model": "r-small", "served_by": "model",
                                   "confidence": 0.9, "probabilities": {"code": 0.9}, "reason": "source code",
                                   "cached": False})
    assert _explained(asked) == ("order; served_by=model; confidence=0.9; probabilities={'code': 0.9}; cached=False; "
                                 "model=r-small; reason=source code")
    failed = Arms(order=(0,), note={"model": "r-small", "error": "r-big: HTTP 500", "served_by": "fallback[0]",
                                    "hops": [{"from": "ai", "to": "fallback[0]", "reason": "error"}]})
    assert _explained(failed) == ("order; served_by=fallback[0]; hops=[{'from': 'ai', 'to': 'fallback[0]', "
                                  "'reason': 'error'}]; model=r-small; error=r-big: HTTP 500")
    skipped = Abstain(note={"model": "r-small", "skipped": "when_false", "served_by": "swrr"})
    assert _explained(skipped) == "abstain; served_by=swrr; skipped=when_false"
    assert _explained(Abstain()) is None
