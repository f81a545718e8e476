"""Where hooks apply: direct model routes (no bypass around a global gate), fallback pools, bad
bodies, and the engine swap of a plugin hot reload.

Source: docs/hooks.md#configuring (global_hooks attach to every request);
docs/reliability.md#when-nothing-can-be-tried-on_exhausted; issue 4 (hot reload swaps whole).
"""
from __future__ import annotations

import busbar.hooks as hooks_pkg
from busbar.hooks import reattach

from tests.unit.hooks.conftest import FakePlugin, FakePlugins, body_of

GUARD = """
global_hooks:
  - { module: guard, kind: gate, timeout_ms: 1000, prompt: ro }
pools:
  p: { members: [ { model: big } ] }
"""


def guard(payload, settings):
    if "ssn" in payload["request"]["messages"][-1]["text"]:
        return {"reject": {"status": 451, "message": "pii"}}
    return {}


async def test_a_global_gate_screens_direct_model_routes_too(bed_factory):
    bed = bed_factory(GUARD, {"guard": guard})
    for name in ("p", "big"):                         # the pool, and the model called directly
        r = await bed.send(name, "my ssn is 1")
        assert (r.status, body_of(r)["error"]["message"]) == (451, "pii")
        assert (await bed.send(name, "fine")).status == 200
    assert [m for m, _ in bed.upstream] == ["big", "big"]


async def test_a_restriction_on_a_direct_route_follows_on_empty(bed_factory):
    cfg = GUARD.replace("prompt: ro }", "prompt: ro, on_empty: reject }")
    bed = bed_factory(cfg, {"guard": lambda p, s: {"restrict": {"tags_any": ["baa"]}}})
    r = await bed.send("big")
    assert r.status == 503 and bed.upstream == []


async def test_the_fallback_pool_runs_its_own_chain(bed_factory):
    cfg = """
pools:
  first:
    hooks: [ { module: g, timeout_ms: 1000 } ]
    members: [ { model: fail-a } ]
    failover: { max_hops: 0 }
    breaker: { trip: { mode: consecutive, consecutive_n: 1 } }
    on_exhausted: { fallback_pool: second }
  second:
    hooks: [ cheapest ]
    members: [ { model: big }, { model: small } ]
"""
    bed = bed_factory(cfg, {"g": lambda p, s: {}})
    await bed.send("first")                           # trips fail-a
    r = await bed.send("first")
    assert r.status == 200 and r.headers["x-busbar-route-target"] == "small"
    assert r.headers["x-busbar-route-policy"] == "cheapest"


async def test_a_body_that_does_not_parse_is_the_callers_400(bed_factory):
    bed = bed_factory("pools: { p: { hooks: [ { module: g, timeout_ms: 1000 } ], members: [ { model: big } ] } }",
                      {"g": lambda p, s: {}})
    r = await bed.send("p", body={"model": "p", "messages": "not a list"})
    assert r.status == 400 and body_of(r)["error"]["type"] == "invalid_request_error"
    assert bed.seen("g") == [] and bed.upstream == []


async def test_reattach_swaps_the_engine_and_retires_the_old_one(bed_factory, monkeypatch):
    monkeypatch.setattr(hooks_pkg, "RETIRE_AFTER_S", 0.0)
    bed = bed_factory("pools: { p: { hooks: [ { module: g, timeout_ms: 1000 } ], members: [ { model: big }, "
                      "{ model: small } ] } }", {"g": lambda p, s: {"order": [0]}})
    old = bed.gw.hooks
    new_plugin = FakePlugin("g", lambda p, s: {"order": [1]})
    assert reattach(bed.gw, FakePlugins({"g": new_plugin})) is True
    assert bed.gw.hooks is not old
    r = await bed.send("p")
    assert r.headers["x-busbar-route-target"] == "small"
    import time
    time.sleep(0.1)
    assert bed.plugins["g"].instances[0].closed
    assert reattach(bed.gw, FakePlugins({})) is False          # the module vanished: keep the running one
    assert bed.gw.hooks.facades[0].instance.plugin is new_plugin
