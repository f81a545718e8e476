"""Who is calling the admin API: the credential, checked against ``auth.admin_auth``.

The credential is read from ``Authorization: Bearer <token>`` or, failing that, ``x-admin-token``
(blank values count as absent). The built-in ``admin-tokens`` module holds the operator token (a
secret reference resolved once at start); a match, compared in constant time, is the principal
``admin-tokens`` with scope ``full`` (the root credential; no ``max_admin_scope`` applies).
``auth.admin_auth: []`` is the open admin API: every caller is the principal ``anonymous`` with
``full`` (a loud warning at start). ``admin-tokens`` without a ``token:`` authenticates nobody.

Source: docs/admin.md#authentication.
"""
from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

__all__ = ["AdminAuth", "Principal", "credential_of"]


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


class AdminAuth:
    """The resolved admin chain.

    Args:
        tokens: the operator tokens of the ``admin-tokens`` entries (resolved secret values,
            non-blank; validation refused blank ones): each proves the principal ``admin-tokens``
            with ``full``.
        open_admin: ``auth.admin_auth: []``: no authentication at all.
        scoped: further ``(token, principal name, scopes)`` credentials (a delegated credential with
            less than ``full``).
    """

    def __init__(self, tokens: list[str], *, open_admin: bool = False,
                 scoped: list[tuple[str, str, frozenset[str]]] | None = None) -> None:
        self._creds = [(t.encode(), Principal("admin-tokens", frozenset({"full"}))) for t in tokens]
        self._creds += [(t.encode(), Principal(name, scopes)) for t, name, scopes in scoped or []]
        self.open = open_admin

    @property
    def usable(self) -> bool:
        """Can anyone ever authenticate (open, or at least one credential)?"""
        return self.open or bool(self._creds)

    def authenticate(self, credential: str | None) -> Principal | None:
        """The principal ``credential`` proves, or ``None`` (missing, wrong or unknown)."""
        if self.open:
            return Principal("anonymous", frozenset({"full"}))
        if credential is None:
            return None
        given = credential.encode()
        found = None
        for token, principal in self._creds:   # every token compared: time does not say which matched
            if hmac.compare_digest(given, token) and found is None:
                found = principal
        return found
