"""Where plugin code runs: a bounded pool of worker threads per hook, never the event loop.

A plugin's ``busbar_call`` is synchronous Python that may block, sleep or loop. Each hook gets a
:class:`WorkerPool` (threads started lazily up to ``max_workers``, at most ``max_pending`` jobs
waiting): :meth:`WorkerPool.submit` returns a :class:`Job`, or ``None`` when the hook is saturated
(every worker busy and the queue full: the gate's ``on_error`` applies at once, memory stays
bounded). A job whose request stopped waiting (deadline passed) is :meth:`Job.abandon`-ed: a
worker skips it, and a late result is never read.

A hook whose plugin carries an async twin of ``busbar_call`` (``PluginInstance.acall``) needs no
thread: :meth:`Job.on_loop` runs it as a task on the event loop, and abandoning the job at its
deadline cancels the task (a deadline that really cuts the call, unlike a thread's).

Waiting for a job, two ways (both bounded by the gate's deadline):

- :meth:`Job.wait_sync`: block the calling thread on the job's lock for a short window. Used for
  hooks whose recent latency is a few tens of µs: a lock hand-off costs ~20 µs where an event-loop
  round trip costs ~100 µs, and the window (``SYNC_WINDOW_S``) bounds how long the loop can stall.
- :meth:`Job.future`: an asyncio future resolved from the worker via ``call_soon_threadsafe``.

What a job's deadline measures (``docs/hooks.md#deadlines``): :attr:`Job.cpu` is the CPU time the
plugin's own code used — its thread's CPU clock around the call on a worker or inline, the loop
thread's CPU clock around each of its steps for an async twin (:class:`Metered`) — so the time a job
waits in the queue, for the GIL or for a CPU the machine gave to something else never counts
against the hook, and neither does a garbage collection that happens to run inside its call
(:func:`watch_gc`). :meth:`Job.cpu_now` reads a running worker's CPU clock from another thread (the
waiter cuts a hook that spins past its budget without waiting for it to return).

Source: docs/hooks.md#fail-safety (slow, hung, saturated).
C035 (a deadline on every callout; memory bounded under 200 concurrent requests).
"""
from __future__ import annotations

import asyncio
import gc
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("busbar.hooks")

__all__ = ["INLINE_EXACT_CPU_S", "Job", "Metered", "WorkerPool", "run_inline", "watch_gc"]

#: An inline call shorter than this (wall clock, s: the smallest ``timeout_ms``, 1 ms) has its CPU
#: time bounded by its wall time; a longer one reads the thread's CPU clock (``Job.now``).
INLINE_EXACT_CPU_S = 0.001

_cpu = time.thread_time
#: CPU seconds the cyclic garbage collector has run on each thread (thread ident -> s), and the CPU
#: clock at the start of a collection in progress: a collection that happens to start inside a
#: hook's call frees everybody's garbage, so it is not the hook's own time.
_gc_cpu: dict[int, float] = {}
_gc_start: dict[int, float] = {}
_gc_watched = False
#: Threads running a hook's call now: only their collections are timed (the rest cost one lookup) ...
_in_call: set[int] = set()
#: ... and threads that have run an inline call (``run_inline``: the event loop's), every collection
#: of which is timed, so that an inline call reads ``_gc_cpu`` twice instead of registering itself.
_timed: set[int] = set()
_ident = threading.get_ident
_mono = time.monotonic


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    tid = threading.get_ident()
    if tid not in _in_call and tid not in _timed:
        return
    if phase == "start":
        _gc_start[tid] = _cpu()
    else:
        t0 = _gc_start.pop(tid, None)
        if t0 is not None:
            _gc_cpu[tid] = _gc_cpu.get(tid, 0.0) + _cpu() - t0


def watch_gc() -> None:
    """Account the garbage collector's CPU time per thread (idempotent; see ``_gc_cpu``)."""
    global _gc_watched
    if not _gc_watched:
        _gc_watched = True
        gc.callbacks.append(_on_gc)


def _gc_now(tid: int) -> float:
    """GC CPU seconds of thread ``tid`` so far, a collection in progress included (read from any thread)."""
    done = _gc_cpu.get(tid, 0.0)
    t0 = _gc_start.get(tid)
    if t0 is not None and tid == threading.get_ident():
        done += _cpu() - t0
    return done


def run_inline(fn: Callable[..., Any], *args: Any) -> tuple[Any, BaseException | None, float, float, float]:
    """Run ``fn(*args)`` on the calling thread, metered: ``(result, error, t_start, t_done, cpu)``
    (``error``: what it raised, else ``None``; ``t_start``/``t_done``: monotonic s around the call;
    ``cpu``: its own CPU time in s, garbage collections inside it excluded). A call shorter than
    :data:`INLINE_EXACT_CPU_S` of wall clock takes that wall time as its CPU time (a thread's CPU time
    never exceeds it: one CPU-clock read saved); a longer one reads the thread's CPU clock."""
    tid = _ident()
    if tid not in _timed:
        _timed.add(tid)             # from now on every collection on this thread is timed (watch_gc)
    gc_cpu = _gc_cpu
    g0 = gc_cpu.get(tid, 0.0)
    t0 = _mono()
    c0 = _cpu()
    try:
        result = fn(*args)
        error = None
    except BaseException as e:  # noqa: BLE001 - plugin code: every failure is this gate's on_error
        result, error = None, e
    t1 = _mono()
    cpu = (t1 - t0) if t1 - t0 < INLINE_EXACT_CPU_S else _cpu() - c0
    used = gc_cpu.get(tid, 0.0) - g0     # a collection inside the call frees everybody's garbage
    if used:
        cpu = max(0.0, cpu - used)
    return result, error, t0, t1, cpu


def _thread_clock() -> int | None:
    """The calling thread's CPU clock id (readable from any thread), or ``None`` where the platform
    has none (then a running job's CPU time is known only when it returns)."""
    try:
        return time.pthread_getcpuclockid(threading.get_ident())
    except (AttributeError, OSError):
        return None


class Job:
    """One call on a worker. ``result``/``error`` are valid once :attr:`finished` is true;
    ``t_start``/``t_done`` (monotonic s) bracket the plugin's own run (0.0 until it starts / ends),
    ``cpu`` (s) is the CPU time its own code used (see the module docstring), ``clock`` the running
    worker's CPU clock id while it runs."""

    __slots__ = ("abandoned", "clock", "cpu", "cpu0", "error", "finished", "fn", "gc0", "lock", "loop", "result",
                 "t_done", "t_start", "task", "tid", "waiter")

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn
        self.lock: threading.Lock | None = threading.Lock()
        self.lock.acquire()
        self.result: Any = None
        self.error: BaseException | None = None
        self.finished = False
        self.abandoned = False
        self.t_start = self.t_done = 0.0
        self.cpu = self.cpu0 = self.gc0 = 0.0
        self.clock: int | None = None
        self.tid = 0
        self.waiter: asyncio.Future[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[None] | None = None

    @classmethod
    def _bare(cls, fn: Any) -> Job:
        job = cls.__new__(cls)
        job.fn, job.lock, job.result, job.error = fn, None, None, None
        job.abandoned, job.waiter, job.loop, job.task, job.finished = False, None, None, None, False
        job.t_start = job.t_done = job.cpu = job.cpu0 = job.gc0 = 0.0
        job.clock = None
        job.tid = 0
        return job

    @classmethod
    def now(cls, fn: Callable[..., Any], *args: Any) -> Job:
        """Run ``fn(*args)`` in the calling thread (a hook declared inline; :func:`run_inline`): a
        finished job, no lock."""
        job = cls._bare(fn)
        job.result, job.error, job.t_start, job.t_done, job.cpu = run_inline(fn, *args)
        job.finished = True
        return job

    @classmethod
    def on_loop(cls, make: Callable[[], Awaitable[Any]]) -> Job:
        """Run the coroutine ``make()`` as a task on the running loop (a hook with an async twin:
        no thread). The job finishes when the task does; :meth:`abandon` cancels the task."""
        job = cls._bare(make)
        job.loop = asyncio.get_running_loop()
        job.t_start = time.monotonic()
        job.task = job.loop.create_task(job._run_async(make))
        return job

    @classmethod
    async def awaited(cls, coro: Awaitable[Any], budget_s: float, wall_s: float,
                      then: Callable[..., Any] | None = None, *args: Any) -> Job:
        """Await ``coro`` right here, metered (:class:`Metered`): cut when its own CPU time passes
        ``budget_s`` or, whatever it does, at ``wall_s`` of wall-clock time; its value passes through
        ``then(value, *args)`` when given (a reply normalizer: what it raises is the job's error).
        Returns the job, finished unless a deadline cut it. A cancellation from outside (the client
        left) propagates."""
        job = cls._bare(coro)
        job.t_start = time.monotonic()
        metered = Metered(coro, budget_s)
        deadline = asyncio.timeout(wall_s)
        try:
            async with deadline:
                value = await metered
                job.result = value if then is None else then(value, *args)
        except TimeoutError as e:
            if deadline.expired() or metered.over:
                job.abandoned = True
                job.cpu = metered.cpu
                return job
            job.error = e
        except Exception as e:  # noqa: BLE001 - plugin code: every failure is this gate's on_error
            job.error = e
        job.cpu = metered.cpu
        job.t_done = time.monotonic()
        job.finished = True
        return job

    async def _run_async(self, make: Callable[[], Awaitable[Any]]) -> None:
        metered = Metered(make(), None)
        try:
            self.result = await metered
        except asyncio.CancelledError:          # abandoned at its deadline: nobody reads it
            return
        except BaseException as e:  # noqa: BLE001 - plugin code: every failure is this gate's on_error
            self.error = e
        self.cpu = metered.cpu
        self.t_done = time.monotonic()
        self.finished = True
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def run(self, clock: int | None = None) -> None:
        """Worker side: call, record, wake whoever waits. ``clock``: this worker's CPU clock id."""
        if self.abandoned:
            return
        self.tid = tid = threading.get_ident()
        self.gc0 = g0 = _gc_now(tid)
        _in_call.add(tid)
        self.cpu0 = c0 = _cpu()
        self.clock = clock
        self.t_start = time.monotonic()
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - plugin code: every failure is this gate's on_error
            self.error = e
        cpu = _cpu() - c0
        _in_call.discard(tid)
        self.cpu = cpu - (_gc_now(tid) - g0)
        self.clock = None
        self.t_done = time.monotonic()
        self.finished = True
        if self.lock is not None:
            self.lock.release()
        w = self.waiter
        if w is not None and self.loop is not None:
            try:
                self.loop.call_soon_threadsafe(_wake, w)
            except RuntimeError:        # the loop closed while the plugin ran
                pass

    def cpu_now(self) -> float:
        """CPU time (s) the plugin has used so far: :attr:`cpu` once finished, the running worker's
        clock read from this thread while it runs (minus garbage collection on it), 0.0 before it
        starts (or where the platform cannot read another thread's clock)."""
        if self.finished:
            return self.cpu
        clock = self.clock
        if clock is None or not self.t_start:
            return 0.0
        try:
            now = time.clock_gettime(clock)
        except OSError:             # the platform refused the read
            return 0.0
        tid = self.tid
        gc_used = _gc_cpu.get(tid, 0.0) - self.gc0
        running = _gc_start.get(tid)
        if running is not None:     # a collection is running on that thread now: not the hook's
            gc_used += now - running
        used = now - self.cpu0 - gc_used
        return self.cpu if self.finished else used     # it may have finished between the reads

    def wait_sync(self, timeout_s: float) -> bool:
        """Block up to ``timeout_s`` for the result; True when finished."""
        if self.finished:
            return True
        if timeout_s <= 0 or self.lock is None:
            return False
        if self.lock.acquire(timeout=timeout_s):
            self.lock.release()
        return self.finished

    def future(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """A future resolved when the job finishes (already resolved if it has)."""
        fut: asyncio.Future[None] = loop.create_future()
        self.loop = loop
        self.waiter = fut
        if self.finished and not fut.done():
            fut.set_result(None)
        return fut

    def abandon(self) -> None:
        """Nobody reads this job any more; a worker that has not started it skips it, and an
        on-loop job's task is cancelled."""
        self.abandoned = True
        if self.task is not None and not self.task.done():
            self.task.cancel()


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Metered:
    """Await a coroutine while adding up the CPU time of its own steps (``cpu``, s), read on the
    loop thread's CPU clock around each step: time spent waiting for I/O, or ready while the loop
    ran other tasks, is not the hook's. With ``budget_s``, a step that leaves ``cpu`` above it ends
    the run: the coroutine is closed and ``TimeoutError`` raised (``over`` is then True)."""

    __slots__ = ("budget", "coro", "cpu", "over")

    def __init__(self, coro: Awaitable[Any], budget_s: float | None):
        self.coro: Any = coro
        self.budget = budget_s
        self.cpu = 0.0
        self.over = False

    def _add(self, c0: float, g0: float, tid: int) -> None:
        cpu = _cpu() - c0
        _in_call.discard(tid)
        self.cpu += cpu - (_gc_now(tid) - g0)

    def __await__(self) -> Any:
        coro = self.coro
        send: Any = None
        exc: BaseException | None = None
        tid = threading.get_ident()
        while True:
            g0 = _gc_now(tid)
            _in_call.add(tid)
            c0 = _cpu()
            try:
                step = coro.send(send) if exc is None else coro.throw(exc)
            except StopIteration as stop:
                self._add(c0, g0, tid)
                return stop.value
            except BaseException:
                self._add(c0, g0, tid)
                raise
            self._add(c0, g0, tid)
            if self.budget is not None and self.cpu > self.budget:
                self.over = True
                coro.close()
                raise TimeoutError("the hook used its CPU budget")
            try:
                send, exc = (yield step), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # noqa: BLE001 - delivered into the coroutine (cancellation too)
                send, exc = None, e


class WorkerPool:
    """Daemon worker threads for one hook (so a hung plugin never blocks process exit): ``prestart``
    started at once, more on demand up to ``max_workers``."""

    def __init__(self, name: str, *, max_workers: int = 8, max_pending: int = 64, prestart: int = 2):
        self.name = name
        self.max_workers = max_workers
        self.max_pending = max_pending
        self._q: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._mutex = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._closed = False
        watch_gc()
        for _ in range(min(prestart, max_workers)):     # no thread start on the first requests
            self._spawn()

    def submit(self, fn: Callable[[], Any]) -> Job | None:
        """Queue ``fn``; ``None`` when saturated or closed."""
        if self._closed:
            return None
        queued = self._q.qsize()
        if self._idle <= queued:                     # no idle worker for this job
            if self._threads < self.max_workers:
                self._spawn()
            elif queued >= self.max_pending:         # every worker busy and the queue full
                return None
        job = Job(fn)
        self._q.put(job)
        return job

    def _spawn(self) -> None:
        with self._mutex:
            if self._threads >= self.max_workers:
                return
            self._threads += 1
            n = self._threads
        threading.Thread(target=self._work, name=f"busbar-hook-{self.name}-{n}", daemon=True).start()

    def _work(self) -> None:
        q = self._q
        mutex = self._mutex
        clock = _thread_clock()
        while True:
            with mutex:
                self._idle += 1
            job = q.get()
            with mutex:
                self._idle -= 1
            if job is None:
                return
            job.run(clock)

    @property
    def busy(self) -> int:
        """Workers running a job now (approximate)."""
        return self._threads - self._idle

    def close(self) -> None:
        """Stop idle workers; a worker stuck in plugin code exits when (if) the call returns."""
        self._closed = True
        for _ in range(self._threads):
            self._q.put(None)
