"""Member selection: affinity preference, then Nginx smooth weighted round-robin (SWRR).

SWRR over the usable subset: each usable member's ``current += weight``; the largest wins and
pays back the subset's total weight. Weights 5/1/1 give ``a a b a c a a``. A tripped, dead,
budget-exhausted or saturated member is skipped and its share redistributes. State is per pool
(each ``Member`` object belongs to one pool), so pools sharing a lane select independently.

Affinity (``mode: session``): the session header's FNV-1a hash picks a sticky member among the
pool's members; it is used while usable, otherwise SWRR proceeds without failing.

Source: docs/hooks.md#native-strategies, docs/reliability.md#selection
"""
from __future__ import annotations

from collections.abc import Set as AbstractSet

from busbar.proxy.runtime import Member, Pool


def fnv1a(data: bytes) -> int:
    """64-bit FNV-1a (stable across restarts, unlike ``hash()``)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def swrr_pick(pool: Pool, now: float, excluded: set[int]) -> Member | None:
    """Pick one usable member not in ``excluded`` (member indexes) by SWRR; ``None`` if none."""
    best = None
    total = 0
    for m in pool.members:
        if m.index in excluded or not m.usable(now):
            continue
        m.current += m.weight
        total += m.weight
        if best is None or m.current > best.current:
            best = m
    if best is not None:
        best.current -= total
    return best


def affinity_pick(pool: Pool, session: str | None, now: float, excluded: set[int]) -> Member | None:
    """The sticky member for ``session`` when it is usable and not excluded, else ``None``."""
    if not session:
        return None
    members = pool.members
    m = members[fnv1a(session.encode()) % len(members)]
    if m.index in excluded or not m.usable(now):
        return None
    return m


def soonest_cooldown(pool: Pool, now: float) -> float:
    """Seconds until the earliest member could admit again (≥ 1); the 503's ``Retry-After``."""
    best = None
    for m in pool.members:
        until = max(m.cell.cooldown_until, m.lane.hard_down_until)
        wait = until - now
        if best is None or wait < best:
            best = wait
    return max(1.0, best if best is not None else 1.0)


def least_bad(pool: Pool, now: float, excluded: AbstractSet[int]) -> Member | None:
    """``on_exhausted: least_bad``: the member whose cooldown ends soonest and has a free permit."""
    cands = [m for m in pool.members if m.index not in excluded and m.lane.has_permit()
             and m.lane.budget != 0]
    if not cands:
        return None
    return min(cands, key=lambda m: max(m.cell.cooldown_until, m.lane.hard_down_until))


def all_throttled(members: list[Member], now: float, floor: set[int] | frozenset[int]) -> bool:
    """True when every member outside ``floor`` (member indexes) is out only because of a rate-limit
    cooldown (``BreakerCell.throttled``): not hard-down, budget left. False for an empty set."""
    seen = False
    for m in members:
        if m.index in floor:
            continue
        if not m.cell.throttled(now) or m.lane.hard_down_until > now or m.lane.budget == 0:
            return False
        seen = True
    return seen
