"""Who is calling the admin API: the credential, checked against ``auth.admin_auth``.

The credential is read from ``Authorization: Bearer <token>`` or, failing that, ``x-admin-token``
(blank values count as absent). The built-in ``admin-tokens`` module holds the operator token (a
secret reference resolved once at start); a match, compared in constant time, is the principal
``admin-tokens`` with scope ``full`` (the root credential; no ``max_admin_scope`` applies).
``auth.admin_auth: []`` is the open admin API: every caller is the principal ``anonymous`` with
``full`` (a loud warning at start). ``admin-tokens`` without a ``token:`` authenticates nobody.
Any other entry is an identity-provider ``kind: auth`` plugin (``busbar.auth.plugin.PluginModule``),
asked in order when no operator token matched: Identify gives the principal ``<module>:<sub>`` with
the scopes its roles earn (``busbar.admin.scopes.role_scopes``, capped by the entry's
``max_admin_scope``), Reject refuses, Pass asks the next one.

Source: docs/admin.md#authentication.
"""
from __future__ import annotations

import hmac
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from busbar.admin.scopes import role_scopes

__all__ = ["AdminAuth", "IdpEntry", "Principal", "credential_of"]


@dataclass(frozen=True)
class Principal:
    """An authenticated admin caller: ``name`` (for audit and rate limits) and its scopes."""

    name: str
    scopes: frozenset[str]


def credential_of(headers: Any) -> str | None:
    """The presented admin credential (``Authorization: Bearer`` first, then ``x-admin-token``)."""
    auth = headers.get("authorization") or ""
    scheme, _, value = auth.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    token = (headers.get("x-admin-token") or "").strip()
    return token or None


@dataclass(frozen=True)
class IdpEntry:
    """An identity-provider entry of ``auth.admin_auth``: the opened module (``name``, ``bindings``,
    ``async identify(token, now) -> Identity | "pass" | "reject"``) and its ``max_admin_scope``."""

    module: Any
    ceiling: str


class AdminAuth:
    """The resolved admin chain.

    Args:
        tokens: the operator tokens of the ``admin-tokens`` entries (resolved secret values,
            non-blank; validation refused blank ones): each proves the principal ``admin-tokens``
            with ``full``.
        open_admin: ``auth.admin_auth: []``: no authentication at all.
        scoped: further ``(token, principal name, scopes)`` credentials (a delegated credential with
            less than ``full``).
        idp: the identity-provider entries, in chain order.
    """

    def __init__(self, tokens: list[str], *, open_admin: bool = False,
                 scoped: list[tuple[str, str, frozenset[str]]] | None = None,
                 idp: Sequence[IdpEntry] = ()) -> None:
        self._idp = tuple(idp)
        self._creds = [(t.encode(), Principal("admin-tokens", frozenset({"full"}))) for t in tokens]
        self._creds += [(t.encode(), Principal(name, scopes)) for t, name, scopes in scoped or []]
        self.open = open_admin

    @property
    def usable(self) -> bool:
        """Can anyone ever authenticate (open, or at least one credential)?"""
        return self.open or bool(self._creds) or bool(self._idp)

    async def authenticate(self, credential: str | None) -> Principal | None:
        """The principal ``credential`` proves, or ``None`` (missing, wrong, unknown or rejected)."""
        if self.open:
            return Principal("anonymous", frozenset({"full"}))
        if credential is None:
            return None
        given = credential.encode()
        found = None
        for token, principal in self._creds:   # every token compared: time does not say which matched
            if hmac.compare_digest(given, token) and found is None:
                found = principal
        if found is not None:
            return found
        for entry in self._idp:
            verdict = await entry.module.identify(credential, time.time())
            if verdict == "pass":
                continue
            if verdict == "reject" or isinstance(verdict, str):
                return None
            return Principal(f"{entry.module.name}:{verdict.principal}",
                             role_scopes(entry.module.bindings, verdict.roles, entry.ceiling))
        return None
