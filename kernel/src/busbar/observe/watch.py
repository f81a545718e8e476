"""State-change logs: breaker transitions and hard-down latches, once per change, rate-limited per lane.

:class:`BreakerWatch` compares each breaker cell's observed state (``closed`` / ``open`` /
``half_open``, side-effect free: it never takes a probe) and each lane's hard-down latch with what it
last saw, and logs every change on ``busbar.breaker``:

- ``breaker open: pool 'p' lane 'l' (cooldown 30s)`` at ``warning``; a direct route's own cell
  reads ``pool -``;
- ``breaker half-open: pool 'p' lane 'l' (cooldown over; the next request probes it)`` at ``info``;
- ``breaker closed: pool 'p' lane 'l' (recovered)`` at ``info``;
- ``lane 'l' hard-down for 1800s (an auth or billing failure; a health probe recovers it)`` at
  ``warning`` and ``lane 'l' hard-down lifted`` at ``info``.

With ``--log-format json`` each line carries ``event`` (``breaker`` / ``hard_down``), ``pool``,
``lane``, ``from``, ``to``. It runs after every request that made an upstream attempt (a
``RequestRecord`` finisher: only the cells of the lanes it tried) and on a one-second sweep (a
cooldown ending, a health probe recovering a lane). A flapping lane cannot flood the log: at most
:data:`PER_MINUTE` lines per (pool, lane) a minute; the changes past that are counted and the next
line says how many were not logged.

Source: docs/operations.md#state-change-logs
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from busbar.proxy.breaker import STATE_NAMES

if TYPE_CHECKING:
    from busbar.proxy.breaker import BreakerCell
    from busbar.proxy.gateway import Gateway
    from busbar.proxy.record import RequestRecord
    from busbar.server.app import AppState

__all__ = ["PER_MINUTE", "BreakerWatch"]

log = logging.getLogger("busbar.breaker")
PER_MINUTE = 6
"""Most state-change lines per (pool, lane) in any 60 s."""
SWEEP_S = 1.0


class BreakerWatch:
    """Logs breaker and hard-down changes of ``state.gateway`` (see the module docstring).

    Args:
        state: the server's ``AppState`` (the live gateway is read at each check).
        clock: monotonic seconds for the rate limit (the gateway's own clock judges cell states).
    """

    def __init__(self, state: AppState, clock: Callable[[], float] = time.monotonic) -> None:
        self.state, self.clock = state, clock
        self._seen: dict[tuple[str, str], str] = {}
        self._lines: dict[tuple[str, str], list[float]] = {}
        self._suppressed: dict[tuple[str, str], int] = {}

    def _cells(self, gw: Gateway, lanes: Iterable[str] | None) -> Iterator[tuple[str, str, BreakerCell]]:
        wanted = None if lanes is None else set(lanes)
        for pool in gw.pools.values():
            for m in pool.members:
                if wanted is None or m.lane.name in wanted:
                    yield pool.name, m.lane.name, m.cell
        for name, lane in gw.lanes.items():
            if wanted is None or name in wanted:
                yield "-", name, lane.default_cell

    def check(self, lanes: Iterable[str] | None = None) -> None:
        """Compare every cell (or only those of ``lanes``) and every such lane's latch with the last
        observation; log the changes."""
        gw = self.state.gateway
        now = gw.clock()
        for pool, lane, cell in self._cells(gw, lanes):
            st = STATE_NAMES[cell.state_at(now)]
            before = self._seen.get((pool, lane))
            self._seen[(pool, lane)] = st
            if before is None or before == st:
                continue
            if st == "open":
                self._emit(logging.WARNING, pool, lane, "breaker", before, st,
                           f"breaker open: pool {_q(pool)} lane '{lane}' (cooldown "
                           f"{max(0.0, cell.cooldown_until - now):.0f}s)")
            elif st == "half_open":
                self._emit(logging.INFO, pool, lane, "breaker", before, st,
                           f"breaker half-open: pool {_q(pool)} lane '{lane}' (cooldown over; the next request "
                           f"probes it)")
            else:
                self._emit(logging.INFO, pool, lane, "breaker", before, st,
                           f"breaker closed: pool {_q(pool)} lane '{lane}' (recovered)")
        for name, ln in gw.lanes.items():
            if lanes is not None and name not in lanes:
                continue
            st = "hard_down" if now < ln.hard_down_until else "up"
            before = self._seen.get(("", name))
            self._seen[("", name)] = st
            if before is None or before == st:
                continue
            if st == "hard_down":
                self._emit(logging.WARNING, "", name, "hard_down", before, st,
                           f"lane '{name}' hard-down for {ln.hard_down_until - now:.0f}s (an auth or billing "
                           f"failure; a health probe recovers it)")
            else:
                self._emit(logging.INFO, "", name, "hard_down", before, st, f"lane '{name}' hard-down lifted")

    def _emit(self, level: int, pool: str, lane: str, event: str, before: str, after: str, text: str) -> None:
        key = (pool, lane)
        now = self.clock()
        recent = [t for t in self._lines.get(key, ()) if now - t < 60.0]
        if len(recent) >= PER_MINUTE:
            self._lines[key] = recent
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        recent.append(now)
        self._lines[key] = recent
        skipped = self._suppressed.pop(key, 0)
        if skipped:
            text += f" ({skipped} earlier change(s) of this lane not logged: rate limit)"
        log.log(level, "%s", text, extra={"fields": {"event": event, "pool": pool if pool != "-" else None,
                                                     "lane": lane, "from": before, "to": after},
                                          "json_msg": text})

    def finisher(self, record: RequestRecord) -> None:
        """Check the lanes ``record`` tried (a ``busbar.proxy.record.Finisher``)."""
        if record.attempts:
            self.check({a.lane for a in record.attempts})

    async def run(self, interval_s: float = SWEEP_S) -> None:
        """Check everything every ``interval_s`` seconds (a cooldown ending, a probe recovering)."""
        self.check()
        while True:
            await asyncio.sleep(interval_s)
            self.check()


def _q(pool: str) -> str:
    return "-" if pool == "-" else f"'{pool}'"
