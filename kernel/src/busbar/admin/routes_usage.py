"""``/api/v1/admin``: ``GET /usage?day=YYYY-MM-DD`` and ``GET /keys/{key_id}/usage`` (read-only).

``/usage``: one UTC day of metering (default today): ``{"day", "totals", "by_model", "by_key"
(top 1000 by spend), "others"}``, every entry with ``input``, ``output``, ``cache_read``,
``cache_write``, ``requests``, ``billable_requests`` and ``spend_micros`` derived from the running
rate card (busbar.limits.usage). A malformed day is 400 ``invalid_request``.

``/keys/{key_id}/usage``: the key's all-time counters (every day since it was created) with
``spend_micros``, its ``group`` and that chain's ``budget_remaining`` / ``rate_headroom``
(``null`` when the key has no group or the chain no such limit). Unknown key: 404.

Source: docs/limits.md#usage-reports.
"""
from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from busbar_sdk.store.windows import day_of, parse_day
from fastapi import APIRouter, Request

from busbar.admin.context import admin_of
from busbar.admin.errors import AdminError
from busbar.admin.models import ErrorBody
from busbar.limits.cost import RateCard
from busbar.limits.usage import day_report, totals

router = APIRouter(tags=["usage"])
_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 401, 403, 404)}
MAX_DAYS = 400


def _card(gw: Any) -> RateCard:
    limits = getattr(gw, "limiter", None)
    return limits.card if limits is not None else RateCard(gw.config.rate_card, gw.config.per_request_fee)


@router.get("/usage", responses=_ERRORS, summary="One UTC day of metering: by model, by key (top 1000)")
async def usage(request: Request, day: str | None = None) -> dict[str, Any]:
    ctx = admin_of(request)
    try:
        which = parse_day(day) if day is not None else day_of(int(time.time()))
    except ValueError as e:
        raise AdminError("invalid_request", f"day: {e}") from None
    rows = await ctx.store.list_metering(which)
    return day_report(which, rows, _card(ctx.gateway))


@router.get("/keys/{key_id}/usage", responses=_ERRORS, summary="A key's all-time usage and its chain's headroom")
async def key_usage(request: Request, key_id: str) -> dict[str, Any]:
    ctx = admin_of(request)
    key = await ctx.store.get_key(key_id)
    if key is None:
        raise AdminError("not_found", f"key '{key_id}' does not exist")
    now = int(time.time())
    first = datetime.fromtimestamp(max(key.created_at, now - MAX_DAYS * 86400), UTC).date()
    last = datetime.fromtimestamp(now, UTC).date()
    rows = []
    d = first
    while d <= last:
        rows += [r for r in await ctx.store.list_metering(d.isoformat()) if r.key_id == key_id]
        d += timedelta(days=1)
    gw = ctx.gateway
    budget = rate = None
    limits = getattr(gw, "limiter", None)
    if key.group is not None and limits is not None:
        budget, rate = limits.limiter.headroom(key.group, None)
    return {"key_id": key_id, "group": key.group, "since": first.isoformat(), **totals(rows, _card(gw)),
            "budget_remaining": budget, "rate_headroom": rate}
