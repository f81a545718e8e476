"""Strict limits: fleet-exact admission by one atomic operation in the shared store.

A limit with ``strict: true`` (``requests`` or ``budget``) is not decided by the node's in-memory
counters (:class:`~busbar.limits.engine.Limiter` still charges its bucket window, for the ledger
and the reports, but skips its check): every request whose chain has one is admitted by ONE
``Store.strict_admit`` over all of the chain's strict counters (docs/stores.md#strict-counters),
so N nodes on one store together never pass the cap.

``StrictLimits(card, metrics)``, used by :class:`~busbar.limits.gate.Limits`:

- ``await admit(gw, dialect, limiter, ticket) -> (reply, hold)``: after the in-memory admission
  gave ``ticket``, whose plan names the chain's enforced strict limits (``ticket.plan.strict``,
  resolved once per group and pool by :class:`~busbar.limits.engine.Limiter`). The counters of
  every strict limit (requests: 1; budget: the ticket's worst case + ``per_request_fee``,
  micro-units rounded up, at most the cap + 1) are checked and reserved all or nothing; when the
  store refuses, the in-memory admission is undone (``limiter.cancel``: no counter moved anywhere)
  and ``reply`` is the limit's refusal in the caller's dialect, as the engine words it; when the
  store fails or does not answer within :data:`ADMIT_TIMEOUT_S`, the request is refused 503 naming
  the group (fail closed). Otherwise ``reply`` is ``None`` and ``hold`` is what settlement releases.
- ``settle(gw, hold, ok, model, tiers, units)``: at the request's end, one ``strict_settle``
  releases the reservations and adds the outcome (requests: 1 when ``ok``; budget: the real cost
  of the tokens and operation units + the fee when ``ok``). It runs in the background and is
  retried for about a minute when the store fails (:data:`SETTLE_BACKOFF_S`); after that the
  reservation stays held until the window rolls, logged and counted
  (``busbar_limit_strict_store_failures_total{op="settle"}``).
- ``await close()``: wait for settlements in flight (shutdown).
- ``await fleet_usage(gw, limits, now) -> {(bucket, metric): {"used", "reserved"}}``: the store's
  counters of the current windows of the strict ``limits`` (the groups report), ``{}`` when the
  store cannot be read.

Source: docs/limits.md#strict-mode.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from busbar_sdk.store import MemoryStore, StoreError, StoreUnavailable, StrictCharge, StrictRelease, TierTokens
from busbar_sdk.store.strict import EXPIRY_GRACE_S
from busbar_sdk.store.windows import window_end, window_start

from busbar.limits.cost import RateCard, micros
from busbar.limits.engine import Limiter, Refusal, Ticket
from busbar.limits.replies import refusal_reply
from busbar.limits.tree import Limit

if TYPE_CHECKING:
    from busbar_sdk.store import Store

    from busbar.limits.metrics import LimitMetrics
    from busbar.proto.base import Dialect
    from busbar.proxy.relay import Reply

__all__ = ["ADMIT_TIMEOUT_S", "SETTLE_BACKOFF_S", "Hold", "StrictLimits", "unavailable"]

log = logging.getLogger("busbar.limits")
T = TypeVar("T")

#: Seconds a strict admission waits for the store before refusing the request (503).
ADMIT_TIMEOUT_S = 5.0
#: Waits between attempts of a settlement the store failed (about a minute in all).
SETTLE_BACKOFF_S = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)


@dataclass(slots=True)
class Hold:
    """What one admitted request holds in the store: each strict limit and its charge."""

    charges: list[tuple[Limit, StrictCharge]] = field(default_factory=list)


def unavailable(lim: Limit) -> Refusal:
    """The 503 of a strict admission the store could not decide, naming ``lim``'s group."""
    return Refusal(503, "unavailable", f"group '{lim.group}': {lim.label} is strict and the store that "
                                       f"enforces it is unavailable; the request is refused (retry shortly)",
                   None, lim)


async def _admit(store: Store, charges: list[StrictCharge]) -> int | None:
    """``strict_admit``, once more on :class:`StoreUnavailable` (a dropped connection is replaced on
    the next call; if the first attempt did reserve, the reservation stays held until the window
    rolls: fewer admissions, never more)."""
    try:
        return await store.strict_admit(charges)
    except StoreUnavailable:
        return await store.strict_admit(charges)


class StrictLimits:
    """The strict half of admission and settlement (see the module docstring).

    Args:
        card: the rate card (the fee and the cost of a settled reply).
        metrics: the limits metrics (store failures are counted there).
    """

    def __init__(self, card: RateCard, metrics: LimitMetrics) -> None:
        self.card = card
        self.metrics = metrics
        self._local: MemoryStore | None = None          # a gateway without a store: per node
        self.pending: set[asyncio.Future[Any]] = set()

    def store_of(self, gw: Any) -> Store:
        """The gateway's store (a private in-memory one when it has none)."""
        store: Store | None = getattr(gw, "store", None)
        if store is None:
            if self._local is None:
                self._local = MemoryStore()
            store = self._local
        return store

    def _charge(self, lim: Limit, cost_pico: int, now: int) -> StrictCharge:
        per = lim.per or "total"
        start = window_start(per, now)
        end = window_end(per, start)
        amount = 1 if lim.metric == "requests" else micros(cost_pico + self.card.fee_pico)
        # a worst case past the cap never fits: cap + 1 refuses it the same way, and keeps a body's
        # absurd max_tokens within the store's 64-bit counters (else a 503 "store unavailable")
        amount = min(amount, lim.amount + 1)
        return StrictCharge(lim.bucket, start, lim.metric, lim.amount, amount,
                            None if end is None else end + EXPIRY_GRACE_S)

    async def admit(self, gw: Any, dialect: Dialect, limiter: Limiter,
                    ticket: Ticket) -> tuple[Reply | None, Hold | None]:
        """Decide ``ticket``'s strict limits in the store (see the module docstring)."""
        lims = ticket.plan.strict
        now = int(limiter.clock())
        charges = [(lim, self._charge(lim, ticket.worst.cost, now)) for lim in lims]
        store = self.store_of(gw)
        op = self._track(_admit(store, [c for _, c in charges]))     # it may outlive this request
        try:
            over = await asyncio.wait_for(asyncio.shield(op), ADMIT_TIMEOUT_S)
        except BaseException as e:
            limiter.cancel(ticket)
            op.add_done_callback(lambda done: self._undo_late(gw, done, charges))   # timed out or cancelled
            if not isinstance(e, StoreError | TimeoutError):
                raise
            self.metrics.strict_failed("admit")
            reason = str(e) or f"no answer within {ADMIT_TIMEOUT_S:g} s"
            log.error("store (%s): strict admission for group '%s' failed (%s); the request is refused (503)",
                      store.backend, ticket.group, reason)
            return refusal_reply(dialect, unavailable(lims[0])), None
        if over is not None:
            limiter.cancel(ticket)
            return refusal_reply(dialect, limiter.refuse(charges[over][0], now)), None
        return None, Hold(charges)

    def _undo_late(self, gw: Any, done: asyncio.Future[int | None], charges: list[tuple[Limit, StrictCharge]]) -> None:
        """An admission the request stopped waiting for (timed out, or the request was cancelled)
        that the store granted after all: release its reservations."""
        if not done.cancelled() and done.exception() is None and done.result() is None:
            self._release([StrictRelease(c.bucket, c.window_start, c.metric, c.amount, 0, c.expires_at)
                           for _, c in charges], self.store_of(gw))

    def _release(self, releases: list[StrictRelease], store: Store) -> None:
        self._track(self._settle(store, releases))

    def _track(self, coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        """Run ``coro`` as a task held in :attr:`pending` until it is done (``close`` waits for it)."""
        task = asyncio.ensure_future(coro)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)
        return task

    def settle(self, gw: Any, hold: Hold, ok: bool, model: str | None, tiers: TierTokens | None,
               units: Mapping[str, TierTokens] | None = None) -> None:
        """Release ``hold`` and record the outcome, in the background (see the module docstring):
        the cost is ``model``'s ``tiers`` plus the operation ``units`` (``{unit_key: count}``,
        busbar.limits.cost) at today's rate card."""
        cost = 0
        if model is not None and tiers is not None and not tiers.is_zero():
            cost = self.card.entry_pico(model, tiers)
        for name, count in (units or {}).items():
            cost += self.card.entry_pico(name, count)
        releases = []
        for lim, c in hold.charges:
            if lim.metric == "requests":
                add = 1 if ok else 0
            else:
                add = micros(cost + (self.card.fee_pico if ok else 0))
            releases.append(StrictRelease(c.bucket, c.window_start, c.metric, c.amount, add, c.expires_at))
        self._release(releases, self.store_of(gw))

    async def _settle(self, store: Store, releases: list[StrictRelease]) -> None:
        for wait in (*SETTLE_BACKOFF_S, None):
            try:
                await store.strict_settle(releases)
                return
            except StoreError as e:
                if wait is None:
                    self.metrics.strict_failed("settle")
                    log.error("store (%s): a strict settlement failed for a minute (%s); its reservation on %s "
                              "stays held until the window rolls", store.backend, e,
                              ", ".join(sorted({r.bucket for r in releases})))
                    return
                await asyncio.sleep(wait)

    async def fleet_usage(self, gw: Any, limits: list[Limit], now: int) -> dict[tuple[str, str], dict[str, int]]:
        """See the module docstring."""
        store = self.store_of(gw)
        out: dict[tuple[str, str], dict[str, int]] = {}
        try:
            for lim in limits:
                if lim.strict:
                    c = await store.strict_get(lim.bucket, window_start(lim.per or "total", now), lim.metric)
                    out[(lim.bucket, lim.metric)] = {"used": c.used, "reserved": c.reserved}
        except StoreError as e:
            log.warning("store (%s): strict counters could not be read for the groups report (%s)", store.backend, e)
            return {}
        return out

    async def close(self, timeout_s: float = 5.0) -> None:
        """Wait up to ``timeout_s`` for settlements in flight; the rest are cancelled."""
        if not self.pending:
            return
        _, late = await asyncio.wait(set(self.pending), timeout=timeout_s)
        if late:
            self.metrics.strict_failed("settle", len(late))
            log.error("%d strict settlement(s) still retrying at shutdown were abandoned; their reservations stay "
                      "held until their windows roll", len(late))
        for task in late:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
