"""Admission and settlement against the group tree: all-or-nothing, with worst-case reservations.

``Limiter(tree, card, *, flusher=None, clock=time.time, sweep_every=256)``:

- ``admit(group, pool, worst, reprice=None) -> Ticket | Refusal`` walks ``group`` and every
  ancestor and checks every limit that applies to ``pool`` (group-wide ones and those scoped to
  ``pool``). Only when every enforced limit passes does anything move: each distinct bucket window
  of the chain counts the request once (``requests`` and ``billable_requests`` + 1), holds the
  request's worst case (``worst``: tokens and cost) as a reservation, and each group's in-flight
  gauge + 1. A refused request moves no counter (case C028). A failing pool-scoped budget with
  ``downgrade_to`` re-admits through that pool (cycle-bounded) with ``reprice(pool)``'s worst case
  (``None``: the caller may not use that pool; ``reprice`` absent: same worst case, every pool
  allowed); the ticket names the pool that was admitted.
- ``settle(ticket, ok, model, tiers, served=None)`` runs once per admitted request at its end (reply
  sent, stream ended, client gone): reservations released, the real tokens added to every charged
  bucket (spend derived from them), ``billable_requests`` refunded on a non-2xx outcome, the
  in-flight gauges released; the request (+1, billable unless refunded, its tokens) is journalled
  for each charged bucket window's pending delta. ``served`` names the pool that served when a
  ``fallback_pool`` hop moved the request out of the admitted pool: the charge then lands on the
  serving pool's buckets (the admitted pool's own buckets are refunded). ``drain()`` (every flush
  interval, and at shutdown) folds the journal into the windows' pending deltas and hands one
  additive delta per dirty window to ``flusher.add_usage`` (no I/O).

Every check and every charge happens without an ``await`` in between, so on one node the check
and the charge are one atomic step: recorded spend plus open reservations never exceeds a budget
(case C027). Shadow limits are evaluated and counted (``on_shadow``) but never refuse. A strict
limit's bucket is charged here but its check is the shared store's (``busbar.limits.strict``):
``refuse(lim, now)`` words its refusal, ``cancel(ticket)`` undoes an admission the store refused.

The hot path works on objects resolved once: each ``(group, pool)`` gets a :class:`Plan` on first
use (the chain's applicable limits in order, each bound to its :class:`Bucket` or :class:`Gauge`),
rebuilt only when the tree changes. A bucket caches its window's end, so a request does no calendar
work until the window rolls.

Windows are civil UTC (``busbar_sdk.store.windows``); a bucket keeps only its current window in
memory, the store keeps them all. Every ``sweep_every`` admissions (``advanced.rate_sweep_interval``)
the limiter sweeps: a window that has rolled and holds no reservation is dropped, and a bucket or
gauge the running tree no longer names is forgotten once idle, so memory stays bounded by the
live tree. ``seed(bucket, window_start, ledger)`` loads a stored window at boot.

Source: docs/limits.md#admission.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from busbar_sdk.store import TierTokens, UsageDelta, UsageLedger
from busbar_sdk.store.windows import window_end, window_start

from busbar.limits.cost import PICO_PER_MICRO, RateCard, is_unit_key, micros
from busbar.limits.tree import GroupTree, Limit

__all__ = ["Bucket", "Gauge", "Limiter", "Plan", "Refusal", "Ticket", "Window", "Worst"]

MAX_DOWNGRADES = 8
_NEVER = 1 << 62                 # a ``total`` window's end: it never rolls


class Worst(NamedTuple):
    """A request's worst case: ``tokens`` (input counted from the body + max output) and ``cost``
    (pico-units at the dearest rate of the pool, fee excluded); ``input`` and ``output`` split
    ``tokens`` (what a stream that never reports usage is charged). A named tuple: one is made per
    request, and a tuple is the cheapest immutable record to make."""

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


class Bucket:
    """One ledger bucket (``group:<g>@<per>[#pool]``) and its current window.

    ``win`` is the current :class:`Window` (``None`` before the first request or after a sweep);
    ``until`` caches the first second after it, so :meth:`at` is two comparisons until it rolls.
    """

    __slots__ = ("name", "per", "win", "until")

    def __init__(self, name: str, per: str) -> None:
        self.name = name
        self.per = per
        self.win: Window | None = None
        self.until = 0

    def at(self, now: int) -> Window:
        """The window holding ``now`` (Unix s): the current one, or a fresh one once it rolled."""
        win = self.win
        if win is not None and win.start <= now < self.until:
            return win
        start = window_start(self.per, now)
        if win is None or win.start != start:
            win = Window(self.name, start, window_end(self.per, start))
        return self.hold(win)

    def hold(self, win: Window) -> Window:
        """Make ``win`` the current window."""
        self.win = win
        self.until = _NEVER if win.end is None else win.end
        return win

    def live(self, now: int) -> Window | None:
        """The current window when it holds ``now``, else ``None`` (no window is made)."""
        win = self.win
        return win if win is not None and win.start <= now < self.until else None


class Gauge:
    """One group's in-flight gauge (``concurrent`` limits read it)."""

    __slots__ = ("group", "n")

    def __init__(self, group: str) -> None:
        self.group = group
        self.n = 0


REQUESTS, TOKENS, BUDGET, CONCURRENT = 0, 1, 2, 3
_CODES = {"requests": REQUESTS, "tokens": TOKENS, "budget": BUDGET, "concurrent": CONCURRENT}


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


class Plan:
    """What admitting ``group`` through ``pool`` checks and charges, resolved once.

    Attributes:
        group, pool: what the plan is for (``pool`` ``None``: a direct model route).
        refusal: a frozen or unconfigured chain's 403 (an unconfigured chain has no checks), else
            ``None``.
        checks: ``(code, limit, cap, slot)`` in chain order (leaf first, config order within a
            group): ``code`` one of ``REQUESTS``/``TOKENS``/``BUDGET``/``CONCURRENT``, ``cap`` the
            amount (budgets in pico-units), ``slot`` the limit's :class:`Bucket` (or :class:`Gauge`
            for ``concurrent``).
        buckets: the distinct buckets the request is charged to (check order).
        unchecked: those of ``buckets`` no local check reads (a strict limit's: the store decides).
        gauges: the chain's in-flight gauges (leaf first).
        strict: the plan's enforced limits marked ``strict: true`` (empty when none): the shared
            store decides them (``busbar.limits.strict``), the engine only charges their buckets.
    """

    __slots__ = ("group", "pool", "refusal", "checks", "buckets", "unchecked", "gauges", "strict")

    def __init__(self, group: str, pool: str | None) -> None:
        self.group = group
        self.pool = pool
        self.refusal: Refusal | None = None
        self.checks: tuple[tuple[int, Limit, int, Bucket | Gauge], ...] = ()
        self.buckets: tuple[Bucket, ...] = ()
        self.unchecked: tuple[Bucket, ...] = ()
        self.gauges: tuple[Gauge, ...] = ()
        self.strict: tuple[Limit, ...] = ()


class Ticket:
    """An admitted request: what ``settle`` releases. ``pool`` is the pool that was admitted (a
    downgrade may change it); ``windows`` are the windows charged, aligned with ``plan.buckets``."""

    __slots__ = ("group", "pool", "worst", "plan", "windows", "settled")

    def __init__(self, plan: Plan, worst: Worst, windows: list[Window]) -> None:
        self.group = plan.group
        self.pool = plan.pool
        self.worst = worst
        self.plan = plan
        self.windows = windows
        self.settled = False


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
        sweep_every: admissions between sweeps of idle windows (``advanced.rate_sweep_interval``,
            ≥ 1).
    """

    def __init__(self, tree: GroupTree, card: RateCard, *, flusher: Any = None,
                 clock: Callable[[], float] = time.time,
                 on_shadow: Callable[[Limit], None] | None = None,
                 on_refuse: Callable[[Limit | None], None] | None = None,
                 sweep_every: int = 256) -> None:
        self._tree = tree
        self.card = card
        self.flusher = flusher
        self.clock = clock
        self.on_shadow = on_shadow
        self.on_refuse = on_refuse
        self.buckets: dict[str, Bucket] = {}          # bucket name -> its state
        self.gauges: dict[str, Gauge] = {}            # group -> its in-flight gauge
        self.reservations = 0                        # open tickets
        self.dirty: dict[Window, None] = {}          # windows with settled requests not drained (ordered)
        # settled requests not yet folded into their windows' pending deltas (drain() folds them):
        # (windows, billable, model or None, tiers, operation units [(unit key, count, cost)] or None)
        self.journal: list[tuple[list[Window], bool, str | None, TierTokens | None,
                                 list[tuple[str, TierTokens, int]] | None]] = []
        self.sweep_every = max(1, int(sweep_every))
        self._to_sweep = self.sweep_every
        self._plans: dict[str, dict[str | None, Plan]] = {}

    # -- state ---------------------------------------------------------------------------------
    @property
    def tree(self) -> GroupTree:
        """The running group tree; setting it drops every cached plan (the counters stay)."""
        return self._tree

    @tree.setter
    def tree(self, tree: GroupTree) -> None:
        self._tree = tree
        self._plans = {}

    def take_over(self, prev: Limiter) -> None:
        """Carry ``prev``'s state (buckets, gauges, open reservations, pending deltas, flusher):
        a live config apply. Tickets ``prev`` admitted settle here."""
        self.buckets, self.gauges, self.dirty, self.journal = prev.buckets, prev.gauges, prev.dirty, prev.journal
        self.reservations = prev.reservations
        self.flusher = prev.flusher
        self._plans = {}

    @property
    def current(self) -> dict[str, Window]:
        """Every bucket's current window, ``{bucket name: Window}`` (a snapshot)."""
        return {name: b.win for name, b in self.buckets.items() if b.win is not None}

    @property
    def inflight(self) -> dict[str, int]:
        """Every known group's requests in flight, ``{group: n}`` (a snapshot)."""
        return {name: g.n for name, g in self.gauges.items()}

    def bucket(self, name: str, per: str) -> Bucket:
        """The state of bucket ``name`` (made on first use)."""
        b = self.buckets.get(name)
        if b is None:
            b = self.buckets[name] = Bucket(name, per)
        return b

    def gauge(self, group: str) -> Gauge:
        """The in-flight gauge of ``group`` (made on first use)."""
        g = self.gauges.get(group)
        if g is None:
            g = self.gauges[group] = Gauge(group)
        return g

    def window(self, lim: Limit, now: int) -> Window:
        """The current window of ``lim``'s bucket (a fresh one when the last rolled over)."""
        return self.bucket(lim.bucket, lim.per or "total").at(now)

    def seed(self, bucket: str, start: int, ledger: UsageLedger) -> None:
        """Load a stored ledger window as the bucket's current state (boot)."""
        per = bucket.split("@", 1)[1].split("#", 1)[0]
        b = self.bucket(bucket, per)
        win = b.win
        if win is None or win.start < start:
            win = b.hold(Window(bucket, start, window_end(per, start)))
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

    # -- plans ---------------------------------------------------------------------------------
    def plan(self, group: str, pool: str | None) -> Plan:
        """The cached :class:`Plan` of ``group`` through ``pool`` (built on first use)."""
        by_pool = self._plans.get(group)
        if by_pool is None:
            by_pool = self._plans[group] = {}
        plan = by_pool.get(pool)
        if plan is None:
            plan = by_pool[pool] = self._build(group, pool)
        return plan

    def _build(self, group: str, pool: str | None) -> Plan:
        plan = Plan(group, pool)
        chain = self._tree.chain(group)
        if chain is None:
            plan.refusal = Refusal(403, "unconfigured", f"group '{group}' is not configured in the "
                                                        f"running config; the request is refused")
            return plan
        for g in chain:
            if not g.enabled:       # refused; the checks are still built (the routing signals read them)
                plan.refusal = Refusal(403, "frozen", f"group '{g.name}' is frozen (enabled: false)")
                break
        checks: list[tuple[int, Limit, int, Bucket | Gauge]] = []
        buckets: dict[str, Bucket] = {}
        strict: list[Limit] = []
        for g in chain:
            for lim in g.limits:
                if lim.pool is not None and lim.pool != pool:
                    continue
                code = _CODES[lim.metric]
                slot: Bucket | Gauge
                if lim.strict and code != CONCURRENT:   # charged here, decided by the shared store (strict.py)
                    buckets[lim.bucket] = buckets.get(lim.bucket) or self.bucket(lim.bucket, lim.per or "total")
                    if not lim.shadow:
                        strict.append(lim)
                    continue
                if code == CONCURRENT:
                    slot = self.gauge(g.name)
                else:
                    slot = buckets.get(lim.bucket) or self.bucket(lim.bucket, lim.per or "total")
                    buckets[lim.bucket] = slot
                cap = lim.amount * PICO_PER_MICRO if code == BUDGET else lim.amount
                checks.append((code, lim, cap, slot))
        plan.checks = tuple(checks)
        plan.buckets = tuple(buckets.values())
        checked = {id(slot) for _, _, _, slot in checks}
        plan.unchecked = tuple(b for b in plan.buckets if id(b) not in checked)
        plan.gauges = tuple(self.gauge(g.name) for g in chain)
        plan.strict = tuple(strict)
        return plan

    # -- admission -----------------------------------------------------------------------------
    def admit(self, group: str, pool: str | None, worst: Worst,
              reprice: Callable[[str], Worst | None] | None = None) -> Ticket | Refusal:
        """Admit one request of ``group`` through ``pool`` (``None``: a direct model route) holding
        ``worst``, or say why not. See the module docstring."""
        by_pool = self._plans.get(group)
        plan = by_pool.get(pool) if by_pool is not None else None
        if plan is None:
            plan = self.plan(group, pool)
        if plan.refusal is not None:
            return self._refuse(plan.refusal)
        now = int(self.clock())
        self._to_sweep -= 1
        if self._to_sweep <= 0:
            self._to_sweep = self.sweep_every
            self.sweep(now)
        verdict = self._try(plan, worst, now)
        if verdict.__class__ is Ticket:
            return verdict
        seen = {pool}
        while True:
            assert isinstance(verdict, Refusal)
            lim = verdict.limit
            nxt = lim.downgrade_to if lim is not None else None
            if nxt is None or lim is None or lim.pool != pool or nxt in seen or len(seen) > MAX_DOWNGRADES:
                return self._refuse(verdict)
            hop = worst if reprice is None else reprice(nxt)
            if hop is None:
                return self._refuse(verdict)
            seen.add(nxt)
            pool, worst = nxt, hop
            plan = self.plan(group, pool)
            verdict = self._try(plan, worst, now)
            if isinstance(verdict, Ticket):
                return verdict

    def _refuse(self, r: Refusal) -> Refusal:
        if self.on_refuse is not None:
            self.on_refuse(r.limit)
        return r

    def _try(self, plan: Plan, worst: Worst, now: int) -> Ticket | Refusal:
        fee = self.card.fee_pico
        wtok, wcost = worst.tokens, worst.cost
        for code, lim, cap, slot in plan.checks:
            if code == CONCURRENT:
                if slot.n < cap:                              # type: ignore[union-attr]
                    continue
            else:
                win = slot.win                                # type: ignore[union-attr]
                if win is None or not win.start <= now < slot.until:   # type: ignore[union-attr]
                    win = slot.at(now)                        # type: ignore[union-attr]
                if code == REQUESTS:
                    if win.billable < cap:
                        continue
                elif code == TOKENS:
                    if win.tokens + win.reserved_tokens + wtok <= cap:
                        continue
                elif win.spend + (win.billable + 1) * fee + win.reserved_cost + wcost <= cap:
                    continue
            if lim.shadow:
                if self.on_shadow is not None:
                    self.on_shadow(lim)
                continue
            return self._over(lim, now)
        for b in plan.unchecked:          # a strict limit's bucket: no local check rolled its window
            b.at(now)
        wins = [b.win for b in plan.buckets]
        for win in wins:
            win.requests += 1                                 # type: ignore[union-attr]
            win.billable += 1                                 # type: ignore[union-attr]
            win.reserved_cost += wcost                        # type: ignore[union-attr]
            win.reserved_tokens += wtok                       # type: ignore[union-attr]
        for gauge in plan.gauges:
            gauge.n += 1
        self.reservations += 1
        return Ticket(plan, worst, wins)                      # type: ignore[arg-type]

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
        for gauge in ticket.plan.gauges:
            gauge.n -= 1
        worst = ticket.worst
        for win in ticket.windows:
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

    # -- memory --------------------------------------------------------------------------------
    def sweep(self, now: int | None = None) -> int:
        """Drop what idle state memory holds (every ``sweep_every`` admissions): a window that has
        rolled (``now`` past its end) and holds no reservation, then a bucket or gauge the running
        tree no longer names once it holds no window / nothing in flight. Windows with settled
        usage not yet drained stay in ``dirty`` until the next drain. Returns how many windows
        were dropped."""
        now = int(self.clock()) if now is None else now
        named = self._tree.bucket_names()
        dropped = 0
        for name, b in list(self.buckets.items()):
            win = b.win
            if win is not None and not win.start <= now < b.until and not win.reserved_cost \
                    and not win.reserved_tokens:
                b.win = None
                b.until = 0
                dropped += 1
            if b.win is None and name not in named:
                del self.buckets[name]
        groups = self._tree.groups
        for name, g in list(self.gauges.items()):
            if g.n == 0 and name not in groups:
                del self.gauges[name]
        return dropped

    def usage_of(self, lim: Limit) -> dict[str, int]:
        """What ``lim``'s bucket holds now: ``{"used", "reserved"}`` (requests: billable count;
        tokens: tokens, reserved = the worst case of open requests; budget: micro-units spent,
        reserved = open reservations; concurrent: in flight)."""
        if lim.metric == "concurrent":
            g = self.gauges.get(lim.group)
            return {"used": g.n if g is not None else 0, "reserved": 0}
        b = self.buckets.get(lim.bucket)
        win = b.live(int(self.clock())) if b is not None else None
        if win is None:
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
        plan = self.plan(group, pool)
        if plan.refusal is not None and plan.refusal.kind == "unconfigured":
            return 0, 0.0
        now = int(self.clock())
        fee = self.card.fee_pico
        budget: int | None = None
        rate: float | None = None
        for code, lim, _cap, slot in plan.checks:
            if lim.shadow:
                continue
            if code == CONCURRENT:
                used = slot.n                                             # type: ignore[union-attr]
            else:
                win = slot.live(now)                                      # type: ignore[union-attr]
                if code == BUDGET:
                    left = lim.amount - (micros(win.spend + win.billable * fee + win.reserved_cost)
                                         if win is not None else 0)
                    budget = max(0, left) if budget is None else min(budget, max(0, left))
                    continue
                if win is None:
                    used = 0
                elif code == REQUESTS:
                    used = win.billable
                else:
                    used = win.tokens + win.reserved_tokens
            frac = 0.0 if lim.amount <= 0 else max(0.0, min(1.0, (lim.amount - used) / lim.amount))
            rate = frac if rate is None else min(rate, frac)
        return budget, rate

    # -- settlement ----------------------------------------------------------------------------
    def settle(self, ticket: Ticket, ok: bool, model: str | None, tiers: TierTokens | None,
               units: Mapping[str, TierTokens] | None = None, served: str | None = None) -> None:
        """End one admitted request (idempotent): release, refund on ``not ok``, add ``tiers`` of
        ``model`` (tokens used even when the reply failed after its first byte) and the operation
        ``units`` it used (``{unit_key: count in input}``, busbar.limits.cost; charged, never
        counted as tokens). ``served``: the pool that served when a ``fallback_pool`` hop left the
        admitted pool (the charge lands there; the admitted pool's own buckets are refunded).

        The ledger's share (each window's pending delta) is journalled here and folded into the
        windows by :meth:`drain`, off the request path."""
        if ticket.settled:
            return
        ticket.settled = True
        self.reservations -= 1
        plan = ticket.plan
        for gauge in plan.gauges:
            gauge.n -= 1
        extra = [(n, c, self.card.entry_pico(n, c)) for n, c in units.items() if not c.is_zero()] if units else None
        if served is not None and served != plan.pool and plan.pool is not None:
            self._settle_moved(ticket, ok, model, tiers, served, extra)
            return
        worst = ticket.worst
        wcost, wtok = worst.cost, worst.tokens
        i = o = r = w = ntok = cost = 0
        if tiers is not None and model is not None:
            i, o, r, w = tiers.input, tiers.output, tiers.cache_read, tiers.cache_write
            ntok = i + o + r + w
        if ntok:
            rates = self.card.rates_of(model)            # type: ignore[arg-type]
            if rates is not None:
                cost = i * rates.input + o * rates.output + r * rates.cache_read + w * rates.cache_write
        else:
            model = None
        windows = ticket.windows
        if self.flusher is not None:
            self.journal.append((windows, ok, model, tiers, extra))
        for b, win in zip(plan.buckets, windows):
            win.reserved_cost -= wcost
            win.reserved_tokens -= wtok
            if b.win is not win:     # the window rolled: only the ledger hears of it
                continue
            if not ok and win.billable > 0:
                win.billable -= 1
            if model is not None:
                m = win.models.get(model)
                if m is None:
                    win.models[model] = [i, o, r, w]
                else:
                    m[0] += i
                    m[1] += o
                    m[2] += r
                    m[3] += w
                win.tokens += ntok
                win.spend += cost
            if extra is not None:
                for name, count, unit_cost in extra:
                    _add(win, name, count, 0, unit_cost)

    def _settle_moved(self, ticket: Ticket, ok: bool, model: str | None, tiers: TierTokens | None,
                      served: str, extra: list[tuple[str, TierTokens, int]] | None) -> None:
        """:meth:`settle` of a request a ``fallback_pool`` hop served from ``served``: buckets of
        both pools are charged as usual, the admitted pool's own ones refunded, the serving pool's
        own ones charged after the fact (they were not checked at admission)."""
        plan = ticket.plan
        worst = ticket.worst
        used = tiers is not None and model is not None and not tiers.is_zero()
        ntok = cost = 0
        if used:
            assert model is not None and tiers is not None
            ntok = tiers.input + tiers.output + tiers.cache_read + tiers.cache_write
            rates = self.card.rates_of(model)
            cost = self.card.cost_pico(rates, tiers) if rates is not None else 0
        there = self.plan(plan.group, served).buckets
        ledger = self.flusher is not None
        for b, win in zip(plan.buckets, ticket.windows):
            win.reserved_cost -= worst.cost
            win.reserved_tokens -= worst.tokens
            charged = ok and b in there
            if ledger:
                self.journal.append(([win], charged, model if used and charged else None, tiers,
                                     extra if charged else None))
            if b.win is not win:
                continue
            if not charged:
                win.billable = max(0, win.billable - 1)
                continue
            if used:
                _add(win, model, tiers, ntok, cost)          # type: ignore[arg-type]
            for name, count, unit_cost in extra or ():
                _add(win, name, count, 0, unit_cost)
        now = int(self.clock())
        for b in there:
            if b in plan.buckets:
                continue
            win = b.at(now)
            win.requests += 1
            if ok:
                win.billable += 1
                if used:
                    _add(win, model, tiers, ntok, cost)      # type: ignore[arg-type]
                for name, count, unit_cost in extra or ():
                    _add(win, name, count, 0, unit_cost)
            if ledger:
                self.journal.append(([win], ok, model if used and ok else None, tiers, extra if ok else None))

    def drain(self) -> int:
        """Fold the settlement journal into each window's pending delta, then hand what settled
        since the last drain to ``flusher.add_usage``: one additive delta per bucket window
        (requests, billable requests, tokens per model). Returns how many."""
        journal, self.journal = self.journal, []
        dirty = self.dirty
        for windows, ok, model, tiers, extra in journal:
            for win in windows:
                win.pend_requests += 1
                if ok:
                    win.pend_billable += 1
                if model is not None:
                    _count(win.pend_models, model, tiers)     # type: ignore[arg-type]
                if extra is not None:
                    for name, count, _cost in extra:
                        _count(win.pend_models, name, count)
                dirty[win] = None
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
