"""``busbar --migrate-config OLD.yaml > NEW.yaml``: convert a 1.x config to the 1.5.0 shape.

``migrate_text(text) -> Migration``: every deterministic change is applied; where a human must decide,
a ``# TODO(migrate)`` / ``# WARNING(migrate)`` comment is written directly above the key concerned.
Loudest: every ``allowed_pools: []`` (it used to mean ALL pools; in 1.5.0 it means NO pools). Zero
side effects: the CLI prints ``Migration.yaml`` to stdout and ``Migration.summary()`` to stderr.

Conversions (each recorded in ``Migration.changes``):

=========================================  ===============================================================
1.x                                        1.5.0
=========================================  ===============================================================
``pools.*.members[].target``               ``model``
member ``cost_per_mtok: C`` (1.2)          ``rate_card.<model>: { input_utok: C, output_utok: C }`` (the
                                           cheapest strategy's scalar is preserved), TODO for real rates
``route: <strategy>`` (1.2)                ``hooks: [<strategy>]``
``route: webhook`` + ``policy.url``        ``{ module: busbar-webrequest-hook, settings: { url }, kind: gate,
                                           timeout_ms, on_error }``
``route: socket`` + ``policy.socket``      a module ref with a placeholder module + TODO (the socket
                                           transport was retired)
``route: script``                          removed + TODO (the script engine was removed in 1.3)
top-level ``hooks:`` registry              inline refs in each pool's ``hooks:`` / ``global_hooks:``
                                           (``webhook:`` -> busbar-webrequest-hook ``settings.url``)
``providers.*.api_key_env: VAR``           ``api_key: { env: VAR }``
``governance:``                            ``store`` (sqlite db_path), ``rate_card``, ``per_request_fee``,
                                           ``groups`` (budget_groups), ``advanced``, admin token ->
                                           ``auth.admin_auth: [admin-tokens: { token: <ref> }]``
``auth.mode``                              ``upstream_credentials`` / ``chain: [keys]`` (+ re-mint TODO)
``auth.client_tokens``                     removed (+ re-mint TODO)
``group_map`` / ``auth.group_map``         ``auth.role_bindings.<module>`` (+ generated groups for caps)
top-level ``admin_auth``                   ``auth.admin_auth``
``on_exhausted: { action: X }``            ``reject`` / ``least_bad`` / ``{ fallback_pool: X }``
``breaker.trip.window_s`` / ``n``          ``window_secs`` / ``consecutive_n``
``failover.deadline_secs`` / ``cap``       ``timeout_secs`` / ``max_hops``
``observability.otlp_endpoint``            ``otlp_url``
=========================================  ===============================================================

The input is read raw (``${VAR}`` references pass through untouched). Unrecognized structure passes
through unchanged (``--validate`` then names it); the migrator never raises on a mapping.

Source: docs/configuration.md#migrating-from-1x, docs/configuration.md#startup-checks (1.x config detected).
docs/hooks-firstparty.md (the 1.2-era ``route:`` / ``policy:`` / ``target:`` / ``cost_per_mtok`` config);
docs/hooks.md#configuring
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml

from busbar.config.legacy import protect_env_refs
from busbar.config.migrate_access import _admin_auth, _auth, _governance, _map, _providers
from busbar.config.migrate_emit import Path, render
from busbar.config.schema_base import STRATEGIES

WEBREQUEST = "busbar-webrequest-hook"
SOCKET_PLACEHOLDER = "socket-router-hook"
_ORDER = ("listen", "admin_listen", "admin_insecure", "tls", "admin_tls", "auth", "groups", "rate_card",
          "per_request_fee", "store", "providers", "models", "pools", "global_hooks", "limits",
          "observability", "metrics", "plugins", "security", "advanced")
_HOOK_FIELDS = ("kind", "timeout_ms", "on_error", "on_empty", "prompt", "user", "priority", "at")
FLIP_WARNING = ("WARNING(migrate): the MEANING of allowed_pools: [] FLIPPED in 1.5.0: it used to mean ALL "
                "pools, it now means NO pools. Delete this line to keep all pools (omitted = all); keep [] "
                "only if this must reach none.")


class MigrateError(Exception):
    """The input cannot be migrated at all (not YAML, not a mapping); ``str(e)`` is one line."""


@dataclass
class Migration:
    """The result: ``yaml`` (the new config text), ``changes`` (one line per conversion), ``todos``
    and ``warnings`` (the comment texts, each naming its key path)."""

    yaml: str = ""
    changes: list[str] = field(default_factory=list)
    todos: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        """The stderr report: every change, then the counts."""
        lines = [f"migrate: {c}" for c in self.changes]
        if self.needs_review:
            lines.append(f"migrate: {len(self.changes)} change(s), {len(self.todos)} TODO(migrate), "
                         f"{len(self.warnings)} WARNING(migrate); review them, then run busbar --validate")
        else:
            lines.append(f"migrate: {len(self.changes)} change(s), nothing to review; run busbar --validate")
        return lines

    @property
    def needs_review(self) -> bool:
        """Does any line of the result carry a ``TODO(migrate)`` / ``WARNING(migrate)`` decision?"""
        return bool(self.todos or self.warnings)


class _Ctx:
    def __init__(self) -> None:
        self.notes: dict[Path, list[str]] = {}
        self.result = Migration()

    def change(self, text: str) -> None:
        self.result.changes.append(text)

    def todo(self, path: Path, text: str) -> None:
        self.notes.setdefault(path, []).append(f"TODO(migrate): {text}")
        self.result.todos.append(f"{_dotted(path)}: {text}" if path else text)

    def warning(self, path: Path, text: str, *, raw: bool = False) -> None:
        self.notes.setdefault(path, []).append(text if raw else f"WARNING(migrate): {text}")
        self.result.warnings.append(f"{_dotted(path)}: {text}" if path else text)


def _dotted(path: Path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + str(p)
    return out


# ---------------------------------------------------------------- hooks and pools


def _registry_ref(name: str, h: dict[Any, Any], ctx: _Ctx, path: Path) -> dict[str, Any]:
    settings = dict(_map(h.get("settings")))
    ref: dict[str, Any] = {}
    url = h.get("webhook") or h.get("url")
    if isinstance(h.get("webhook"), dict):
        url = h["webhook"].get("url")
    if url is not None:
        ref["module"] = WEBREQUEST
        settings["url"] = url
    elif h.get("socket") is not None:
        ref["module"] = SOCKET_PLACEHOLDER
        settings["socket"] = h["socket"]
        _socket_todo(ctx, path, name)
    elif h.get("module") is not None:
        ref["module"] = h["module"]
    else:
        ref["module"] = WEBREQUEST
        ctx.todo(path, f"hook '{name}' named no transport; set settings.url to its HTTPS sidecar or name "
                       f"its kind: hook plugin in module:")
    if settings:
        ref["settings"] = settings
    for k in _HOOK_FIELDS:
        if k in h:
            ref[k] = h[k]
    return ref


def _socket_todo(ctx: _Ctx, path: Path, what: str) -> None:
    ctx.todo(path, f"{what}: the socket transport was retired in 1.5.0; package the router as a signed "
                   f"kind: hook plugin and name it in module: (replacing {SOCKET_PLACEHOLDER}), or serve it "
                   f"over HTTPS and use module: {WEBREQUEST} with settings.url")


def _hooks_registry(root: dict[Any, Any], ctx: _Ctx) -> None:
    hooks = root.pop("hooks", None)
    if hooks is None:
        return
    registry = {k: v for k, v in _map(hooks).items() if isinstance(v, dict)}
    ctx.change("top-level hooks: registry -> inline refs at each point of use")
    placed: set[str] = set()
    modules = {n: _registry_ref(n, h, _Ctx(), ()).get("module") for n, h in registry.items()}
    globals_ = [e for e in root.get("global_hooks") or []] if isinstance(root.get("global_hooks"), list) else []
    new_globals: list[Any] = []
    for entry in globals_:
        if isinstance(entry, str) and entry in registry:
            new_globals.append(_registry_ref(entry, registry[entry], ctx, ("global_hooks", len(new_globals))))
            placed.add(entry)
        else:
            new_globals.append(entry)
    for name, h in registry.items():
        if h.get("global") is True and name not in placed:
            new_globals.append(_registry_ref(name, h, ctx, ("global_hooks", len(new_globals))))
            placed.add(name)
        if h.get("default") is True:
            ctx.todo(("pools",), f"hook '{name}' was default: true (the fleet base ordering); the flag is "
                                 f"gone: add it (or a strategy) to each pool's hooks: list")
    if new_globals:
        root["global_hooks"] = new_globals
    for pname, pool in _map(root.get("pools")).items():
        if not isinstance(pool, dict) or not isinstance(pool.get("hooks"), list):
            continue
        out: list[Any] = []
        for entry in pool["hooks"]:
            if isinstance(entry, str) and entry in registry:
                out.append(_registry_ref(entry, registry[entry], ctx, ("pools", pname, "hooks", len(out))))
                placed.add(entry)
            else:
                out.append(entry)
        pool["hooks"] = out
    for refs in _all_refs(root):
        oe = refs.get("on_error")
        if isinstance(oe, str) and oe in registry:
            refs["on_error"] = {"hook": modules[oe]}
            ctx.change(f"on_error: {oe} -> {{ hook: {modules[oe]} }}")
    for name in registry:
        if name not in placed:
            ctx.todo(("pools",), f"hook '{name}' was registered but used by no pool and not global; add it as "
                                 f"an inline ref where it should run, or drop it")


def _all_refs(root: dict[Any, Any]) -> list[dict[Any, Any]]:
    out = [e for e in root.get("global_hooks") or [] if isinstance(e, dict)]
    for pool in _map(root.get("pools")).values():
        if isinstance(pool, dict):
            out += [e for e in pool.get("hooks") or [] if isinstance(e, dict)]
    return out


def _route(pname: Any, pool: dict[Any, Any], ctx: _Ctx) -> None:
    """The 1.2-era ``route:`` + ``policy:`` pair of one pool -> an entry of its hooks: list."""
    route = pool.pop("route", None)
    policy = pool.pop("policy", None)
    if route is None and policy is None:
        return
    hooks: list[Any] = pool["hooks"] if isinstance(pool.get("hooks"), list) else []
    path: Path = ("pools", pname, "hooks", 0)
    if route is None and isinstance(policy, str):
        route, policy = policy, None
    pol = dict(_map(policy))
    entry: Any = None
    if route in STRATEGIES:
        entry = route
        for k in pol:
            ctx.todo(path, f"policy.{k} has no meaning for the {route} strategy; dropped")
    elif route in ("webhook", "socket"):
        settings = dict(_map(pol.pop("settings", None)))
        if route == "webhook":
            module = WEBREQUEST
            if pol.get("url") is not None:
                settings["url"] = pol.pop("url")
            else:
                ctx.todo(path, "route: webhook had no policy.url; set settings.url to the sidecar endpoint")
        else:
            module = SOCKET_PLACEHOLDER
            if pol.get("socket") is not None:
                settings["socket"] = pol.pop("socket")
            _socket_todo(ctx, path, "route: socket")
        typed = {k: pol.pop(k) for k in _HOOK_FIELDS if k in pol}
        for k, v in pol.items():
            settings[k] = v
            ctx.todo(path, f"policy.{k} moved into settings.{k}; check the plugin reads it")
        entry = {"module": module, **({"settings": settings} if settings else {}), "kind": "gate", **typed}
    elif route == "script":
        ctx.todo(("pools", pname), "route: script (the embedded script engine) was removed in 1.3; port the "
                                   "policy to a kind: hook plugin or an HTTPS sidecar (busbar-webrequest-hook)")
    elif route is not None:
        ctx.todo(("pools", pname), f"route: {route!r} is unknown; name a strategy or a hook in hooks:")
    if entry is not None:
        _put_hooks_first(pool, [entry] + [h for h in hooks if h != entry])
        ctx.change(f"pools.{pname}.route: {route} -> hooks[0]")


def _put_hooks_first(pool: dict[Any, Any], hooks: list[Any]) -> None:
    """Set ``pool["hooks"]``, placed before ``members`` as the seeds write it."""
    rest = {k: v for k, v in pool.items() if k != "hooks"}
    pool.clear()
    pool["hooks"] = hooks
    pool.update(rest)


def _pools(root: dict[Any, Any], ctx: _Ctx) -> dict[str, float]:
    """Per-pool renames; returns member cost_per_mtok per model (for the rate card)."""
    costs: dict[str, float] = {}
    for pname, pool in _map(root.get("pools")).items():
        if not isinstance(pool, dict):
            continue
        _route(pname, pool, ctx)
        members = pool.get("members")
        for i, m in enumerate(members if isinstance(members, list) else []):
            if not isinstance(m, dict):
                continue
            if "target" in m:
                m_new = {"model": m.pop("target"), **m}
                m.clear()
                m.update(m_new)
                ctx.change(f"pools.{pname}.members[{i}].target -> model")
            if "cost_per_mtok" in m:
                cost = m.pop("cost_per_mtok")
                model = str(m.get("model"))
                if model in costs and costs[model] != cost:
                    ctx.warning(("rate_card", model), f"pools.{pname}.members[{i}] priced '{model}' at "
                                                      f"{cost}/Mtok but another member at {costs[model]}; "
                                                      f"the first price was kept")
                else:
                    costs[model] = cost
                ctx.change(f"pools.{pname}.members[{i}].cost_per_mtok -> rate_card.{model}")
        trip = _map(_map(pool.get("breaker")).get("trip"))
        for old, new in (("window_s", "window_secs"), ("n", "consecutive_n")):
            if old in trip:
                trip[new] = trip.pop(old)
                ctx.change(f"pools.{pname}.breaker.trip.{old} -> {new}")
        failover = _map(pool.get("failover"))
        for old, new in (("deadline_secs", "timeout_secs"), ("cap", "max_hops")):
            if old in failover:
                failover[new] = failover.pop(old)
                ctx.change(f"pools.{pname}.failover.{old} -> {new}")
        oe = pool.get("on_exhausted")
        if isinstance(oe, dict) and "action" in oe:
            pool["on_exhausted"] = _action(pname, str(oe["action"]).strip(), ctx)
            ctx.change(f"pools.{pname}.on_exhausted: {{ action }} -> 1.5.0 keyword / {{ fallback_pool }}")
    return costs


def _action(pname: Any, action: str, ctx: _Ctx) -> Any:
    if action.startswith("fallback_pool:") and action.split(":", 1)[1].strip():
        return {"fallback_pool": action.split(":", 1)[1].strip()}
    if action in ("reject", "503", "status_503", "status503"):
        return "reject"
    if action in ("least_bad", "least-bad", "leastbad"):
        return "least_bad"
    ctx.todo(("pools", pname, "on_exhausted"), f"the 1.x action {action!r} has no mechanical equivalent; "
                                               f"choose reject, least_bad or {{ fallback_pool: <pool> }} "
                                               f"(left as reject)")
    return "reject"


def _rate_card(root: dict[Any, Any], costs: dict[str, float], ctx: _Ctx) -> None:
    if costs:
        card: dict[Any, Any] = root["rate_card"] if isinstance(root.get("rate_card"), dict) else {}
        for model, cost in costs.items():
            card.setdefault(model, {"input_utok": cost, "output_utok": cost})
        root["rate_card"] = card
        ctx.todo(("rate_card",), "entries came from member cost_per_mtok ($/Mtok = micro-units per token, "
                                 "one blended rate for input and output, which keeps the cheapest strategy's "
                                 "order); replace them with each model's real input/output rates")
    present = root.get("rate_card")
    if isinstance(present, dict):
        missing = [m for m in _map(root.get("models")) if m not in present]
        for m in missing:
            present[m] = {"input_utok": 0.0, "output_utok": 0.0}
        if missing:
            ctx.todo(("rate_card",), f"a present rate_card must price every model; zeroed stubs were added for "
                                     f"{', '.join(map(str, missing))}: fill in their real rates")


def _observability(root: dict[Any, Any], ctx: _Ctx) -> None:
    obs = _map(root.get("observability"))
    if "otlp_endpoint" in obs:
        obs["otlp_url"] = obs.pop("otlp_endpoint")
        ctx.change("observability.otlp_endpoint -> otlp_url")


def _flips(node: Any, path: Path = ()) -> list[Path]:
    """Paths of every ``allowed_pools: []`` in a document."""
    out: list[Path] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "allowed_pools" and v == []:
                out.append(path + (k,))
            out += _flips(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _flips(v, path + (i,))
    return out


def _flip_warnings(old: dict[Any, Any], new: dict[Any, Any], ctx: _Ctx) -> None:
    """The loudest warning right above every ``allowed_pools: []`` of the result, and at the top for any
    that sat in a 1.x section with no 1.5.0 home (so none flips unnoticed)."""
    kept = _flips(new)
    for path in kept:
        ctx.warning(path, FLIP_WARNING, raw=True)
    lost = len(_flips(old)) - len(kept)
    if lost > 0:
        where = ", ".join(_dotted(p) for p in _flips(old))
        ctx.warning((), f"{lost} allowed_pools: [] in 1.x sections that have no mechanical 1.5.0 home "
                        f"(1.x paths: {where}): wherever you re-create them, [] now means NO pools "
                        f"(omit the key for all pools)")


def _plugins_needed(root: dict[Any, Any], ctx: _Ctx) -> None:
    plugins = _map(root.get("plugins"))
    if plugins.get("enabled") is True:
        return
    refs = [r for r in _all_refs(root)]
    store = _map(root.get("store")).get("module", "memory")
    if refs or store != "memory":
        ctx.todo(("plugins",) if "plugins" in root else (), "this config names plugins (hook modules or a "
                 "durable store): set plugins: { enabled: true } and install their signed tarballs in "
                 "plugins.dir (busbar --list-plugins shows what loads)")


# ---------------------------------------------------------------- entry points


def _restore_env(node: Any, tokens: dict[str, str]) -> Any:
    if not tokens:
        return node
    if isinstance(node, dict):
        return {_restore_env(k, tokens): _restore_env(v, tokens) for k, v in node.items()}
    if isinstance(node, list):
        return [_restore_env(v, tokens) for v in node]
    if isinstance(node, str) and "busbarenvref" in node:
        for token, ref in tokens.items():
            node = node.replace(token, ref)
    return node


def migrate_document(doc: dict[Any, Any]) -> tuple[dict[Any, Any], Migration, dict[Path, list[str]]]:
    """Convert a parsed 1.x document; returns ``(new_document, migration, notes)`` (input untouched)."""
    root = copy.deepcopy(doc)
    ctx = _Ctx()
    _governance(root, ctx)
    _auth(root, ctx)
    _admin_auth(root, ctx)
    _providers(root, ctx)
    _hooks_registry(root, ctx)
    costs = _pools(root, ctx)
    _rate_card(root, costs, ctx)
    _observability(root, ctx)
    _flip_warnings(doc, root, ctx)
    _plugins_needed(root, ctx)
    ordered = {k: root[k] for k in _ORDER if k in root}
    ordered.update((k, v) for k, v in root.items() if k not in ordered)
    return ordered, ctx.result, ctx.notes


def migrate_text(text: str, *, source: str = "config.yaml") -> Migration:
    """Migrate the raw text of a 1.x config.yaml; see the module docstring.

    Raises:
        MigrateError: the text is not YAML or not a mapping.
    """
    protected, tokens = protect_env_refs(text)
    try:
        doc = yaml.load(protected, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise MigrateError(f"{source}{where}: invalid YAML: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(doc, dict):
        raise MigrateError(f"{source}: not a YAML mapping (expected a Busbar config document)")
    new, result, notes = migrate_document(_restore_env(doc, tokens))
    header = [f"Busbar 1.5.0 config, converted from {source} by busbar --migrate-config."]
    if result.needs_review:   # no banner when no line needs a decision
        header += ["Review every TODO(migrate) / WARNING(migrate) below, then run busbar --validate.",
                   "Comments of the original file are not carried over; keep it at hand for the review."]
    else:
        header += ["Comments of the original file are not carried over."]
    result.yaml = render(new, notes, header)
    return result


def main(path: str) -> int:
    """``busbar --migrate-config PATH``: the new YAML on stdout, the change summary on stderr.

    Returns:
        0, or 2 when the file cannot be read or is not a YAML mapping (one line on stderr).
    """
    import sys
    from pathlib import Path as FsPath

    try:
        text = FsPath(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        print(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
        return 2
    try:
        result = migrate_text(text, source=FsPath(path).name)
    except MigrateError as e:
        print(str(e), file=sys.stderr)
        return 2
    sys.stdout.write(result.yaml)
    for line in result.summary():
        print(line, file=sys.stderr)
    return 0
