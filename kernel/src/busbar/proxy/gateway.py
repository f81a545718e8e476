"""The running gateway: runtime objects built from a ``LoadedConfig``, plus the upstream client.

``Gateway.build(loaded, env, clock=time.monotonic)`` resolves every provider credential, builds
lanes, pools and breaker cells, and opens the shared upstream client (``gw.upstream``, a
``busbar.proxy.upstream.Upstream``: aiohttp on the SSRF-guarded connector; with ``transport=`` an
``httpx`` transport, e.g. ``httpx.MockTransport`` in tests, behind the same seam). Target resolution:
``target(name)`` -> ``Pool`` | ``Lane`` | ``None``; ``adhoc_lane(provider, model)`` for the
``/{provider}/{model}/v1/messages`` route (no pool; lane-default cell; held in the bounded LRU
cache ``gw.adhoc``, a ``busbar.proxy.adhoc.AdhocLanes``).

``plugins`` (a loaded ``busbar.loader.PluginSet``) lets pools and ``global_hooks`` name hook
plugins; their chains are built here (``busbar.hooks.attach``, ``gw.hooks``).

Raises ``busbar.config.secrets.SecretError`` for an unresolvable credential and
``busbar.hooks.HookBootError`` for a hook config the plugin set cannot serve, and
``busbar.store.StoreBootError`` for a store plugin that is not loaded or refuses its settings.
Source: docs/config-at-a-glance.md#models (Direct routing), docs/config-at-a-glance.md#pools.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import httpx

from busbar.config.load import LoadedConfig
from busbar.config.schema import BreakerConfig
from busbar.config.secrets import ModuleResolver, resolve_secret
from busbar.config.validate import _merged_provider_fields
from busbar.hooks import HookEngine, attach
from busbar.limits.gate import Limits
from busbar.proto.registry import get_dialect
from busbar.proxy.adhoc import AdhocLanes
from busbar.proxy.breaker import BreakerCell
from busbar.proxy.credentials import Credentials
from busbar.proxy.egress import auth_headers, make_client
from busbar.proxy.metrics import Metrics, NullMetrics
from busbar.proxy.runtime import Lane, Member, Pool, Provider
from busbar.proxy.upstream import AiohttpUpstream, HttpxUpstream, Upstream
from busbar.store.attach import attach_store

if TYPE_CHECKING:
    from busbar_sdk.ssrf import HostGuard
    from busbar_sdk.store import Store

    from busbar.admin.audit import AuditLog
    from busbar.admin.provision import RuntimeGroups
    from busbar.auth.chain import FrontDoor
    from busbar.auth.signing import Keyring
    from busbar.loader.registry import PluginSet
    from busbar.loader.reload import PluginReloader
    from busbar.store.flusher import UsageFlusher
    from busbar.store.shared import StoreBridge
    from busbar.store.sync import KeySync

log = logging.getLogger("busbar")


class Gateway:
    """Everything the request path needs; one instance per process (rebuilt on config reload).
    Satisfies ``busbar.proxy.context.GatewayContext`` (what the hooks engine reads).

    ``store`` / ``flusher`` / ``keysync`` / ``state_bridge``: the configured store (memory by
    default), its usage write-behind, its key mirror and hook plugins' way to it (shared state),
    set by ``build`` (``busbar.store.attach``); opened by the serving coroutine
    (``busbar.store.attach.start_store``)."""

    store: Store
    flusher: UsageFlusher
    keysync: KeySync
    state_bridge: StoreBridge

    def __init__(self, loaded: LoadedConfig, providers: dict[str, Provider], lanes: dict[str, Lane],
                 pools: dict[str, Pool], upstream: Upstream, clock: Callable[[], float]):
        self.loaded = loaded
        self.config = loaded.config
        self.limits = loaded.config.limits
        self.providers = providers
        self.lanes = lanes
        self.pools = pools
        self.upstream = upstream
        self.clock = clock
        self.adhoc = AdhocLanes(clock)
        self.auth = {name: auth_headers(p) for name, p in providers.items()
                     if p.protocol in ("openai", "anthropic")}
        self.credentials = Credentials(upstream)
        self.metrics: NullMetrics = NullMetrics()
        self.plugins: PluginReloader | None = None   # when plugins are enabled
        self.hooks: HookEngine | None = None         # when any pool or global_hooks has hooks
        self.frontdoor: FrontDoor | None = None      # auth.chain (busbar.auth.boot.start_front_door)
        self.signing: Keyring | None = None          # the virtual-key signing keyring (busbar.auth.signing)
        self.audit: AuditLog | None = None           # the admin audit log (busbar.admin.server)
        self.runtime_groups: RuntimeGroups | None = None   # auto-provisioned groups (busbar.admin.provision)
        self.limiter: Limits | None = None           # when groups: or rate_card: is set
        self.cells_by_lane: dict[str, list[BreakerCell]] = {name: [lane.default_cell] for name, lane in lanes.items()}
        for pool in pools.values():
            for m in pool.members:
                self.cells_by_lane[m.lane.name].append(m.cell)

    @classmethod
    def build(cls, loaded: LoadedConfig, env: Mapping[str, str], *, clock: Callable[[], float] = time.monotonic,
              transport: httpx.AsyncBaseTransport | None = None, module_resolver: ModuleResolver | None = None,
              plugins: PluginSet | None = None) -> Gateway:
        cfg = loaded.config
        from busbar_sdk.ssrf import set_deployment_policy

        from busbar.security.ssrf import policy_of

        sec = cfg.security                   # plugin egress guards start from it (busbar_sdk.ssrf)
        set_deployment_policy(policy_of(sec))
        providers: dict[str, Provider] = {}
        for name, dep in cfg.providers.items():
            merged = _merged_provider_fields(loaded, name)
            key = resolve_secret(dep.api_key, env, where=f"providers.{name}.api_key",
                                 module_resolver=module_resolver)
            providers[name] = Provider(
                name=name, protocol=merged["protocol"], dialect=get_dialect(merged["protocol"]),
                base_url=str(merged["base_url"]).rstrip("/"), path=merged.get("path"),
                path_base=merged.get("path_base"), auth=merged.get("auth"),
                error_map=merged["error_map"], api_key=key, token_url=merged.get("token_url"),
                scope=merged.get("scope"), subject=merged.get("subject"), health=merged.get("health"))
        default_breaker = BreakerConfig()
        lanes = {name: Lane(name, providers[m.provider], m, BreakerCell(default_breaker, hash(name)))
                 for name, m in cfg.models.items()}
        pools: dict[str, Pool] = {}
        for pname, pcfg in cfg.pools.items():
            members = [Member(lanes[mc.model], mc, BreakerCell(pcfg.breaker, hash((pname, i))), i)
                       for i, mc in enumerate(pcfg.members)]
            pools[pname] = Pool(pname, pcfg, members)
        upstream: Upstream
        if transport is None:
            upstream = _guarded_upstream(loaded)
        else:
            upstream = HttpxUpstream(make_client(cfg.limits, transport))
        gw = cls(loaded, providers, lanes, pools, upstream, clock)
        gw.metrics = Metrics(gw) if cfg.metrics is not None else NullMetrics()
        attach(gw, plugins)          # hook chains (None when nothing asks for hooks)
        attach_store(gw, plugins)    # gw.store, gw.flusher, gw.keysync (opened by the server)
        gw.limiter = Limits.build(cfg, getattr(gw.metrics, "registry", None))   # groups, rate card
        return gw

    def target(self, name: str) -> Pool | Lane | None:
        """A pool by name, else a model (lane) by name, else ``None``."""
        pool = self.pools.get(name)
        if pool is not None:
            return pool
        return self.lanes.get(name)

    def adhoc_lane(self, provider: str, model: str) -> Lane | None:
        """A lane for ``/{provider}/{model}/v1/messages`` (the provider's credential, no pool), or
        ``None`` when ``provider`` is not configured. ``model`` must already pass
        ``busbar.modelname.name_fault``."""
        prov = self.providers.get(provider)
        if prov is None:
            return None
        return self.adhoc.get(prov, model)

    def routable_names(self) -> list[str]:
        """Pools then models, for ``GET /v1/models``."""
        return list(self.pools) + [m for m in self.lanes if m not in self.pools]

    def any_usable(self) -> bool:
        """``/healthz``: is at least one lane usable somewhere? (reads never take a probe)."""
        now = self.clock()
        for pool in self.pools.values():
            if any(m.usable(now) for m in pool.members):
                return True
        return any(lane.usable(now) and lane.default_cell.admits(now) for lane in self.lanes.values())

    def pool_usable(self, name: str) -> bool | None:
        """``/healthz?pool=<name>``: is some member of pool ``name`` usable in that pool's own cells
        (lane not hard-down, budget and a permit left, cell admitting)? ``None``: no such pool."""
        pool = self.pools.get(name)
        if pool is None:
            return None
        now = self.clock()
        return any(m.usable(now) for m in pool.members)

    async def aclose(self) -> None:
        """Close the hook instances and the upstream client (shutdown)."""
        if self.hooks is not None:
            self.hooks.close()
        await self.upstream.aclose()


def provider_guards(loaded: LoadedConfig) -> tuple[HostGuard, dict[str, HostGuard]]:
    """The SSRF guards of the provider egress path: ``(default, scoped)``.

    ``default`` carries only the deployment's ``security`` lists; ``scoped`` maps each provider that
    declares ``allow_metadata_hosts`` to a guard carrying that list (providers declaring the same
    list share one guard). A provider's exception applies to that provider and to nothing else
    (docs/security.md "Scope of an exception").

    Raises:
        ValueError: a ``security`` list entry is not a host, IP or CIDR (config validation reports it
            first).
    """
    from busbar.security.ssrf import HostGuard, policy_of

    sec = loaded.config.security
    policy = policy_of(sec)
    default = HostGuard(policy, purpose="provider", allow_private=True)
    by_allow: dict[tuple[str, ...], HostGuard] = {}
    scoped: dict[str, HostGuard] = {}
    for name, prov in loaded.config.providers.items():
        allow = tuple(prov.allow_metadata_hosts)
        if allow:
            scoped[name] = by_allow.setdefault(allow, HostGuard(policy, purpose="provider", provider_allow=allow,
                                                                allow_private=True))
    return default, scoped


def _guarded_upstream(loaded: LoadedConfig) -> AiohttpUpstream:
    """The upstream client with the SSRF guards at request and connect time (docs/security.md)."""
    limits = loaded.config.limits
    default, scoped = provider_guards(loaded)
    return AiohttpUpstream(default, total_timeout_s=limits.upstream_request_timeout_secs,
                           max_idle_per_host=limits.pool_max_idle_per_host,
                           idle_timeout_s=limits.pool_idle_timeout_secs, scoped=scoped)
