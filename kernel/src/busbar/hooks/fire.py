"""Fire gates concurrently and collect each reply by its own deadline.

``await fire(calls)`` where each call is ``(gate, submit)``: ``submit()`` queues the gate's message
on its worker pool (``HookFacade.decide``/``transform``) and returns the job (``None`` =
saturated). All jobs are queued first, so every gate runs at once; then:

1. a short synchronous wait (at most ``SYNC_WINDOW_S`` in total, never past a gate's deadline) for
   gates whose recent latency is a lock hand-off's order, which avoids an event-loop round trip;
2. an asynchronous wait on the rest, woken by the workers, until every job has finished or passed
   its own ``timeout_ms`` deadline (so the added latency is the slowest gate, not the sum, and a
   hung gate costs its deadline, no more).

``fire_inline(gate, payload, known_idx)`` is the same for one ``decide`` on a gate whose facade runs inline
(``HookFacade.inline``): the call has returned by the time ``submit()`` does, so there is nothing to
wait for and no coroutine, task or future is made; it is judged by the same rules (a reply that came
back after the deadline is a ``timeout``, discarded). ``fire_awaited(gate, payload, known_idx)`` is
the same for a gate whose plugin has an async twin (``facade.on_loop``): awaited right here and
cancelled at its deadline.

What ``timeout_ms`` measures (``docs/hooks.md#deadlines``): the hook, not the scheduler. A reply
counts when the hook's own CPU time (``Job.cpu``: its thread's CPU clock on a worker or inline, its
steps on the loop for an async twin) stayed within ``timeout_ms``, however long the job waited in
the queue, for the GIL or for a CPU the machine gave to another process. Two cuts bound the wait:

* the **budget** cut: a running worker's CPU clock is read while it runs (``Job.cpu_now``), so a
  hook spinning past its budget is cut as soon as the waiter sees it, without waiting for it to return;
* the **hard** deadline (:func:`hard_deadline_s`: ``timeout_ms`` plus ``WALL_ALLOWANCE_S``), a
  wall clock from the moment the message was queued: whatever the hook does (sleeps, blocks on I/O,
  hangs forever, never gets a thread), the request never waits for it longer than that.

Each gate's :class:`Result` is its normalized arm, or a failure: ``timeout`` (either cut, or a
reply that used more than its budget: ignored), ``error`` (the plugin raised), ``garbage`` (the
reply is not a valid arm), ``grant`` (it returned a field it was not granted), ``saturated``; and
``seconds``, the wall time the request waited for it (from its message being queued to its reply, or
to the cut for a timeout; 0 when saturated), which feeds ``busbar_hook_decision_duration_seconds``.

Source: docs/hooks.md#reconcile-several-gates-one-decision, docs/hooks.md#fail-safety.
C035.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from busbar.hooks.reply import ReplyError
from busbar.hooks.workers import Job, run_inline

if TYPE_CHECKING:
    from busbar.hooks.specs import GateSpec

log = logging.getLogger("busbar.hooks")

#: The most the event loop is held, per request, waiting synchronously on fast gates.
SYNC_WINDOW_S = 0.0003
#: Wall-clock time a request waits for a gate beyond its ``timeout_ms``: the room a loaded machine
#: needs to schedule a hook that is within its budget (queue, GIL, CPU). A hook that never answers
#: costs its request ``timeout_ms`` plus this, never more (``docs/hooks.md#deadlines``).
WALL_ALLOWANCE_S = 0.1
#: How often (at most) a waiter reads the CPU clock of a gate that is still running.
_POLL_MIN_S = 0.0005

__all__ = ["SYNC_WINDOW_S", "WALL_ALLOWANCE_S", "Result", "fire", "fire_awaited", "fire_inline", "hard_deadline_s"]


def hard_deadline_s(gate: Any) -> float:
    """Seconds a request waits for ``gate`` at most, from when its message is queued: its
    ``timeout_ms`` (in seconds) plus ``WALL_ALLOWANCE_S``."""
    return float(gate.timeout_s) + WALL_ALLOWANCE_S


@dataclass(slots=True)
class Result:
    """One gate's outcome: ``arm`` (a reply arm) or ``failure`` (a reason) with ``detail``;
    ``seconds``: the wall time the request waited for it (see the module docstring)."""

    arm: Any = None
    failure: str | None = None
    detail: str = ""
    seconds: float = 0.0


def _judge(gate: GateSpec, job: Job, hard: float, queued: float) -> Result:
    """``job``'s outcome: a timeout when it is unfinished, finished past the ``hard`` deadline
    (monotonic s), or used more CPU than ``gate.timeout_s``; else its arm or failure. ``queued``
    (monotonic s): when its message was queued (``Result.seconds`` counts from there)."""
    res = _verdict_of(gate, job, hard)
    res.seconds = max(0.0, (job.t_done if res.failure != "timeout" else time.monotonic()) - queued)
    return res


def _verdict_of(gate: GateSpec, job: Job, hard: float) -> Result:
    facade = gate.facade
    if not job.finished or job.t_done > hard or job.cpu > gate.timeout_s:
        job.abandon()
        facade.timeouts += 1
        facade.observe(gate.timeout_s * 1e6)
        if job.finished:
            facade.overran(gate.timeout_ms, job.cpu * 1e3, (job.t_done - job.t_start) * 1e3)
        used = max(job.cpu, job.cpu_now())       # an async step's cut sets cpu; a running worker's clock
        return Result(failure="timeout", detail=_timeout_detail(gate, used))
    facade.observe((job.t_done - job.t_start) * 1e6)     # the plugin's own run, not the queue's
    return _outcome(facade, job.result, job.error)


def _timeout_detail(gate: GateSpec, used: float) -> str:
    """Why a gate's reply was a ``timeout``: the CPU it ``used`` (s) past its budget, or the wall clock."""
    if used > gate.timeout_s:
        return f"it used {used * 1e3:.1f} ms of CPU, over its timeout_ms of {gate.timeout_ms}"
    return (f"no reply within {hard_deadline_s(gate) * 1e3:g} ms of wall clock (timeout_ms "
            f"{gate.timeout_ms} + {WALL_ALLOWANCE_S * 1e3:g} ms allowance)")


def _outcome(facade: Any, result: Any, err: BaseException | None) -> Result:
    """A call that finished in time: its arm, or the failure its error stands for (counted)."""
    if err is None:
        return Result(arm=result)
    if isinstance(err, ReplyError):
        facade.garbage += 1
        return Result(failure=err.reason, detail=str(err))
    facade.errors += 1
    return Result(failure="error", detail=f"{type(err).__name__}: {err}")


async def fire(calls: Sequence[tuple[GateSpec, Callable[[], Job | None]]]) -> list[Result]:
    """Queue every call, then collect; results are in the order of ``calls``."""
    t0 = time.monotonic()
    results: list[Result | None] = [None] * len(calls)
    pending: list[tuple[int, GateSpec, Job, float]] = []
    for i, (gate, submit) in enumerate(calls):
        job = submit()
        if job is None:
            results[i] = Result(failure="saturated", detail="every worker is busy and the queue is full")
        else:
            pending.append((i, gate, job, t0 + hard_deadline_s(gate)))
    try:
        if any(not p[2].finished for p in pending):
            await _collect(pending)
    finally:
        for _, _, job, _ in pending:
            if not job.finished:
                job.abandon()
    for i, gate, job, hard in pending:
        results[i] = _judge(gate, job, hard, t0)
    return [r if r is not None else Result(failure="error") for r in results]


def fire_inline(gate: GateSpec, payload: dict[str, Any], known_idx: frozenset[int]) -> Result:
    """``decide`` on one inline gate now, judged (``fire([(gate, submit)])[0]`` without the
    waiting: the caller checked ``gate.facade.inline``, so the plugin runs on this thread). No job
    record: the call's times come back as numbers (``workers.run_inline``) and are judged by the
    same rules as a job's (:func:`_judge`)."""
    facade = gate.facade
    if facade.inline:
        facade.calls += 1
        arm, err, t0, t1, cpu = run_inline(facade.decide_now, payload, known_idx)
        if t1 > t0 + gate.timeout_s + WALL_ALLOWANCE_S or cpu > gate.timeout_s:   # past the hard deadline
            facade.timeouts += 1                                                  # or over its CPU budget
            facade.observe(gate.timeout_s * 1e6)
            facade.overran(gate.timeout_ms, cpu * 1e3, (t1 - t0) * 1e3)
            return Result(failure="timeout", detail=_timeout_detail(gate, cpu), seconds=time.monotonic() - t0)
        facade.observe((t1 - t0) * 1e6)
        if err is None:
            return Result(arm=arm, seconds=t1 - t0)
        res = _outcome(facade, arm, err)
        res.seconds = t1 - t0
        return res
    job = facade.decide(payload, known_idx)
    if job is None:
        return Result(failure="saturated", detail="every worker is busy and the queue is full")
    if not job.finished:            # not inline after all: never wait on the loop, never read it late
        job.abandon()
        return Result(failure="error", detail="an inline call was queued on a worker")
    return _judge(gate, job, job.t_start + hard_deadline_s(gate), job.t_start)     # ran right here, from its start


async def fire_awaited(gate: GateSpec, payload: dict[str, Any], known_idx: frozenset[int]) -> Result:
    """``decide`` on one gate whose facade runs on the loop (``facade.on_loop``), awaited here
    and cancelled at its deadline (no task, future or wait), judged by the same rules."""
    hard = hard_deadline_s(gate)
    job = await gate.facade.decide_awaited(payload, known_idx, gate.timeout_s, hard)
    return _judge(gate, job, job.t_start + hard, job.t_start)


async def _collect(pending: list[tuple[int, GateSpec, Job, float]]) -> None:
    """Wait until every job has finished or been cut (budget or hard deadline); see the module
    docstring. A job cut here is abandoned."""
    if pending:
        t0 = time.monotonic()
        sync_end = t0 + SYNC_WINDOW_S
        for _, gate, job, hard in pending:
            if gate.facade.sync_ok:
                now = time.monotonic()
                if not job.wait_sync(min(hard, sync_end) - now):
                    gate.facade.sync_missed()
        waiting = [p for p in pending if not p[2].finished]
        if waiting:
            loop = asyncio.get_running_loop()
            futs = {id(p[2]): p[2].future(loop) for p in waiting}
            while waiting:
                now = time.monotonic()
                live = []
                wake = now + 3600.0
                for p in waiting:
                    job, budget, hard = p[2], p[1].timeout_s, p[3]
                    if job.finished:
                        continue
                    left = budget - job.cpu_now()
                    if now >= hard or left < 0:
                        job.abandon()               # cut: spinning past its budget, or the hard deadline
                        continue
                    live.append(p)
                    # the earliest it could exhaust its budget, re-read at a growing interval
                    wake = min(wake, hard, now + max(left, _POLL_MIN_S, (now - t0) / 2))
                if not live:
                    break
                await asyncio.wait([futs[id(p[2])] for p in live], timeout=wake - now)
                waiting = live
