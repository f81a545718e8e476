"""Cross-reference and value checks over the typed config: every fault collected, none raised early.

``validate(loaded, env) -> (errors, warnings)``; each entry is one line
``config.yaml: <key path>: <what is wrong>; <the fix>``.

Source: seeds 001 "Startup validation summary" (the rows this module owns are marked in tests).
"""
from __future__ import annotations

from typing import Mapping

from busbar.config.schema import (AUTH_STYLES, DISPOSITION_CLASSES, PROTOCOLS, STRATEGIES,
                                  FallbackPool, HookRef)


def _merged_provider_fields(loaded, name: str) -> dict:
    """Catalog entry overlaid with the deployment overrides (error_map merged per code)."""
    dep = loaded.config.providers[name]
    cat = loaded.catalog.get(name)
    out = cat.model_dump() if cat else {"protocol": "anthropic", "base_url": None, "error_map": {}}
    for k, v in dep.model_dump(exclude={"api_key", "error_map", "allow_metadata_hosts"}).items():
        if v is not None:
            out[k] = v
    out["error_map"] = {**(out.get("error_map") or {}), **dep.error_map}
    return out


def validate(loaded, env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Return (errors, warnings) for the merged config; see the module docstring."""
    cfg = loaded.config
    src = loaded.config_path.name
    errors: list[str] = []
    warnings: list[str] = []
    err = errors.append

    for name in cfg.providers:
        where = f"{src}: providers.{name}"
        if name == "admin" or name.startswith("admin/"):
            err(f"{where}: the provider name '{name}' is reserved; rename it")
        merged = _merged_provider_fields(loaded, name)
        if not merged.get("base_url"):
            err(f"{where}: '{name}' is not in the provider catalog, so base_url and protocol are "
                f"required; add them or fix the name")
            continue
        if merged["protocol"] not in PROTOCOLS:
            err(f"{where}.protocol: unknown protocol '{merged['protocol']}'; use one of "
                f"{', '.join(PROTOCOLS)}")
        if merged.get("auth") is not None and merged["auth"] not in AUTH_STYLES:
            err(f"{where}.auth: unknown auth '{merged['auth']}'; use one of {', '.join(AUTH_STYLES)}")
        for field in ("path", "path_base"):
            if merged.get(field) is not None and not str(merged[field]).startswith("/"):
                err(f"{where}.{field}: '{merged[field]}' must begin with /")
        for code, cls in merged["error_map"].items():
            if cls not in DISPOSITION_CLASSES:
                err(f"{where}.error_map.{code}: unknown disposition class '{cls}'; use one of "
                    f"{', '.join(DISPOSITION_CLASSES)}")
        errors.extend(_ssrf_faults(loaded, name, merged["base_url"], where))

    for name, m in cfg.models.items():
        where = f"{src}: models.{name}"
        if name == "admin":
            err(f"{where}: the model name 'admin' is reserved; rename it")
        if m.provider not in cfg.providers:
            err(f"{where}.provider: '{m.provider}' is not defined under providers; fix the name or "
                f"add the provider")
        if m.max_concurrent is not None and m.max_concurrent < 1:
            err(f"{where}.max_concurrent: must be ≥ 1 (0 never grants a permit; omit it for unbounded)")
        if m.max_requests == 0 or m.max_requests < -1:
            err(f"{where}.max_requests: must be -1 (unlimited) or ≥ 1 (0 is a permanently unusable lane)")
        if m.default_max_tokens is not None and m.default_max_tokens < 1:
            err(f"{where}.default_max_tokens: must be > 0 (omit it for limits.default_max_tokens)")
        if m.attempt_timeout_ms is not None and m.attempt_timeout_ms < 1:
            err(f"{where}.attempt_timeout_ms: must be ≥ 1 (omit it for no per-attempt cap)")
        if m.upstream_model is not None and not m.upstream_model.strip():
            err(f"{where}.upstream_model: must be non-empty when set (omit it to send '{name}')")

    for name, pool in cfg.pools.items():
        errors.extend(_pool_faults(cfg, src, name, pool))

    if cfg.limits.request_body_max_bytes < 1:
        err(f"{src}: limits.request_body_max_bytes: must be ≥ 1")
    b = cfg.limits.reasoning_effort_budgets
    if not (0 < b.minimal < b.low < b.medium < b.high):
        err(f"{src}: limits.reasoning_effort_budgets: must be ascending and all > 0 "
            f"(minimal < low < medium < high)")
    if cfg.store.module not in ("memory",) and not cfg.plugins.enabled:
        err(f"{src}: store.module: '{cfg.store.module}' is a plugin but plugins.enabled is false; "
            f"set plugins.enabled: true and install its tarball, or use memory")
    if not cfg.auth.chain:
        warnings.append(f"{src}: auth.chain: [] is an open front door: no client authentication "
                        f"(development only)")
    for pname, pool in cfg.pools.items():
        protos = {_merged_provider_fields(loaded, cfg.models[m.model].provider).get("protocol")
                  for m in pool.members if m.model in cfg.models
                  and cfg.models[m.model].provider in cfg.providers}
        if len(protos) > 1:
            warnings.append(f"{src}: pools.{pname}: heterogeneous pool (members speak "
                            f"{', '.join(sorted(p for p in protos if p))}); cross-protocol translation applies")
    return errors, warnings


def _pool_faults(cfg, src: str, name: str, pool) -> list[str]:
    where = f"{src}: pools.{name}"
    out: list[str] = []
    if name == "admin":
        out.append(f"{where}: the pool name 'admin' is reserved; rename it")
    if name in cfg.models or name in cfg.providers:
        kind = "model" if name in cfg.models else "provider"
        out.append(f"{where}: the pool name collides with a {kind} of the same name; rename the pool")
    if not pool.members:
        out.append(f"{where}.members: a pool with no members is un-routable; add at least one member")
    member_models = set()
    for i, m in enumerate(pool.members):
        member_models.add(m.model)
        mw = f"{where}.members[{i}]"
        if m.model not in cfg.models:
            out.append(f"{mw}.model: '{m.model}' is not defined under models; fix the name or add the model")
        if m.weight < 1:
            out.append(f"{mw}.weight: must be ≥ 1 (0 never selects the member; omit it for 1)")
        if m.attempt_timeout_ms is not None and m.attempt_timeout_ms < 1:
            out.append(f"{mw}.attempt_timeout_ms: must be ≥ 1 (omit it to inherit the model's value)")
        if m.context_max is not None and m.context_max < 1:
            out.append(f"{mw}.context_max: must be ≥ 1 (omit it for unknown)")
    for ex in pool.failover.exclusions:
        if ex not in member_models:
            out.append(f"{where}.failover.exclusions: '{ex}' is not a member of this pool; remove it")
    if pool.failover.timeout_secs < 1:
        out.append(f"{where}.failover.timeout_secs: must be ≥ 1 (a zero failover deadline)")
    if pool.failover.max_hops < 0:
        out.append(f"{where}.failover.max_hops: must be ≥ 0")
    br = pool.breaker
    if br.base_cooldown_secs < 1:
        out.append(f"{where}.breaker.base_cooldown_secs: must be ≥ 1")
    if br.max_cooldown_secs < br.base_cooldown_secs:
        out.append(f"{where}.breaker.max_cooldown_secs: {br.max_cooldown_secs} is below "
                   f"base_cooldown_secs {br.base_cooldown_secs}; raise it to ≥ the base")
    t = br.trip
    if t.window_secs < 1:
        out.append(f"{where}.breaker.trip.window_secs: must be ≥ 1")
    if not (0.0 < t.threshold <= 1.0):
        out.append(f"{where}.breaker.trip.threshold: must be in (0.0, 1.0]")
    if t.min_requests < 1:
        out.append(f"{where}.breaker.trip.min_requests: must be ≥ 1")
    if t.consecutive_n < 1:
        out.append(f"{where}.breaker.trip.consecutive_n: must be ≥ 1")
    if pool.affinity is not None and pool.affinity.mode != "session":
        out.append(f"{where}.affinity.mode: '{pool.affinity.mode}' is unknown; session is the only mode")
    if isinstance(pool.on_exhausted, FallbackPool):
        out.extend(_fallback_faults(cfg, where, name))
    strategies = [h for h in pool.hooks if isinstance(h, str)]
    for i, h in enumerate(pool.hooks):
        if isinstance(h, str) and h not in STRATEGIES:
            out.append(f"{where}.hooks[{i}]: '{h}' is not a built-in strategy ({', '.join(STRATEGIES)}); "
                       f"an out-of-process hook is an inline {{ module: ... }} ref")
        if isinstance(h, HookRef) and h.kind == "tap" and h.prompt == "rw":
            out.append(f"{where}.hooks[{i}].prompt: rw is not allowed on a tap (a tap never replies); "
                       f"use ro, or kind: gate")
    if len(strategies) > 1:
        out.append(f"{where}.hooks: names more than one ordering strategy ({', '.join(strategies)}); "
                   f"a pool has one base ordering")
    return out


def _fallback_faults(cfg, where: str, name: str) -> list[str]:
    target = cfg.pools[name].on_exhausted.fallback_pool
    if target == name:
        return [f"{where}.on_exhausted.fallback_pool: '{name}' falls back to itself; name another pool"]
    if target not in cfg.pools:
        return [f"{where}.on_exhausted.fallback_pool: '{target}' is not a configured pool"]
    chain = [name]
    cur = target
    while True:
        if cur in chain:
            cycle = " -> ".join(chain[chain.index(cur):] + [cur])
            return [f"{where}.on_exhausted.fallback_pool: fallback cycle {cycle}; break the cycle"] \
                if chain[0] == cur else []
        chain.append(cur)
        nxt = cfg.pools.get(cur)
        if nxt is None or not isinstance(nxt.on_exhausted, FallbackPool):
            return []
        cur = nxt.on_exhausted.fallback_pool


def _ssrf_faults(loaded, name: str, base_url: str, where: str) -> list[str]:
    from busbar.security.ssrf import SsrfBlocked, SsrfPolicy

    sec = loaded.config.security
    policy = SsrfPolicy(sec.blocked_metadata_hosts, sec.allow_metadata_hosts, sec.allow_all_metadata)
    try:
        policy.check_url(base_url, purpose=f"provider {name}",
                         provider_allow=loaded.config.providers[name].allow_metadata_hosts,
                         allow_private=True)
    except SsrfBlocked as e:
        return [f"{where}.base_url: {e.reason}"]
    return []
