"""Validation of hook lists: each pool's ``hooks:`` and the top-level ``global_hooks:``.

Rows (docs/configuration.md#startup-checks): Pool hooks: names more than one ordering strategy; bare
name not a built-in strategy; Hook plugin subsystem disabled; Unknown hook module (only with the
loader's plugin catalog); a plugin's settings against what its manifest settings schema declares
(with a catalog that serves ``settings_schema_of``: ``required`` keys, ``x-busbar-headers`` allowlists
naming no credential, ``x-busbar-cel`` expressions that compile, ``x-busbar-egress-url`` URLs
through the SSRF guard: loopback allowed, RFC-1918 / CGNAT / link-local / metadata refused, remote must
be https://; docs/plugin-format.md "Settings schema keywords"); prompt: rw on a kind: tap hook. Seeds
003 "What Busbar guarantees when a hook misbehaves": an ``on_error: { hook: <name> }`` chain must
terminate: an unknown name, a tap, or a cycle is a startup error (the path is printed).

Naming: an inline instance answers to its ``module`` (manifest name or alias). A ``{ hook: X }``
fallback resolves to the first instance of module X in scope: for a pool's hook, that pool's
``hooks:`` then ``global_hooks:``; for a global hook, ``global_hooks:``. Strategy names and the
terminals nothing / weighted / first / reject end a chain.
"""
from __future__ import annotations

from typing import Any

from busbar.config.schema_base import ON_ERROR_TERMINALS, STRATEGIES
from busbar.config.schema_pools import HookRef, OnErrorHook

_TERMINALS = set(ON_ERROR_TERMINALS) | set(STRATEGIES)


def _ref(ctx: Any, path: str, ref: HookRef, *, in_global: bool) -> None:
    kind = ref.effective_kind(in_global=in_global)
    ctx.plugin_ref(ref.module, f"{path}.module", kind="hook")
    if ref.timeout_ms < 1:
        ctx.err(f"{path}.timeout_ms", "must be ≥ 1 (a gate's deadline in ms; default 1)")
    if kind == "tap" and ref.shadow:
        ctx.err(f"{path}.shadow", "shadow applies to gates (a tap never decides); remove it, or use kind: gate")
    if kind == "tap" and ref.prompt == "rw":
        ctx.err(f"{path}.prompt", "rw is not allowed on a tap (a tap never replies); use ro, or kind: gate")
    if kind == "tap" and "on_error" in ref.model_fields_set:
        ctx.warn(f"{path}.on_error", "ignored on a tap (a tap's errors are swallowed); remove it")
    if kind == "gate" and "at" in ref.model_fields_set and ref.at != "request":
        ctx.warn(f"{path}.at", "inert on a gate (at: picks a tap's observation stage); remove it")
    if isinstance(ref.on_error, str) and ref.on_error not in _TERMINALS:
        ctx.err(f"{path}.on_error", f"'{ref.on_error}' is not an on_error value; use nothing, weighted, "
                                    f"first, reject, a strategy name, or {{ hook: {ref.on_error} }} "
                                    f"for a named fallback")
    _settings(ctx, path, ref, in_global=in_global)


def _settings(ctx: Any, path: str, ref: HookRef, *, in_global: bool) -> None:
    """The ref's ``settings:`` against its plugin's manifest schema, when the catalog serves it
    (``busbar.hooks.check.settings_faults``: the boot's own lines, in the boot's order)."""
    schema_of = getattr(ctx.plugins, "settings_schema_of", None)
    if schema_of is None or not ctx.cfg.plugins.enabled:
        return
    from busbar_sdk.settings_schema import settings_rules

    from busbar.hooks.check import settings_faults

    schema = schema_of(ref.module)
    if not isinstance(schema, (str, dict)):
        return
    rules = settings_rules(schema)
    policy = ctx.policy if rules.required or rules.egress_urls else None
    for where, text in settings_faults(schema, ref, ctx.cfg, path, in_global=in_global, policy=policy):
        ctx.err(where, text)


def _chain(ctx: Any, path: str, ref: HookRef, scope: list[HookRef], global_ids: set[int]) -> None:
    """Prove the ``on_error`` chain starting at ``ref`` terminates; one fault at ``path`` if not."""
    seen = [ref.module]
    cur = ref
    while isinstance(cur.on_error, OnErrorHook):
        name = cur.on_error.hook
        if name in _TERMINALS:
            return
        nxt = next((h for h in scope if h.module == name), None)
        if nxt is None:
            known = ", ".join(dict.fromkeys(h.module for h in scope)) or "none"
            ctx.err(f"{path}.on_error.hook", f"unknown hook '{name}' in the on_error chain (hooks in "
                                             f"scope: {known}); name one of them, a strategy, or a "
                                             f"terminal (nothing, weighted, first, reject)")
            return
        if nxt.effective_kind(in_global=id(nxt) in global_ids) == "tap":
            ctx.err(f"{path}.on_error.hook", f"'{name}' is a tap; a tap never decides, so it cannot be "
                                             f"an on_error fallback; name a gate or a terminal")
            return
        if name in seen:
            ctx.err(f"{path}.on_error.hook", f"on_error cycle {' -> '.join(seen + [name])}; end the "
                                             f"chain with a terminal (nothing, weighted, first, reject)")
            return
        seen.append(name)
        cur = nxt


def check(ctx: Any) -> None:
    """Each pool's hooks list, then global_hooks, then every on_error chain."""
    cfg = ctx.cfg
    globals_: list[HookRef] = []
    for i, entry in enumerate(cfg.global_hooks):
        path = f"global_hooks[{i}]"
        if isinstance(entry, str):
            ctx.err(path, f"'{entry}' is a bare name; global_hooks takes inline {{ module: <hook plugin> "
                          f"}} refs (an ordering strategy belongs in a pool's hooks: list)")
            continue
        _ref(ctx, path, entry, in_global=True)
        globals_.append(entry)
    global_ids = {id(g) for g in globals_}
    for pname, pool in cfg.pools.items():
        where = f"pools.{pname}.hooks"
        strategies = []
        refs: list[tuple[str, HookRef]] = []
        for i, entry in enumerate(pool.hooks):
            if isinstance(entry, str):
                if entry in STRATEGIES:
                    strategies.append(entry)
                else:
                    ctx.err(f"{where}[{i}]", f"'{entry}' is not a built-in strategy "
                                             f"({', '.join(STRATEGIES)}); an out-of-process hook is an "
                                             f"inline {{ module: ... }} ref")
            else:
                _ref(ctx, f"{where}[{i}]", entry, in_global=False)
                refs.append((f"{where}[{i}]", entry))
        if len(strategies) > 1:
            ctx.err(where, f"names more than one ordering strategy ({', '.join(strategies)}); a pool has "
                           f"one base ordering: keep one")
        scope = [r for _, r in refs] + globals_
        for path, ref in refs:
            _chain(ctx, path, ref, scope, global_ids)
    for i, ref in enumerate(cfg.global_hooks):
        if isinstance(ref, HookRef):
            _chain(ctx, f"global_hooks[{i}]", ref, globals_, global_ids)
