"""``GET /stats``: a JSON snapshot of every lane's live state, scoped to what the caller may use.

``stats_reply(state, headers) -> Reply``. With an ``auth.chain`` the caller must identify like a
data-plane request (a stranger gets the OpenAI-envelope 401 of the front door) and sees only the
pools its grant allows (``allowed_pools``; every pool when unrestricted) and the lanes those pools
use, plus models it may address directly. Without a chain (an open front door) everything is shown.
Reading it never takes a breaker probe. Shape::

    {"config_version": 3,
     "lanes": [{"lane": "gpt-4o", "provider": "openai", "inflight": 2, "max_concurrent": 10,
                "latency_ewma_ms": 412.5, "hard_down_secs": 0.0, "budget": -1,
                "ok": 120, "errors": 3,
                "cells": [{"pool": "smart", "state": "open", "cooldown_secs": 17.2},
                          {"pool": null, "state": "closed", "cooldown_secs": 0.0}]}]}

``pool: null`` is the lane's own cell (direct routes); ``state`` is ``closed`` / ``open`` /
``half_open``; seconds are remaining time; ``budget`` -1 = unlimited.

Source: docs/operations.md#stats
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from busbar.proto.registry import get_dialect
from busbar.proxy.breaker import STATE_NAMES
from busbar.proxy.relay import Reply

if TYPE_CHECKING:
    from busbar.proxy.breaker import BreakerCell
    from busbar.server.app import AppState

__all__ = ["stats_reply"]


def _cell(pool: str | None, cell: BreakerCell, now: float) -> dict[str, Any]:
    return {"pool": pool, "state": STATE_NAMES[cell.state_at(now)],
            "cooldown_secs": round(max(0.0, cell.cooldown_until - now), 3)}


async def stats_reply(state: AppState, headers: Mapping[str, str]) -> Reply:
    """The ``/stats`` reply for a caller presenting ``headers`` (see the module docstring)."""
    gw = state.gateway
    allowed: frozenset[str] | None = None
    frontdoor = getattr(gw, "frontdoor", None)
    if frontdoor is not None:
        identity = await frontdoor.identify(headers)
        if identity is None:
            from busbar.auth.refusal import unauthenticated

            return unauthenticated(get_dialect("openai"))
        allowed = identity.allowed_pools
    now = gw.clock()
    cells: dict[str, list[dict[str, Any]]] = {}
    for pool in gw.pools.values():
        if allowed is not None and pool.name not in allowed:
            continue
        for m in pool.members:
            cells.setdefault(m.lane.name, []).append(_cell(pool.name, m.cell, now))
    lanes = []
    for name, lane in gw.lanes.items():
        direct = allowed is None or name in allowed
        if name not in cells and not direct:
            continue
        own = [_cell(None, lane.default_cell, now)] if direct else []
        lanes.append({"lane": name, "provider": lane.provider.name, "inflight": lane.inflight,
                      "max_concurrent": lane.max_concurrent,
                      "latency_ewma_ms": None if lane.latency_ms is None else round(lane.latency_ms, 1),
                      "hard_down_secs": round(max(0.0, lane.hard_down_until - now), 3), "budget": lane.budget,
                      "ok": lane.ok, "errors": lane.err, "cells": cells.get(name, []) + own})
    version = state.applier.config_version if state.applier is not None else 1
    body = orjson.dumps({"config_version": version, "lanes": lanes})
    return Reply(200, {"content-type": "application/json"}, body=body)
