"""Recognise a Busbar 1.x config by its structural markers, before the 1.5.0 schema ever reads it.

``legacy_markers(doc) -> [(key_path, what_replaced_it)]``; empty = not a 1.x config. Boot and
``--validate`` refuse a config with any marker, one line per marker::

    config.yaml: pools.p.members[0].target: this looks like a Busbar 1.x config; run busbar --migrate-config

Booting such a config under 1.5.0 rules would silently flip semantics (most critically
``allowed_pools: []``, which now means NO pools), so nothing from 1.x boots. The migrator
(``busbar.config.migrate``) converts every marker listed here.

Markers: ``governance:``, ``auth.mode``, ``auth.group_map``, ``auth.client_tokens``, top-level
``hooks:``, top-level ``group_map:`` / ``admin_auth:`` (1.4.x homes), ``providers.*.api_key_env``,
``pools.*.members[].target``, ``pools.*.on_exhausted.action`` (1.4.x wrapper), and the 1.2-era
``route:`` / ``policy:`` keys (top level or in a pool) and member ``cost_per_mtok``.

Source: docs/configuration.md#startup-checks (1.x config detected), docs/configuration.md#migrating-from-1x.
docs/hooks-firstparty.md (the 1.2-era keys); docs/hooks.md ("the old keys are hard startup errors that name the fix").
"""
from __future__ import annotations

import re
from typing import Any

import yaml

MIGRATE_HINT = "this looks like a Busbar 1.x config; run busbar --migrate-config"

_TOP = {
    "governance": "dissolved into store / rate_card / per_request_fee / groups / advanced / auth",
    "hooks": "hook instances are inline refs in pools.<pool>.hooks / global_hooks",
    "group_map": "became auth.role_bindings, nested by module",
    "admin_auth": "moved to auth.admin_auth",
    "route": "the 1.2 routing key; name the strategy or hook in pools.<pool>.hooks",
    "policy": "the 1.2 routing key; name the strategy or hook in pools.<pool>.hooks",
}
_AUTH = {
    "mode": "replaced by auth.chain / auth.upstream_credentials",
    "group_map": "became auth.role_bindings, nested by module",
    "client_tokens": "static tokens are gone; mint signed keys",
}


def legacy_markers(doc: Any) -> list[tuple[str, str]]:
    """Every 1.x marker in a parsed config.yaml document, as ``(key path, what replaced it)``."""
    if not isinstance(doc, dict):
        return []
    found = [(k, why) for k, why in _TOP.items() if k in doc]
    auth = doc.get("auth")
    if isinstance(auth, dict):
        found += [(f"auth.{k}", why) for k, why in _AUTH.items() if k in auth]
    providers = doc.get("providers")
    if isinstance(providers, dict):
        for name, p in providers.items():
            if isinstance(p, dict) and "api_key_env" in p:
                found.append((f"providers.{name}.api_key_env", "secret fields are secret references: "
                                                               "api_key: { env: VAR }"))
    pools = doc.get("pools")
    if isinstance(pools, dict):
        for name, pool in pools.items():
            if not isinstance(pool, dict):
                continue
            for k in ("route", "policy"):
                if k in pool:
                    found.append((f"pools.{name}.{k}", _TOP[k]))
            oe = pool.get("on_exhausted")
            if isinstance(oe, dict) and "action" in oe:
                found.append((f"pools.{name}.on_exhausted.action",
                              "a bare reject / least_bad or { fallback_pool: <pool> }"))
            members = pool.get("members")
            for i, m in enumerate(members if isinstance(members, list) else []):
                if isinstance(m, dict):
                    if "target" in m:
                        found.append((f"pools.{name}.members[{i}].target", "renamed model"))
                    if "cost_per_mtok" in m:
                        found.append((f"pools.{name}.members[{i}].cost_per_mtok",
                                      "rate_card is the only cost source"))
    return found


_ENV_REF = re.compile(r"\$\{[^}\n]*\}")


def protect_env_refs(text: str) -> tuple[str, dict[str, str]]:
    """Replace each ``${...}`` by an inert token (``busbarenvref<N>x``) so the raw, uninterpolated text
    parses whatever the references hold; returns the text and token -> original reference."""
    tokens: dict[str, str] = {}

    def sub(m: re.Match[str]) -> str:
        token = f"busbarenvref{len(tokens)}x"
        tokens[token] = m.group(0)
        return token

    return _ENV_REF.sub(sub, text), tokens


def raw_legacy_markers(text: str) -> list[tuple[str, str]]:
    """:func:`legacy_markers` of the raw (uninterpolated) text; [] when it does not parse.

    Used when interpolation fails, so a 1.x config still points at the migrator even though the
    variables it names (static client tokens, ...) are no longer set.
    """
    protected, _ = protect_env_refs(text)
    try:
        doc = yaml.load(protected, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return []
    return legacy_markers(doc)
