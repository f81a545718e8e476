"""Admin scopes: what each route requires, and whether a principal's grants cover it.

Scopes: ``read-only`` (every ``GET``, ``POST /config/validate``), ``mint`` (``POST /keys``),
``hooks-register`` (``PATCH /hooks/{name}/settings``) and ``full`` (everything). ``mint`` and
``hooks-register`` are incomparable siblings: each covers ``read-only`` and its own routes, neither
covers the other, and holding both is still not ``full``.

:func:`required_scope` derives the scope from the method and the route template alone
(``/api/v1/admin/keys/{key_id}``); a method or route not in :data:`ROUTE_SCOPES` requires ``full``
(fail closed). The OpenAPI document states each operation's scope as ``x-busbar-required-scope``.

An identity-provider principal (an ``auth.admin_auth`` plugin) holds :func:`role_scopes`: the union
of the ``admin_scope`` of its roles bound under ``auth.role_bindings.<module>``, each capped by the
module's ``max_admin_scope`` (:func:`capped`: a ceiling incomparable with a grant reduces it to
``read-only``). An unbound role grants nothing.

Source: docs/admin.md#scopes.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["PREFIX", "ROUTE_SCOPES", "SCOPES", "capped", "covers", "required_scope", "role_scopes"]

PREFIX = "/api/v1/admin"
SCOPES = ("read-only", "hooks-register", "mint", "full")

#: (method, route template) -> the scope it requires. Every GET not listed needs read-only.
ROUTE_SCOPES: dict[tuple[str, str], str] = {
    ("POST", f"{PREFIX}/config/validate"): "read-only",
    ("POST", f"{PREFIX}/keys"): "mint",
    ("PATCH", f"{PREFIX}/hooks/{{name}}/settings"): "hooks-register",
}


def required_scope(method: str, route: str | None) -> str:
    """The scope ``method`` on ``route`` (a template, or ``None`` when no route matched) requires."""
    method = method.upper()
    if route is not None and (method, route) in ROUTE_SCOPES:
        return ROUTE_SCOPES[(method, route)]
    if method in ("GET", "HEAD") and route is not None:
        return "read-only"
    return "full"


def covers(granted: Iterable[str], required: str) -> bool:
    """Do the ``granted`` scopes (a principal's union) cover ``required``?"""
    have = set(granted)
    if "full" in have:
        return True
    if required == "read-only":
        return bool(have & {"read-only", "mint", "hooks-register"})
    return required in have


def capped(grant: str, ceiling: str) -> str:
    """``grant`` under a module's ``max_admin_scope`` ``ceiling`` (incomparable: ``read-only``)."""
    if ceiling == "full" or grant == ceiling:
        return grant
    if grant == "full":
        return ceiling
    return "read-only"


def role_scopes(bindings: Mapping[str, Any], roles: Iterable[str], ceiling: str) -> frozenset[str]:
    """The admin scopes ``roles`` earn under one module's ``bindings`` (role -> RoleBinding), each
    capped by ``ceiling``; empty when no bound role grants one."""
    out = set()
    for role in roles:
        b = bindings.get(role)
        grant = getattr(b, "admin_scope", None) if b is not None else None
        if grant is not None:
            out.add(capped(grant, ceiling))
    return frozenset(out)
