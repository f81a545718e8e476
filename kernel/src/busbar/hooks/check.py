"""Boot-time checks of the hook config against the loaded plugin set; every fault at once.

``check(cfg, plugins, src="config.yaml") -> list[str]``, one line per fault, each naming its key
path (rows of docs/configuration.md#startup-checks that need the loader):

- ``pools.<p>.hooks[i]`` / ``global_hooks[i]``: a bare name that is not a strategy, more than one
  strategy in a list, a bare name in ``global_hooks``;
- ``.module``: the plugin subsystem is disabled, or the module is not a loaded ``kind: hook`` plugin
  (by manifest name or alias), or it is another kind;
- ``.prompt``: ``rw`` on a tap;
- ``.settings.<key>``: what the plugin's manifest settings schema declares (``required`` keys; an
  ``x-busbar-egress-url`` property refused by the one SSRF guard: loopback allowed, RFC-1918 / CGNAT /
  link-local / metadata refused, a remote URL must be ``https://``; the instance's
  ``x-busbar-egress-allow`` list its only exception), for any plugin (``busbar.security.egress``);
  an ``x-busbar-headers`` list naming a credential header or a non-name
  (``busbar_sdk.settings_schema.header_faults``);
- ``.on_error``: not a terminal, a strategy or ``{ hook: <name> }``; and every ``{ hook: <name> }``
  chain proven terminating (an unknown name, a tap, or a cycle is a fault, the path printed).

A ``{ hook: X }`` fallback resolves to the first ref whose ``module`` is X in scope: a pool ref's
scope is that pool's ``hooks:`` then ``global_hooks:``; a global's is ``global_hooks:``. The
terminals ``nothing``/``weighted``/``first``/``reject`` and the strategy names end a chain.

See docs/hooks.md and docs/plugin-format.md "Settings schema keywords".
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from busbar.hooks.strategies import STRATEGIES
from busbar.security.ssrf import policy_of

TERMINALS = ("nothing", "weighted", "first", "reject")

__all__ = ["TERMINALS", "cel_faults", "check", "deadline_faults", "gateway_faults", "headers_faults", "iter_refs",
           "kind_of", "member_faults", "resolve_fallback", "settings_faults"]


def kind_of(ref: Any, *, in_global: bool) -> str:
    """The ref's kind as written, else the position default (tap in global_hooks, gate in a pool)."""
    return str(ref.kind or ("tap" if in_global else "gate"))


def iter_refs(cfg: Any) -> Iterator[tuple[str, str | None, int, Any, bool]]:
    """Every hook entry as ``(path, pool or None, position, entry, in_global)``, globals first."""
    for i, entry in enumerate(cfg.global_hooks):
        yield f"global_hooks[{i}]", None, i, entry, True
    for pname, pool in cfg.pools.items():
        for i, entry in enumerate(pool.hooks):
            yield f"pools.{pname}.hooks[{i}]", pname, i, entry, False


def resolve_fallback(name: str, scope: list[tuple[str, Any, bool]]) -> tuple[str, Any, bool] | None:
    """The first ``(path, ref, in_global)`` of ``scope`` whose module is ``name``."""
    for item in scope:
        if item[1].module == name:
            return item
    return None


def check(cfg: Any, plugins: Any, src: str = "config.yaml") -> list[str]:
    """All hook faults of ``cfg`` given the loaded ``plugins`` (a ``PluginSet`` or ``None``)."""
    faults: list[str] = []

    def err(path: str, text: str) -> None:
        faults.append(f"{src}: {path}: {text}")

    strategies: dict[str, list[str]] = {}
    for path, pool, _, entry, in_global in iter_refs(cfg):
        if isinstance(entry, str):
            if in_global:
                err(path, f"'{entry}' is a bare name; global_hooks takes inline {{ module: <hook plugin> }} refs "
                          f"(an ordering strategy belongs in a pool's hooks: list)")
            elif entry not in STRATEGIES:
                err(path, f"'{entry}' is not a built-in strategy ({', '.join(STRATEGIES)}); an out-of-process "
                          f"hook is an inline {{ module: ... }} ref")
            else:
                strategies.setdefault(f"pools.{pool}.hooks", []).append(entry)
            continue
        _check_ref(cfg, plugins, path, entry, in_global, err)
    for where, names in strategies.items():
        if len(names) > 1:
            err(where, f"names more than one ordering strategy ({', '.join(names)}); a pool has one base "
                       f"ordering: keep one")
    globals_ = [(f"global_hooks[{i}]", r, True) for i, r in enumerate(cfg.global_hooks) if not isinstance(r, str)]
    for path, ref, _ in globals_:
        _check_chain(path, ref, globals_, err)
    for pname, pool in cfg.pools.items():
        refs = [(f"pools.{pname}.hooks[{i}]", r, False) for i, r in enumerate(pool.hooks) if not isinstance(r, str)]
        for path, ref, _ in refs:
            _check_chain(path, ref, refs + globals_, err)
    return faults


def _check_ref(cfg: Any, plugins: Any, path: str, ref: Any, in_global: bool, err: Any) -> None:
    kind = kind_of(ref, in_global=in_global)
    module = ref.module
    plugin = None
    if not cfg.plugins.enabled:
        err(f"{path}.module", f"'{module}' is a kind: hook plugin but plugins.enabled is false; set "
                              f"plugins.enabled: true and install its tarball in plugins.dir")
    else:
        plugin = plugins.get(module) if plugins is not None else None
        if plugin is None:
            err(f"{path}.module", f"'{module}' is not a loaded kind: hook plugin; install its tarball in "
                                  f"plugins.dir")
        elif plugin.kind != "hook":
            err(f"{path}.module", f"'{module}' is a kind: {plugin.kind} plugin, not a kind: hook plugin; name a "
                                  f"kind: hook plugin")
    if kind == "tap" and getattr(ref, "shadow", False):
        err(f"{path}.shadow", "shadow applies to gates (a tap never decides); remove it, or use kind: gate")
    if kind == "tap" and ref.prompt == "rw":
        err(f"{path}.prompt", "rw is not allowed on a tap (a tap never replies); use ro, or kind: gate")
    oe = ref.on_error
    if isinstance(oe, str) and oe not in TERMINALS and oe not in STRATEGIES:
        err(f"{path}.on_error", f"'{oe}' is not an on_error value; use nothing, weighted, first, reject, a "
                                f"strategy name, or {{ hook: {oe} }} for a named fallback")
    if plugin is not None and plugin.kind == "hook":
        from busbar.security.egress import manifest_rules

        policy = None
        rules = manifest_rules(getattr(plugin, "manifest", None))
        if rules.required or rules.egress_urls:
            sec = cfg.security
            try:
                policy = policy_of(sec)
            except ValueError as e:
                err("security", f"{e}; use host names, IP literals or CIDRs")
                return
        schema = getattr(getattr(plugin, "manifest", None), "settings_schema", None)
        for where, text in settings_faults(schema, ref, cfg, path, in_global=in_global, policy=policy):
            err(where, text)


def settings_faults(schema: Any, ref: Any, cfg: Any, path: str, *, in_global: bool,
                    policy: Any) -> list[tuple[str, str]]:
    """Every fault of the ``settings:`` of the hook ref at ``path`` against its plugin's manifest
    ``schema`` (JSON text, or ``None``), as ``(key path, text)``: one list for ``busbar --validate``
    and the boot, in one order. First the Busbar keywords (pool members: pool refs only; deadlines;
    gateway refs; header allowlists; CEL), then the ``required`` keys and egress URLs (through
    ``policy``, the deployment's SSRF policy), then the schema itself
    (:func:`busbar.config.plugin_settings.with_schema_faults`) at key paths no earlier line names.
    """
    from busbar_sdk.settings_schema import settings_rules

    from busbar.config.plugin_settings import with_schema_faults
    from busbar.security.egress import settings_faults as egress_faults

    if not isinstance(schema, (str, dict)):
        return []
    settings = ref.settings
    out = member_faults(schema, settings, cfg, path) if not in_global else []
    out += deadline_faults(schema, settings, ref.timeout_ms, path)
    out += gateway_faults(schema, settings, cfg, path, in_global=in_global)
    out += headers_faults(schema, settings, path)
    out += cel_faults(schema, settings, path)
    rules = settings_rules(schema)
    if (rules.required or rules.egress_urls) and isinstance(settings, dict):
        out += egress_faults(rules, settings, module=ref.module, path=path, policy=policy)
    return with_schema_faults(out, schema, settings, ref.module, prefix=f"{path}.settings")


def cel_faults(schema: Any, settings: Any, path: str) -> list[tuple[str, str]]:
    """``(key path, text)`` for every ``x-busbar-cel`` setting of the ref at ``path`` that does not
    compile, with CEL's own message, as the plugin's ``busbar_open`` would raise it
    (``busbar_sdk.settings_schema.cel_faults``)."""
    from busbar_sdk.settings_schema import cel_faults as faults

    if not isinstance(schema, (str, dict)):
        return []
    return [(f"{path}.settings.{where}", text) for where, text in faults(schema, settings)]


def gateway_faults(schema: Any, settings: Any, cfg: Any, path: str, *, in_global: bool) -> list[tuple[str, str]]:
    """``(key path, text)`` for the ``x-busbar-gateway-pool``/``-model`` settings of the ref at
    ``path``: the pool must be configured and must not be the ref's own pool, the ref must not sit
    in ``global_hooks`` (its own requests would fire it again), and every model must be a member
    model of that pool."""
    from busbar_sdk.settings_schema import gateway_refs

    if not isinstance(schema, (str, dict)):
        return []
    refs = gateway_refs(schema, settings)
    if refs.pool is None:
        return []
    where = f"{path}.settings.{refs.pool_key}"
    if in_global:
        return [(where, "a gate in global_hooks fires on every request, its own calls through pool "
                        f"'{refs.pool}' included; attach it to a pool's hooks instead")]
    own = path.split(".")[1]
    if refs.pool == own:
        return [(where, f"'{own}' is the pool this gate sits on: its own calls would fire it again; name "
                        f"another pool")]
    pool = cfg.pools.get(refs.pool)
    if pool is None:
        return [(where, f"'{refs.pool}' is not a configured pool (pools: {', '.join(cfg.pools) or 'none'})")]
    models = [m.model for m in pool.members]
    return [(f"{path}.settings.{at}", f"'{name}' is not a member model of pool '{refs.pool}' (models: "
                                      f"{', '.join(models)}); name one of them")
            for at, name in refs.models if name not in models]


def headers_faults(schema: Any, settings: Any, path: str) -> list[tuple[str, str]]:
    """``(key path, text)`` for every ``x-busbar-headers`` entry of the ref at ``path`` that cannot be
    projected: a credential header or a non-name (``busbar_sdk.settings_schema.header_faults``)."""
    from busbar_sdk.settings_schema import header_faults

    if not isinstance(schema, (str, dict)):
        return []
    return [(f"{path}.settings.{where}", text) for where, text in header_faults(schema, settings)]


def deadline_faults(schema: Any, settings: Any, timeout_ms: int, path: str) -> list[tuple[str, str]]:
    """``(key path, text)`` when a ``x-busbar-within-timeout`` setting of the ref at ``path`` does not
    fit in its ``timeout_ms``."""
    from busbar_sdk.settings_schema import deadline_settings

    if not isinstance(schema, (str, dict)) or not isinstance(settings, dict):
        return []
    return [(f"{path}.timeout_ms", f"{timeout_ms} ms is below settings.{key} ({ms} ms): the gate's deadline must "
                                   f"cover the plugin's own time budget; set timeout_ms to at least {ms} or lower "
                                   f"settings.{key}")
            for key, ms in deadline_settings(schema, settings) if ms > timeout_ms]


def member_faults(schema: Any, settings: Any, cfg: Any, path: str) -> list[tuple[str, str]]:
    """``(key path, text)`` for every ``x-busbar-pool-member`` setting of the ref at ``path``
    (``pools.<p>.hooks[i]``) that names neither a member model nor a member tag of pool ``<p>``."""
    from busbar_sdk.settings_schema import member_names

    names = member_names(schema, settings) if isinstance(schema, (str, dict)) else []
    if not names:
        return []
    pname = path.split(".")[1]
    members = cfg.pools[pname].members
    models = [m.model for m in members]
    tags = sorted({t for m in members for t in (m.tags or ())})
    known = f"models: {', '.join(models)}; tags: {', '.join(tags) or 'none'}"
    return [(f"{path}.settings.{where}", f"'{name}' is not a member of pool '{pname}' ({known}); name a member's "
                                         f"model or one of its tags")
            for where, name in names if name not in models and name not in tags]


def _check_chain(path: str, ref: Any, scope: list[tuple[str, Any, bool]], err: Any) -> None:
    """Prove the ``on_error`` chain starting at ``ref`` terminates; one fault at ``path`` if not."""
    seen = [ref.module]
    cur = ref
    while not isinstance(cur.on_error, str):
        name = cur.on_error.hook
        if name in TERMINALS or name in STRATEGIES:
            return
        found = resolve_fallback(name, scope)
        if found is None:
            known = ", ".join(dict.fromkeys(r.module for _, r, _ in scope)) or "none"
            err(f"{path}.on_error.hook", f"unknown hook '{name}' in the on_error chain (hooks in scope: "
                                         f"{known}); name one of them, a strategy, or a terminal (nothing, "
                                         f"weighted, first, reject)")
            return
        _, nxt, nxt_global = found
        if kind_of(nxt, in_global=nxt_global) == "tap":
            err(f"{path}.on_error.hook", f"'{name}' is a tap; a tap never decides, so it cannot be an "
                                         f"on_error fallback; name a gate or a terminal")
            return
        if name in seen:
            err(f"{path}.on_error.hook", f"on_error cycle {' -> '.join(seen + [name])}; end the chain with a "
                                         f"terminal (nothing, weighted, first, reject)")
            return
        seen.append(name)
        cur = nxt
