"""A gate's deadline measures the hook, not the scheduler (issue 11 item 26; docs/hooks.md#deadlines).

``timeout_ms`` is judged on the hook's own CPU time (worker thread, inline, async twin); the time a
job waits for a worker, the GIL or a CPU is not charged. A hard wall clock (``timeout_ms`` +
``WALL_ALLOWANCE_S``) still bounds every wait: a hook that hangs forever, blocked or spinning,
never holds its request past it.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time

import orjson
import pytest
from busbar.hooks.fire import WALL_ALLOWANCE_S
from busbar.hooks.workers import Job, Metered

from tests.unit.hooks.test_hooks_on_error import pool
from tests.unit.hooks.test_hooks_on_loop import _on_loop


def spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@pytest.fixture()
def stop():
    """Released at the end of the test: hooks that 'hang forever' wait on it, so no thread outlives
    the test burning a CPU."""
    ev = threading.Event()
    yield ev
    ev.set()


@pytest.mark.parametrize("on_error,status", [("nothing", 200), ("reject", 503)])
async def test_a_gate_that_hangs_forever_never_holds_its_request_past_the_hard_deadline(bed_factory, stop,
                                                                                       on_error, status):
    bed = bed_factory(pool(on_error, timeout_ms=1), {"g": lambda p, s: stop.wait(3600)})
    for _ in range(3):                              # every worker it takes stays stuck
        t = time.monotonic()
        r = await bed.send("p")
        took = time.monotonic() - t
        assert r.status == status
        assert 0.001 + WALL_ALLOWANCE_S <= took < 0.001 + WALL_ALLOWANCE_S + 0.05
    if status == 503:
        assert r.headers["x-busbar-hook-error"] == "timeout"
    assert bed.gw.hooks.facades[0].timeouts == 3


async def test_a_gate_spinning_forever_is_cut_by_its_cpu_budget_before_the_hard_deadline(bed_factory, stop,
                                                                                         caplog):
    def hog(payload, settings):
        while not stop.is_set():
            pass
    bed = bed_factory(pool("reject", timeout_ms=2), {"g": hog})
    t = time.monotonic()
    with caplog.at_level(logging.WARNING, "busbar.hooks"):
        r = await bed.send("p")
    took = time.monotonic() - t
    assert r.status == 503 and r.headers["x-busbar-hook-error"] == "timeout"
    assert 0.002 <= took < 0.002 + WALL_ALLOWANCE_S         # usually ~5-10 ms: the loop must get the GIL to cut
    assert "hook 'g' (pools.p.hooks[0]) timed out: it used " in caplog.text
    assert "ms of CPU, over its timeout_ms of 2; applying on_error: reject" in caplog.text


async def test_time_waiting_for_a_worker_is_not_the_hooks(bed_factory):
    """Two workers (the prestarted ones, no more), four concurrent requests, a gate whose own work
    is a 0.3 ms spin after a 15 ms wait for I/O: the last two wait ~15 ms for a worker, far past
    timeout_ms 1, and every verdict is still the gate's own (before: every one timed out)."""
    def gate(payload, settings):
        time.sleep(0.015)
        spin(0.0003)
        return {"order": [2]}
    bed = bed_factory(pool("reject", timeout_ms=1), {"g": gate})
    facade = bed.gw.hooks.facades[0]
    facade._pool.max_workers = 1
    rs = await asyncio.gather(*(bed.send("p") for _ in range(4)))
    assert [(r.status, r.headers["x-busbar-route-target"]) for r in rs] == [(200, "small")] * 4
    assert (facade.timeouts, facade._pool._threads) == (0, 2)


async def test_a_busy_event_loop_is_not_the_hooks(bed_factory):
    """The loop is held for 30 ms right after the gate is queued (other requests' work): the
    gate's 0.1 ms of work is judged on its own CPU time and counts."""
    bed = bed_factory(pool("reject", timeout_ms=1), {"g": lambda p, s: spin(0.0001) or {"order": [2]}})

    async def busy():
        await asyncio.sleep(0)
        spin(0.03)
    r, _ = await asyncio.gather(bed.send("p"), busy())
    assert (r.status, r.headers["x-busbar-route-target"]) == (200, "small")


async def test_a_gate_over_its_cpu_budget_is_a_timeout_even_when_it_answers(bed_factory, caplog):
    bed = bed_factory(pool("reject", timeout_ms=1), {"g": lambda p, s: spin(0.005) or {"order": [2]}})
    with caplog.at_level(logging.WARNING, "busbar.hooks"):
        r = await bed.send("p")
    assert r.status == 503
    assert orjson.loads(r.body)["error"]["message"] == ("hook 'g' timed out and its on_error is reject; the "
                                                        "request was not routed")
    assert "ms of CPU, over its timeout_ms of 1" in caplog.text


async def test_an_async_gate_is_judged_on_its_own_steps(bed_factory, caplog):
    """Awaiting I/O is not the hook's CPU time; a step that spins past the budget cuts it."""
    async def patient(payload):
        await asyncio.sleep(0.02)
        return {"order": [2]}

    async def greedy(payload):
        await asyncio.sleep(0)
        spin(0.005)
        await asyncio.sleep(0)
        return {"order": [2]}
    bed = bed_factory(pool("reject", timeout_ms=1), {"g": lambda p, s: {}})
    facade = _on_loop(bed, "g", patient)
    r = await bed.send("p")
    assert (r.status, r.headers["x-busbar-route-target"]) == (200, "small")
    facade._acall = greedy
    with caplog.at_level(logging.WARNING, "busbar.hooks"):
        r = await bed.send("p")
    assert (r.status, r.headers["x-busbar-hook-error"]) == (503, "timeout")
    assert facade.timeouts == 1
    assert "ms of CPU, over its timeout_ms of 1; applying on_error: reject" in caplog.text


async def test_metered_counts_only_the_coroutines_own_steps():
    async def work():
        spin(0.002)
        await asyncio.sleep(0.03)
        spin(0.002)
        return "done"
    m = Metered(work(), None)
    t = time.monotonic()
    assert await m == "done"
    assert time.monotonic() - t >= 0.03
    assert 0.004 <= m.cpu < 0.015


def test_a_worker_job_records_its_cpu_not_its_wall_time():
    job = Job(lambda: time.sleep(0.03) or spin(0.002))
    job.run(None)
    assert job.finished and job.t_done - job.t_start >= 0.03
    assert 0.002 <= job.cpu < 0.012


def test_an_inline_call_records_its_cpu_not_its_wall_time():
    """Past ``INLINE_EXACT_CPU_S`` of wall clock an inline call reads the thread's CPU clock (a
    sleep is not CPU); under it, the wall time is the bound."""
    job = Job.now(lambda: time.sleep(0.03) or spin(0.002))
    assert job.finished and job.t_done - job.t_start >= 0.03
    assert 0.002 <= job.cpu < 0.012
    job = Job.now(lambda x: x + 1, 41)
    assert (job.result, job.error) == (42, None)
    assert 0.0 <= job.cpu <= job.t_done - job.t_start < 0.001


@pytest.mark.parametrize("where", ["worker", "inline"])
def test_a_garbage_collection_inside_the_call_is_not_the_hooks(where):
    import gc

    from busbar.hooks.workers import watch_gc
    watch_gc()

    def collect():
        t0 = time.thread_time()
        junk = []
        for _ in range(100_000):                  # reference cycles only the collector frees
            a: list = []
            a.append(a)
            junk.append(a)
        del junk
        t1 = time.thread_time()
        gc.collect()
        return t1 - t0, time.thread_time() - t1

    if where == "worker":
        job = Job(collect)
        job.run(None)
    else:                                         # run_inline: the thread's running GC total, read twice
        job = Job.now(collect)
    made, collected = job.result
    assert collected > 0.005                      # the collection took real CPU time ...
    assert job.cpu < made + collected / 4         # ... which is not charged to the hook
