"""Taps: the four stages with their payloads, fire-and-forget delivery, drops and failures.

Source: docs/hooks.md#taps, docs/hooks.md#fail-safety.
C054 (b)-(d).
"""
from __future__ import annotations

import asyncio
import threading
import time

from busbar.hooks.taps import TapQueue

CFG = """
global_hooks:
  - { module: t_req, prompt: ro, at: request }
  - { module: t_route, at: route }
  - { module: t_attempt, at: attempt }
  - { module: t_done, at: completion }
pools:
  p:
    failover: { max_hops: 3 }
    members: [ { model: fail-a }, { model: big } ]
  guarded:
    hooks: [ { module: gate, timeout_ms: 1000, prompt: ro } ]
    members: [ { model: mid } ]
"""
TAPS = ("t_req", "t_route", "t_attempt", "t_done")


def nothing(payload, settings):
    return {}


def wait_for(pred, timeout=2.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.005)
    return False


def hooks(**extra):
    out = {t: nothing for t in TAPS}
    out["gate"] = lambda p, s: ({"reject": {"status": 403, "message": "no"}}
                                if "forbidden" in p["request"]["messages"][0]["text"] else {})
    out.update(extra)
    return out


async def test_stage_payloads(bed_factory):
    bed = bed_factory(CFG, hooks())
    r = await bed.send("p", "hello")
    assert r.status == 200
    assert wait_for(lambda: all(len(bed.seen(t)) >= (2 if t == "t_attempt" else 1) for t in TAPS))
    (req,), (route,), attempts, (done,) = (bed.seen("t_req"), bed.seen("t_route"), bed.seen("t_attempt"),
                                           bed.seen("t_done"))
    assert req["op"] == "notify" and req["stage"] == {"at": "request"} and req["candidates"] == []
    assert req["request"]["messages"] == [{"role": "user", "text": "hello"}]      # prompt: ro on a request tap
    assert route["stage"] == {"at": "route", "remaining_candidates": 2} and "messages" not in route["request"]
    assert [a["stage"] for a in attempts] == [
        {"at": "attempt", "model": "fail-a", "attempt_number": 1, "remaining_candidates": 1},
        {"at": "attempt", "model": "big", "attempt_number": 2, "remaining_candidates": 0,
         "previous_failure": "server_error"}]
    assert done["stage"] == {"at": "completion", "outcome": "ok", "status": 200}
    assert len({m["request"]["request_id"] for t in TAPS for m in bed.seen(t)}) == 1
    assert all("user" not in m["request"] for t in TAPS for m in bed.seen(t))   # taps never carry identity


async def test_completion_sees_gate_denials(bed_factory):
    bed = bed_factory(CFG, hooks())
    r = await bed.send("guarded", "a forbidden topic")
    assert r.status == 403
    assert wait_for(lambda: bed.seen("t_done"))
    assert bed.seen("t_done")[0]["stage"] == {"at": "completion", "outcome": "rejected_by_gate", "status": 403}
    assert bed.seen("t_route") == [] and bed.seen("t_attempt") == []


async def test_completion_of_a_stream_fires_when_it_ends(bed_factory):
    bed = bed_factory(CFG, hooks())
    r = await bed.send("p", stream=True)
    assert r.status == 200 and r.body.endswith(b"data: [DONE]\n\n")
    assert wait_for(lambda: bed.seen("t_done"))
    assert bed.seen("t_done")[0]["stage"] == {"at": "completion", "outcome": "ok", "status": 200}


async def test_global_taps_observe_direct_model_routes(bed_factory):
    bed = bed_factory(CFG, hooks())
    r = await bed.send("big")
    assert r.status == 200
    assert wait_for(lambda: bed.seen("t_done") and bed.seen("t_attempt"))
    assert bed.seen("t_attempt")[0]["stage"] == {"at": "attempt", "model": "big", "attempt_number": 1,
                                                 "remaining_candidates": 0}
    assert bed.seen("t_done")[0]["request"]["pool"] == "big"


async def test_a_failing_tap_never_reaches_the_client(bed_factory, caplog):
    """C054 (b): the tap raises on completion; the stream is byte-identical, the failure counted."""
    def explode(payload, settings):
        raise RuntimeError("end-of-request handler broke")
    plain = bed_factory(CFG.split("global_hooks:")[0] + "pools:" + CFG.split("pools:")[1].split("  guarded:")[0],
                        plugins=False)
    bed = bed_factory(CFG, hooks(t_done=explode))
    a = await plain.send("p", stream=True)
    b = await bed.send("p", stream=True)
    strip = {"x-busbar-route-policy"}
    assert (a.status, {k: v for k, v in a.headers.items() if k not in strip}, a.body) == \
        (b.status, {k: v for k, v in b.headers.items() if k not in strip}, b.body)
    facade = next(f for f in bed.gw.hooks.facades if f.name == "t_done")
    assert wait_for(lambda: facade.tap_errors == 1)
    assert "tap 't_done' failed on a completion observation (1 failure(s) so far): RuntimeError: " \
           "end-of-request handler broke" in caplog.text
    assert 'busbar_tap_failures_total{hook="t_done"} 1.0' in bed.gw.metrics.render().decode()


async def test_a_slow_tap_never_delays_requests_and_drops_under_pressure(bed_factory):
    """C054 (c)/(d): a tap sleeping 2 s per event; requests keep their pace; the queue is bounded."""
    release = threading.Event()

    def sleepy(payload, settings):
        release.wait(2)
    bed = bed_factory(CFG, hooks(t_attempt=sleepy, t_done=sleepy))
    facade = next(f for f in bed.gw.hooks.facades if f.name == "t_done")
    facade._tap_capacity = 8
    try:
        t = time.monotonic()
        rs = await asyncio.gather(*(bed.send("guarded", "fine", stream=True) for _ in range(50)))
        assert [r.status for r in rs] == [200] * 50
        assert all(r.body.endswith(b"data: [DONE]\n\n") for r in rs), rs[0].body
        assert time.monotonic() - t < 1.0                               # 50 streams, a 2 s tap: no wait
        assert facade._taps.pending <= 8 and facade.tap_dropped >= 50 - 1 - 8
        assert f'busbar_tap_notifications_dropped_total{{hook="t_done"}} {float(facade.tap_dropped)}' in \
            bed.gw.metrics.render().decode()
    finally:
        release.set()


def test_tap_queue_drops_and_counts_when_full():
    release = threading.Event()
    calls = []

    def slow(payload):
        calls.append(payload)
        release.wait(2)
    q = TapQueue("t", slow, capacity=4)
    try:
        results = [q.offer({"n": i, "stage": {"at": "attempt"}}) for i in range(20)]
        assert wait_for(lambda: len(calls) == 1)
        assert results[:4] == [True] * 4 and results.count(True) <= 5   # four queued, one maybe taken
        assert results.count(False) == q.dropped >= 15
        assert q.pending <= 4
    finally:
        release.set()
    assert wait_for(lambda: q.delivered == results.count(True))
    q.close()
