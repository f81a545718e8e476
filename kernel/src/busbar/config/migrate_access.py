"""The 1.4.x access-side conversions of ``busbar --migrate-config``: governance, auth, providers.

``governance:`` dissolves into ``store`` / ``rate_card`` / ``per_request_fee`` / ``groups`` /
``advanced`` / ``auth.admin_auth``; ``auth.mode`` / ``auth.client_tokens`` / ``auth.modules`` /
``group_map`` become ``auth.chain`` / ``auth.upstream_credentials`` / chain-entry ``max_admin_scope`` /
``auth.role_bindings.<module>``; ``providers.*.api_key_env`` becomes a ``{ env: VAR }`` reference. Each
function takes the document root (mutated in place) and the run's context (``migrate._Ctx``: ``change``,
``todo(path, text)``, ``warning(path, text)``). What must not live here: the pool / hook conversions and
the entry points (``busbar.config.migrate``).

Source: docs/stores.md, docs/configuration.md#migrating-from-1x, docs/config-at-a-glance.md#auth,
docs/config-at-a-glance.md#groups, docs/config-at-a-glance.md#store
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from busbar.config.migrate import _Ctx

DEFAULT_GOVERNANCE_DB = "busbar-governance.db"  # 1.4.x's default governance.db_path
REMINT = ("static tokens are gone in 1.5.0: mint a signed key for every caller with "
          "'busbar admin keys mint --name <caller>' (docs/auth.md#minting-keys); 1.x bearer tokens stop working")


def _map(v: Any) -> dict[Any, Any]:
    return v if isinstance(v, dict) else {}


def _entry_name(entry: Any) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and len(entry) == 1:
        return str(next(iter(entry)))
    return None


def _governance(root: dict[Any, Any], ctx: _Ctx) -> None:
    gov = root.pop("governance", None)
    if gov is None:
        return
    gov = dict(_map(gov))
    module = str(gov.pop("store", "sqlite") or "sqlite")
    db_path = gov.pop("db_path", None)
    settings: dict[str, Any] = {}
    if module == "sqlite":
        settings["db_path"] = db_path if db_path is not None else DEFAULT_GOVERNANCE_DB
    elif db_path is not None and module != "memory":
        settings["url"] = db_path
    if "sqlite_busy_timeout_ms" in gov:
        settings["busy_timeout_ms"] = gov.pop("sqlite_busy_timeout_ms")
    root["store"] = {"module": module, **({"settings": settings} if settings else {})}
    ctx.change(f"governance -> store: {{ module: {module} }} (1.4.x's durable governance database)")
    if module != "memory":
        ctx.todo(("store",), "the store is a signed plugin in 1.5.0: set plugins.enabled: true and install "
                            f"the busbar-store-{module} tarball in plugins.dir")
    if "rate_card" in gov:
        root["rate_card"] = gov.pop("rate_card")
        ctx.change("governance.rate_card -> rate_card")
    if "price_per_request_cents" in gov:
        root["per_request_fee"] = gov.pop("price_per_request_cents")
        ctx.change("governance.price_per_request_cents -> per_request_fee")
    if "price_per_1k_tokens_cents" in gov:
        per_tier = float(gov.pop("price_per_1k_tokens_cents") or 0) * 10.0
        card = root.setdefault("rate_card", {})
        for model in _map(root.get("models")):
            card.setdefault(model, {"input_utok": per_tier, "output_utok": per_tier})
        ctx.change("governance.price_per_1k_tokens_cents -> a rate_card entry per model (N cents/1k = 10N "
                   "micro-units per token)")
        ctx.todo(("rate_card",), "synthesized from the flat price_per_1k_tokens_cents; replace with each "
                                 "model's real input/output rates")
    if "budget_groups" in gov:
        groups = root.setdefault("groups", {})
        for name, g in _map(gov.pop("budget_groups")).items():
            g = _map(g)
            entry: dict[str, Any] = {}
            if g.get("parent") is not None:
                entry["parent"] = g["parent"]
            if g.get("max_budget_cents") is not None:
                entry["limits"] = [{"budget": g["max_budget_cents"],
                                    "per": _window(g.get("budget_period"))}]
            groups[name] = entry
        ctx.change("governance.budget_groups -> groups (budget caps became limits)")
    adv = {k: gov.pop(k) for k in ("rate_sweep_interval", "usage_flush_interval_ms") if k in gov}
    if adv:
        root.setdefault("advanced", {}).update(adv)
        ctx.change("governance.rate_sweep_interval / usage_flush_interval_ms -> advanced")
    if "admin_token" in gov:
        ref = _secret_from_value(gov.pop("admin_token"))
        if ref is None:
            ref = {"env": "BUSBAR_ADMIN_TOKEN"}
            ctx.todo(("auth", "admin_auth"), "governance.admin_token held a literal value: put it in the "
                                             "BUSBAR_ADMIN_TOKEN environment variable (or a file reference)")
        auth = root.setdefault("auth", {})
        auth["admin_auth"] = [{"admin-tokens": {"token": ref}}]
        ctx.change("governance.admin_token -> auth.admin_auth: [admin-tokens: { token: <secret ref> }]")
    if gov.pop("enabled", None) is not None:
        ctx.change("governance.enabled removed (governance is presence-driven)")
    for k, v in gov.items():
        ctx.todo(("store",), f"governance.{k}: {v!r} has no mechanical 1.5.0 equivalent; re-express it or "
                             f"drop it")


def _window(period: Any) -> str:
    return {"daily": "day", "day": "day", "monthly": "month", "month": "month", "minute": "minute",
            "hour": "hour", "hourly": "hour"}.get(str(period), "total")


def _secret_from_value(value: Any) -> dict[str, str] | None:
    m = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", str(value)) if isinstance(value, str) else None
    return {"env": m.group(1)} if m else None


def _auth(root: dict[Any, Any], ctx: _Ctx) -> None:
    group_map = root.pop("group_map", None)
    auth = root.get("auth")
    if auth is None and group_map is None:
        return
    if auth is not None and not isinstance(auth, dict):
        if group_map is not None:
            root["group_map"] = group_map
            ctx.todo(("group_map",), "auth: is not a mapping, so group_map could not move under "
                                     "auth.role_bindings; fix auth: by hand and re-run the migrator")
        return
    auth = root.setdefault("auth", {})
    if group_map is None:
        group_map = auth.pop("group_map", None)
    else:
        auth.pop("group_map", None)
    chain = auth.get("chain")
    if isinstance(chain, list):
        new = []
        for e in chain:
            e = "keys" if e in ("tokens", "static-tokens") else e
            if e not in new:
                new.append(e)
        if new != chain:
            auth["chain"] = new
            ctx.change("auth.chain: tokens -> keys (static tokens are gone)")
            ctx.todo(("auth", "chain"), REMINT)
    modules = auth.pop("modules", None)
    for mod, caps in _map(modules).items():
        caps = _map(caps)
        if "max_admin_scope" in caps:
            placed = False
            for which in ("chain", "admin_auth"):
                seq = auth.get(which)
                for i, e in enumerate(seq if isinstance(seq, list) else []):
                    if _entry_name(e) == mod:
                        body = dict(_map(e.get(mod))) if isinstance(e, dict) else {}
                        body["max_admin_scope"] = caps["max_admin_scope"]
                        seq[i] = {mod: body}
                        placed = True
            if not placed:
                ctx.todo(("auth",), f"auth.modules.{mod}.max_admin_scope: '{mod}' is in no chain; set "
                                    f"max_admin_scope on its chain entry when you add it")
        if "allowed_groups" in caps:
            ctx.todo(("auth",), f"auth.modules.{mod}.allowed_groups was removed in 1.5.0; re-express that "
                                f"boundary in auth.role_bindings.{mod}")
    if modules is not None:
        ctx.change("auth.modules removed (max_admin_scope folded into the chain entries)")
    mode = auth.pop("mode", None)
    if mode is not None:
        if mode == "passthrough":
            auth["upstream_credentials"] = "passthrough"
            ctx.change("auth.mode: passthrough -> auth.upstream_credentials: passthrough")
        elif mode in ("none", "open", False):
            ctx.change(f"auth.mode: {mode} removed (an empty chain is the open front door)")
        elif "chain" in auth:
            ctx.change(f"auth.mode: {mode} removed (auth.chain already names the verifiers)")
        else:
            auth["chain"] = ["keys"]
            ctx.change(f"auth.mode: {mode} -> auth.chain: [keys]")
            ctx.todo(("auth", "chain"), REMINT)
    if auth.pop("client_tokens", None) is not None:
        ctx.change("auth.client_tokens removed (static tokens are gone)")
        if "chain" not in auth:       # the 1.x deployment required a token: it must stay closed
            auth["chain"] = ["keys"]
            ctx.change("auth.client_tokens -> auth.chain: [keys] (every caller presents a minted key)")
            ctx.todo(("auth", "chain"), REMINT)
        else:
            ctx.todo(("auth",), "auth.client_tokens was removed: mint a signed key for each former token "
                                "holder with 'busbar admin keys mint --name <caller>' (docs/auth.md#minting-keys)")
    if group_map is not None:
        _group_map(root, auth, group_map, ctx)


def _group_map(root: dict[Any, Any], auth: dict[Any, Any], group_map: Any, ctx: _Ctx) -> None:
    chain = [n for n in (_entry_name(e) for e in auth.get("chain") or []) if n not in (None, "keys")]
    module = chain[0] if len(chain) == 1 else "<module>"
    bindings: dict[Any, Any] = {}
    for role, b in _map(group_map).items():
        b = dict(_map(b))
        out: dict[str, Any] = {}
        if "allowed_pools" in b:
            out["allowed_pools"] = b.pop("allowed_pools")
        group = b.pop("budget_group", None) or b.pop("group", None)
        if group is not None:
            out["group"] = group
        if "admin_scope" in b:
            out["admin_scope"] = b.pop("admin_scope")
        caps = [(m, b.pop(k)) for k, m in (("rpm_limit", "requests"), ("tpm_limit", "tokens"))
                if k in b]
        budget = b.pop("max_budget_cents", None)
        period = _window(b.pop("budget_period", None))
        if caps or budget is not None:
            gname = f"migrated-{role}"
            limits = [{m: v, "per": "minute"} for m, v in caps]
            if budget is not None:
                limits.append({"budget": budget, "per": period})
            root.setdefault("groups", {})[gname] = {"limits": limits}
            out.setdefault("group", gname)
            ctx.todo(("groups", gname), f"generated from group_map role '{role}''s inline caps; review the "
                                        f"limits and merge them into your group tree")
        for k in b:
            ctx.todo(("auth", "role_bindings", module, role), f"group_map.{role}.{k} has no 1.5.0 "
                                                              f"equivalent; re-express or drop it")
        bindings[role] = out
    auth.setdefault("role_bindings", {})[module] = bindings
    ctx.change(f"group_map -> auth.role_bindings.{module} (nested by module)")
    if module == "<module>":
        ctx.todo(("auth", "role_bindings", module), "replace <module> with the name of the auth module that "
                                                    "asserts these roles (bindings are nested by module)")


def _admin_auth(root: dict[Any, Any], ctx: _Ctx) -> None:
    top = root.pop("admin_auth", None)
    if top is None:
        return
    auth = root.setdefault("auth", {})
    current = auth.get("admin_auth") if isinstance(auth.get("admin_auth"), list) else []
    names = {_entry_name(e) for e in current}
    for e in top if isinstance(top, list) else [top]:
        if _entry_name(e) not in names:
            current.append(e)
    auth["admin_auth"] = current
    ctx.change("admin_auth -> auth.admin_auth")


def _providers(root: dict[Any, Any], ctx: _Ctx) -> None:
    for name, p in _map(root.get("providers")).items():
        if isinstance(p, dict) and "api_key_env" in p:
            var = p.pop("api_key_env")
            p["api_key"] = {"env": var}
            ctx.change(f"providers.{name}.api_key_env -> api_key: {{ env: {var} }}")
