"""Judge a plugin instance's ``settings:`` by the rules its manifest's settings schema declares.

The kernel names no plugin here: what it checks comes from the plugin's signed settings schema
(:mod:`busbar_sdk.settings_schema`: ``required`` keys, ``x-busbar-egress-url`` properties, the
``x-busbar-egress-allow`` list). Every egress URL goes through the one SSRF guard as a hook-sidecar
endpoint (``allow_private=False``: loopback, or public ``https://``), with the instance's own
allow-list as its only exception (docs/plugin-format.md "Settings schema keywords",
docs/security.md "Scope of an exception").
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from busbar_sdk.settings_schema import NO_RULES, SettingsRules, settings_rules
from busbar_sdk.ssrf import SsrfBlocked, SsrfPolicy

__all__ = ["manifest_rules", "settings_faults"]


def manifest_rules(manifest: Any) -> SettingsRules:
    """The :class:`SettingsRules` of a loaded plugin's manifest (``NO_RULES`` without a schema or a
    manifest; a manifest's schema was validated when it was loaded)."""
    schema = getattr(manifest, "settings_schema", None)
    return settings_rules(schema) if isinstance(schema, str) else NO_RULES


def settings_faults(rules: SettingsRules, settings: Mapping[str, Any], *, module: str, path: str,
                    policy: SsrfPolicy) -> list[tuple[str, str]]:
    """Every fault of one instance's ``settings`` under ``rules``, as ``(key path, text)``.

    Args:
        rules: the plugin's rules (:func:`manifest_rules`).
        settings: the instance's ``settings:`` map as configured.
        module: the ``module:`` the config names (manifest name or alias), for the text.
        path: the instance's key path (``pools.p.hooks[0]``); faults are at ``<path>.settings.<key>``.
        policy: the deployment's SSRF policy (``security:``).

    Returns:
        ``[]`` when every rule holds. A refused URL's text is the guard's reason without its key path
        (``10.0.0.5 is a private (RFC 1918 / unique-local) address; refused by the SSRF guard ...``).
    """
    faults: list[tuple[str, str]] = []
    for key in rules.required:
        if key not in settings:
            what = rules.describe(key)
            faults.append((f"{path}.settings.{key}", f"required by {module}" + (f" ({what})" if what else "")
                           + f"; add settings: {{ {key}: ... }}"))
    if not rules.egress_urls:
        return faults
    allow: tuple[str, ...] = ()
    if rules.egress_allow is not None:
        raw = settings.get(rules.egress_allow, [])
        if isinstance(raw, list) and all(isinstance(e, str) for e in raw):
            allow = tuple(raw)
        else:
            faults.append((f"{path}.settings.{rules.egress_allow}", "must be a list of host names, IP addresses "
                                                                    "or CIDRs"))
    guard_policy = policy.with_allow_key(f"settings.{rules.egress_allow}") if rules.egress_allow else policy
    for key in rules.egress_urls:
        where = f"{path}.settings.{key}"
        url = settings.get(key)
        if url is None:
            continue                      # absent: a required key is reported above
        if not isinstance(url, str):
            faults.append((where, f"must be a URL string, found {url!r}"))
            continue
        try:
            guard_policy.check_url(url, purpose=where, provider_allow=allow, allow_private=False)
        except SsrfBlocked as e:
            reason = e.reason
            for sep in (": ", " "):
                if reason.startswith(where + sep):
                    reason = reason[len(where) + len(sep):]
                    break
            faults.append((where, reason))
    return faults
