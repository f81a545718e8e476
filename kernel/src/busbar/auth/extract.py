"""Which credential a data-plane caller presented (docs/auth.md#presenting-a-key).

Order: ``Authorization: Bearer <token>``, then ``x-api-key``, then ``x-goog-api-key``; a blank
value is absent (the next header is tried). An ``Authorization`` header of another scheme (an AWS
SigV4 signature) is not a bearer token. A request carrying one of these headers more than once
is ambiguous (which one counts depends on the parser) and is refused (:func:`repeated_credential`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["CREDENTIAL_HEADERS", "presented_token", "repeated_credential"]

_HEADERS = ("x-api-key", "x-goog-api-key")
CREDENTIAL_HEADERS = frozenset({b"authorization", *(h.encode() for h in _HEADERS)})
"""The headers a credential is read from (lower-case bytes, as in an ASGI scope)."""


def repeated_credential(raw: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether the raw ``(name, value)`` header pairs carry any :data:`CREDENTIAL_HEADERS` name twice
    (names compared case-insensitively)."""
    seen: set[bytes] = set()
    for name, _ in raw:
        low = name.lower()
        if low in CREDENTIAL_HEADERS:
            if low in seen:
                return True
            seen.add(low)
    return False


def presented_token(headers: Mapping[str, str]) -> str | None:
    """The caller's token from lower-cased request ``headers``, or ``None`` when none is presented."""
    auth = headers.get("authorization", "")
    scheme, _, value = auth.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    for name in _HEADERS:
        value = headers.get(name, "").strip()
        if value:
            return value
    return None
