"""The failover walk: select a member, attempt it, classify the outcome, fail over or relay.

``forward(gw, call, target) -> Reply`` for a pool, a model (direct route) or an ad-hoc lane.

Per pool request: a wall-clock budget of ``failover.timeout_secs`` (exceeded -> 503 at once),
at most ``1 + failover.max_hops`` attempts, never a member in ``failover.exclusions`` through
SWRR (affinity may still pick it), each tried member excluded for the rest of the request.
Outcomes (see ``disposition``): TRANSIENT penalizes the (pool, lane) cell and fails over;
HARD_DOWN sets the lane hard-down for ``limits.hard_down_cooldown_secs`` and fails over;
CLIENT is relayed at once with no penalty (case C021: a 404 is never retried); CONTEXT
excludes members whose known ``context_max`` ≤ the failed one and fails over, no penalty.
When no member can be tried: ``on_exhausted`` — reject (503 + Retry-After = soonest cooldown; 429
``rate_limit`` in the caller's dialect when every candidate cools down after upstream rate limits),
least_bad (the soonest-expiring member, degraded), or ``fallback_pool`` (its full selection).
When every tried member failed: an upstream 429 stays a 429 (case C018), anything else is 503.

Hooks (``busbar.hooks``): a pool with a chain (a non-weighted strategy, gates or taps) gets its
``Plan`` before the walk: a gate's reject is answered at once; a restriction joins the exclusion
set for every hop (and ``least_bad``); an order replaces SWRR by a ranked walk (omitted members
last, by SWRR). Replies carry ``x-busbar-route-policy``. ``global_hooks`` screen direct routes.
A pool without hooks pays one attribute read and one dict lookup; a request whose hooks include no
tap skips the per-attempt tap bookkeeping (``HookRun.attempt``).

Responses state (``busbar.proxy.responses_state``): a Responses request carrying
``previous_response_id`` or encrypted reasoning goes first to the member that issued it; see that
module for what happens when that member is unusable, fails, or is unknown.

Source: docs/reliability.md#the-walk-and-the-first-byte-boundary,
docs/reliability.md#when-nothing-can-be-tried-on_exhausted, docs/reliability.md#dispositions,
docs/reliability.md#context-length-failover, docs/reliability.md#selection.
"""
from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

from busbar.hooks.plan import Plan
from busbar.modelname import header_value
from busbar.proto.base import ErrorKind
from busbar.proxy import responses_state
from busbar.proxy.attempt import AttemptFailure, attempt
from busbar.proxy.disposition import CLIENT, CONTEXT, HARD_DOWN, effect
from busbar.proxy.relay import Reply, StreamLimits, error_reply, relay_failure, stream_reply, whole_reply
from busbar.proxy.runtime import Lane, Member, Pool
from busbar.proxy.select import affinity_pick, all_throttled, least_bad, soonest_cooldown, swrr_pick
from busbar.proxy.translate import Call

if TYPE_CHECKING:
    from busbar.proxy.breaker import BreakerCell
    from busbar.proxy.gateway import Gateway

log = logging.getLogger("busbar")

ROUTE_TARGET = "x-busbar-route-target"
TRANSLATION_DROPPED = "x-busbar-translation-dropped"


async def forward(gw: Gateway, call: Call, target: Pool | Lane) -> Reply:
    """Serve one call against a pool or a single lane; always returns a ``Reply``."""
    if isinstance(target, Pool):
        now = gw.clock()
        reply = await _walk_pool(gw, call, target, now + target.cfg.failover.timeout_secs, set())
    else:
        reply = await _direct(gw, call, target)
    if call.hooks is not None:           # taps: the completion stage (or at the stream's end)
        call.hooks.finish(reply)
    return reply


async def _direct(gw: Gateway, call: Call, lane: Lane) -> Reply:
    hooks = gw.hooks
    if hooks is not None and hooks.direct is not None:     # global_hooks screen direct routes too
        plan = await hooks.direct.plan_lane(gw, call, lane)
        if plan.reply is not None:
            return plan.reply
    now = gw.clock()
    cell = lane.default_cell
    admit = cell.try_acquire(now) if lane.usable(now) else False
    if admit is False or not lane.acquire():
        if admit is None:
            cell.release_probe()
        wait = max(1.0, max(cell.cooldown_until, lane.hard_down_until) - now)
        throttled = cell.throttled(now) and lane.hard_down_until <= now and lane.budget != 0
        return _exhausted_reply(call, wait, throttled=throttled)
    run = call.hooks
    if run is not None and run.taps:    # attempt bookkeeping only for a request with taps
        run.attempt(lane.name, 0, None)
    res = await _run(gw, call, lane, lane, cell, gw.limits.upstream_request_timeout_secs, "")
    if isinstance(res, AttemptFailure):
        return _final_failure(call, res, lane, 1.0)
    return res


async def _walk_pool(gw: Gateway, call: Call, pool: Pool, deadline: float, visited: set[str]) -> Reply:
    hooks = gw.hooks
    if hooks is not None:
        chain = hooks.chains.get(pool.name)
        if chain is not None:           # the pool's strategy and gates decide before the walk
            plan = await chain.plan(gw, call, pool)
            if plan.reply is not None:
                return plan.reply
            return plan.stamp(await _walk(gw, call, pool, deadline, visited, plan))
    return await _walk(gw, call, pool, deadline, visited, None)


async def _walk(gw: Gateway, call: Call, pool: Pool, deadline: float, visited: set[str], plan: Plan | None) -> Reply:
    """The failover walk: SWRR, or ``plan``'s ranked walk inside its restriction (busbar.hooks)."""
    visited.add(pool.name)
    call.strict = pool.cfg.translation == "strict"
    excluded: set[int] = set(pool.excluded_idx)
    if plan is not None:
        excluded |= plan.excluded
    if call.op is not None:             # members that cannot serve the operation: skipped, no penalty
        excluded |= call.op.unable(pool)
    max_attempts = 1 + max(0, pool.cfg.failover.max_hops)
    attempts = 0
    last: tuple[AttemptFailure, Member] | None = None
    session = call.headers.get(pool.affinity_header) if pool.affinity_header else None
    tracked = responses_state.tracks(call, pool)
    refs = responses_state.refs_of(gw, call, pool) if tracked else None
    again: Member | None = None         # a member that gets the request once more, blobs stripped
    while attempts < max_attempts:
        now = gw.clock()
        remaining = deadline - now
        if remaining <= 0:
            return error_reply(call.ingress, 503, ErrorKind.OVERLOADED,
                               f"pool '{pool.name}': failover deadline of "
                               f"{pool.cfg.failover.timeout_secs}s exceeded", {"retry-after": "1"})
        member, again = again, None
        if member is None and refs is not None and refs.pinned is not None:
            member = _issuer(refs, excluded, now)
            if member is None:
                if refs.previous is not None:     # only the issuer can serve it: its failure, or 503
                    break
                _unpin(call, refs)                # sent once to another member, blobs stripped
                max_attempts = min(max_attempts, attempts + 1)
        if member is None:
            member = affinity_pick(pool, session, now, excluded - pool.excluded_idx) if attempts == 0 else None
        if member is None:
            member = swrr_pick(pool, now, excluded) if plan is None else plan.pick(pool, now, excluded)
        if member is None:
            break
        admit = member.cell.try_acquire(now)
        if admit is False or not member.lane.acquire():
            if admit is None:
                member.cell.release_probe()
            excluded.add(member.index)
            continue
        if last is not None:
            gw.metrics.failover(pool.name, last[0].reason)     # this attempt is a failover hop
        attempts += 1
        run = call.hooks
        if run is not None and run.taps:    # attempt bookkeeping only for a request with taps
            run.attempt(member.lane.name, sum(1 for m in pool.members if m.index not in excluded) - 1,
                        last[0].reason if last is not None else None)
        res = await _run(gw, call, member.lane, member, member.cell, remaining, pool.name)
        if not isinstance(res, AttemptFailure):
            return _stateful(gw, member.lane, res, refs) if tracked else res
        kind = effect(res.cls)
        if refs is not None:
            if kind == CLIENT and not refs.retried and responses_state.foreign_blob(res):
                refs.retried = True             # once more on this member, blobs stripped: not a hop
                if responses_state.strip(call):
                    refs.stripped, again = True, member
                    attempts -= 1
                    continue
            elif kind == CLIENT and refs.pinned is None and refs.previous and responses_state.foreign_response(res):
                excluded.add(member.index)      # not this member's response: try the next one
                last = (res, member)
                continue
            elif member is refs.pinned and kind != CLIENT:
                if refs.previous is not None:   # the issuer's failure, never another member's "not found"
                    return _final_failure(call, res, member.lane, soonest_cooldown(pool, gw.clock()))
                _unpin(call, refs)
                max_attempts = min(max_attempts, attempts + 1)      # sent once to another member
        if kind == CLIENT:
            return _final_failure(call, res, member.lane, 1.0)
        excluded.add(member.index)
        last = (res, member)
        if kind == CONTEXT:
            limit = member.context_max
            for m in pool.members:
                if limit is not None and m.context_max is not None and m.context_max <= limit:
                    excluded.add(m.index)
        log.info("pool %s: %s failed (%s), failing over", pool.name, member.lane.name, res.reason)
    if last is not None:
        if effect(last[0].cls) == CONTEXT and not any(m.index not in excluded for m in pool.members):
            return _final_failure(call, last[0], last[1].lane, 1.0)
        return _final_failure(call, last[0], last[1].lane, soonest_cooldown(pool, gw.clock()))
    if refs is not None and refs.previous is not None and refs.pinned is not None:
        return _exhausted_reply(call, soonest_cooldown(pool, gw.clock()), pool.name)
    return await _on_exhausted(gw, call, pool, deadline, visited, excluded, plan)


def _issuer(refs: responses_state.StateRefs, excluded: set[int], now: float) -> Member | None:
    """The member that issued the request's state, when it can take it now (else ``None``)."""
    m: Member | None = refs.pinned
    if m is None or m.index in excluded or not m.usable(now):
        return None
    return m


def _unpin(call: Call, refs: responses_state.StateRefs) -> None:
    """The issuer cannot take a blob-only request: strip the blobs, route it like any other."""
    refs.pinned = None
    if responses_state.strip(call):
        refs.stripped = True


def _stateful(gw: Gateway, lane: Lane, reply: Reply, refs: responses_state.StateRefs | None) -> Reply:
    """A Responses answer in a pool that routes Responses state: remember its issuer (JSON body or
    stream) and name stripped blobs in ``x-busbar-translation-dropped``."""
    if lane.provider.protocol == "responses":
        if reply.stream is not None:
            reply.stream = responses_state.recording(gw, lane, reply.stream)
        else:
            responses_state.record(gw, lane, reply.body)
    if refs is not None and refs.stripped:
        have = reply.headers.get(TRANSLATION_DROPPED)
        reply.headers[TRANSLATION_DROPPED] = (f"{have}, " if have else "") + responses_state.DROPPED
    return reply


async def _on_exhausted(gw: Gateway, call: Call, pool: Pool, deadline: float, visited: set[str], excluded: set[int],
                        plan: Plan | None = None) -> Reply:
    now = gw.clock()
    mode = pool.on_exhausted
    if mode == "fallback" and pool.fallback not in visited and pool.fallback in gw.pools:
        return await _walk_pool(gw, call, gw.pools[pool.fallback], deadline, visited)
    if mode == "least_bad":
        floor = pool.excluded_idx if plan is None else pool.excluded_idx | plan.excluded
        if call.op is not None:
            floor = floor | call.op.unable(pool)
        member = least_bad(pool, now, floor)
        if member is not None and member.lane.acquire():
            log.warning("pool %s exhausted: degraded dispatch to %s (least_bad)", pool.name, member.lane.name)
            res = await _run(gw, call, member.lane, member, member.cell, deadline - now, pool.name)
            if not isinstance(res, AttemptFailure):
                return res
            return _final_failure(call, res, member.lane, soonest_cooldown(pool, gw.clock()))
    floor = pool.excluded_idx if plan is None else pool.excluded_idx | plan.excluded
    return _exhausted_reply(call, soonest_cooldown(pool, now), pool.name,
                            throttled=all_throttled(pool.members, now, floor))


def _exhausted_reply(call: Call, wait_s: float, pool: str | None = None, *, throttled: bool = False) -> Reply:
    """Nothing could be tried: 503 ``overloaded``, or 429 ``rate_limit`` in the caller's dialect when
    every candidate is cooling down after upstream rate limits (an outage stays 503). Retry-After is
    the soonest cooldown expiry, whole seconds, ≥ 1."""
    what = f"pool '{pool}'" if pool else f"'{call.called}'"
    retry = {"retry-after": str(max(1, math.ceil(wait_s)))}
    if throttled:
        return error_reply(call.ingress, 429, ErrorKind.RATE_LIMIT,
                           f"{what}: every upstream is rate-limited; retry after {retry['retry-after']}s", retry)
    return error_reply(call.ingress, 503, ErrorKind.OVERLOADED,
                       f"{what}: no healthy upstream available; retry later", retry)


def _final_failure(call: Call, failure: AttemptFailure, lane: Lane, wait_s: float) -> Reply:
    """The walk ended on a failure: relay a client error / a 429; otherwise a 503 with Retry-After."""
    kind = effect(failure.cls)
    same = lane.provider.dialect is call.ingress
    if kind in (CLIENT, CONTEXT):
        return relay_failure(call, failure, same)
    if failure.status == 429 or failure.cls == "rate_limit":
        ra = failure.retry_after if failure.retry_after else wait_s
        reply = relay_failure(call, failure, same) if failure.status == 429 else \
            error_reply(call.ingress, 429, ErrorKind.RATE_LIMIT, failure.info.message if failure.info else
                        "upstream rate limit")
        reply.headers = {**reply.headers, "retry-after": str(max(1, math.ceil(ra)))}
        return reply
    if failure.cls in ("auth", "billing"):     # never echo upstream credential text (case C020)
        msg = f"upstream {failure.cls} failure at lane '{lane.name}'"
    elif failure.cls == "network":             # transport text names internal hosts and library classes
        log.warning("lane %s: upstream connection failed: %s", lane.name,
                    failure.info.message if failure.info else "")
        msg = f"upstream connection failure at lane '{lane.name}'"
    else:
        msg = failure.info.message if failure.info and failure.info.message else "upstream unavailable"
    reply = error_reply(call.ingress, 503, ErrorKind.OVERLOADED,
                        f"all upstream attempts failed; last: {msg}",
                        {"retry-after": str(max(1, math.ceil(wait_s)))})
    return reply


async def _run(gw: Gateway, call: Call, lane: Lane, who: Member | Lane, cell: BreakerCell, remaining: float,
               pool: str) -> Reply | AttemptFailure:
    """One admitted attempt (permit already held): record its outcome on ``cell``/``lane``."""
    t0 = gw.clock()
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            lane.release()

    gw.metrics.attempt(pool, lane.metric_label)
    record = call.record
    note = record.attempt_started(lane.name, pool) if record is not None else None
    try:
        res = await attempt(gw, call, who, remaining)
    except BaseException:
        release()
        cell.release_probe()
        if note is not None:
            note.ended, note.outcome = time.perf_counter(), "client_closed"
        raise
    now = gw.clock()
    if isinstance(res, AttemptFailure):
        release()
        _record_failure(gw, lane, cell, res, now, pool)
        if note is not None:
            note.ended, note.outcome, note.status = time.perf_counter(), res.cls, res.status
        return res
    if record is not None and note is not None:
        note.status = res.response.status
        record.lane = lane.name
    charged = lane.budget > 0
    if charged:
        lane.budget -= 1
    lane.observe_latency((now - t0) * 1000.0)
    headers_extra = {ROUTE_TARGET: header_value(lane.name)}
    if res.dropped:
        headers_extra[TRANSLATION_DROPPED] = ", ".join(res.dropped)
    if not call.stream:
        release()
        try:
            reply = whole_reply(call, lane, res)
        except Exception as e:  # noqa: BLE001 - an untranslatable 2xx body is the upstream's fault: fail over
            log.warning("pool %s: undecodable response from %s: %r", pool, lane.name, e)
            if charged:
                lane.budget += 1
            failure = AttemptFailure("server_error", 502, None, None, reason="server_error")
            _record_failure(gw, lane, cell, failure, now, pool)
            if record is not None and note is not None:
                note.ended, note.outcome = time.perf_counter(), failure.cls
                record.lane = None
            return failure
        cell.record_success(now)
        lane.ok += 1
        reply.headers.update(headers_extra)
        if note is not None:
            note.ended, note.outcome = time.perf_counter(), "ok"
        return reply

    def on_end(outcome: bool | None) -> None:
        release()
        t = gw.clock()
        if record is not None and note is not None:
            note.ended = time.perf_counter()
            note.outcome = "ok" if outcome is True else "stream_error" if outcome is False else "client_closed"
            record.stream_ok = outcome
        if outcome is True:
            cell.record_success(t)
            lane.ok += 1
        elif outcome is False:
            if cell.record_failure(t):
                gw.metrics.trip(pool, lane.metric_label)
            gw.metrics.failure(pool, lane.metric_label, "stream_error")
            lane.err += 1
            if charged:
                lane.budget += 1          # refund: the body failed after 2xx headers
        else:
            cell.release_probe()
        if call.hooks is not None:      # taps: the completion stage of a stream
            call.hooks.stream_done(outcome)

    limits = gw.limits
    bounds = StreamLimits(limits.stream_keepalive_secs, limits.upstream_idle_timeout_secs,
                          limits.upstream_body_max_bytes)
    reply = stream_reply(call, lane, res, bounds=bounds, on_end=on_end)
    reply.headers.update(headers_extra)
    return reply


def _record_failure(gw: Gateway, lane: Lane, cell: BreakerCell, failure: AttemptFailure, now: float, pool: str) -> None:
    kind = effect(failure.cls)
    gw.metrics.failure(pool, lane.metric_label,
                       "attempt_timeout" if failure.reason == "attempt_timeout" else failure.cls)
    if kind == CLIENT:
        lane.client_fault += 1
        cell.release_probe()
        return
    if kind == CONTEXT:
        cell.release_probe()
        return
    lane.err += 1
    if kind == HARD_DOWN:
        secs = gw.limits.hard_down_cooldown_secs
        lane.hard_down_until = max(lane.hard_down_until, now + secs)
        cell.hard_down(now, secs)
        return
    if cell.record_failure(now, failure.retry_after, failure.cls == "rate_limit"):
        gw.metrics.trip(pool, lane.metric_label)
