"""Validation of ``pools:`` (everything but ``hooks:``, which is ``validate_hooks``).

Rows (docs/configuration.md#startup-checks): Pool name reserved, Pool name collision, Empty members,
weight: 0, model reference missing, failover.timeout_secs: 0, failover.exclusions dangling, Fallback
pool cycle / self-reference / unknown, affinity.mode unknown, Breaker max_cooldown < base_cooldown;
the field ranges of docs/reliability.md#dispositions, docs/reliability.md#the-walk-and-the-first-byte-boundary,
docs/reliability.md#selection; and the warning
"Heterogeneous pool".

A fallback cycle is reported once, at the first pool of the cycle in config order, with the path
printed (``primary -> overflow -> primary``).
"""
from __future__ import annotations

import re
from typing import Any

from busbar.config.schema_pools import FallbackPool

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110 field-name token


def _members(ctx: Any, where: str, pool: Any) -> None:
    if not pool.members:
        ctx.err(f"{where}.members", "a pool with no members is un-routable; add at least one "
                                    "{ model: <model> }")
    for i, m in enumerate(pool.members):
        mw = f"{where}.members[{i}]"
        if m.model not in ctx.cfg.models:
            ctx.err(f"{mw}.model", f"'{m.model}' is not defined under models; fix the name or add the model")
        if m.weight < 1:
            ctx.err(f"{mw}.weight", "must be ≥ 1 (0 never selects the member; omit it for 1)")
        if m.attempt_timeout_ms is not None and m.attempt_timeout_ms < 1:
            ctx.err(f"{mw}.attempt_timeout_ms", "must be ≥ 1 (omit it to inherit the model's value)")
        if m.context_max is not None and m.context_max < 1:
            ctx.err(f"{mw}.context_max", "must be ≥ 1 (omit it when the window is unknown)")


def _failover_and_breaker(ctx: Any, where: str, pool: Any) -> None:
    members = {m.model for m in pool.members}
    for i, ex in enumerate(pool.failover.exclusions):
        if ex not in members:
            ctx.err(f"{where}.failover.exclusions[{i}]", f"'{ex}' is not a member of this pool; remove "
                                                         f"it or add the member")
    if pool.failover.timeout_secs < 1:
        ctx.err(f"{where}.failover.timeout_secs", "must be ≥ 1 (a zero failover deadline fails every "
                                                  "request; default 120)")
    if pool.failover.max_hops < 0:
        ctx.err(f"{where}.failover.max_hops", "must be ≥ 0 (default 3)")
    br = pool.breaker
    if br.base_cooldown_secs < 1:
        ctx.err(f"{where}.breaker.base_cooldown_secs", "must be ≥ 1 (default 15)")
    if br.max_cooldown_secs < br.base_cooldown_secs:
        ctx.err(f"{where}.breaker.max_cooldown_secs", f"{br.max_cooldown_secs} is below "
                                                      f"base_cooldown_secs {br.base_cooldown_secs}; "
                                                      f"raise it to ≥ the base")
    t = br.trip
    for name, value, default in (("window_secs", t.window_secs, 30), ("min_requests", t.min_requests, 5),
                                 ("consecutive_n", t.consecutive_n, 3)):
        if value < 1:
            ctx.err(f"{where}.breaker.trip.{name}", f"must be ≥ 1 (default {default})")
    if not (0.0 < t.threshold <= 1.0):
        ctx.err(f"{where}.breaker.trip.threshold", f"{t.threshold} is outside (0.0, 1.0]; an error "
                                                   f"fraction like 0.5 (the default)")
    if pool.affinity is not None:
        if pool.affinity.mode != "session":
            ctx.err(f"{where}.affinity.mode", f"'{pool.affinity.mode}' is unknown; session is the only "
                                              f"mode (omit it for session)")
        if not _TOKEN.match(pool.affinity.header_name):
            ctx.err(f"{where}.affinity.header_name", f"'{pool.affinity.header_name}' is not an HTTP "
                                                     f"header name (default x-session-id)")


def _fallback(ctx: Any, name: str, order: list[str]) -> None:
    pools = ctx.cfg.pools
    where = f"pools.{name}.on_exhausted.fallback_pool"
    target = pools[name].on_exhausted.fallback_pool
    if target == name:
        ctx.err(where, f"'{name}' falls back to itself; name another pool")
        return
    if target not in pools:
        known = ", ".join(p for p in pools if p != name) or "none"
        ctx.err(where, f"'{target}' is not a configured pool (configured: {known}); fix the name")
        return
    chain = [name]
    cur = target
    while cur not in chain:
        chain.append(cur)
        nxt = pools.get(cur)
        if nxt is None or not isinstance(nxt.on_exhausted, FallbackPool) or nxt.on_exhausted.fallback_pool == cur:
            return
        cur = nxt.on_exhausted.fallback_pool
    cycle = chain[chain.index(cur):]
    if cycle[0] != name or min(cycle, key=order.index) != name:
        return  # reported once, at the cycle's first pool in config order
    ctx.err(where, f"fallback cycle {' -> '.join(cycle + [name])}; break the cycle (end one pool's "
                   f"chain with reject or least_bad)")


def check(ctx: Any) -> None:
    """Every pool in config order, then the heterogeneous-pool warnings."""
    cfg = ctx.cfg
    order = list(cfg.pools)
    for name, pool in cfg.pools.items():
        where = f"pools.{name}"
        if name == "admin":
            ctx.err(where, "the pool name 'admin' is reserved; rename it")
        if name in cfg.models or name in cfg.providers:
            kind = "model" if name in cfg.models else "provider"
            ctx.err(where, f"the pool name collides with a {kind} of the same name; rename the pool")
        _members(ctx, where, pool)
        _failover_and_breaker(ctx, where, pool)
        if isinstance(pool.on_exhausted, FallbackPool):
            _fallback(ctx, name, order)
    for name, pool in cfg.pools.items():
        protos = {ctx.protocol_of_model(m.model) for m in pool.members} - {None}
        if len(protos) > 1:
            ctx.warn(f"pools.{name}", f"heterogeneous pool (members speak {', '.join(sorted(protos))}); "
                                      f"cross-protocol translation applies")
