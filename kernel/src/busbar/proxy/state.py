"""State snapshot: what must survive a restart (``BUSBAR_STATE_FILE``).

Persisted: every breaker cell's state, trip streak and cooldown deadline (as wall-clock time, so a
restart keeps an open lane open for the rest of its cooldown), each lane's hard-down deadline and
its remaining ``max_requests`` lifetime budget (kept only while the configured ``max_requests``
is unchanged). Path: ``BUSBAR_STATE_FILE`` — empty string disables persistence; unset means
``busbar-state.json`` next to the config file. Written atomically (temp file + rename) every
``SAVE_INTERVAL_S`` seconds and at shutdown. A corrupt or unreadable file is reported and
ignored — never fatal.

File shape (JSON)::

    {"version": 1, "saved_at": <unix s>,
     "cells": [{"pool": "smart", "lane": "gpt-4o", "state": "open", "trips": 2, "cooldown_until": <unix s>}],
     "lanes": [{"lane": "gpt-4o", "hard_down_until": <unix s>, "budget": 41, "max_requests": 50}]}

Source: docs/reliability.md#state-across-restarts (BUSBAR_STATE_FILE)
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from busbar.proxy.breaker import CLOSED, STATE_NAMES

if TYPE_CHECKING:
    from busbar.proxy.breaker import BreakerCell
    from busbar.proxy.gateway import Gateway

log = logging.getLogger("busbar.state")
SAVE_INTERVAL_S = 5.0
VERSION = 1
_STATE_BY_NAME = {name: value for value, name in STATE_NAMES.items()}


def state_path(config_path: Path, env: Mapping[str, str] = os.environ) -> Path | None:
    """Resolve ``BUSBAR_STATE_FILE``: ``None`` when persistence is disabled."""
    raw = env.get("BUSBAR_STATE_FILE")
    if raw is None:
        return config_path.resolve().parent / "busbar-state.json"
    return Path(raw) if raw.strip() else None


def _cells(gw: Gateway) -> Iterator[tuple[str, str, BreakerCell]]:
    for pool in gw.pools.values():
        for m in pool.members:
            yield pool.name, m.lane.name, m.cell
    for lane in gw.lanes.values():
        yield "", lane.name, lane.default_cell


def snapshot(gw: Gateway) -> dict[str, Any]:
    """The JSON-ready snapshot of ``gw`` now (monotonic deadlines converted to wall-clock)."""
    now_m, now_w = gw.clock(), time.time()

    def to_wall(t: float) -> float:
        return now_w + (t - now_m) if t > now_m else 0.0
    cells = [{"pool": p, "lane": ln, "state": STATE_NAMES[c.state], "trips": c.trips,
              "cooldown_until": to_wall(c.cooldown_until)}
             for p, ln, c in _cells(gw) if c.state != CLOSED or c.cooldown_until > now_m]
    lanes = [{"lane": n, "hard_down_until": to_wall(lane.hard_down_until), "budget": lane.budget,
              "max_requests": gw.config.models[n].max_requests} for n, lane in gw.lanes.items()]
    return {"version": VERSION, "saved_at": now_w, "cells": cells, "lanes": lanes}


def save(gw: Gateway, path: Path) -> None:
    """Write the snapshot atomically; errors are logged, never raised."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(snapshot(gw)))
        os.replace(tmp, path)
    except OSError as e:
        log.warning("cannot write state file %s: %s", path, e.strerror)


def restore(gw: Gateway, path: Path) -> bool:
    """Apply a saved snapshot to ``gw``; a missing file is fine, a corrupt one is logged and ignored."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError("unknown format or version")
        now_m, now_w = gw.clock(), time.time()

        def to_mono(t: float) -> float:
            return now_m + (t - now_w) if t > now_w else 0.0
        cells = {(p, ln): c for p, ln, c in _cells(gw)}
        for e in data.get("cells", []):
            cell = cells.get((str(e["pool"]), str(e["lane"])))
            if cell is None:
                continue
            cell.state = _STATE_BY_NAME[str(e["state"])]
            cell.trips = int(e["trips"])
            cell.cooldown_until = to_mono(float(e["cooldown_until"]))
            cell.probe_in_flight = False
        for e in data.get("lanes", []):
            lane = gw.lanes.get(str(e["lane"]))
            if lane is None:
                continue
            lane.hard_down_until = to_mono(float(e["hard_down_until"]))
            if e.get("max_requests") == gw.config.models[lane.name].max_requests:
                lane.budget = int(e["budget"])
    except FileNotFoundError:
        return False
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("state file %s is corrupt or unreadable (%s); ignoring it", path, e)
        return False
    log.info("restored breaker and lane state from %s", path)
    return True
