"""Validation of ``limits:``, ``observability:``, ``metrics:``, ``security:``, ``advanced:`` and the
keys of ``plugins.min_versions`` (with a plugin catalog: a key naming no plugin in plugins.dir warns).

Rules (docs/config-at-a-glance.md#limits): the limit fields are counts, sizes and durations (a 0 body cap or timeout
would refuse every request; the "0 = unlimited" ones say so); ``reasoning_effort_budgets`` ascending and
> 0; ``otlp_url`` loopback http allowed, remote https, SSRF-guarded (RFC-1918, link-local, CGNAT,
metadata refused); ``request_log_webhook_url`` https only, SSRF-guarded; ``metrics.buffer_seconds``
≥ 1; ``security.allow_all_metadata: true`` logs a startup warning. Both URLs go through the one
SSRF guard (C032).
"""
from __future__ import annotations

from typing import Any

# field -> minimum (0 where docs/configuration.md defines 0 as "unlimited" / "off")
_LIMIT_MIN = {
    "max_inbound_concurrent": 0, "request_body_max_bytes": 1, "upstream_request_timeout_secs": 1,
    "tls_handshake_timeout_secs": 1, "request_body_read_timeout_secs": 1, "pool_max_idle_per_host": 0,
    "pool_idle_timeout_secs": 0, "hard_down_cooldown_secs": 1, "upstream_error_body_max_bytes": 1,
    "max_honored_retry_after_secs": 0, "default_max_tokens": 1, "max_keys_per_principal": 0,
    "max_auto_provisioned_groups": 0, "header_read_timeout_secs": 1, "keep_alive_timeout_secs": 1,
    "upstream_idle_timeout_secs": 1, "upstream_body_max_bytes": 1,
}


def _limits(ctx: Any) -> None:
    limits = ctx.cfg.limits
    defaults = type(limits)()
    for name, minimum in _LIMIT_MIN.items():
        value = getattr(limits, name)
        if value < minimum:
            zero = " (0 = unlimited)" if minimum == 0 else ""
            ctx.err(f"limits.{name}", f"{value} is not allowed; must be ≥ {minimum}{zero} "
                                      f"(default {getattr(defaults, name)})")
    if limits.stream_keepalive_secs <= 0:
        ctx.err("limits.stream_keepalive_secs", f"{limits.stream_keepalive_secs} is not allowed; must be > 0 "
                                                f"(default 15)")
    b = limits.reasoning_effort_budgets
    if not (0 < b.minimal < b.low < b.medium < b.high):
        ctx.err("limits.reasoning_effort_budgets", f"must be ascending and all > 0 (minimal < low < medium "
                                                   f"< high), found {b.minimal}, {b.low}, {b.medium}, {b.high}")


def _floor_keys(ctx: Any) -> None:
    """A ``plugins.min_versions`` key that is neither the manifest name nor the alias of any plugin in
    plugins.dir (loadable or not) floors nothing today: a warning, not an error, because a floor may
    deliberately precede the plugin's install (one config for a fleet, a plugin rolled out later),
    and a 1.5.0 config that boots must keep booting. A typo is what the warning is there to catch."""
    plugins = ctx.cfg.plugins
    installed_of = getattr(ctx.plugins, "installed", None)
    if not plugins.enabled or not plugins.min_versions or installed_of is None:
        return
    installed: dict[str, str] = installed_of()
    known = set(installed) | set(installed.values())
    listing = ", ".join(name if alias == name else f"{name} (alias {alias})"
                        for name, alias in installed.items()) or "none"
    for key in plugins.min_versions:
        if key not in known:
            ctx.warn(f"plugins.min_versions.{key}",
                     f"names no plugin in plugins.dir ({plugins.dir}): no manifest name or alias is '{key}' "
                     f"(installed: {listing}); the floor applies once such a plugin is installed, fix the key "
                     f"if it is a typo")


def check(ctx: Any) -> None:
    """limits, observability, metrics, security, advanced, plugins.min_versions keys."""
    cfg = ctx.cfg
    _limits(ctx)
    _floor_keys(ctx)
    obs = cfg.observability
    if obs.otlp_url is not None:
        ctx.url(obs.otlp_url, "observability.otlp_url", allow_private=False)
    if obs.request_log_webhook_url is not None:
        ctx.url(obs.request_log_webhook_url, "observability.request_log_webhook_url", allow_private=False,
                require_https=True)
    for name, default in (("max_inflight_webhook_deliveries", 64), ("webhook_delivery_timeout_secs", 2),
                          ("request_log_rotate_mb", 100)):
        if getattr(obs, name) < 1:
            ctx.err(f"observability.{name}", f"must be ≥ 1 (default {default})")
    if obs.request_log_file is not None and not obs.request_log_file.strip():
        ctx.err("observability.request_log_file", "is empty; give a file path (or omit the key)")
    elif obs.request_log_file is not None:
        fault = log_file_fault(obs.request_log_file)
        if fault:
            ctx.err("observability.request_log_file", fault)
    if cfg.metrics is not None and cfg.metrics.buffer_seconds < 1:
        ctx.err("metrics.buffer_seconds", "must be ≥ 1 (seconds of observations to retain, e.g. 60)")
    if cfg.security.allow_all_metadata:
        ctx.warn("security.allow_all_metadata", "true disables the cloud-metadata SSRF denylist for every "
                                                "egress path; development use only")
    adv = cfg.advanced
    for name, default in (("rate_sweep_interval", 256), ("usage_flush_interval_ms", 100)):
        if getattr(adv, name) < 1:
            ctx.err(f"advanced.{name}", f"must be ≥ 1 (default {default})")
    if adv.worker_threads is not None and adv.worker_threads < 1:
        ctx.err("advanced.worker_threads", "must be ≥ 1 (omit it for one per core)")
    if adv.upstream_http1_only and adv.upstream_h2_prior_knowledge:
        ctx.err("advanced.upstream_h2_prior_knowledge", "contradicts upstream_http1_only: true; keep one")


def log_file_fault(path: str) -> str:
    """What keeps this process from appending to the file at ``path`` (relative: to the working
    directory, as the boot opens it), or ``""``: a directory at the path, a missing or unwritable
    parent directory, an existing file it may not write."""
    import os
    from pathlib import Path

    file = Path(path)
    parent = file.parent
    if file.is_dir():
        return f"{path} is a directory; give a file path"
    if not parent.is_dir():
        return f"directory {parent} does not exist; create it or choose another path"
    if file.exists() and not os.access(file, os.W_OK):
        return f"{path} is not writable by this process"
    if not file.exists() and not os.access(parent, os.W_OK | os.X_OK):
        return f"directory {parent} is not writable by this process"
    return ""
