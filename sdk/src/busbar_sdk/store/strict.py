"""Strict (fleet-exact) limit counters: the records of the store's strict operations and the one
check every backend applies.

A strict counter is keyed by ``(bucket, window_start, metric)`` (``metric``: ``requests`` or
``budget``) and holds two integers: ``used`` (settled: billable requests, or spend in micro-units)
and ``reserved`` (held by requests in flight: 1 per request, or a worst-case cost in micro-units).

- ``Store.strict_admit([StrictCharge])``: ONE atomic operation over every charge. When every
  counter has ``used + reserved + amount <= cap`` each one's ``reserved`` grows by its ``amount``;
  otherwise nothing moves and the answer is the index of the first charge that does not fit.
- ``Store.strict_settle([StrictRelease])``: atomically, each counter's ``reserved`` shrinks by
  ``release`` and its ``used`` grows by ``add`` (both floored at 0).
- ``Store.strict_get(bucket, window_start, metric) -> StrictCounter``.

``expires_at`` (Unix seconds, ``None`` = never) is when the counter may be dropped: the window's
end plus :data:`EXPIRY_GRACE_S`, so a request that settles after the roll still finds its row. A
backend with native expiry (valkey) sets it on the key; the SQL and memory stores drop expired rows
whenever a counter is created. A counter that expired reads as zero.

Source: docs/stores.md#strict-counters, docs/limits.md#strict-mode.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from busbar_sdk.store.errors import StoreInvalid
from busbar_sdk.store.records import _Flat

__all__ = ["EXPIRY_GRACE_S", "STRICT_METRICS", "StrictCharge", "StrictCounter", "StrictRelease", "check_distinct",
           "first_over"]

#: The metrics a strict counter may hold.
STRICT_METRICS = ("requests", "budget")

#: Seconds a counter outlives its window (longer than any request is in flight).
EXPIRY_GRACE_S = 3600

_KEY_TYPES: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "bucket": (str, False), "window_start": (int, False), "metric": (str, False), "expires_at": (int, True)}


class _Keyed(_Flat):
    """What a charge and a release share: the counter they name, ``(bucket, window_start, metric)``
    (the fields themselves are declared by each dataclass, so their positional order stays its own)."""

    bucket: str
    window_start: int
    metric: str

    @property
    def key(self) -> tuple[str, int, str]:
        """``(bucket, window_start, metric)``."""
        return (self.bucket, self.window_start, self.metric)


@dataclass(slots=True)
class StrictCharge(_Keyed):
    """One counter to check and reserve on admission: fits when ``used + reserved + amount <= cap``.
    ``amount`` and ``cap`` are ≥ 0 (requests: 1 and the cap; budget: micro-units)."""

    WHERE: ClassVar[str] = "strict charge"
    TYPES: ClassVar[dict[str, tuple[type | tuple[type, ...], bool]]] = {
        **_KEY_TYPES, "cap": (int, False), "amount": (int, False)}

    bucket: str
    window_start: int
    metric: str
    cap: int
    amount: int
    expires_at: int | None = None


@dataclass(slots=True)
class StrictRelease(_Keyed):
    """One counter to settle: ``reserved -= release``, ``used += add`` (each floored at 0)."""

    WHERE: ClassVar[str] = "strict release"
    TYPES: ClassVar[dict[str, tuple[type | tuple[type, ...], bool]]] = {
        **_KEY_TYPES, "release": (int, False), "add": (int, False)}

    bucket: str
    window_start: int
    metric: str
    release: int
    add: int
    expires_at: int | None = None


@dataclass(slots=True)
class StrictCounter(_Flat):
    """A strict counter as read: ``used`` (settled) and ``reserved`` (in flight)."""

    WHERE: ClassVar[str] = "strict counter"
    TYPES: ClassVar[dict[str, tuple[type | tuple[type, ...], bool]]] = {"used": (int, False), "reserved": (int, False)}

    used: int = 0
    reserved: int = 0


def check_distinct(items: Sequence[StrictCharge | StrictRelease]) -> None:
    """Validate one call's items: known metrics, no negative amounts, each key once.

    Raises:
        StoreInvalid: the first fault, naming the item's index.
    """
    seen: set[tuple[str, int, str]] = set()
    for i, item in enumerate(items):
        if item.metric not in STRICT_METRICS:
            raise StoreInvalid(f"item {i}: metric {item.metric!r} is not one of {', '.join(STRICT_METRICS)}")
        amounts: Any = (item.cap, item.amount) if isinstance(item, StrictCharge) else (item.release, item.add)
        if min(amounts) < 0:
            raise StoreInvalid(f"item {i}: amounts must be >= 0")
        if item.key in seen:
            raise StoreInvalid(f"item {i}: counter {item.key} appears twice in one call")
        seen.add(item.key)


def first_over(charges: Sequence[StrictCharge], current: Mapping[tuple[str, int, str], tuple[int, int]]) -> int | None:
    """The index of the first charge that does not fit ``current`` (``key -> (used, reserved)``,
    absent = 0, 0), or ``None`` when all fit. What every backend decides, in one place for the
    backends that decide in Python (memory, sqlite)."""
    for i, c in enumerate(charges):
        used, reserved = current.get(c.key, (0, 0))
        if used + reserved + c.amount > c.cap:
            return i
    return None
