"""What keeps model calls to the requests that need one: the decision cache and the call budget.

:class:`DecisionCache`: an in-process LRU of ``size`` entries, each kept ``ttl_s`` seconds
(``size: 0`` disables it). :class:`Budget`: ``max_calls_per_minute`` counted per clock minute and
``max_tokens_per_hour`` per clock hour, in this process; ``allow()`` is False once either is spent,
until its window turns over. Both are thread-safe (the gate runs on worker threads).
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["Budget", "DecisionCache"]


class DecisionCache:
    """LRU with a TTL (see the module docstring)."""

    def __init__(self, size: int, ttl_s: float, clock: Callable[[], float] = time.monotonic):
        self.size, self.ttl_s, self.clock = size, ttl_s, clock
        self._data: OrderedDict[str, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        """The cached value, or ``None`` (absent or expired)."""
        if self.size <= 0:
            return None
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            if self.clock() - hit[0] > self.ttl_s:
                del self._data[key]
                return None
            self._data.move_to_end(key)
            return hit[1]

    def put(self, key: str, value: Any) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._data[key] = (self.clock(), value)
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


class Budget:
    """Call and token caps per clock window (see the module docstring)."""

    def __init__(self, max_calls_per_minute: int | None, max_tokens_per_hour: int | None,
                 clock: Callable[[], float] = time.time):
        self.max_calls, self.max_tokens, self.clock = max_calls_per_minute, max_tokens_per_hour, clock
        self._minute = self._hour = -1
        self.calls = self.tokens = 0
        self._lock = threading.Lock()

    def _roll(self) -> None:
        now = self.clock()
        minute, hour = int(now // 60), int(now // 3600)
        if minute != self._minute:
            self._minute, self.calls = minute, 0
        if hour != self._hour:
            self._hour, self.tokens = hour, 0

    def allow(self) -> bool:
        """Is there room for one more call in both windows?"""
        with self._lock:
            self._roll()
            if self.max_calls is not None and self.calls >= self.max_calls:
                return False
            return self.max_tokens is None or self.tokens < self.max_tokens

    def spend(self, tokens: int) -> None:
        """Count one call of ``tokens`` tokens."""
        with self._lock:
            self._roll()
            self.calls += 1
            self.tokens += tokens
