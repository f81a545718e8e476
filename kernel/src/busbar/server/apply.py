"""Live config apply: re-read both YAML files, validate everything, swap the running gateway whole.

:class:`ConfigApplier` (one per serving process) is what ``SIGHUP`` and the admin API's
``POST /api/v1/admin/config/apply`` call: ``await applier.apply(source) -> ApplyResult``.

1. Load and validate config.yaml and providers.yaml exactly as ``busbar --validate`` does (the same
   fault lines, the unsupported-key refusals, the plugin manifest check). Any fault: nothing
   changes, the running config keeps serving, the lines are logged and returned.
2. With plugins enabled, rescan ``plugins.dir`` with the new ``plugins:`` block
   (``PluginReloader.reload_faults``; a fault keeps the running plugin set and refuses the apply).
3. Build a new ``Gateway`` (credentials resolved, hook chains opened) and carry the learned health
   over by model identity (:func:`carry_health`): a lane whose model and provider are unchanged is
   the very same object (its permits in flight, budget, latency EWMA, breaker cells); a lane whose
   settings changed but that still names the same provider and upstream model keeps its hard-down
   latch, EWMA, counters and breaker state; a member keeps its pool's breaker cell when the pool's
   breaker settings are unchanged. The upstream client (and its warm connections), the Prometheus
   registry (counters continue; gauges read the new gateway) and the store with its usage flusher
   are kept.
4. Swap ``AppState.gateway`` in one assignment: a request already running finishes on the gateway it
   started with; the next one sees the new one. The old hook instances close
   ``busbar.hooks.RETIRE_AFTER_S`` later.

Every applied change increments ``config_version`` (1 = the boot config; it restarts at 1 with the
process). :attr:`ConfigApplier.versions` keeps the last :data:`KEEP_VERSIONS`
(:class:`ConfigVersion`: number, time, source, changed key paths, ``reload_to_apply``), and
:meth:`ConfigApplier.diff` compares two retained versions key by key.

``reload_to_apply``: changed keys this process cannot take live (the listeners and their TLS, the
connection timeouts baked into the listener, the upstream client's settings, the observability
sinks, the store, the ``auth:`` chain, the group limits and rate card); they are stored in the
version and act at the next restart
(:data:`RESTART_TO_APPLY`).

Source: docs/operations.md#changing-config-live
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from busbar.proxy.breaker import BreakerCell

if TYPE_CHECKING:
    from busbar.config.load import LoadedConfig
    from busbar.proxy.gateway import Gateway
    from busbar.server.app import AppState

__all__ = ["KEEP_VERSIONS", "RESTART_TO_APPLY", "ApplyResult", "ConfigApplier", "ConfigVersion", "carry_health",
           "changed_paths", "flatten"]

log = logging.getLogger("busbar.config")

KEEP_VERSIONS = 20
"""Config versions retained for ``versions`` / ``diff`` (older ones are dropped)."""

RESTART_TO_APPLY: tuple[str, ...] = (
    "listen", "admin_listen", "admin_insecure", "tls", "admin_tls",
    "limits.tls_handshake_timeout_secs", "limits.header_read_timeout_secs", "limits.keep_alive_timeout_secs",
    "limits.upstream_request_timeout_secs", "limits.pool_max_idle_per_host", "limits.pool_idle_timeout_secs",
    "security", "providers.*.allow_metadata_hosts",
    "observability.otlp_url", "observability.request_log_webhook_url",
    "observability.max_inflight_webhook_deliveries", "observability.webhook_delivery_timeout_secs",
    "store", "advanced", "auth", "plugins.enabled", "groups", "rate_card", "per_request_fee",
)
"""Key path prefixes (``*`` = any one map key) a live apply stores but cannot act on."""


@dataclass(frozen=True)
class ConfigVersion:
    """One applied config: ``version`` (1 = boot), ``applied_at`` (Unix seconds), ``source`` (``boot``,
    ``sighup``, ``api``), ``changed`` (key paths that differ from the previous version),
    ``reload_to_apply`` (the subset that acts only after a restart), ``flat`` (path -> value of the
    whole config; secret *references* only, never a resolved secret)."""

    version: int
    applied_at: float
    source: str
    changed: tuple[str, ...]
    reload_to_apply: tuple[str, ...]
    flat: Mapping[str, Any] = field(repr=False)

    def summary(self) -> dict[str, Any]:
        """The JSON shape of ``GET /api/v1/admin/config/versions`` entries."""
        return {"version": self.version, "applied_at": self.applied_at, "source": self.source,
                "changed": list(self.changed), "reload_to_apply": list(self.reload_to_apply)}


@dataclass(frozen=True)
class ApplyResult:
    """What one apply did. ``applied``: the new config is serving; ``config_version``: the version now
    serving; ``faults``: why it was refused (the ``--validate`` lines); ``changed`` /
    ``reload_to_apply``: as :class:`ConfigVersion`."""

    applied: bool
    config_version: int
    faults: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    reload_to_apply: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON body of ``POST /api/v1/admin/config/apply`` (HTTP 200 applied, 400 refused)."""
        return {"applied": self.applied, "config_version": self.config_version, "faults": list(self.faults),
                "changed": list(self.changed), "reload_to_apply": list(self.reload_to_apply)}


def flatten(loaded: LoadedConfig) -> dict[str, Any]:
    """``loaded`` as ``{key path: JSON value}``: maps are walked (``pools.fast.failover.max_hops``),
    lists and scalars are leaves; the providers.yaml catalog appears under ``catalog.<name>``."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out[prefix] = value
    walk("", loaded.config.model_dump(mode="json"))
    walk("catalog", {name: p.model_dump(mode="json") for name, p in loaded.catalog.items()})
    return out


def changed_paths(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Key paths added, removed or changed between two :func:`flatten` results, sorted."""
    return sorted(p for p in old.keys() | new.keys() if old.get(p, _MISSING) != new.get(p, _MISSING))


_MISSING = object()


def _restart_keys(changed: list[str]) -> list[str]:
    def hit(path: str) -> bool:
        parts = path.split(".")
        for pattern in RESTART_TO_APPLY:
            pat = pattern.split(".")
            if len(parts) >= len(pat) and all(q in ("*", p) for q, p in zip(pat, parts, strict=False)):
                return True
        return False
    return [p for p in changed if hit(p)]


def carry_health(old: Gateway, new: Gateway) -> None:
    """Move ``old``'s learned state into ``new`` by model identity (see the module docstring, step 3).
    Mutates ``new`` only (its lanes, members and ``cells_by_lane``)."""
    for name, lane in list(new.lanes.items()):
        prev = old.lanes.get(name)
        if prev is None or prev.provider.name != lane.provider.name or prev.upstream_model != lane.upstream_model:
            continue                                 # a new or different model: it starts fresh
        if prev.provider == lane.provider and old.config.models[name] == new.config.models[name]:
            new.lanes[name] = prev                   # unchanged: the very lane, permits in flight included
            continue
        lane.hard_down_until, lane.latency_ms = prev.hard_down_until, prev.latency_ms
        lane.ok, lane.err, lane.client_fault = prev.ok, prev.err, prev.client_fault
        lane.default_cell = prev.default_cell
        if old.config.models[name].max_requests == new.config.models[name].max_requests:
            lane.budget = prev.budget
    for pool in new.pools.values():
        before = old.pools.get(pool.name)
        members = {m.lane.name: m for m in before.members} if before is not None else {}
        for m in pool.members:
            m.lane = new.lanes[m.lane.name]
            pm = members.get(m.lane.name)
            if pm is None:
                continue
            m.current = pm.current
            if pm.cell.cfg == m.cell.cfg:
                m.cell = pm.cell
            else:
                _copy_cell(pm.cell, m.cell)
    if old.providers == new.providers:
        new.adhoc = old.adhoc                        # ad-hoc lanes are bound to unchanged providers
    new.cells_by_lane = {name: [lane.default_cell] for name, lane in new.lanes.items()}
    for pool in new.pools.values():
        for m in pool.members:
            new.cells_by_lane[m.lane.name].append(m.cell)


def _copy_cell(src: BreakerCell, dst: BreakerCell) -> None:
    dst.state, dst.streak, dst.trips = src.state, src.streak, src.trips
    dst.cooldown_until, dst.throttled_until = src.cooldown_until, src.throttled_until
    dst.window.extend(src.window)


SwapHook = Callable[["Gateway", "Gateway"], None]


class ConfigApplier:
    """Applies config changes to a serving process (see the module docstring).

    Args:
        state: the server's ``AppState`` (``state.gateway`` is swapped).
        loaded: the boot config (version 1).
        env: environment for interpolation and ``{ env: }`` references.

    Attributes:
        on_swap: called ``fn(old, new)`` on the event loop after each swap (the lifecycle restarts
            its health probers there); an exception is logged and never undoes the swap.
    """

    def __init__(self, state: AppState, loaded: LoadedConfig, env: Mapping[str, str] = os.environ) -> None:
        self.state, self.env = state, env
        self.config_path, self.providers_path = loaded.config_path, loaded.providers_path
        self.on_swap: list[SwapHook] = []
        self._lock = asyncio.Lock()
        self._versions = [ConfigVersion(1, time.time(), "boot", (), (), flatten(loaded))]

    @property
    def config_version(self) -> int:
        """The version now serving (1 = the boot config)."""
        return self._versions[-1].version

    @property
    def versions(self) -> list[ConfigVersion]:
        """Retained versions, oldest first."""
        return list(self._versions)

    def diff(self, a: int, b: int) -> list[dict[str, Any]] | None:
        """``[{path, from, to}]`` between retained versions ``a`` and ``b`` (a missing side is
        ``None``), or ``None`` when either is no longer retained."""
        by = {v.version: v for v in self._versions}
        if a not in by or b not in by:
            return None
        fa, fb = by[a].flat, by[b].flat
        return [{"path": p, "from": fa.get(p), "to": fb.get(p)} for p in changed_paths(fa, fb)]

    async def apply(self, source: str = "api") -> ApplyResult:
        """Re-read, validate and swap (see the module docstring). Never raises for a bad config: a
        refusal is an ``ApplyResult`` with ``applied=False`` and the fault lines. Applies run one at
        a time."""
        async with self._lock:
            faults, loaded = await asyncio.to_thread(self._load)
            if loaded is None:
                return self._refused(source, faults)
            old = self.state.gateway
            if loaded.config.plugins.enabled and old.plugins is not None:
                faults = await asyncio.to_thread(old.plugins.reload_faults, loaded.config.plugins)
                if faults:
                    return self._refused(source, faults)
            elif loaded.config.plugins.enabled != old.config.plugins.enabled:
                return self._refused(source, ["config.yaml: plugins.enabled: turning the plugin subsystem on or "
                                              "off needs a restart; restart busbar to apply it"])
            try:
                new = self._build(loaded, old)
            except _Refused as e:
                return self._refused(source, e.faults)
            flat = flatten(loaded)
            changed = changed_paths(self._versions[-1].flat, flat)
            restart = _restart_keys(changed)
            self.state.gateway = new               # the swap: one assignment
            _retire(old, new)
            for fn in self.on_swap:
                try:
                    fn(old, new)
                except Exception:  # a follower's fault never undoes the swap
                    log.exception("config apply: an on_swap follower raised")
            version = ConfigVersion(self.config_version + 1, time.time(), source, tuple(changed), tuple(restart), flat)
            self._versions = [*self._versions, version][-KEEP_VERSIONS:]
            for w in loaded.warnings:
                log.warning("%s", w)
            log.info("config apply (%s): version %d now serving; %d key(s) changed%s", source, version.version,
                     len(changed), f"; restart to apply: {', '.join(restart)}" if restart else "")
            return ApplyResult(True, version.version, (), tuple(changed), tuple(restart))

    def _refused(self, source: str, faults: list[str]) -> ApplyResult:
        for line in faults:
            log.error("config apply (%s) refused: %s", source, line)
        log.error("config apply (%s): %d fault(s); version %d keeps serving", source, len(faults),
                  self.config_version)
        return ApplyResult(False, self.config_version, tuple(faults))

    def _load(self) -> tuple[list[str], LoadedConfig | None]:
        """Both files through the ``--validate`` pipeline (runs on a worker thread: file I/O)."""
        from busbar.config.errors import ConfigError
        from busbar.config.load import load_config
        from busbar.server.boot import check_plugins

        try:
            loaded = load_config(self.config_path, self.providers_path, self.env, check_support=True)
        except ConfigError as e:
            return list(e.faults), None
        faults = check_plugins(loaded, self.env)
        return (faults, None) if faults else ([], loaded)

    def _build(self, loaded: LoadedConfig, old: Gateway) -> Gateway:
        from busbar.config.secrets import SecretError
        from busbar.hooks import HookBootError
        from busbar.loader import SecretResolutionError
        from busbar.proxy.credentials import Credentials
        from busbar.proxy.gateway import Gateway

        plugins = old.plugins.current if old.plugins is not None else None
        resolver = None
        if plugins is not None:
            from busbar.loader.secrets import SecretModuleResolver

            resolver = SecretModuleResolver(plugins)
        try:
            new = Gateway.build(loaded, self.env, module_resolver=resolver, plugins=plugins, clock=old.clock)
        except (SecretError, SecretResolutionError) as e:
            raise _Refused([str(e)]) from None
        except HookBootError as e:
            raise _Refused(list(e.faults)) from None
        fresh, new.upstream = new.upstream, old.upstream        # keep the warm upstream client
        new.credentials = Credentials(old.upstream)
        asyncio.get_running_loop().create_task(fresh.aclose())
        new.plugins = old.plugins
        carry_health(old, new)
        from busbar.proxy.metrics import Metrics

        if isinstance(old.metrics, Metrics) and isinstance(new.metrics, Metrics):
            new.metrics = old.metrics                 # one registry for the process: counters continue
            old.metrics.follow(new)
        for attr in _PROCESS_WIDE:
            if hasattr(old, attr):
                setattr(new, attr, getattr(old, attr))
        from busbar.limits.gate import carry_limits

        carry_limits(old, new)        # counters, reservations, runtime groups; spend repriced
        from busbar.store.shared import bind_hooks

        bind_hooks(new)               # the new hook instances' shared state (the process's store)
        return new


_PROCESS_WIDE = ("store", "flusher", "keysync", "state_bridge",
                 "frontdoor", "signing", "audit", "runtime_groups", "limiter")
"""Gateway attributes opened once per process: the store and its loops (the ones ``Gateway.build``
made are never opened, so there is nothing to close), the front door and its signing keyring
(``busbar.auth.boot``; an ``auth:`` change is restart-to-apply, so the running chain never has a
gap), the admin audit log and the runtime groups (``busbar.admin.server``), the group limits with
their in-memory windows and reservations (``busbar.limits``: a ``groups:`` / ``rate_card`` change is
restart-to-apply, so no budget restarts at zero). A new gateway takes the old one's."""


class _Refused(Exception):
    def __init__(self, faults: list[str]) -> None:
        super().__init__("; ".join(faults))
        self.faults = faults


def _retire(old: Gateway, new: Gateway) -> None:
    """Close ``old``'s hook instances once requests running on them have had time to finish."""
    if old.hooks is None or old.hooks is new.hooks:
        return
    from busbar.hooks import RETIRE_AFTER_S

    timer = threading.Timer(RETIRE_AFTER_S, old.hooks.close)
    timer.daemon = True
    timer.start()
