"""Admission and settlement against the group tree: all-or-nothing, with worst-case reservations.

``Limiter(tree, card, *, flusher=None, clock=time.time)``:

- ``admit(group, pool, worst_of, allowed=None) -> Ticket | Refusal`` walks ``group`` and every
  ancestor and checks every limit that applies to ``pool`` (group-wide ones and those scoped to
  ``pool``). Only when every enforced limit passes does anything move: each distinct bucket window
  of the chain counts the request once (``requests`` and ``billable_requests`` + 1), holds the
  request's worst case (``worst_of(pool) -> Worst``: tokens and cost) as a reservation, and each
  group's in-flight gauge + 1. A refused request moves no counter (case C028). A failing
  pool-scoped budget with ``downgrade_to`` re-admits through that pool when ``allowed(pool)`` says
  the caller may use it (cycle-bounded); the ticket names the pool that was admitted.
- ``settle(ticket, ok, model, tiers)`` runs once per admitted request at its end (reply sent,
  stream ended, client gone): reservations released, the real tokens added to every charged
  bucket (spend derived from them), ``billable_requests`` refunded on a non-2xx outcome, the
  in-flight gauges released; the request (+1, billable unless refunded, its tokens) joins each
  charged bucket window's pending delta. ``drain()`` (every flush interval, and at shutdown) hands
  one additive delta per dirty window to ``flusher.add_usage`` (no I/O).

Every check and every charge happens without an ``await`` in between, so on one node the check
and the charge are one atomic step: recorded spend plus open reservations never exceeds a budget
(case C027). Shadow limits are evaluated and counted (``on_shadow``) but never refuse. A strict
limit's bucket is charged here but its check is the shared store's (``busbar.limits.strict``):
``refuse(lim, now)`` words its refusal, ``cancel(ticket)`` undoes an admission the store refused.

Windows are civil UTC (``busbar_sdk.store.windows``); a bucket keeps only its current window in
memory, the store keeps them all. ``seed(bucket, window_start, ledger)`` loads a stored window at
boot.

Source: docs/limits.md#admission.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from busbar_sdk.store import TierTokens, UsageDelta, UsageLedger
from busbar_sdk.store.windows import window_end, window_start

from busbar.limits.cost import RateCard, is_unit_key, micros
from busbar.limits.tree import Group, GroupTree, Limit

__all__ = ["Limiter", "Refusal", "Ticket", "Window", "Worst"]

MAX_DOWNGRADES = 8


@dataclass(frozen=True, slots=True)
class Worst:
    """A request's worst case: ``tokens`` (input counted from the body + max output) and ``cost``
    (pico-units at the dearest rate of the pool, fee excluded); ``input`` and ``output`` split
    ``tokens`` (what a stream that never reports usage is charged)."""

    tokens: int = 0
    cost: int = 0
    input: int = 0
    output: int = 0


class Window:
    """The in-memory counters of one bucket window (ledger + open reservations)."""

    __slots__ = ("bucket", "start", "end", "pend_requests", "pend_billable", "pend_models", "requests",
                 "billable", "tokens", "spend", "reserved_cost", "reserved_tokens", "models")

    def __init__(self, bucket: str, start: int, end: int | None = None) -> None:
        self.bucket = bucket
        self.start = start
        self.pend_requests = 0       # settled since the last drain (the ledger delta to flush)
        self.pend_billable = 0
        self.pend_models: dict[str, list[int]] = {}
        self.end = end               # first second after the window (None: never rolls)
        self.requests = 0           # admitted
        self.billable = 0           # admitted minus non-2xx refunds (the requests limit and the fee)
        self.tokens = 0             # every tier of every model
        self.spend = 0              # pico-units of token cost (fee derived from billable)
        self.reserved_cost = 0      # pico-units held by requests in flight
        self.reserved_tokens = 0
        self.models: dict[str, list[int]] = {}     # model -> [input, output, cache_read, cache_write]


@dataclass(slots=True)
class Refusal:
    """Why a request is not admitted: ``status`` (429, 403), ``kind`` (``rate_limit``, ``quota``,
    ``frozen``, ``unconfigured``), ``message`` naming the bucket, ``retry_after`` seconds (``None``
    for ``total``/``concurrent``/403), the failing ``limit`` (``None`` for 403)."""

    status: int
    kind: str
    message: str
    retry_after: int | None = None
    limit: Limit | None = None


@dataclass(slots=True)
class Ticket:
    """An admitted request: what ``settle`` releases. ``pool`` is the pool that was admitted (a
    downgrade may change it)."""

    group: str
    pool: str | None
    worst: Worst
    windows: list[tuple[str, Window]] = field(default_factory=list)
    groups: tuple[str, ...] = ()
    settled: bool = False


_PER_TOKEN_METRICS = ("tokens", "budget")


class Limiter:
    """The per-node enforcement state of one running config.

    Args:
        tree: the group tree.
        card: the rate card and fee.
        flusher: anything with ``add_usage(bucket, window_start, UsageDelta)`` (the store's
            write-behind), or ``None``.
        clock: Unix seconds (float).
        on_shadow: called with a shadow ``Limit`` each time it would have refused.
        on_refuse: called with the refusing ``Limit`` (``None`` for a 403).
    """

    def __init__(self, tree: GroupTree, card: RateCard, *, flusher: Any = None,
                 clock: Callable[[], float] = time.time,
                 on_shadow: Callable[[Limit], None] | None = None,
                 on_refuse: Callable[[Limit | None], None] | None = None) -> None:
        self.tree = tree
        self.card = card
        self.flusher = flusher
        self.clock = clock
        self.on_shadow = on_shadow
        self.on_refuse = on_refuse
        self.current: dict[str, Window] = {}         # bucket -> its current window
        self.inflight: dict[str, int] = {}           # group -> requests in flight
        self.reservations = 0                        # open tickets
        self.dirty: dict[Window, None] = {}          # windows with settled requests not drained (ordered)

    # -- state ---------------------------------------------------------------------------------
    def window(self, lim: Limit, now: int) -> Window:
        """The current window of ``lim``'s bucket (a fresh one when the last rolled over)."""
        bucket = lim.bucket
        win = self.current.get(bucket)
        if win is not None and win.start <= now and (win.end is None or now < win.end):
            return win
        per = lim.per or "total"
        start = window_start(per, now)
        if win is None or win.start != start:
            win = self.current[bucket] = Window(bucket, start, window_end(per, start))
        return win

    def seed(self, bucket: str, start: int, ledger: UsageLedger) -> None:
        """Load a stored ledger window as the bucket's current state (boot)."""
        win = self.current.get(bucket)
        if win is None or win.start < start:
            per = bucket.split("@", 1)[1].split("#", 1)[0]
            win = self.current[bucket] = Window(bucket, start, window_end(per, start))
        elif win.start != start:
            return
        win.requests += ledger.requests
        win.billable += ledger.billable_requests
        for model, tiers in ledger.models.items():
            self._add_tokens(win, model, tiers)

    def _add_tokens(self, win: Window, model: str, tiers: TierTokens) -> None:
        ntok = 0 if is_unit_key(model) else tiers.input + tiers.output + tiers.cache_read + tiers.cache_write
        _add(win, model, tiers, ntok, self.card.entry_pico(model, tiers))

    def spent_micros(self, win: Window) -> int:
        """A window's derived spend (tokens × today's rates + fee × billable), micro-units."""
        return micros(win.spend + win.billable * self.card.fee_pico)

    # -- admission -----------------------------------------------------------------------------
    def admit(self, group: str, pool: str | None, worst_of: Callable[[str | None], Worst],
              allowed: Callable[[str], bool] | None = None) -> Ticket | Refusal:
        """Admit one request of ``group`` through ``pool`` (``None``: a direct model route), or say
        why not. See the module docstring."""
        chain = self.tree.chain(group)
        if chain is None:
            return self._refuse(Refusal(403, "unconfigured", f"group '{group}' is not configured in the "
                                                             f"running config; the request is refused"))
        for g in chain:
            if not g.enabled:
                return self._refuse(Refusal(403, "frozen", f"group '{g.name}' is frozen (enabled: false)"))
        now = int(self.clock())
        seen = {pool}
        while True:
            worst = worst_of(pool)
            verdict = self._try(chain, group, pool, worst, now)
            if isinstance(verdict, Ticket):
                return verdict
            lim = verdict.limit
            nxt = lim.downgrade_to if lim is not None else None
            if (nxt is None or lim is None or lim.pool != pool or nxt in seen or len(seen) > MAX_DOWNGRADES
                    or (allowed is not None and not allowed(nxt))):
                return self._refuse(verdict)
            seen.add(nxt)
            pool = nxt

    def _refuse(self, r: Refusal) -> Refusal:
        if self.on_refuse is not None:
            self.on_refuse(r.limit)
        return r

    def _try(self, chain: tuple[Group, ...], group: str, pool: str | None, worst: Worst,
             now: int) -> Ticket | Refusal:
        fee = self.card.fee_pico
        charged: dict[str, Window] = {}
        for g in chain:
            for lim in g.limits:
                if lim.pool is not None and lim.pool != pool:
                    continue
                metric = lim.metric
                if metric == "concurrent":
                    if self.inflight.get(g.name, 0) + 1 <= lim.amount:
                        continue
                    over = True
                else:
                    win = charged.get(lim.bucket)
                    if win is None:
                        win = charged[lim.bucket] = self.window(lim, now)
                    if lim.strict:           # charged here, decided by the shared store (limits/strict.py)
                        continue
                    if metric == "requests":
                        over = win.billable + 1 > lim.amount
                    elif metric == "tokens":
                        over = win.tokens + win.reserved_tokens + worst.tokens > lim.amount
                    else:
                        over = micros(win.spend + (win.billable + 1) * fee + win.reserved_cost
                                      + worst.cost) > lim.amount
                    if not over:
                        continue
                if lim.shadow:
                    if self.on_shadow is not None:
                        self.on_shadow(lim)
                    continue
                return self._over(lim, now)
        for win in charged.values():
            win.requests += 1
            win.billable += 1
            win.reserved_cost += worst.cost
            win.reserved_tokens += worst.tokens
        names = tuple(g.name for g in chain)
        inflight = self.inflight
        for name in names:
            inflight[name] = inflight.get(name, 0) + 1
        self.reservations += 1
        return Ticket(group, pool, worst, list(charged.items()), names)

    def refuse(self, lim: Limit, now: int) -> Refusal:
        """The refusal of ``lim`` at ``now`` (counted like every refusal): what a limit decided
        outside this engine (a strict limit's store) answers."""
        return self._refuse(self._over(lim, now))

    def cancel(self, ticket: Ticket) -> None:
        """Undo an admission that another part of the chain refused (a strict limit): every counter
        it moved goes back and nothing reaches the ledger. Idempotent; a settled ticket is kept."""
        if ticket.settled:
            return
        ticket.settled = True
        self.reservations -= 1
        for name in ticket.groups:
            self.inflight[name] = self.inflight.get(name, 1) - 1
        worst = ticket.worst
        for _, win in ticket.windows:
            win.requests -= 1
            win.billable -= 1
            win.reserved_cost -= worst.cost
            win.reserved_tokens -= worst.tokens

    def _over(self, lim: Limit, now: int) -> Refusal:
        where = f"group '{lim.group}': {lim.label}"
        retry = None
        if lim.per is not None and lim.per != "total":
            start = window_start(lim.per, now)
            end = window_end(lim.per, start)
            retry = max(1, (end or now) - now)
        if lim.metric == "budget":
            return Refusal(429, "quota", f"{where} is exhausted (budget {lim.amount})", retry, lim)
        return Refusal(429, "rate_limit", f"{where} exceeded (limit {lim.amount})", retry, lim)

    def usage_of(self, lim: Limit) -> dict[str, int]:
        """What ``lim``'s bucket holds now: ``{"used", "reserved"}`` (requests: billable count;
        tokens: tokens, reserved = the worst case of open requests; budget: micro-units spent,
        reserved = open reservations; concurrent: in flight)."""
        if lim.metric == "concurrent":
            return {"used": self.inflight.get(lim.group, 0), "reserved": 0}
        now = int(self.clock())
        win = self.current.get(lim.bucket)
        if win is None or win.start > now or (win.end is not None and now >= win.end):
            return {"used": 0, "reserved": 0}
        if lim.metric == "requests":
            return {"used": win.billable, "reserved": 0}
        if lim.metric == "tokens":
            return {"used": win.tokens, "reserved": win.reserved_tokens}
        return {"used": self.spent_micros(win), "reserved": micros(win.reserved_cost)}

    # -- signals -------------------------------------------------------------------------------
    def headroom(self, group: str, pool: str | None) -> tuple[int | None, float | None]:
        """``(budget_remaining, rate_headroom)`` of ``group``'s chain for a request through
        ``pool``: the least budget left (micro-units, reservations counted, ≥ 0) over its budget
        limits, and the tightest fraction left (0.0 .. 1.0) over its requests / tokens / concurrent
        limits; ``None`` for a kind of limit the chain does not have. Shadow limits are ignored;
        nothing is charged."""
        chain = self.tree.chain(group)
        if chain is None:
            return 0, 0.0
        now = int(self.clock())
        fee = self.card.fee_pico
        budget: int | None = None
        rate: float | None = None
        for g in chain:
            for lim in g.limits:
                if lim.shadow or (lim.pool is not None and lim.pool != pool):
                    continue
                if lim.metric == "concurrent":
                    used = self.inflight.get(g.name, 0)
                else:
                    win = self.current.get(lim.bucket)
                    live = win is not None and win.start <= now and (win.end is None or now < win.end)
                    if lim.metric == "budget":
                        left = lim.amount - (micros(win.spend + win.billable * fee + win.reserved_cost)
                                             if win is not None and live else 0)
                        budget = max(0, left) if budget is None else min(budget, max(0, left))
                        continue
                    if win is None or not live:
                        used = 0
                    elif lim.metric == "requests":
                        used = win.billable
                    else:
                        used = win.tokens + win.reserved_tokens
                frac = 0.0 if lim.amount <= 0 else max(0.0, min(1.0, (lim.amount - used) / lim.amount))
                rate = frac if rate is None else min(rate, frac)
        return budget, rate

    # -- settlement ----------------------------------------------------------------------------
    def settle(self, ticket: Ticket, ok: bool, model: str | None, tiers: TierTokens | None,
               units: Mapping[str, TierTokens] | None = None) -> None:
        """End one admitted request (idempotent): release, refund on ``not ok``, add ``tiers`` of
        ``model`` (tokens used even when the reply failed after its first byte) and the operation
        ``units`` it used (``{unit_key: count in input}``, busbar.limits.cost; charged, never
        counted as tokens)."""
        if ticket.settled:
            return
        ticket.settled = True
        self.reservations -= 1
        inflight = self.inflight
        for name in ticket.groups:
            inflight[name] = inflight.get(name, 1) - 1
        worst = ticket.worst
        used = tiers is not None and model is not None and not tiers.is_zero()
        ntok = cost = 0
        if used:
            assert model is not None and tiers is not None
            ntok = tiers.input + tiers.output + tiers.cache_read + tiers.cache_write
            rates = self.card.rates_of(model)
            cost = self.card.cost_pico(rates, tiers) if rates is not None else 0
        unit_items = [(n, c) for n, c in units.items() if not c.is_zero()] if units else []
        dirty = self.dirty
        ledger = self.flusher is not None
        for bucket, win in ticket.windows:
            win.reserved_cost -= worst.cost
            win.reserved_tokens -= worst.tokens
            if ledger:
                win.pend_requests += 1
                if ok:
                    win.pend_billable += 1
                if used:
                    assert model is not None and tiers is not None
                    _count(win.pend_models, model, tiers)
                for name, count in unit_items:
                    _count(win.pend_models, name, count)
                dirty[win] = None
            if self.current.get(bucket) is not win:     # the window rolled: only the ledger hears of it
                continue
            if not ok:
                win.billable = max(0, win.billable - 1)
            if used:
                assert model is not None and tiers is not None
                _add(win, model, tiers, ntok, cost)
            for name, count in unit_items:
                _add(win, name, count, 0, self.card.entry_pico(name, count))

    def drain(self) -> int:
        """Hand what settled since the last drain to ``flusher.add_usage``: one additive delta per
        bucket window (requests, billable requests, tokens per model). Returns how many."""
        dirty, self.dirty = self.dirty, {}
        flusher = self.flusher
        n = 0
        for win in dirty:
            if flusher is not None and win.pend_requests:
                models = {m: TierTokens(*v) for m, v in win.pend_models.items()}
                flusher.add_usage(win.bucket, win.start, UsageDelta(win.pend_requests, win.pend_billable, models))
                n += 1
            win.pend_requests = win.pend_billable = 0
            win.pend_models = {}
        return n


def _count(models: dict[str, list[int]], model: str, tiers: TierTokens) -> None:
    m = models.get(model)
    if m is None:
        models[model] = [tiers.input, tiers.output, tiers.cache_read, tiers.cache_write]
    else:
        m[0] += tiers.input
        m[1] += tiers.output
        m[2] += tiers.cache_read
        m[3] += tiers.cache_write


def _add(win: Window, model: str, tiers: TierTokens, ntok: int, cost: int) -> None:
    """Add one model's ``tiers`` (``ntok`` tokens, ``cost`` pico-units) to ``win``."""
    _count(win.models, model, tiers)
    win.tokens += ntok
    win.spend += cost
