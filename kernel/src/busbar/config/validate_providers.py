"""Validation of providers.yaml, config.yaml ``providers:`` and ``models:``.

Rows (docs/configuration.md#startup-checks): Provider name reserved, Protocol unknown, base_url SSRF,
base_url plaintext, error_map value unknown, auth value unknown, path malformed, Model name reserved,
provider reference missing, max_concurrent: 0, max_requests: 0, default_max_tokens: 0; plus the
field rules of docs/config-at-a-glance.md#providers, docs/config-at-a-glance.md#models (token_url / scope for
oauth-client-credentials, attempt_timeout_ms ≥ 1, non-empty upstream_model), an api_key reference that is unset or
resolves empty (a fault; docs/configuration.md#secret-references-and-interpolation) and the warning
"upstream_credentials: passthrough with a provider whose credential reference resolves non-empty".

Catalog entries are checked where they are written (``providers.yaml: <name>.protocol``); a
deployment override is checked under ``config.yaml: providers.<name>.<field>``. Every egress URL goes
through the one SSRF guard (``Context.url``; C032).
"""
from __future__ import annotations

from typing import Any

from busbar.config.operations import operations_faults
from busbar.config.schema_base import AUTH_STYLES, DISPOSITION_CLASSES, PROTOCOLS


def _field_faults(fields: dict[str, Any], emit: Any) -> None:
    """Value rules shared by catalog entries and deployment overrides; ``emit(field, text)``."""
    proto = fields.get("protocol")
    if proto is not None and proto not in PROTOCOLS:
        emit("protocol", f"unknown protocol '{proto}'; use one of {', '.join(PROTOCOLS)}")
    auth = fields.get("auth")
    if auth is not None and auth not in AUTH_STYLES:
        emit("auth", f"unknown auth '{auth}'; use one of {', '.join(AUTH_STYLES)} (omit it for the "
                     f"protocol's native scheme)")
    for name in ("path", "path_base"):
        value = fields.get(name)
        if value is not None and not str(value).startswith("/"):
            emit(name, f"'{value}' must begin with / (write /{str(value).lstrip('/')})")
    for code, cls in (fields.get("error_map") or {}).items():
        if cls not in DISPOSITION_CLASSES:
            emit(f"error_map.{code}", f"unknown disposition class '{cls}'; use one of "
                                      f"{', '.join(DISPOSITION_CLASSES)}")


def _check_catalog(ctx: Any) -> None:
    for name, entry in ctx.loaded.catalog.items():
        _field_faults(entry.model_dump(), lambda f, t, n=name: ctx.out.error(ctx.cat_src, f"{n}.{f}", t))


def _allow_list(ctx: Any, name: str, entries: list[str]) -> list[str]:
    from busbar_sdk.ssrf import parse_host_or_network

    good = []
    for i, entry in enumerate(entries):
        try:
            parse_host_or_network(entry)
        except (ValueError, TypeError) as e:
            ctx.err(f"providers.{name}.allow_metadata_hosts[{i}]", f"'{entry}' is not a host name, IP "
                                                                  f"address or CIDR ({e})")
        else:
            good.append(entry)
    return good


def _check_provider(ctx: Any, name: str) -> None:
    cfg = ctx.cfg
    dep = cfg.providers[name]
    where = f"providers.{name}"
    if name == "admin" or name.startswith("admin/"):
        ctx.err(where, f"the provider name '{name}' is reserved; rename it")
    _field_faults(dep.model_dump(exclude={"api_key"}), lambda f, t: ctx.err(f"{where}.{f}", t))
    merged = ctx.merged(name)
    in_catalog = name in ctx.loaded.catalog
    auth = merged.get("auth")
    if auth == "oauth-client-credentials":
        for need, example in (("token_url", "https://login.example.com/oauth2/token"),
                              ("scope", "https://cognitiveservices.azure.com/.default")):
            if not merged.get(need):
                ctx.err(f"{where}.{need}", f"required by auth: oauth-client-credentials; add "
                                           f"{need}: {example}")
    else:
        for extra in ("token_url", "scope"):
            if getattr(dep, extra) is not None:
                ctx.warn(f"{where}.{extra}", "ignored: only auth: oauth-client-credentials uses it")
    if dep.subject is not None and auth != "jwt-bearer":
        ctx.warn(f"{where}.subject", "ignored: only auth: jwt-bearer uses it")
    allow = _allow_list(ctx, name, dep.allow_metadata_hosts)
    base_url = merged.get("base_url")
    if not base_url:
        ctx.err(where, f"'{name}' is not in the provider catalog, so base_url is required; add "
                       f"base_url: https://... (and protocol:, default anthropic) or fix the name")
    else:
        note = "" if dep.base_url is not None or not in_catalog else (
            " (this base_url comes from the provider catalog; override it here)")
        ctx.url(str(base_url), f"{where}.base_url", allow_private=True, provider_allow=allow, note=note)
    if merged.get("token_url"):
        ctx.url(str(merged["token_url"]), f"{where}.token_url", allow_private=True, provider_allow=allow)
    key = ctx.secret(dep.api_key, f"{where}.api_key")   # unset / empty: a fault (config/secrets.py)
    if key and cfg.auth.upstream_credentials == "passthrough":
        ctx.warn(f"{where}.api_key", "auth.upstream_credentials is passthrough but this credential "
                                     "resolves non-empty: a configured key on a passthrough gateway "
                                     "is a credential-leak risk; remove it or use own")


def _check_model(ctx: Any, name: str) -> None:
    cfg = ctx.cfg
    m = cfg.models[name]
    where = f"models.{name}"
    if name == "admin":
        ctx.err(where, "the model name 'admin' is reserved; rename it")
    if m.provider not in cfg.providers:
        ctx.err(f"{where}.provider", f"'{m.provider}' is not defined under providers; fix the name or "
                                     f"add the provider")
    if m.max_concurrent is not None and m.max_concurrent < 1:
        ctx.err(f"{where}.max_concurrent", "must be ≥ 1 (0 never grants a permit; omit it for unbounded)")
    if m.max_requests == 0 or m.max_requests < -1:
        ctx.err(f"{where}.max_requests", f"{m.max_requests} is not allowed; must be -1 (unlimited) or "
                                         f"≥ 1 (0 is a permanently unusable lane; default -1)")
    if m.default_max_tokens is not None and m.default_max_tokens < 1:
        ctx.err(f"{where}.default_max_tokens", "must be > 0 (it is injected upstream and a 0 is "
                                               "rejected; omit it for limits.default_max_tokens)")
    if m.attempt_timeout_ms is not None and m.attempt_timeout_ms < 1:
        ctx.err(f"{where}.attempt_timeout_ms", "must be ≥ 1 (omit it for no per-attempt cap)")
    if m.upstream_model is not None and not m.upstream_model.strip():
        ctx.err(f"{where}.upstream_model", f"must be non-empty when set (omit it to send '{name}')")
    if m.operations is not None:
        for fault in operations_faults(ctx.protocol_of_model(name), m.operations):
            ctx.err(f"{where}.operations", fault)


def check(ctx: Any) -> None:
    """Catalog entries, deployment providers, then models (document order)."""
    _check_catalog(ctx)
    for name in ctx.cfg.providers:
        _check_provider(ctx, name)
    for name in ctx.cfg.models:
        _check_model(ctx, name)
