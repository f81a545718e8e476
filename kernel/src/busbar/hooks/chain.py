"""A pool's hook chain, built once at boot, and its per-request decision: ``await chain.plan(...)``.

:class:`PoolChain` holds the pool's base strategy, its transform gates (effective ``prompt: rw``, in
priority order), its decide gates and its taps (the pool's own plus every global). Per request:

1. Transform pass, once per request (a fallback pool does not repeat it): each rw gate in priority
   order gets ``op: transform`` with the body as left by the previous one; reject > rewrite >
   abstain. A rewrite replaces the request's IR messages (and tools, when sent) before routing; on
   a non-chat request it replaces the texts hooks were shown (``Operation.rewrite``), and one that
   does not fit follows the gate's ``on_error`` as a malformed reply would.
   Then taps at ``request`` observe the effective body.
2. Decide pass: every other gate gets ``op: decide`` at once (``fire``), each cut at its own
   deadline; failures follow ``on_error`` (fallback hooks fire in their place); the verdicts, in
   priority-chain order, reconcile (``reconcile``) over the base strategy's ranking.
3. The result is a :class:`busbar.hooks.plan.Plan`: a reject reply (dialect-native, with
   ``x-busbar-route-policy``), or the allowed set and ranked walk for the failover loop. Taps at
   ``route`` see the surviving candidate count.

A pool with a native strategy and nothing else takes :meth:`PoolChain.plan`'s fast path: no
projection, no run, one sort (``cheapest``: none, its boot ranking filtered to the healthy
members). A pool whose only decide gate runs inline (``busbar_inline``) calls it without the
machinery for waiting on several gates (``fire_inline``). Source: docs/hooks.md#reconcile-several-gates-one-decision,
docs/hooks.md#what-a-gate-may-answer, docs/hooks.md#fail-safety; docs/reliability.md#selection,
docs/config-at-a-glance.md#observability.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from busbar.hooks.fire import Result, fire, fire_awaited, fire_inline
from busbar.hooks.plan import ROUTE_POLICY, Plan
from busbar.hooks.projection import candidate_views
from busbar.hooks.reconcile import Decision, Verdict, reconcile
from busbar.hooks.reply import Abstain, Arms, Reject, Rewrite
from busbar.hooks.run import HookRun
from busbar.hooks.shadow import record_shadow, trace_entry
from busbar.hooks.specs import GateSpec, TapSpec
from busbar.hooks.strategies import CONFIG_ONLY, STRATEGIES, Ranker
from busbar.limits.signals import signals_of, stamp
from busbar.observe import decisions
from busbar.proto.base import ErrorKind
from busbar.proto.errors import ProtoError
from busbar.proxy.relay import error_reply

if TYPE_CHECKING:
    from busbar.hooks.workers import Job
    from busbar.proxy.context import GatewayContext
    from busbar.proxy.runtime import Lane, Pool
    from busbar.proxy.translate import Call

log = logging.getLogger("busbar.hooks")

__all__ = ["PoolChain"]

_FAILED = {"timeout": "timed out", "error": "raised an error", "garbage": "returned a malformed reply",
           "grant": "returned a field it was not granted", "saturated": "is saturated"}


class PoolChain:
    """The hooks of one pool (or, with ``pool`` None, of direct model routes: globals only).

    Attributes:
        name: the pool name ('' for direct routes).
        strategy: the base strategy's name (``None`` = weighted).
        transforms, gates, taps: the rw gates, the decide gates (priority-chain order) and taps.
        ordering: whether replies carry ``x-busbar-route-policy`` (a non-weighted strategy or any gate).
    """

    def __init__(self, name: str, *, strategy: str | None, transforms: Sequence[GateSpec],
                 gates: Sequence[GateSpec], taps: Sequence[TapSpec], costs: dict[int, float | None],
                 tags_of: dict[int, frozenset[str]], all_idx: tuple[int, ...], max_rewrite_bytes: int,
                 statics: dict[int, dict[str, Any]] | None = None, members: Sequence[Any] = ()):
        self.name = name
        self.strategy = strategy if strategy != "weighted" else None
        self.ranker: Ranker | None = STRATEGIES[self.strategy] if self.strategy else None
        self.transforms = tuple(sorted(transforms, key=lambda g: g.rank))
        self.gates = tuple(sorted(gates, key=lambda g: g.rank))
        self.taps = tuple(sorted(taps, key=lambda t: t.rank))
        self.tap_at = {at: tuple(t for t in self.taps if t.at == at)
                       for at in ("request", "route", "attempt", "completion")}
        self.run_taps = self.tap_at["attempt"] + self.tap_at["completion"]     # a HookRun's own stages
        self.costs = costs
        self.tags_of = tags_of
        self.all_idx = all_idx
        self.max_rewrite_bytes = max_rewrite_bytes
        self.statics = statics
        self.boot_rank: tuple[int, ...] | None = None
        if (self.strategy in CONFIG_ONLY and self.ranker is not None and members
                and all(m.index == i for i, m in enumerate(members))):    # idx = position: pool.members[idx]
            self.boot_rank = self.ranker(members, costs)
        self.ordering = self.strategy is not None or bool(self.transforms or self.gates)
        self.native_only = not (self.transforms or self.gates or self.taps)
        self.solo = self.gates[0] if len(self.gates) == 1 and not self.gates[0].shadow else None
        self.has_shadow = any(g.shadow for g in self.gates + self.transforms)
        self.all_known = frozenset(all_idx)      # the candidates' idx set when every member is healthy
        self.quiet_route = not self.tap_at["route"]     # no tap observes the route stage

    # ------------------------------------------------------------------ entry points

    async def plan(self, gw: GatewayContext, call: Call, pool: Pool) -> Plan:
        """Decide for a pool request; see the module docstring."""
        now = gw.clock()
        skip = pool.excluded_idx
        if call.op is not None:         # a non-chat operation: members that cannot serve it are no candidates
            skip = skip | call.op.unable(pool)
        boot = self.boot_rank
        if boot is not None and self.native_only:     # cheapest alone: the boot ranking, filtered
            pm = pool.members
            ranking = [i for i in boot if i not in skip and pm[i].usable(now)]
            if not ranking or self.costs.get(ranking[0]) is None:    # no healthy member is priced
                return Plan(ordering=True)
            gw.metrics.policy_selection(self.strategy or "", self.name)
            return Plan(order=tuple(ranking), policy=self.strategy, ordering=True)
        members = []
        for m in pool.members:          # a loop, not a comprehension: no extra frame per request
            if m.index not in skip and m.usable(now):
                members.append(m)
        base = None
        if self.ranker is not None:
            if self.strategy == "usage":     # the caller's chain headroom (busbar.limits.signals)
                sig = signals_of(gw, call, pool.name)
                ranked = tuple(m.index for m in members) if members and sig is not None and sig[1] is not None \
                    else None
            else:
                ranked = self.ranker(members, self.costs)
            if ranked:
                base = (self.strategy or "", ranked)
        if self.native_only:
            if base is None:
                return Plan(ordering=True)
            gw.metrics.policy_selection(base[0], self.name)
            return Plan(order=base[1], policy=base[0], ordering=True)
        return await self._decide(gw, call, members, base)

    async def plan_lane(self, gw: GatewayContext, call: Call, lane: Lane) -> Plan:
        """Decide for a direct (pool-less) route: the globals over a single candidate."""
        now = gw.clock()
        member = _LaneMember(lane)
        members = [member] if member.usable(now) else []
        return await self._decide(gw, call, members, None)

    # ------------------------------------------------------------------ the decision

    async def _decide(self, gw: GatewayContext, call: Call, members: list[Any],
                      base: tuple[str, tuple[int, ...]] | None) -> Plan:
        run: HookRun | None = call.hooks
        if run is None:
            run = call.hooks = HookRun(call)
            run.pool = self.name or call.called
            run.taps = self.run_taps
        extra: list[tuple[tuple[int, int, int], Verdict]] = []
        try:
            cands = candidate_views(members, self.costs, self.statics)
            signals = signals_of(gw, call, self.name if self.name in gw.pools else None)
            if signals is not None:
                stamp(cands, signals)
            if not run.transformed:
                run.transformed = True
                if self.transforms:
                    stop = await self._transform_pass(gw, call, run, cands, members, extra)
                    if stop is not None:
                        return stop
                if self.tap_at["request"]:
                    run.tap(self.tap_at["request"], "request")
            solo = self.solo
            facade = solo.facade if solo is not None else None
            if (solo is not None and facade is not None and run.trace is None
                    and (facade.inline or facade.on_loop)):  # one gate: here
                known = (self.all_known if len(cands) == len(self.all_idx)
                         else frozenset([c["idx"] for c in cands]))
                msg = run.message("decide", run.pool, cands, prompt=facade.prompt, user=facade.user, owned=True,
                                  headers=facade.headers)
                t0 = time.perf_counter() if decisions.enabled else 0.0
                res = fire_inline(solo, msg, known) if facade.inline else await fire_awaited(solo, msg, known)
                if gw.metrics.enabled:
                    gw.metrics.hook_decision(self.name, solo.name, res.failure or "ok", res.seconds)
                if decisions.enabled:
                    decisions.note(call, solo.name, res.failure, t0, _explained(res.arm))
                if res.failure is None:
                    answer, who = res.arm, solo
                    arm = res.arm
                    if type(arm) is Arms and arm.restrict is None and arm.order and not extra:
                        # one gate's order, nothing to intersect: what reconcile decides, without it
                        if self.quiet_route and not gw.metrics.enabled:     # and what _planned makes of it
                            return Plan(order=arm.order, policy=solo.name, ordering=self.ordering, run=run)
                        return self._planned(gw, run, members, Decision(policy=solo.name, order=arm.order))
                elif solo.on_error.kind == "hook":      # the gate may have mutated cands: new ones
                    fresh_cands = candidate_views(members, self.costs, self.statics)
                    stamp(fresh_cands, signals_of(gw, call, self.name if self.name in gw.pools else None))
                    answer, who = await self._settle(gw, solo, res, run, fresh_cands, known, members)
                else:
                    answer, who = self._terminal(solo, res, members)
                v = _verdict(call, run, answer, who)
                verdicts = [] if v is None else [(solo.rank, v)]
            else:
                known = frozenset(c["idx"] for c in cands)
                verdicts = await self._decide_pass(gw, call, run, cands, known, members)
        except ProtoError as e:          # the body does not parse: the caller's own 400
            return Plan(reply=error_reply(call.ingress, e.status, e.kind, e.message))
        if extra:
            verdicts.extend(extra)
            verdicts.sort(key=lambda rv: rv[0])
        decision = reconcile([v for _, v in verdicts], self.tags_of, base)
        if decision.reject is not None:
            return self._reject(gw, call, run, decision.reject, decision.policy or "", decision.failure)
        return self._planned(gw, run, members, decision)

    def _planned(self, gw: GatewayContext, run: HookRun, members: list[Any], decision: Decision) -> Plan:
        """A reconciled decision that routes (no reject) -> its :class:`Plan`; counts the selection
        and offers the ``route`` stage to taps."""
        allowed = decision.allowed
        excluded = frozenset() if allowed is None else frozenset(i for i in self.all_idx if i not in allowed)
        if decision.order is not None and decision.policy is not None and gw.metrics.enabled:
            gw.metrics.policy_selection(decision.policy, self.name)
        if self.tap_at["route"]:
            run.tap(self.tap_at["route"], "route",
                    remaining_candidates=sum(1 for m in members if allowed is None or m.index in allowed))
        return Plan(order=decision.order, excluded=excluded, policy=decision.policy, ordering=self.ordering,
                    run=run)

    def _reject(self, gw: GatewayContext, call: Call, run: HookRun, reject: tuple[int, str], policy: str,
                failure: str | None) -> Plan:
        status, message = reject
        headers = {ROUTE_POLICY: policy} if policy else {}
        if failure is not None:
            headers["x-busbar-hook-error"] = failure
        else:
            gw.metrics.policy_rejection(policy, self.name, status)
        run.rejected = True
        return Plan(reply=error_reply(call.ingress, status, ErrorKind.from_status(status), message, headers),
                    run=run)

    async def _transform_pass(self, gw: GatewayContext, call: Call, run: HookRun, cands: list[dict[str, Any]],
                              members: list[Any], extra: list[tuple[tuple[int, int, int], Verdict]]) -> Plan | None:
        for g in self.transforms:
            res = (await fire([(g, self._submit(g, run, cands, frozenset()))]))[0]
            gw.metrics.hook_decision(self.name, g.name, res.failure or "ok", res.seconds)
            if g.shadow:
                record_shadow(g, res, run, cands)
                continue
            if run.trace is not None:
                run.trace.append(trace_entry(g, res, _models(cands)))
            answer, who = await self._settle(gw, g, res, run, cands, frozenset(), members)
            while isinstance(answer, Rewrite) and (why := _apply_rewrite(call, run, answer)) is not None:
                # a rewrite this non-chat request cannot take: the gate's on_error, as for a malformed reply
                answer, who = await self._settle(gw, who, Result(failure="garbage", detail=why), run, cands,
                                                 frozenset(), members)
            if isinstance(answer, Verdict):
                if answer.reject is not None:
                    return self._reject(gw, call, run, answer.reject, answer.policy, answer.failure)
                extra.append((g.rank, answer))
            elif isinstance(answer, Reject):
                return self._reject(gw, call, run, (answer.status, answer.message), who.name, None)
            elif isinstance(answer, Arms):      # a non-rw fallback's decide arms
                extra.append((g.rank, Verdict(who.name, restrict=answer.restrict, order=answer.order,
                                              on_empty=who.on_empty)))
        return None

    async def _decide_pass(self, gw: GatewayContext, call: Call, run: HookRun, cands: list[dict[str, Any]],
                           known: frozenset[int], members: list[Any]) -> list[tuple[tuple[int, int, int], Verdict]]:
        gates = self.gates
        if not gates:
            return []
        t0 = time.perf_counter()
        results = await fire([(g, self._submit(g, run, cands, known)) for g in gates])
        if gw.metrics.enabled:
            for g, r in zip(gates, results, strict=True):
                gw.metrics.hook_decision(self.name, g.name, r.failure or "ok", r.seconds)
        if decisions.enabled:           # the trace's hook spans (busbar.observe.decisions)
            for g, r in zip(gates, results, strict=True):
                decisions.note(call, g.name, r.failure, t0, _explained(r.arm))
        if self.has_shadow or run.trace is not None:
            gates, results = _unshadowed(run, gates, results, cands)
        if any(r.failure is not None and g.on_error.kind == "hook" for g, r in zip(gates, results)):
            settled = await asyncio.gather(*(self._settle(gw, g, r, run, cands, known, members)
                                             for g, r in zip(gates, results)))
        else:                           # no fallback hook to fire: settle without a loop round trip
            settled = [self._terminal(g, r, members) if r.failure is not None else (r.arm, g)
                       for g, r in zip(gates, results)]
        out: list[tuple[tuple[int, int, int], Verdict]] = []
        for g, (answer, who) in zip(gates, settled):
            v = _verdict(call, run, answer, who)
            if v is not None:
                out.append((g.rank, v))
        return out

    def _submit(self, g: GateSpec, run: HookRun, cands: list[dict[str, Any]],
                known: frozenset[int]) -> Callable[[], Job | None]:
        if g.transform:
            msg = run.message("transform", run.pool, cands, prompt=g.prompt, user="no", headers=g.facade.headers)
            return lambda: g.facade.transform(msg, self.max_rewrite_bytes)
        msg = run.message("decide", run.pool, cands, prompt=g.prompt, user=g.user, headers=g.facade.headers)
        known_idx = known or frozenset(c["idx"] for c in cands)
        return lambda: g.facade.decide(msg, known_idx)

    async def _settle(self, gw: GatewayContext, g: GateSpec, res: Result, run: HookRun, cands: list[dict[str, Any]],
                      known: frozenset[int], members: list[Any]) -> tuple[Any, GateSpec]:
        """Follow ``g``'s ``on_error`` chain until an answer: ``(arm, the gate that gave it)`` or
        ``(Verdict | None, g)`` for a terminal. Each fallback fired is observed in the decision
        latency histogram like any gate."""
        while res.failure is not None:
            if g.on_error.kind != "hook" or g.on_error.hook is None:
                return self._terminal(g, res, members)
            _log_failure(g, res)
            g = g.on_error.hook
            res = (await fire([(g, self._submit(g, run, cands, known))]))[0]
            gw.metrics.hook_decision(self.name, g.name, res.failure or "ok", res.seconds)
            if run.trace is not None:
                run.trace.append(trace_entry(g, res, _models(cands)))
        return res.arm, g

    def _terminal(self, g: GateSpec, res: Result, members: list[Any]) -> tuple[Verdict | None, GateSpec]:
        """A failed gate under a terminal ``on_error`` (not ``{ hook: ... }``) -> its verdict."""
        _log_failure(g, res)
        oe = g.on_error
        if oe.kind == "first":
            return Verdict("first", order=self.all_idx), g
        if oe.kind == "reject":
            what = _FAILED.get(res.failure or "", "failed")
            return Verdict(g.name, reject=(503, (f"hook '{g.name}' {what} and its on_error is reject; the request "
                                                f"was not routed")), failure=res.failure), g
        if oe.kind == "strategy" and oe.strategy is not None:
            ranking = STRATEGIES[oe.strategy](members, self.costs)
            return (Verdict(oe.strategy, order=ranking) if ranking else None), g
        return None, g                  # nothing / weighted: the gate does not participate


def _explained(answer: Any) -> str | None:
    """The summary of what a gate explained about its decision (its reply's ``explain``, kept on the
    arm as ``note``), for the trace's hook span; ``None`` when it explained nothing."""
    note = getattr(answer, "note", None)
    if not note:
        return None
    keys = ["served_by", "confidence", "probabilities", "hops", "skipped", "cached", "cache"]
    if "confidence" in note or "error" in note:
        keys += ["model", "reason", "error"]        # the model was asked: which one, and what it said
    parts = [f"{k}={note[k]}" for k in keys if k in note]
    arm = "abstain" if isinstance(answer, Abstain) else ("restrict" if answer.restrict is not None else "order")
    return "; ".join([arm, *parts])


def _models(cands: Sequence[dict[str, Any]]) -> dict[int, str]:
    return {int(c["idx"]): str(c["model"]) for c in cands}


def _unshadowed(run: HookRun, gates: Sequence[GateSpec], results: list[Result],
                cands: list[dict[str, Any]]) -> tuple[tuple[GateSpec, ...], list[Result]]:
    """Record every shadow gate's result (and, when tracing, every gate's) and return the gates
    that decide with their results."""
    keep_g: list[GateSpec] = []
    keep_r: list[Result] = []
    models = _models(cands) if run.trace is not None else {}
    for g, r in zip(gates, results):
        if g.shadow:
            record_shadow(g, r, run, cands)
            continue
        if run.trace is not None:
            run.trace.append(trace_entry(g, r, models))
        keep_g.append(g)
        keep_r.append(r)
    return tuple(keep_g), keep_r


def _verdict(call: Call, run: HookRun, answer: Any, who: GateSpec) -> Verdict | None:
    """A settled decide-pass answer -> its verdict (``None``: abstained or did not participate).
    A rewrite (an rw fallback answering the transform it was sent) is applied here."""
    if isinstance(answer, Verdict):
        return answer
    if isinstance(answer, Reject):
        return Verdict(who.name, reject=(answer.status, answer.message))
    if isinstance(answer, Arms):
        return Verdict(who.name, restrict=answer.restrict, order=answer.order, on_empty=who.on_empty)
    if isinstance(answer, Rewrite):
        why = _apply_rewrite(call, run, answer)
        if why is not None:
            log.warning("hook '%s': its rewrite was not applied: %s; the request proceeds unmodified", who.name, why)
    return None


def _apply_rewrite(call: Call, run: HookRun, rw: Rewrite) -> str | None:
    """Install the rewritten body: a copy of the IR with new messages (and tools, when sent); on a
    non-chat request, its texts (``busbar.proxy.operation.Operation.rewrite``). Returns why the
    rewrite cannot be applied (nothing changed), else ``None``."""
    if call.op is not None:
        why = call.op.rewrite(rw.messages, rw.tools)
        if why is None:
            call.reset_ir()              # hooks after this one see the rewritten texts
            run.rewritten()
        return why
    ir = copy.copy(call.ir)
    ir.messages = rw.messages
    if rw.tools is not None:
        ir.tools = rw.tools
    call.install_ir(ir)
    run.rewritten()
    return None


def _log_failure(g: GateSpec, res: Result) -> None:
    f = g.facade
    n = f.timeouts + f.errors + f.garbage + f.saturated
    if n <= 5 or n % 1000 == 0:
        log.warning("hook '%s' (%s) %s: %s; applying on_error: %s (%d failure(s) so far)", g.name, g.path,
                    _FAILED.get(res.failure or "", "failed"), res.detail, g.on_error.describe(), n)


class _LaneMember:
    """A direct route's lane seen as the single member (idx 0, no labels) of a chain decision."""

    __slots__ = ("lane",)
    index = 0
    weight = 1
    context_max = None
    tier = None
    tags: tuple[str, ...] = ()

    def __init__(self, lane: Lane):
        self.lane = lane

    def usable(self, now: float) -> bool:
        return bool(self.lane.usable(now) and self.lane.default_cell.admits(now))
