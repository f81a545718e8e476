"""``Idempotency-Key`` on key mint and rotate: a retried request gets the first reply, not a second key.

A reply is remembered for 10 minutes per ``(principal, route, Idempotency-Key)`` together with a
digest of the request body. The same key with the same body replays the stored reply (status and
body, the token included: it is the mint reply); the same key with a different body is ``409
conflict``. At most 10,000 replies are kept (oldest dropped first).

Source: docs/admin.md#keys.
"""
from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["TTL_S", "IdempotencyCache"]

TTL_S = 600.0
_MAX = 10_000


class IdempotencyCache:
    """Remembered replies (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._items: OrderedDict[tuple[str, str, str], tuple[float, str, int, Any]] = OrderedDict()

    @staticmethod
    def digest(body: bytes) -> str:
        """SHA-256 hex of the request body."""
        return hashlib.sha256(body).hexdigest()

    def _prune(self) -> None:
        now = self._clock()
        while self._items:
            key, (at, *_rest) = next(iter(self._items.items()))
            if now - at < TTL_S and len(self._items) <= _MAX:
                break
            del self._items[key]

    def lookup(self, scope: tuple[str, str, str], digest: str) -> tuple[int, Any] | bool | None:
        """``(status, body)`` to replay, ``None`` when unseen, ``False`` when the key was used with
        another body."""
        self._prune()
        hit = self._items.get(scope)
        if hit is None:
            return None
        _at, seen, status, body = hit
        if seen != digest:
            return False
        return status, body

    def store(self, scope: tuple[str, str, str], digest: str, status: int, body: Any) -> None:
        """Remember a reply."""
        self._items[scope] = (self._clock(), digest, status, body)
        self._items.move_to_end(scope)
        self._prune()
