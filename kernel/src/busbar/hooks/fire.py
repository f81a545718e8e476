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

Each gate's :class:`Result` is its normalized arm, or a failure: ``timeout`` (including a reply
that arrived after the deadline: ignored), ``error`` (the plugin raised), ``garbage`` (the reply is
not a valid arm), ``grant`` (it returned a field it was not granted), ``saturated``.

Source: seeds 003 "Gates fire concurrently", "What Busbar guarantees when a hook misbehaves";
handout C035.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from busbar.hooks.reply import ReplyError
from busbar.hooks.workers import Job

if TYPE_CHECKING:
    from busbar.hooks.specs import GateSpec

log = logging.getLogger("busbar.hooks")

#: The most the event loop is held, per request, waiting synchronously on fast gates.
SYNC_WINDOW_S = 0.0003

__all__ = ["SYNC_WINDOW_S", "Result", "fire", "fire_awaited", "fire_inline"]


@dataclass(slots=True)
class Result:
    """One gate's outcome: ``arm`` (a reply arm) or ``failure`` (a reason) with ``detail``."""

    arm: Any = None
    failure: str | None = None
    detail: str = ""


def _judge(gate: GateSpec, job: Job, deadline: float, t0: float) -> Result:
    facade = gate.facade
    if not job.finished or job.t_done > deadline:
        job.abandon()
        facade.timeouts += 1
        facade.observe(gate.timeout_s * 1e6)
        if job.finished:
            facade.overran(gate.timeout_ms, (job.t_done - job.t_start) * 1e3)
        return Result(failure="timeout", detail=f"no reply within {gate.timeout_ms} ms (timeout_ms)")
    facade.observe((job.t_done - job.t_start) * 1e6)     # the plugin's own time, not the scheduler's
    err = job.error
    if err is None:
        return Result(arm=job.result)
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
            pending.append((i, gate, job, t0 + gate.timeout_s))
    try:
        if any(not p[2].finished for p in pending):
            await _collect(pending)
    finally:
        for _, _, job, _ in pending:
            if not job.finished:
                job.abandon()
    for i, gate, job, deadline in pending:
        results[i] = _judge(gate, job, deadline, t0)
    return [r if r is not None else Result(failure="error") for r in results]


def fire_inline(gate: GateSpec, payload: dict[str, Any], known_idx: frozenset[int]) -> Result:
    """``decide`` on one inline gate now, judged (``fire([(gate, submit)])[0]`` without the
    waiting: the caller checked ``gate.facade.inline``, so the plugin runs on this thread)."""
    job = gate.facade.decide(payload, known_idx)
    if job is None:
        return Result(failure="saturated", detail="every worker is busy and the queue is full")
    if not job.finished:            # not inline after all: never wait on the loop, never read it late
        job.abandon()
        return Result(failure="error", detail="an inline call was queued on a worker")
    t0 = job.t_start                # ran right here: its start is the decision's start
    return _judge(gate, job, t0 + gate.timeout_s, t0)


async def fire_awaited(gate: GateSpec, payload: dict[str, Any], known_idx: frozenset[int]) -> Result:
    """``decide`` on one gate whose facade runs on the loop (``facade.on_loop``), awaited here
    and cancelled at its deadline (no task, future or wait), judged by the same rules."""
    t0 = time.monotonic()
    job = await gate.facade.decide_awaited(payload, known_idx, gate.timeout_s)
    return _judge(gate, job, t0 + gate.timeout_s, t0)


async def _collect(pending: list[tuple[int, GateSpec, Job, float]]) -> None:
    if pending:
        t0 = time.monotonic()
        sync_end = t0 + SYNC_WINDOW_S
        for _, gate, job, deadline in pending:
            if gate.facade.sync_ok:
                now = time.monotonic()
                if not job.wait_sync(min(deadline, sync_end) - now):
                    gate.facade.sync_missed()
        waiting = [p for p in pending if not p[2].finished]
        if waiting:
            loop = asyncio.get_running_loop()
            futs = {id(p[2]): p[2].future(loop) for p in waiting}
            while waiting:
                now = time.monotonic()
                live = [p for p in waiting if not p[2].finished and p[3] > now]
                if not live:
                    break
                soonest = min(p[3] for p in live)
                await asyncio.wait([futs[id(p[2])] for p in live], timeout=soonest - now)
                waiting = live
