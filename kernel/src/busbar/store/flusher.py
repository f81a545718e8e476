"""Write-behind of the usage ledger and metering: in memory on the request path, additive in the store.

The request path calls :meth:`UsageFlusher.add_usage` / :meth:`UsageFlusher.add_metering`: a dict
merge, no I/O, no await. :meth:`UsageFlusher.run` flushes what accrued every
``advanced.usage_flush_interval_ms`` (default 100 ms) with one additive ``add_usage`` and one
``add_metering`` call, so several nodes sharing a store converge on the exact fleet total.

When the store is unavailable the batch is merged back into the pending deltas and retried with
exponential backoff (``interval`` doubling up to 5 s), so nothing is lost while the outage lasts.
Pending state is bounded by ``max_pending`` rows (ledger windows + metering rows); past it the
oldest rows are dropped, counted in ``busbar_store_flush_lost_total{kind}`` and logged once per
outage: never silently. A batch the store *rejects* (any error other than unavailable) is dropped
the same way, since re-sending it would fail again. :meth:`close` flushes one last time, bounded
by ``shutdown_timeout_s``.

Metrics (when a registry is given): ``busbar_store_flush_lost_total{kind=usage|metering}``,
``busbar_store_flush_failures_total``, ``busbar_store_flushed_rows_total{kind}``,
``busbar_store_flush_pending_rows`` and ``busbar_store_flush_lag_seconds`` (age of the oldest
unflushed delta).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from busbar_sdk.store import MeteringDelta, Store, StoreError, StoreUnavailable, UsageDelta, UsageItem
from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["UsageFlusher"]

log = logging.getLogger("busbar.store")

_MAX_BACKOFF_S = 5.0


class UsageFlusher:
    """Accumulate ledger and metering deltas; flush them additively to ``store``.

    Args:
        store: an opened :class:`~busbar_sdk.store.Store`.
        interval_s: the flush period (seconds; ``advanced.usage_flush_interval_ms`` / 1000).
        max_pending: the most pending rows kept while the store is down (oldest dropped first).
        registry: a Prometheus registry for the metrics above, or ``None``.
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, store: Store, *, interval_s: float = 0.1, max_pending: int = 100_000,
                 registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.interval_s = interval_s
        self.max_pending = max_pending
        self._clock = clock
        self._usage: dict[tuple[str, int], UsageDelta] = {}
        self._metering: dict[tuple[str, str, str, str], MeteringDelta] = {}
        self._oldest: float | None = None
        self._inflight = 0
        self._outage = False
        self._closed = False
        self.lost = {"usage": 0, "metering": 0}
        self.flushed = {"usage": 0, "metering": 0}
        self.failures = 0
        self._m_lost: Counter | None = None
        self._m_flushed: Counter | None = None
        self._m_fail: Counter | None = None
        if registry is not None:
            self._m_lost = Counter("busbar_store_flush_lost", "Pending rows dropped (store down too long or a "
                                   "rejected batch)", ["kind"], registry=registry)
            self._m_flushed = Counter("busbar_store_flushed_rows", "Rows flushed to the store", ["kind"],
                                      registry=registry)
            self._m_fail = Counter("busbar_store_flush_failures", "Flushes that failed", registry=registry)
            Gauge("busbar_store_flush_pending_rows", "Rows waiting for the next flush",
                  registry=registry).set_function(lambda: self.pending)
            Gauge("busbar_store_flush_lag_seconds", "Age of the oldest unflushed delta",
                  registry=registry).set_function(self.lag_s)

    # -- the request path --------------------------------------------------------------------
    def add_usage(self, bucket: str, window_start: int, delta: UsageDelta) -> None:
        """Merge one ledger delta (no I/O)."""
        key = (bucket, window_start)
        old = self._usage.get(key)
        self._usage[key] = delta if old is None else _sum(old, delta)
        self._touch()

    def add_metering(self, delta: MeteringDelta) -> None:
        """Merge one metering delta (no I/O)."""
        old = self._metering.get(delta.row_key)
        self._metering[delta.row_key] = delta if old is None else old.plus(delta)
        self._touch()

    def _touch(self) -> None:
        if self._oldest is None:
            self._oldest = self._clock()
        self._trim()

    def _drop(self, n: int) -> None:
        """Drop the ``n`` oldest pending rows (insertion order), counting and logging the loss."""
        while n > 0 and self._usage:
            del self._usage[next(iter(self._usage))]
            n -= 1
            self._lose("usage", 1)
        while n > 0 and self._metering:
            del self._metering[next(iter(self._metering))]
            n -= 1
            self._lose("metering", 1)

    def _lose(self, kind: str, n: int) -> None:
        if n <= 0:
            return
        if self.lost[kind] == 0 or not self._outage:
            log.error("store (%s): dropped %d pending %s row(s); the store copy of the ledger is short by them",
                      self.store.backend, n, kind)
        self.lost[kind] += n
        if self._m_lost is not None:
            self._m_lost.labels(kind).inc(n)

    def lag_s(self) -> float:
        """Seconds since the oldest unflushed delta arrived (0 when nothing is pending)."""
        return 0.0 if self._oldest is None else max(0.0, self._clock() - self._oldest)

    @property
    def pending(self) -> int:
        """Rows not yet in the store: waiting for the next flush or on the wire in this one."""
        return len(self._usage) + len(self._metering) + self._inflight

    # -- flushing ----------------------------------------------------------------------------
    async def flush(self) -> bool:
        """Send everything pending; returns whether the store took it all.

        On :class:`StoreUnavailable` the batch goes back to pending (retried next time); on any
        other store error it is dropped and counted as lost.
        """
        ok = True
        if self._usage:
            usage, self._usage = self._usage, {}
            items = [UsageItem(b, w, d) for (b, w), d in usage.items() if not d.is_zero()]
            outcome = await self._in_flight(len(usage), self._send("usage", len(items),
                                                                   lambda: self.store.add_usage(items)),
                                            lambda: self._requeue_usage(usage))
            if outcome == "retry":
                self._requeue_usage(usage)
            ok &= outcome == "sent"
        if self._metering:
            metering, self._metering = self._metering, {}
            rows = list(metering.values())
            outcome = await self._in_flight(len(rows), self._send("metering", len(rows),
                                                                  lambda: self.store.add_metering(rows)),
                                            lambda: self._requeue_metering(metering))
            if outcome == "retry":
                self._requeue_metering(metering)
            ok &= outcome == "sent"
        if not self._usage and not self._metering:
            self._oldest = None
        return ok

    async def _in_flight(self, n: int, send: Awaitable[str], requeue: Callable[[], None]) -> str:
        """Await ``send`` with its ``n`` rows counted as pending (the gauge does not dip to 0 while a
        batch is on the wire); when cancelled (``close``'s bound ran out) the batch goes back to
        pending first, so ``close`` counts it lost instead of losing it silently."""
        self._inflight += n
        try:
            return await send
        except asyncio.CancelledError:
            requeue()
            raise
        finally:
            self._inflight -= n

    async def _send(self, kind: str, n: int, call: Callable[[], Awaitable[None]]) -> str:
        """Send one batch of ``n`` rows: ``"sent"``, ``"retry"`` (store unavailable: the caller keeps
        the batch) or ``"lost"`` (rejected: dropped and counted here)."""
        try:
            await call()
        except StoreUnavailable as exc:
            self._failed(exc)
            return "retry"
        except StoreError as exc:
            self._failed(exc)
            self._lose(kind, n)
            return "lost"
        if self._outage:
            log.warning("store (%s): reachable again; pending usage flushed", self.store.backend)
            self._outage = False
        self.flushed[kind] += n
        if self._m_flushed is not None:
            self._m_flushed.labels(kind).inc(n)
        return "sent"

    def _failed(self, exc: StoreError) -> None:
        self.failures += 1
        if self._m_fail is not None:
            self._m_fail.inc()
        if not self._outage:
            log.warning("store (%s): flush failed, retrying with backoff: %s", self.store.backend, exc)
            self._outage = True

    def _requeue_usage(self, batch: dict[tuple[str, int], UsageDelta]) -> None:
        """Merge a failed batch back under anything that accrued meanwhile (older rows first)."""
        newer, self._usage = self._usage, dict(batch)
        for (bucket, window_start), delta in newer.items():
            self.add_usage(bucket, window_start, delta)
        self._trim()

    def _requeue_metering(self, batch: dict[tuple[str, str, str, str], MeteringDelta]) -> None:
        newer, self._metering = self._metering, dict(batch)
        for delta in newer.values():
            self.add_metering(delta)
        self._trim()

    def _trim(self) -> None:
        overflow = len(self._usage) + len(self._metering) - self.max_pending
        if overflow > 0:
            self._drop(overflow)

    async def run(self) -> None:
        """Flush every ``interval_s`` until cancelled, backing off while the store is unavailable."""
        delay = self.interval_s
        while not self._closed:
            await asyncio.sleep(delay)
            ok = await self.flush()
            delay = self.interval_s if ok else min(_MAX_BACKOFF_S, max(delay * 2, self.interval_s))

    async def close(self, shutdown_timeout_s: float = 5.0) -> None:
        """Stop :meth:`run`'s loop and flush once more (bounded); what cannot be sent is counted lost."""
        self._closed = True
        try:
            async with asyncio.timeout(shutdown_timeout_s):
                await self.flush()
        except TimeoutError:
            pass
        self._outage = False
        self._lose("usage", len(self._usage))
        self._lose("metering", len(self._metering))
        self._usage.clear()
        self._metering.clear()


def _sum(a: UsageDelta, b: UsageDelta) -> UsageDelta:
    models = dict(a.models)
    for model, tiers in b.models.items():
        models[model] = models[model].plus(tiers, floor=False) if model in models else tiers
    return UsageDelta(a.requests + b.requests, a.billable_requests + b.billable_requests, models)
