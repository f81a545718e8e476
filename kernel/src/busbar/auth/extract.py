"""Which credential a data-plane caller presented (docs/auth.md#presenting-a-key).

Order: ``Authorization: Bearer <token>``, then ``x-api-key``, then ``x-goog-api-key``; a blank
value is absent (the next header is tried). An ``Authorization`` header of another scheme (an AWS
SigV4 signature) is not a bearer token.
"""
from __future__ import annotations

from collections.abc import Mapping

__all__ = ["presented_token"]

_HEADERS = ("x-api-key", "x-goog-api-key")


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
