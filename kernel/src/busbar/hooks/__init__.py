"""The hooks engine on the request path: native strategies, gates, taps, reconcile, management.

Public API::

    attach(gw, plugins) -> HookEngine | None     # boot: build, set gw.hooks, metrics, configure push
    reattach(gw, plugins) -> bool                # plugin hot reload: rebuild and swap whole
    HookEngine.chains[pool] -> PoolChain          # only pools with something to do
    HookEngine.direct -> PoolChain | None         # global_hooks, for model / ad-hoc routes
    await PoolChain.plan(gw, call, pool) -> Plan  # per request, before the failover walk
    await PoolChain.plan_lane(gw, call, lane) -> Plan
    Plan.reply | .excluded | .order | .pick(pool, now, excluded) | .stamp(reply)
    HookRun (Call.hooks): .attempt(...), .finish(reply), .stream_done(outcome)   # taps
    HookFacade.configure(...) / .describe() / .status()                          # management
    check(cfg, plugins) -> list[str]              # boot faults; HookBootError(faults)

Module map (what lives where; nothing here imports the proxy engine): ``projection`` (the wire
view), ``strategies`` (native rankings), ``reply`` (arm normalizers, grants on the way back),
``reconcile`` (pure), ``specs`` (gate/tap specs), ``chain`` (per-pool decision), ``plan`` (what the
walk gets), ``run`` (per-request state, tap stages), ``fire`` (concurrent gates, deadlines),
``workers`` (bounded threads), ``taps`` (bounded delivery), ``facade`` (typed calls per op),
``mgmt`` (configure/describe/status), ``check`` (boot faults), ``engine`` (build), ``metrics``.
The gateway is seen through ``busbar.proxy.context.GatewayContext``, imported for typing only.

Source: docs/hooks.md, docs/routing.md.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from busbar.hooks.chain import PoolChain
from busbar.hooks.check import check
from busbar.hooks.engine import HookBootError, HookEngine, build_engine
from busbar.hooks.facade import HookFacade
from busbar.hooks.plan import ROUTE_POLICY, Plan
from busbar.hooks.run import HookRun

if TYPE_CHECKING:
    from busbar.loader.registry import PluginSet
    from busbar.proxy.context import GatewayContext

log = logging.getLogger("busbar.hooks")

#: How long a replaced engine's instances stay open for in-flight requests after a reload (s).
RETIRE_AFTER_S = 60.0

__all__ = ["ROUTE_POLICY", "HookBootError", "HookEngine", "HookFacade", "HookRun", "Plan", "PoolChain",
           "attach", "build_engine", "check", "reattach"]


def attach(gw: GatewayContext, plugins: PluginSet | None) -> HookEngine | None:
    """Build ``gw``'s hook engine from its config and the loaded plugin set and install it as
    ``gw.hooks`` (``None`` when nothing asks for hooks). Raises :class:`HookBootError`."""
    engine = build_engine(gw.loaded, gw, plugins)
    gw.hooks = engine
    if engine is not None:
        registry = getattr(gw.metrics, "registry", None)
        if registry is not None:
            from busbar.hooks.metrics import HookCollector

            registry.register(HookCollector(gw))
        engine.push_configure()
    return engine


def reattach(gw: GatewayContext, plugins: PluginSet | None) -> bool:
    """After a plugin hot reload: rebuild the engine on the new set and swap it in whole; the old
    instances close after :data:`RETIRE_AFTER_S`. On any fault the running engine stays (False)."""
    try:
        engine = build_engine(gw.loaded, gw, plugins)
    except HookBootError as e:
        log.error("plugin reload: hooks keep running on the previous plugin set: %s", "; ".join(e.faults))
        return False
    old, gw.hooks = gw.hooks, engine
    if engine is not None:
        from busbar.store.shared import bind_hooks

        bind_hooks(gw)                   # shared state for the new instances (a running shared store)
        engine.push_configure()
    if old is not None:
        timer = threading.Timer(RETIRE_AFTER_S, old.close)
        timer.daemon = True
        timer.start()
    return True
