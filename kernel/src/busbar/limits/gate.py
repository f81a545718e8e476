"""The data plane's seam into limits: admit a call after identity, settle it when it ends.

``Limits.build(cfg, registry) -> Limits | None`` (``None`` when there is neither a group nor a
rate card: the request path then pays one attribute read). Per request:

- ``limits.admit(gw, call, target, identity) -> (reply, target, ticket)``: with a present
  ``rate_card`` an ad-hoc model it does not price is refused (400) before forwarding; a caller
  bound to a group is admitted through :class:`~busbar.limits.engine.Limiter` (``reply`` is then
  the refusal in the caller's dialect, or ``None`` with the ticket and the target to forward to: a
  downgrade replaces the pool).
- ``limits.serve(gw, call, target, run)`` admits, forwards through ``run`` and registers
  settlement as a finisher of the request record (``call.record.on_finish``): it runs once the
  reply is written, the stream ended (broken included) or the client left; a non-2xx outcome is
  refunded, a 2xx one is charged the tokens it used (``record.usage``) and a non-chat reply's
  operation units (``record.extra["op_usage"]``, busbar.limits.units); a non-chat request's
  reservation adds the units its body asks for (images, speech characters, rerank search units).
  A chain with a strict limit is then decided by the shared store (:mod:`busbar.limits.strict`)
  before forwarding.

The identity is duck-typed: ``identity.group`` (``None`` = unlimited) and
``identity.allowed_pools`` (``None`` = every pool). With no identity on the request (an open front
door) nothing is charged. A reply served by a ``fallback_pool`` hop is charged to the pool that
served (the last attempt's pool in ``record.attempts``).

The per-request work is kept flat: the worst case reads the body already parsed (one pass over its
top-level keys) against prices resolved once per pool object; the limiter's plans resolve every
bucket once per (group, pool); settlement is a bound method, not a closure.

Source: docs/limits.md.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from busbar_sdk.store import StoreError, StoreUnsupported, TierTokens
from busbar_sdk.store.windows import window_start

from busbar.limits.cost import RateCard, tiers_of
from busbar.limits.engine import Limiter, Ticket, Worst
from busbar.limits.estimate import lane_prices, worst_case
from busbar.limits.metrics import LimitMetrics
from busbar.limits.replies import refusal_reply
from busbar.limits.strict import Hold, StrictLimits
from busbar.limits.tree import GroupTree
from busbar.limits.units import unit_entries, unit_worst
from busbar.proto.base import ErrorKind
from busbar.proxy.relay import error_reply
from busbar.proxy.runtime import Lane, Pool

if TYPE_CHECKING:
    from busbar_sdk.store import Store
    from prometheus_client import CollectorRegistry

    from busbar.proxy.gateway import Gateway
    from busbar.proxy.record import AttemptNote, RequestRecord
    from busbar.proxy.relay import Reply
    from busbar.proxy.translate import Call

__all__ = ["Limits", "carry_limits"]

log = logging.getLogger("busbar.limits")
_NO_HOP: tuple[Any, Any, Any] = (None, None, None)


class Limits:
    """The limits of one running config (see the module docstring).

    Args:
        cfg: the ``DeploymentConfig``.
        registry: the gateway's Prometheus registry, or ``None`` (metrics off).
    """

    def __init__(self, cfg: Any, registry: CollectorRegistry | None = None) -> None:
        self.card = RateCard(cfg.rate_card, cfg.per_request_fee)
        self.config_groups: dict[str, Any] = dict(cfg.groups)
        self.tree = GroupTree(cfg.groups)
        self.metrics = LimitMetrics(registry)
        self.limiter = Limiter(self.tree, self.card, on_shadow=self._shadow, on_refuse=self.metrics.refused,
                               sweep_every=int(cfg.advanced.rate_sweep_interval))
        self.metrics.watch(lambda: self.limiter.reservations)
        self.strict = StrictLimits(self.card, self.metrics)
        self.runtime: dict[str, Any] = {}
        self.default_max = int(cfg.limits.default_max_tokens)
        self._drainer: asyncio.Future[None] | None = None
        self._prices: dict[Pool, tuple[tuple[int, int, int, int], ...]] = {}     # pool object -> lane_prices
        self._hop: tuple[Any, Any, Any] = _NO_HOP                            # see _hop_worst
        self._reprice = self._hop_worst         # bound once: admission passes it without making one

    @classmethod
    def build(cls, cfg: Any, registry: CollectorRegistry | None = None) -> Limits | None:
        """The running limits, or ``None`` when ``groups:`` is empty and no ``rate_card`` is set."""
        if not cfg.groups and cfg.rate_card is None:
            return None
        return cls(cfg, registry)

    def set_runtime(self, runtime: Mapping[str, Any]) -> None:
        """Enforce the auto-provisioned groups ``runtime`` (``{name: GroupConfig}``) beside the
        config's (a config group of the same name wins). Counters are kept: they are per bucket."""
        self.runtime = dict(runtime)
        self.tree = GroupTree({**runtime, **self.config_groups})
        self.limiter.tree = self.tree

    def adopt(self, old: Limits, gw: Gateway) -> None:
        """Take over ``old``'s state on a live config apply (``gw`` is the new gateway): every
        bucket window, in-flight gauge and open reservation is kept (requests admitted on the old
        config settle into this one), spend is repriced from the windows' tokens at the new rate
        card, the runtime groups and the drain loop carry over, and the metrics stay on the
        process registry."""
        prev = old.limiter
        lim = self.limiter
        lim.take_over(prev)
        for win in lim.current.values():
            win.spend = self.card.ledger_pico({m: TierTokens(*v) for m, v in win.models.items()}, 0)
        self.set_runtime(old.runtime)
        runtime = getattr(gw, "runtime_groups", None)
        if runtime is not None:
            runtime.on_change[:] = [self.set_runtime if cb == old.set_runtime else cb for cb in runtime.on_change]
        self.metrics, self._drainer, old._drainer = old.metrics, old._drainer, None
        self.strict.pending |= old.strict.pending
        old.limiter, old.strict = lim, self.strict      # tickets admitted on the old config settle here

    async def start(self, gw: Gateway) -> None:
        """Boot, after the store and the admin plane are up: start draining settled usage into
        ``gw.flusher`` every flush interval, enforce the runtime groups (and follow them), seed the
        counters from the store's ledger, and re-check every stored key's group: a key bound to a
        group the running config does not have is logged (its requests fail closed).

        A store that fails while seeding is logged; the node then counts from zero.
        """
        flusher = getattr(gw, "flusher", None)
        self.limiter.flusher = flusher
        if flusher is not None and self._drainer is None:
            self._drainer = asyncio.ensure_future(self._drain_every(float(flusher.interval_s)))
        runtime = getattr(gw, "runtime_groups", None)
        if runtime is not None:
            self.set_runtime(runtime.all())
            runtime.on_change.append(self.set_runtime)
        store = getattr(gw, "store", None)
        if store is not None:
            await self._strict_probe(store)
            try:
                await self.seed_from(store)
            except StoreError as e:      # serve anyway: this node counts from zero until it flushes
                log.error("store (%s): the usage ledger could not be read (%s); limits count from zero "
                          "on this node", store.backend, e)
        keysync = getattr(gw, "keysync", None)
        for key in (keysync.keys.values() if keysync is not None else ()):
            group = getattr(key, "group", None)
            if group is not None and self.tree.chain(group) is None and getattr(key, "deleted_at", None) is None:
                log.warning("key %s is bound to group '%s', which is not configured; its requests are refused "
                            "(403) until the group is configured or the key rebound", key.id, group)

    async def _strict_probe(self, store: Store) -> None:
        """Refuse the boot when a strict limit is configured on a store without strict counters."""
        strict = [lim for lim in self.tree.all_limits() if lim.strict]
        if not strict:
            return
        try:
            await store.strict_get(strict[0].bucket, 0, strict[0].metric)
        except StoreUnsupported:
            from busbar.auth.boot import FrontDoorBootError
            raise FrontDoorBootError([f"group '{lim.group}': {lim.label} is strict, but the {store.backend} store "
                                      f"does not implement strict counters; use the memory, sqlite, postgres or "
                                      f"valkey store, or remove strict: true" for lim in strict]) from None
        except StoreError as e:        # reachable later, perhaps: strict requests are refused (503) until then
            log.error("store (%s): strict counters could not be read (%s); strict limits refuse requests (503) "
                      "while the store is unavailable", store.backend, e)

    async def _drain_every(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            self.limiter.drain()

    async def stop(self) -> None:
        """Shutdown, before the store's last flush: stop the drain loop and drain once more."""
        if self._drainer is not None:
            self._drainer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drainer
            self._drainer = None
        self.limiter.drain()
        await self.strict.close()

    async def seed_from(self, store: Store) -> int:
        """Load every bucket's current window from ``store``'s ledger (boot, before serving), so a
        restarted node keeps counting where the fleet's flushed ledger stands. Returns how many
        windows held usage.

        Raises:
            busbar_sdk.store.StoreError: the store failed (the boot reports it).
        """
        now = int(self.limiter.clock())
        seen: set[str] = set()
        loaded = 0
        for lim in self.tree.all_limits():
            if lim.per is None or lim.bucket in seen:
                continue
            seen.add(lim.bucket)
            start = window_start(lim.per, now)
            ledger = await store.get_usage(lim.bucket, start)
            if ledger.requests or ledger.billable_requests or ledger.models:
                self.limiter.seed(lim.bucket, start, ledger)
                loaded += 1
        return loaded

    def _shadow(self, lim: Any) -> None:
        log.warning("shadow limit: group '%s': %s would have refused this request (not enforced)",
                    lim.group, lim.label)
        self.metrics.shadow(lim)

    # -- admission -----------------------------------------------------------------------------
    def admit(self, gw: Gateway, call: Call, target: Pool | Lane,
              identity: Any) -> tuple[Reply | None, Pool | Lane, Ticket | None]:
        """Admit ``call`` (see the module docstring)."""
        if target.__class__ is Lane and self.card.present and target.name not in gw.lanes \
                and self.card.rates_of(target.name, target.upstream_model) is None:
            return error_reply(call.ingress, 400, ErrorKind.INVALID_REQUEST,
                               f"model '{target.name}' has no rate_card entry; an unpriced model is refused "
                               f"while a rate card is configured"), target, None
        group = identity.group if identity is not None else None
        if group is None:
            return None, target, None
        if target.__class__ is Pool:
            prices = self._prices.get(target)
            if prices is None:
                prices = self._pool_prices(target)
            pool: str | None = target.name
        else:                         # a direct or ad-hoc lane: its own prices (ad-hoc names are unbounded)
            prices = lane_prices((target,), self.card, self.default_max)
            pool = None
        if pool is not None:          # what a downgrade hop reprices (read only inside this call)
            self._hop = (gw, call, identity.allowed_pools)
        worst = worst_case(call.body, len(call.raw), prices)
        if call.op is not None:       # a non-chat operation: the units its body asks for, at the dearest lane
            lanes = (m.lane for m in target.members) if target.__class__ is Pool else (target,)
            worst = worst._replace(cost=worst.cost + unit_worst(call.op, lanes, self.card))
        verdict = self.limiter.admit(group, pool, worst, self._reprice if pool is not None else None)
        self._hop = _NO_HOP           # the request is not kept alive past its admission
        if verdict.__class__ is Ticket:
            if verdict.pool != pool and verdict.pool is not None:     # a downgrade hop: pool to pool
                log.info("group '%s': pool '%s' budget spent; downgraded to pool '%s'", group, pool,
                         verdict.pool)
                target = gw.pools[verdict.pool]
            return None, target, verdict
        return refusal_reply(call.ingress, verdict), target, None     # type: ignore[arg-type]

    def _hop_worst(self, pool: str) -> Worst | None:
        """A downgrade hop's worst case (``Limiter.admit``'s ``reprice``): the next pool's prices,
        or ``None`` when that pool is gone or the caller's grant does not cover it. The request is
        the one :meth:`admit` is admitting (``_hop``: the limiter calls this synchronously)."""
        gw, call, allowed = self._hop
        target = gw.pools.get(pool)
        if target is None or (allowed is not None and pool not in allowed):
            return None
        prices = self._prices.get(target) or self._pool_prices(target)
        worst = worst_case(call.body, len(call.raw), prices)
        if call.op is not None:
            worst = worst._replace(cost=worst.cost + unit_worst(call.op, (m.lane for m in target.members),
                                                                self.card))
        return worst

    def _pool_prices(self, pool: Pool) -> tuple[tuple[int, int, int, int], ...]:
        prices = self._prices[pool] = lane_prices(pool.members, self.card, self.default_max)
        return prices

    async def serve(self, gw: Gateway, call: Call, target: Pool | Lane,
                    run: Callable[[Pool | Lane], Awaitable[Reply | None]]) -> Reply | None:
        """Admit ``call``, then ``await run(target)``; settlement is a finisher of ``call.record``
        (run once the reply is written, the stream ended or the client left). Returns the reply
        (``None`` when the client left). The identity is ``call.record.identity``."""
        record = call.record
        identity = record.identity if record is not None else None
        refused, target, ticket = self.admit(gw, call, target, identity)
        if refused is not None:
            return refused
        if ticket is not None:
            hold = None
            if ticket.plan.strict:       # decided by the shared store (busbar.limits.strict)
                refused, hold = await self.strict.admit(gw, call.ingress, self.limiter, ticket)
                if refused is not None:
                    return refused
            if record is None:           # no request record (not the data plane): settle on return
                reply = None
                try:
                    reply = await run(target)
                finally:
                    ok = reply is not None and 200 <= reply.status < 300
                    self.limiter.settle(ticket, ok, None, None)
                    if hold is not None:
                        self.strict.settle(gw, hold, ok, None, None)
                return reply
            record.on_finish(_Settle(self, gw, ticket, hold).run)
        return await run(target)

    def settle(self, gw: Gateway, ticket: Ticket, record: RequestRecord, hold: Hold | None = None) -> None:
        """Settle ``ticket`` from the finished ``record``: a 2xx reply is billable and its tokens
        (``record.usage``: a stream's as far as it got) are charged to the lane that served, in the
        pool that served (a ``fallback_pool`` hop moves the charge there); a 2xx stream that
        reported no usage at all (cut before its usage chunk, or an upstream that never sends one)
        is charged the ticket's worst case instead of nothing; a client that left while an upstream
        exchange was in flight is billable too, at the worst case on that attempt's lane (the
        provider was asked and may bill it; refunding it would let a caller spend upstream budget
        for free by hanging up just before the answer); anything else is refunded. ``hold``: the
        strict counters to settle too."""
        ok = 200 <= record.status < 300 and record.first_byte is not None
        model = record.lane
        tiers = None
        served = None
        if not ok and record.client_closed:
            abandoned = _abandoned(record)
            if abandoned is not None:
                return self._charge_abandoned(gw, ticket, abandoned, hold)
        if ok and model is not None:
            attempts = record.attempts
            served = attempts[-1].pool if attempts and ticket.pool is not None else None
            tiers = tiers_of(record.usage)
            worst = ticket.worst
            if record.stream and not (tiers.input or tiers.output or tiers.cache_read or tiers.cache_write) \
                    and (worst.input or worst.output):
                log.warning("group '%s': a stream on lane %s ended without reporting usage; charged its "
                            "worst case (%d input + %d output tokens)", ticket.group, model, worst.input,
                            worst.output)
                tiers = TierTokens(worst.input, worst.output, 0, 0)
            self.metrics.used(served or ticket.pool or "", gw, model, tiers, self.card)
        units = None
        if ok and model is not None:
            extra = getattr(record, "extra", None)
            op_usage = extra.get("op_usage") if extra else None
            if op_usage is not None:
                units = unit_entries(model, op_usage)
                if units:
                    self.metrics.used_units(served or ticket.pool or "", gw, units, self.card)
        self.limiter.settle(ticket, ok, model, tiers, units, served or None)
        if hold is not None:
            self.strict.settle(gw, hold, ok, model, tiers, units)

    def _charge_abandoned(self, gw: Gateway, ticket: Ticket, attempt: AttemptNote, hold: Hold | None) -> None:
        """Settle a request whose client left while ``attempt`` was in flight: billable, charged the
        ticket's worst case (input and output tokens) on the attempt's lane and pool."""
        worst = ticket.worst
        tiers = TierTokens(worst.input, worst.output, 0, 0)
        served = attempt.pool if ticket.pool is not None and attempt.pool else None
        log.warning("group '%s': the client left while lane %s was answering; charged its worst case "
                    "(%d input + %d output tokens)", ticket.group, attempt.lane, worst.input, worst.output)
        self.metrics.used(served or ticket.pool or "", gw, attempt.lane, tiers, self.card)
        self.limiter.settle(ticket, True, attempt.lane, tiers, None, served)
        if hold is not None:
            self.strict.settle(gw, hold, True, attempt.lane, tiers, None)


def _abandoned(record: RequestRecord) -> AttemptNote | None:
    """The upstream attempt that was in flight when the client left (its outcome
    ``client_closed``), or ``None`` when the client left before any was sent or between them."""
    attempts = record.attempts
    if attempts and attempts[-1].outcome == "client_closed":
        return attempts[-1]
    return None


class _Settle:
    """One admitted request's settlement, as the record's finisher (a bound method, no closure)."""

    __slots__ = ("limits", "gw", "ticket", "hold")

    def __init__(self, limits: Limits, gw: Gateway, ticket: Ticket, hold: Hold | None) -> None:
        self.limits, self.gw, self.ticket, self.hold = limits, gw, ticket, hold

    def run(self, record: RequestRecord) -> None:
        self.limits.settle(self.gw, self.ticket, record, self.hold)


def carry_limits(old: Any, new: Any) -> None:
    """A live config apply's hand-over between gateways (``busbar.server.apply``). The apply hands
    the new gateway the old one's limiter (``_PROCESS_WIDE``: ``groups``/``rate_card`` are
    restart-to-apply), so there is nothing to carry: its windows, gauges, reservations, runtime
    groups (``on_change``) and drain loop simply continue. Were the new gateway to bring its own:
    it adopts the old one's state; a gateway that gains limits starts them (seeding from the store);
    one that loses them drains the old state into the flusher."""
    before: Limits | None = getattr(old, "limiter", None)
    after: Limits | None = getattr(new, "limiter", None)
    if after is before:
        return
    if after is not None and before is not None:
        after.adopt(before, new)
    elif after is not None:
        asyncio.get_running_loop().create_task(after.start(new))
    elif before is not None:
        asyncio.get_running_loop().create_task(before.stop())
