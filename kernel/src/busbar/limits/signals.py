"""The routing signals of limits: ``budget_remaining`` and ``rate_headroom`` of the caller's chain.

``signals_of(gw, call, pool) -> (budget_remaining, rate_headroom) | None``: ``None`` when the
gateway enforces no groups or the caller is bound to none; otherwise
:meth:`busbar.limits.engine.Limiter.headroom` of the caller's group for ``pool``.
``stamp(candidates, signals)`` adds the two fields to every ``candidates[]`` entry of a hook
projection (absent when ``None``: the wire never carries null). The chain's headroom is the same
for every member of one pool (pool-scoped limits scope to the pool, not the member), so the
``usage`` strategy ranks members with the signal in config order and no longer abstains.

Source: docs/limits.md#routing-signals, docs/hooks.md#native-strategies.
"""
from __future__ import annotations

from typing import Any

__all__ = ["signals_of", "stamp"]


def signals_of(gw: Any, call: Any, pool: str | None) -> tuple[int | None, float | None] | None:
    """The caller's ``(budget_remaining, rate_headroom)`` through ``pool``, or ``None``."""
    limits = getattr(gw, "limiter", None)
    if limits is None:
        return None
    record = getattr(call, "record", None)
    identity = record.identity if record is not None else None
    group = getattr(identity, "group", None) if identity is not None else None
    if group is None:
        return None
    result: tuple[int | None, float | None] = limits.limiter.headroom(group, pool)
    return result


def stamp(candidates: list[dict[str, Any]], signals: tuple[int | None, float | None] | None) -> None:
    """Add ``budget_remaining`` / ``rate_headroom`` to each candidate (left out when ``None``)."""
    if signals is None:
        return
    budget, rate = signals
    for c in candidates:
        if budget is not None:
            c["budget_remaining"] = budget
        if rate is not None:
            c["rate_headroom"] = round(rate, 6)
