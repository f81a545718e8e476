"""Per-principal mutation budgets of the admin API, in fixed one-minute windows.

Every request that is not a ``GET``/``HEAD`` spends one unit of its principal's budget for its class
before the handler runs: ``config`` (``/config/...``: validation and apply are costly) 10 a minute,
``crud`` (everything else) 60 a minute. Past the budget the answer is ``429 rate_limited`` with
``Retry-After`` = the whole seconds left in the window.

Only changes count: a mutation refused as invalid (``400 invalid_request``: a body FastAPI cannot
parse or validate, or a handler's own validation) gets its unit back (:meth:`MutationLimiter.refund`),
so a burst of bad requests cannot lock a principal out. A key revoke (:data:`EXEMPT`) is never
budgeted: an emergency revoke must always go through.

Source: docs/admin.md#rate-limits.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["BUDGETS", "EXEMPT", "MutationLimiter", "class_of"]

#: class -> mutations per principal per minute.
BUDGETS: dict[str, int] = {"config": 10, "crud": 60}
WINDOW_S = 60
#: Route templates no budget applies to.
EXEMPT = frozenset({"/api/v1/admin/keys/{key_id}/revoke"})


def class_of(route: str) -> str | None:
    """The budget class of a route template (``config`` under ``/config``, else ``crud``), or
    ``None`` for an :data:`EXEMPT` route."""
    if route in EXEMPT:
        return None
    return "config" if "/api/v1/admin/config" in route else "crud"


class MutationLimiter:
    """Fixed-window counters keyed by ``(principal, class)``.

    Args:
        budgets: class -> mutations per window (default :data:`BUDGETS`).
        clock: seconds (monotonic).
    """

    def __init__(self, budgets: dict[str, int] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.budgets = dict(BUDGETS if budgets is None else budgets)
        self._clock = clock
        self._windows: dict[tuple[str, str], tuple[int, int]] = {}

    def spend(self, principal: str, klass: str) -> int | None:
        """Spend one unit; ``None`` when allowed, else the seconds until the window resets (>= 1)."""
        now = self._clock()
        window = int(now // WINDOW_S)
        key = (principal, klass)
        start, used = self._windows.get(key, (window, 0))
        if start != window:
            start, used = window, 0
        if used >= self.budgets.get(klass, BUDGETS["crud"]):
            return max(1, math.ceil((start + 1) * WINDOW_S - now))
        self._windows[key] = (start, used + 1)
        if len(self._windows) > 10_000:               # stale windows of idle principals
            self._windows = {k: v for k, v in self._windows.items() if v[0] == window}
        return None

    def refund(self, principal: str, klass: str) -> None:
        """Give back one unit spent in the current window (a mutation refused as invalid)."""
        key = (principal, klass)
        entry = self._windows.get(key)
        if entry is not None and entry[0] == int(self._clock() // WINDOW_S) and entry[1] > 0:
            self._windows[key] = (entry[0], entry[1] - 1)
