"""Hooks with an async twin (``busbar_call.busbar_acall``) run on the event loop, cut at their deadline.

No worker thread: the call is awaited (a single gate) or run as a task next to the other gates, and
the deadline cancels it (a deadline that really stops the call). Every failure follows ``on_error``
as on the thread path; the seam keeps grants in both directions. Source: docs/hooks.md#fail-safety,
docs/plugins.md#grants; C035.
"""
from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest
from busbar.loader.errors import PluginCallError
from busbar.loader.registry import Grant, _make_acall

from tests.unit.hooks.test_hooks_on_error import MEMBERS, pool


def _on_loop(bed, name, fn):
    facade = bed.gw.hooks.facade(name)
    facade._acall = fn                        # what PluginInstance.acall is for a declaring plugin
    facade.inline = False
    assert facade.on_loop and not facade.sync_ok
    return facade


async def test_a_single_async_gate_is_awaited_on_the_loop(bed_factory):
    threads = []

    async def gate(payload):
        threads.append(threading.get_ident())
        await asyncio.sleep(0)
        return {"order": [2]}
    bed = bed_factory(pool("nothing"), {"g": lambda p, s: {}})
    facade = _on_loop(bed, "g", gate)
    r = await bed.send("p")
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == ("small", "g")
    assert threads == [threading.get_ident()] and facade.calls == 1


@pytest.mark.parametrize("on_error, status, target", [("first", 200, "big"), ("reject", 503, None)])
async def test_a_slow_async_gate_is_cancelled_at_its_deadline(bed_factory, on_error, status, target):
    state = {"cancelled": False}

    async def gate(payload):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        return {"order": [2]}
    bed = bed_factory(pool(on_error, timeout_ms=50), {"g": lambda p, s: {}})
    facade = _on_loop(bed, "g", gate)
    t = time.monotonic()
    r = await bed.send("p")
    assert time.monotonic() - t < 0.5
    assert r.status == status and state["cancelled"] and facade.timeouts == 1
    if target:
        assert r.headers["x-busbar-route-target"] == target
    else:
        assert r.headers["x-busbar-hook-error"] == "timeout"


@pytest.mark.parametrize("reply, reason", [(RuntimeError("boom"), "error"), (["garbage"], "garbage"),
                                           (TimeoutError("the plugin's own"), "error")])
async def test_async_gate_failures_follow_on_error(bed_factory, reply, reason):
    async def gate(payload):
        if isinstance(reply, BaseException):
            raise reply
        return reply
    bed = bed_factory(pool("reject"), {"g": lambda p, s: {}})
    _on_loop(bed, "g", gate)
    r = await bed.send("p")
    assert (r.status, r.headers["x-busbar-hook-error"]) == (503, reason)


async def test_an_async_gate_beside_another_runs_as_a_task_and_is_cut(bed_factory):
    cfg = """
pools:
  p:
    hooks:
      - { module: a, timeout_ms: 50, on_error: nothing }
      - { module: b, timeout_ms: 500, priority: 1 }
""" + MEMBERS
    state = {"cancelled": False}

    async def slow(payload):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        return {"order": [0]}
    bed = bed_factory(cfg, {"a": lambda p, s: {}, "b": lambda p, s: {"order": [2]}})
    _on_loop(bed, "a", slow)
    t = time.monotonic()
    r = await bed.send("p")
    assert time.monotonic() - t < 0.4
    assert (r.headers["x-busbar-route-target"], r.headers["x-busbar-route-policy"]) == ("small", "b")
    await asyncio.sleep(0)                     # let the cancelled task unwind
    assert state["cancelled"]


async def test_the_seam_strips_ungranted_fields_and_refuses_a_rewrite_without_rw():
    seen = []

    def busbar_call(handle, payload):
        return {}

    async def busbar_acall(handle, payload):
        seen.append(payload)
        return {"rewrite": {"messages": []}} if payload.get("op") == "transform" else {"order": [0]}
    busbar_call.busbar_acall = busbar_acall
    plugin = SimpleNamespace(binding=SimpleNamespace(call=busbar_call), file="g.tar.gz", kind="hook")
    acall = _make_acall(plugin, object(), Grant("no", "no"))
    msg = {"op": "decide", "request": {"pool": "p", "messages": [{"role": "user", "text": "x"}], "user": {}}}
    assert await acall(msg) == {"order": [0]}
    assert seen[-1]["request"] == {"pool": "p"}
    with pytest.raises(PluginCallError, match="rewrite needs prompt: rw"):
        await acall({"op": "transform", "request": {}})
    del busbar_call.busbar_acall
    assert _make_acall(plugin, object(), Grant("no", "no")) is None
