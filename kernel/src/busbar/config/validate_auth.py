"""Validation of the front door and the admin door: listeners, TLS, ``auth:``, ``store:``.

Rows (docs/configuration.md#startup-checks): auth.chain names an unknown module (keys, or a
kind: auth plugin: needs plugins.enabled, and with the loader's catalog a loadable plugin),
passthrough with the keys verifier (the token forwarded would be a Busbar key),
role_bindings faults (a binding under a module in no chain; a bound group that does not exist; a
pool that does not exist), Admin token blank, Exposed admin without mTLS, Plugin store without
plugins, Plugin store unresolved (with a catalog), store.settings against the store plugin's
manifest settings schema (with a catalog; ``busbar_sdk.store.settings.schema_faults``); the
docs/config-at-a-glance.md#listen, docs/config-at-a-glance.md#tls rules of docs/configuration.md
(host:port; PEM files that parse, a key that matches its certificate: ``busbar.server.tls.pem_faults``,
the boot's own check); and the warnings chain: [] (open front door), admin_auth: [] (open admin),
the ephemeral memory store with the keys verifier.

Secret values are resolved here only to judge them (blank token, PEM shape); nothing is kept.
"""
from __future__ import annotations

import ipaddress
from typing import Any

from busbar.config.schema_base import BUILTIN_ADMIN_MODULE, BUILTIN_CHAIN_MODULE


def split_hostport(value: str) -> tuple[str, int] | None:
    """``"0.0.0.0:8080"`` / ``"[::1]:8081"`` / ``":8080"`` -> (host, port); None when malformed."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        return None
    if host.startswith("["):
        if not host.endswith("]"):
            return None
        host = host[1:-1]
    elif ":" in host:
        return None  # an IPv6 literal needs brackets: [::1]:8081
    return host, int(port)


def is_loopback(host: str) -> bool:
    """True for localhost and loopback IP literals; an empty host binds every interface."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_listeners(ctx: Any) -> None:
    """listen / admin_listen shape, the admin exposure rule, and both TLS blocks."""
    cfg = ctx.cfg
    addrs = {}
    for key in ("listen", "admin_listen"):
        value = getattr(cfg, key)
        parsed = split_hostport(value)
        if parsed is None:
            ctx.err(key, f"'{value}' is not host:port (e.g. 0.0.0.0:8080, [::1]:8081)")
        else:
            addrs[key] = parsed
    if len(addrs) == 2:
        (h1, p1), (h2, p2) = addrs["listen"], addrs["admin_listen"]
        wild = ("", "0.0.0.0", "::")
        if p1 == p2 and p1 != 0 and (h1 == h2 or h1 in wild or h2 in wild):
            ctx.err("admin_listen", f"'{cfg.admin_listen}' collides with listen '{cfg.listen}'; the admin "
                                    f"API runs on its own listener (default 127.0.0.1:8081)")
    admin = addrs.get("admin_listen")
    mtls = cfg.admin_tls is not None and cfg.admin_tls.client_ca is not None
    if admin is not None and not is_loopback(admin[0]) and not mtls:
        if cfg.admin_insecure:
            ctx.warn("admin_listen", f"'{cfg.admin_listen}' exposes the admin API on the network without "
                                     f"mTLS (admin_insecure: true)")
        else:
            ctx.err("admin_listen", f"'{cfg.admin_listen}' exposes the admin API on the network without "
                                    f"mTLS; bind it to 127.0.0.1, or set admin_tls with client_ca, or set "
                                    f"admin_insecure: true deliberately")
    from busbar.server.tls import pem_faults

    for block in ("tls", "admin_tls"):
        tls = getattr(cfg, block)
        if tls is None:
            continue
        refs = {part: getattr(tls, part) for part in ("cert", "key", "client_ca") if getattr(tls, part) is not None}
        values = {part: v for part, ref in refs.items() if (v := ctx.secret(ref, f"{block}.{part}")) is not None}
        for path, text in pem_faults(values, refs, block):     # the boot's own check (busbar.server.tls)
            ctx.err(path, text)


def _entries(ctx: Any, which: str) -> list[str]:
    cfg = ctx.cfg
    names: list[str] = []
    for i, mod in enumerate(cfg.auth.modules(which)):  # type: ignore[arg-type]
        path = f"auth.{which}[{i}]"
        if mod.name in names:
            ctx.err(path, f"'{mod.name}' is listed twice; keep one entry per module")
        names.append(mod.name)
        if mod.token is not None and mod.name != BUILTIN_ADMIN_MODULE:
            fix = "remove it" if mod.name == BUILTIN_CHAIN_MODULE else f"put '{mod.name}''s own config under settings:"
            ctx.err(f"{path}.{mod.name}.token", f"token: is for the built-in {BUILTIN_ADMIN_MODULE} module "
                                                f"only; {fix}")
        if mod.name in (BUILTIN_CHAIN_MODULE, BUILTIN_ADMIN_MODULE):
            _builtin_fields(ctx, path, mod)
        if which == "chain" and mod.name == BUILTIN_ADMIN_MODULE:
            ctx.err(path, f"{BUILTIN_ADMIN_MODULE} gates the admin API only; move it to auth.admin_auth")
        elif which == "admin_auth" and mod.name == BUILTIN_CHAIN_MODULE:
            ctx.err(path, f"{BUILTIN_CHAIN_MODULE} verifies data-plane keys, which carry no admin scope; "
                          f"use {BUILTIN_ADMIN_MODULE} or an identity-provider auth plugin")
        elif mod.name not in (BUILTIN_CHAIN_MODULE, BUILTIN_ADMIN_MODULE):
            ctx.plugin_ref(mod.name, path, kind="auth")
            ctx.plugin_settings(mod.name, mod.settings, f"{path}.{mod.name}", kind="auth")
        if mod.name == BUILTIN_ADMIN_MODULE and mod.token is not None:
            ctx.secret(mod.token, f"{path}.{mod.name}.token")   # unset / blank: a fault
    return names


def _builtin_fields(ctx: Any, path: str, mod: Any) -> None:
    """A built-in module's entry may not carry fields it would ignore: neither takes ``settings``;
    ``keys`` grants no admin scope and ``admin-tokens`` is the root credential (exempt from a
    ceiling), so ``max_admin_scope`` would do nothing on either."""
    if mod.settings:
        ctx.err(f"{path}.{mod.name}.settings", f"the built-in {mod.name} module takes no settings; remove them")
    if "max_admin_scope" in mod.given:
        why = ("verifies data-plane keys, which carry no admin scope" if mod.name == BUILTIN_CHAIN_MODULE
               else "is the root operator credential, exempt from any ceiling")
        ctx.err(f"{path}.{mod.name}.max_admin_scope", f"{mod.name} {why}, so a ceiling here would do nothing; "
                                                      f"remove it")


def check_auth(ctx: Any) -> None:
    """Chains, role bindings, the signing key and the auth-related warnings."""
    cfg = ctx.cfg
    auth = cfg.auth
    chain = _entries(ctx, "chain")
    admin = _entries(ctx, "admin_auth")
    if not chain:
        ctx.warn("auth.chain", "[] is an open front door: no client authentication (development only)")
    if not admin:
        ctx.warn("auth.admin_auth", "[] is an OPEN admin API: no admin authentication (development only)")
    if BUILTIN_CHAIN_MODULE in chain and cfg.store.module == "memory":
        ctx.warn("store.module", "the ephemeral memory store with the keys verifier: minted keys, usage and "
                                 "the revocation denylist reset on restart; choose a durable store.module")
    if auth.upstream_credentials == "passthrough" and BUILTIN_CHAIN_MODULE in chain:
        ctx.err("auth.upstream_credentials", f"passthrough forwards the caller's token upstream, and with "
                                             f"{BUILTIN_CHAIN_MODULE} in auth.chain that token is a Busbar "
                                             f"key no provider accepts; use own, or drop {BUILTIN_CHAIN_MODULE} "
                                             f"from the chain")
    if auth.signing_key is not None:
        text = ctx.secret(auth.signing_key, "auth.signing_key")   # unset / empty: a fault
        if text is not None:
            from busbar.auth.signing import SigningKeyError, keyring_from_text
            try:
                keyring_from_text(text, "auth.signing_key")
            except SigningKeyError as e:
                ctx.err("auth.signing_key", str(e).removeprefix("auth.signing_key: "))
    modules = set(chain) | set(admin)
    names_of = getattr(ctx.plugins, "names_of", None)
    if names_of is not None:  # a binding may use the plugin's own name where the chain uses an alias
        modules |= {n for m in list(modules) for n in (names_of(m) or ())}
    for module, roles in auth.role_bindings.items():
        if module in (BUILTIN_CHAIN_MODULE, BUILTIN_ADMIN_MODULE):
            ctx.err(f"auth.role_bindings.{module}", f"{module} asserts no roles, so these bindings can never "
                                                    f"apply; bind roles under an identity-provider module")
        elif module not in modules:
            known = ", ".join(sorted(modules - {BUILTIN_CHAIN_MODULE, BUILTIN_ADMIN_MODULE})) or "none"
            ctx.err(f"auth.role_bindings.{module}", f"'{module}' is not a module in auth.chain or "
                                                    f"auth.admin_auth (modules: {known}); bind roles under "
                                                    f"the module that asserts them")
        for role, b in roles.items():
            where = f"auth.role_bindings.{module}.{role}"
            if b.group is not None and b.group not in cfg.groups:
                ctx.err(f"{where}.group", f"'{b.group}' is not a configured group; add it under groups: "
                                          f"or fix the name")
            for i, pool in enumerate(b.allowed_pools or []):     # a model or an ad-hoc provider counts too
                if pool not in cfg.pools and pool not in cfg.models and pool not in cfg.providers:
                    ctx.err(f"{where}.allowed_pools[{i}]", f"'{pool}' is not a configured pool, model or "
                                                           f"provider; fix the name (omit allowed_pools for all "
                                                           f"pools)")


def check_store(ctx: Any) -> None:
    """store.module: memory takes no settings; anything else is a kind: store plugin, whose
    ``store.settings`` are judged by its manifest settings schema when it has one."""
    store = ctx.cfg.store
    if store.module == "memory":
        if store.settings:
            ctx.err("store.settings", "the compiled-in memory store takes no settings; remove them or "
                                      "choose a durable store.module")
        return
    from busbar.store import ALIASES

    module = store.module
    canonical = ALIASES.get(module)      # `valkey` and `redis` both name busbar-store-valkey (alias `redis`)
    if canonical is not None and ctx.plugins is not None and ctx.plugins.kind_of(module) is None \
            and ctx.plugins.kind_of(canonical) is not None:
        module = canonical
    ctx.plugin_ref(module, "store.module", kind="store")
    _store_settings(ctx, module)


def _store_settings(ctx: Any, module: str) -> None:
    """``store.settings`` against the loadable store plugin's manifest ``settings_schema`` (with a
    catalog that serves it; a plugin without one checks its settings itself at open). The lines are
    the plugin's own (``busbar_sdk.store.settings``); settings reach the plugin verbatim, so a
    ``{ env: ... }`` there is judged as the mapping it is, as the plugin would."""
    catalog = ctx.plugins
    schema_of = getattr(catalog, "settings_schema_of", None)
    name_of = getattr(catalog, "name_of", None)
    if schema_of is None or name_of is None or not ctx.cfg.plugins.enabled or catalog.kind_of(module) != "store":
        return
    schema = schema_of(module)
    if schema is None:
        return
    from busbar_sdk.store.settings import schema_faults

    from busbar.store import backend_name

    for line in schema_faults(ctx.cfg.store.settings or {}, schema, backend_name(name_of(module))):
        path, text = line.split(": ", 1)
        ctx.err(path, text)
