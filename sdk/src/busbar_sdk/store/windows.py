"""Limit windows in civil UTC: where a window starts and when it rolls over.

A window is named by ``per``: ``minute``, ``hour``, ``day``, ``month`` (calendar months, so
February rolls after 28 or 29 days) or ``total`` (one window for ever, starting at 0). Times are
integer Unix seconds. A usage ledger row is keyed by ``(bucket, window_start)``.
"""
from __future__ import annotations

from datetime import UTC, date, datetime

__all__ = ["WINDOWS", "day_of", "parse_day", "window_end", "window_start"]

WINDOWS = ("minute", "hour", "day", "month", "total")
_FIXED = {"minute": 60, "hour": 3600, "day": 86400}


def window_start(per: str, ts: int) -> int:
    """Start (Unix s) of the ``per`` window holding ``ts``.

    Raises:
        ValueError: ``per`` is not one of :data:`WINDOWS`.
    """
    size = _FIXED.get(per)
    if size is not None:
        return ts - ts % size
    if per == "month":
        d = datetime.fromtimestamp(ts, UTC)
        return int(datetime(d.year, d.month, 1, tzinfo=UTC).timestamp())
    if per == "total":
        return 0
    raise ValueError(f"unknown window {per!r}; expected one of {', '.join(WINDOWS)}")


def window_end(per: str, start: int) -> int | None:
    """First second after the window that starts at ``start`` (``None`` for ``total``: it never rolls).

    Raises:
        ValueError: ``per`` is not one of :data:`WINDOWS`.
    """
    size = _FIXED.get(per)
    if size is not None:
        return start + size
    if per == "month":
        d = datetime.fromtimestamp(start, UTC)
        year, month = (d.year + 1, 1) if d.month == 12 else (d.year, d.month + 1)
        return int(datetime(year, month, 1, tzinfo=UTC).timestamp())
    if per == "total":
        return None
    raise ValueError(f"unknown window {per!r}; expected one of {', '.join(WINDOWS)}")


def day_of(ts: int) -> str:
    """The UTC calendar day of ``ts`` as ``YYYY-MM-DD`` (the metering bucket)."""
    return datetime.fromtimestamp(ts, UTC).date().isoformat()


def parse_day(text: str) -> str:
    """Validate a ``YYYY-MM-DD`` day and return it normalised.

    Raises:
        ValueError: not a valid calendar date in that form.
    """
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise ValueError(f"{text!r} is not a day in the form YYYY-MM-DD") from None
