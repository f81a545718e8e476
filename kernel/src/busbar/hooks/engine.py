"""The gateway's hook engine: every pool's chain and every hook instance, built once at boot.

``build_engine(loaded, gw, plugins) -> HookEngine | None``. ``None`` when no pool names a
non-weighted strategy or a module ref and ``global_hooks`` is empty: then the request path reads one
attribute, finds nothing, and runs today's SWRR code (no projection, no hook object).

Otherwise :class:`HookEngine` holds ``chains`` (pool name -> :class:`PoolChain`, only for pools that
have something to do: ``hooks: [weighted]`` alone builds nothing), ``direct`` (the globals, for
model and ad-hoc routes), and the opened :class:`HookFacade` instances: one per distinct
``(module, settings, effective grant)``, shared by every ref that names the same instance. Each
facade is told its settings with a ``configure`` push on a background thread (the ack is recorded,
never awaited by the boot).

Raises :class:`HookBootError` (one line per fault) for the faults of ``busbar.hooks.check`` and
for a plugin whose ``busbar_open`` fails.

Source: docs/hooks.md#configuring, docs/hooks.md#management-messages, docs/hooks.md#performance
(pools with no ``hooks:`` list run the zero-overhead case).
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import orjson
from busbar_sdk.settings_schema import exports_status_metrics
from busbar_sdk.wire import MODEL_TAG_PREFIX

from busbar.faults import FaultList
from busbar.hooks.chain import PoolChain
from busbar.hooks.check import TERMINALS, check, kind_of, resolve_fallback
from busbar.hooks.facade import HookFacade
from busbar.hooks.projection import candidate_static, cost_per_mtok
from busbar.hooks.specs import GateSpec, OnError, TapSpec
from busbar.hooks.strategies import STRATEGIES

if TYPE_CHECKING:
    from busbar.config.load import LoadedConfig
    from busbar.loader.registry import PluginSet
    from busbar.proxy.context import GatewayContext

log = logging.getLogger("busbar.hooks")

__all__ = ["HookBootError", "HookEngine", "build_engine", "wants_engine"]


class HookBootError(FaultList):
    """The hook config cannot run with the loaded plugins; ``faults``: one line each."""


class HookEngine:
    """Chains and instances of one gateway (see the module docstring)."""

    def __init__(self, chains: dict[str, PoolChain], direct: PoolChain | None, facades: list[HookFacade]):
        self.chains = chains
        self.direct = direct
        self.facades = facades

    def facade(self, name: str) -> HookFacade | None:
        """The first instance named ``name`` (its module), for management calls."""
        return next((f for f in self.facades if f.name == name), None)

    def push_configure(self) -> None:
        """Tell every instance its settings (``configure``, settings_version 1), off the boot path."""
        for f in self.facades:
            threading.Thread(target=f.configure, name=f"busbar-hook-configure-{f.name}", daemon=True).start()

    def close(self) -> None:
        for f in self.facades:
            f.close()


def wants_engine(cfg: Any) -> bool:
    """Does any pool or ``global_hooks`` ask for hooks beyond the weighted floor?"""
    if cfg.global_hooks:
        return True
    return any(e != "weighted" for p in cfg.pools.values() for e in p.hooks)


def build_engine(loaded: LoadedConfig, gw: GatewayContext, plugins: PluginSet | None) -> HookEngine | None:
    """Build the engine for ``gw`` (see the module docstring). Raises :class:`HookBootError`."""
    cfg = loaded.config
    if not wants_engine(cfg):
        return None
    faults = check(cfg, plugins, src=loaded.config_path.name)
    if faults:
        raise HookBootError(faults)
    b = _Builder(cfg, plugins, loaded.config_path.name)
    globals_ = [(f"global_hooks[{i}]", r, True) for i, r in enumerate(cfg.global_hooks)]
    g_gates, g_taps = b.specs(globals_, globals_)
    chains: dict[str, PoolChain] = {}
    max_bytes = cfg.limits.request_body_max_bytes
    rate_card = cfg.rate_card
    for pname, pcfg in cfg.pools.items():
        refs = [(f"pools.{pname}.hooks[{i}]", e, False) for i, e in enumerate(pcfg.hooks) if not isinstance(e, str)]
        strategy = next((e for e in pcfg.hooks if isinstance(e, str)), None)
        if not refs and not globals_ and strategy in (None, "weighted"):
            continue
        gates, taps = b.specs(refs, refs + globals_)
        pool = gw.pools[pname]
        costs = {m.index: cost_per_mtok(rate_card, m.lane) for m in pool.members}
        chains[pname] = PoolChain(
            pname, strategy=strategy, transforms=[g for g in gates + g_gates if g.transform],
            gates=[g for g in gates + g_gates if not g.transform], taps=taps + g_taps, costs=costs,
            tags_of={m.index: frozenset((*m.tags, MODEL_TAG_PREFIX + m.lane.name)) for m in pool.members},
            all_idx=tuple(m.index for m in pool.members), max_rewrite_bytes=max_bytes,
            statics={m.index: candidate_static(m, costs[m.index]) for m in pool.members}, members=pool.members)
    direct = None
    if globals_:
        direct = PoolChain("", strategy=None, transforms=[g for g in g_gates if g.transform],
                           gates=[g for g in g_gates if not g.transform], taps=g_taps, costs={},
                           tags_of={0: frozenset()}, all_idx=(0,), max_rewrite_bytes=max_bytes)
    if b.faults:
        b.close()
        raise HookBootError(b.faults)
    return HookEngine(chains, direct, list(b.facades.values()))


class _Builder:
    """Opens instances (deduplicated) and resolves specs, memoized per ref."""

    def __init__(self, cfg: Any, plugins: Any, src: str):
        self.cfg, self.plugins, self.src = cfg, plugins, src
        self.facades: dict[tuple[str, bytes, str, str], HookFacade] = {}
        self.gates: dict[int, GateSpec] = {}
        self.taps: dict[int, TapSpec] = {}
        self.faults: list[str] = []

    def facade(self, path: str, ref: Any) -> HookFacade:
        plugin = self.plugins.get(ref.module)
        grant = plugin.grant(ref.prompt, ref.user)
        key = (ref.module, orjson.dumps(ref.settings, option=orjson.OPT_SORT_KEYS), grant.prompt, grant.user)
        f = self.facades.get(key)
        if f is None:
            if grant.prompt != ref.prompt or grant.user != ref.user:
                log.warning("%s: %s: the manifest needs (prompt: %s, user: %s) cap the configured grant (prompt: "
                            "%s, user: %s); it receives prompt: %s, user: %s", self.src, path,
                            plugin.manifest.needs.prompt, plugin.manifest.needs.user, ref.prompt, ref.user,
                            grant.prompt, grant.user)
            instance = plugin.open(ref.settings, prompt=ref.prompt, user=ref.user)
            schema = getattr(plugin.manifest, "settings_schema", None)
            f = HookFacade(ref.module, instance, prompt=instance.grant.prompt, user=instance.grant.user,
                           settings=ref.settings, schema=schema if isinstance(schema, (str, dict)) else None)
            f.exports_status = exports_status_metrics(schema)
            self.facades[key] = f
        return f

    def specs(self, refs: list[tuple[str, Any, bool]],
              scope: list[tuple[str, Any, bool]]) -> tuple[list[GateSpec], list[TapSpec]]:
        gates: list[GateSpec] = []
        taps: list[TapSpec] = []
        for pos, (path, ref, in_global) in enumerate(refs):
            try:
                if kind_of(ref, in_global=in_global) == "tap":
                    taps.append(self.tap(path, ref, in_global, pos))
                else:
                    gates.append(self.gate(path, ref, in_global, pos, scope))
            except Exception as e:  # noqa: BLE001 - plugin code (busbar_open) or an odd shape: one fault line
                self.faults.append(f"{self.src}: {path}: {e}")
        return gates, taps

    def tap(self, path: str, ref: Any, in_global: bool, pos: int) -> TapSpec:
        t = self.taps.get(id(ref))
        if t is None:
            t = TapSpec(ref.module, path, self.facade(path, ref), ref.at, (ref.priority, 0 if in_global else 1, pos),
                        in_global)
            self.taps[id(ref)] = t
        return t

    def gate(self, path: str, ref: Any, in_global: bool, pos: int, scope: list[tuple[str, Any, bool]]) -> GateSpec:
        g = self.gates.get(id(ref))
        if g is not None:
            return g
        oe = ref.on_error
        if isinstance(oe, str):
            on_error = OnError("strategy", strategy=oe) if oe not in TERMINALS else OnError(oe)
        elif oe.hook in TERMINALS:
            on_error = OnError(oe.hook)
        elif oe.hook in STRATEGIES:
            on_error = OnError("strategy", strategy=oe.hook)
        else:
            found = resolve_fallback(oe.hook, scope)
            if found is None:                       # check() proved this cannot happen
                raise ValueError(f"on_error.hook: unknown hook '{oe.hook}'")
            fpath, fref, fglobal = found
            fpos = next(i for i, item in enumerate(scope) if item[1] is fref)
            fscope = scope if not fglobal else [s for s in scope if s[2]]
            if fglobal:
                fpos = next(i for i, item in enumerate(fscope) if item[1] is fref)
            on_error = OnError("hook", hook=self.gate(fpath, fref, fglobal, fpos, fscope))
        facade = self.facade(path, ref)
        g = GateSpec(ref.module, path, facade, ref.timeout_ms, on_error, ref.on_empty,
                     transform=facade.prompt == "rw", rank=(ref.priority, 0 if in_global else 1, pos),
                     is_global=in_global, shadow=bool(getattr(ref, "shadow", False)))
        self.gates[id(ref)] = g
        return g

    def close(self) -> None:
        for f in self.facades.values():
            f.close()
