"""Native ordering strategies: sync sorts over one live signal, no I/O, no projection built.

``STRATEGIES[name](members, costs) -> tuple[int, ...] | None``: a ranked list of member indexes
(most preferred first) or ``None`` to abstain (SWRR proceeds as if no strategy were named).

=============  ===================================================================================
``weighted``   always abstains: the inline SWRR floor (``hooks: [weighted]`` is byte-identical to no
               list; no chain is even built for it).
``cheapest``   ascending ``cost_per_mtok`` (``(input_utok + output_utok) / 2`` of the model's
               ``rate_card`` entry); unpriced members demoted; abstains when none is priced.
``fastest``    ascending latency EWMA (ms); members without a sample demoted; abstains when none
               has one.
``least_busy`` descending free semaphore permits; never abstains.
``usage``      ranks when the caller's group chain has a ``rate_headroom`` (busbar.limits.signals;
               the same for every member of one pool, so config order); abstains otherwise. The
               chain calls ``busbar.limits.signals`` for it; this ranker sees no request.
=============  ===================================================================================

Ties keep config order; demoted members follow in config order. Every signal ranked on here is on
the wire (``busbar.hooks.projection``), so an external hook can reproduce any strategy exactly.

Source: docs/hooks.md#native-strategies
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from busbar.hooks.projection import available_permits

Ranker = Callable[[Sequence[Any], Mapping[int, "float | None"]], "tuple[int, ...] | None"]

__all__ = ["CONFIG_ONLY", "STRATEGIES", "Ranker", "rank_by"]


def rank_by(members: Sequence[Any], key: Callable[[Any], float | None], *,
            descending: bool = False) -> tuple[int, ...] | None:
    """Members with a signal sorted by it (config order on ties), then the others in config order;
    ``None`` when no member has the signal."""
    have: list[tuple[float, int]] = []
    missing: list[int] = []
    for m in members:
        v = key(m)
        if v is None:
            missing.append(m.index)
        else:
            have.append((-v if descending else v, m.index))
    if not have:
        return None
    have.sort()
    return tuple([i for _, i in have] + missing)


def weighted(members: Sequence[Any], costs: Mapping[int, float | None]) -> tuple[int, ...] | None:
    return None


def cheapest(members: Sequence[Any], costs: Mapping[int, float | None]) -> tuple[int, ...] | None:
    return rank_by(members, lambda m: costs.get(m.index))


def fastest(members: Sequence[Any], costs: Mapping[int, float | None]) -> tuple[int, ...] | None:
    return rank_by(members, lambda m: m.lane.latency_ms)


def least_busy(members: Sequence[Any], costs: Mapping[int, float | None]) -> tuple[int, ...] | None:
    if not members:
        return None
    return rank_by(members, lambda m: float(available_permits(m.lane)), descending=True)


def usage(members: Sequence[Any], costs: Mapping[int, float | None]) -> tuple[int, ...] | None:
    return rank_by(members, lambda m: getattr(m, "rate_headroom", None), descending=True)


STRATEGIES: dict[str, Ranker] = {"weighted": weighted, "cheapest": cheapest, "fastest": fastest,
                                 "least_busy": least_busy, "usage": usage}

#: Strategies ranking on config alone (the rate card): a pool's full ranking is computed once at
#: boot, and a request's is that ranking filtered to its healthy members, the same tuple
#: :func:`rank_by` would sort (filtering a sorted list keeps its order).
CONFIG_ONLY = frozenset({"cheapest"})
