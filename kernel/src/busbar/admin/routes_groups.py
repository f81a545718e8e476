"""``/api/v1/admin``: ``GET /groups`` and ``GET /groups/{name}``: the group tree with live usage.

Each group: ``{"name", "parent", "enabled", "runtime" (auto-provisioned), "chain" (leaf to root),
"limits": [{"metric", "amount", "per", "pool", "shadow", "strict", "bucket", "used", "reserved",
"remaining"}]}``. ``used``/``reserved`` are this node's counters (busbar.limits.engine
``Limiter.usage_of``: requests billable, tokens, budget micro-units, in flight), except for a
strict limit: the fleet's, read from the store's strict counter (busbar.limits.strict; this node's
when the store cannot be read); ``remaining`` = amount - used - reserved, floored at 0. With no
group configured the list is empty. Unknown group: 404.

Source: docs/limits.md#the-groups-report.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from busbar.admin.context import admin_of
from busbar.admin.errors import AdminError
from busbar.admin.models import ErrorBody

router = APIRouter(tags=["groups"])
_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 403, 404)}


async def _fleet(limits: Any, gw: Any, names: list[str]) -> dict[tuple[str, str], dict[str, int]]:
    """The store's counters of the strict limits of ``names`` (one read each; none without one)."""
    strict = [lim for n in names for lim in limits.tree.groups[n].limits if lim.strict]
    if not strict:
        return {}
    fleet: dict[tuple[str, str], dict[str, int]] = await limits.strict.fleet_usage(gw, strict,
                                                                                   int(limits.limiter.clock()))
    return fleet


def _view(limits: Any, name: str, runtime: Any, fleet: dict[tuple[str, str], dict[str, int]]) -> dict[str, Any]:
    group = limits.tree.groups[name]
    chain = limits.tree.chain(name) or ()
    rows = []
    for lim in group.limits:
        now = fleet.get((lim.bucket, lim.metric)) or limits.limiter.usage_of(lim)
        rows.append({"metric": lim.metric, "amount": lim.amount, "per": lim.per, "pool": lim.pool,
                     "shadow": lim.shadow, "strict": lim.strict, "bucket": lim.bucket, **now,
                     "remaining": max(0, lim.amount - now["used"] - now["reserved"])})
    return {"name": name, "parent": group.parent, "enabled": group.enabled,
            "runtime": runtime is not None and name in runtime and name not in limits.config_groups,
            "chain": [g.name for g in chain], "limits": rows}


@router.get("/groups", responses=_ERRORS, summary="The group tree with this node's live usage")
async def groups(request: Request) -> dict[str, Any]:
    ctx = admin_of(request)
    limits = getattr(ctx.gateway, "limiter", None)
    if limits is None:
        return {"groups": []}
    names = sorted(limits.tree.groups)
    fleet = await _fleet(limits, ctx.gateway, names)
    return {"groups": [_view(limits, n, ctx.runtime_groups, fleet) for n in names]}


@router.get("/groups/{name}", responses=_ERRORS, summary="One group with this node's live usage")
async def group(request: Request, name: str) -> dict[str, Any]:
    ctx = admin_of(request)
    limits = getattr(ctx.gateway, "limiter", None)
    if limits is None or name not in limits.tree.groups:
        raise AdminError("not_found", f"group '{name}' is not configured")
    return _view(limits, name, ctx.runtime_groups, await _fleet(limits, ctx.gateway, [name]))
