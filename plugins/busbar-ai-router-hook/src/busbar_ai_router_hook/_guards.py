"""What keeps model calls to the requests that need one: the decision cache and the call budget,
in this process or, when the gateway hands the instance a shared state (``busbar_bind_state``: a
shared store), across the fleet.

:class:`Shared`: the instance's :class:`busbar_sdk.shared_state.SharedState` (``None``: in-process
only) and its faults: any exception from the store is counted by operation (``cache_get``,
``cache_put``, ``budget``), logged at most once a minute (logger ``busbar.router``), and the
operation falls back to the in-process guard; the store is then left alone for
:data:`RETRY_AFTER_S` seconds (a store that does not answer would otherwise cost every decision the
handle's timeout, once per operation). An answer slower than :data:`SLOW_AFTER_S` is used, and
counted and handled as a fault from then on (a store answering just under the handle's timeout
would otherwise cost every decision that much once per operation, up to five times). A store
fault never fails a request.

:class:`DecisionCache`: an in-process LRU of ``size`` entries, each kept ``ttl_s`` seconds
(``size: 0`` disables it). :class:`Cache`: that LRU first, then the store (``cache:<sha256 of the
settings digest and the key>``, kept ``ttl_s``); a store hit fills the LRU with the entry's
remaining life; a fresh model result goes to both. ``get`` answers ``(value, "local"|"store")``.

:class:`Budget`: ``max_calls_per_minute`` counted per clock minute and ``max_tokens_per_hour`` per
clock hour (windows aligned to the epoch). ``admit()`` checks both and counts the call (False
once either is spent, until its window turns over); ``spend(tokens)`` adds the reply's tokens.
With a shared state, ``admit`` is the store's atomic check-and-count of the fleet's calls (after
reading the fleet's tokens of the hour) and ``spend`` adds to the fleet's tokens; the in-process
counters still count this process's share, and decide alone when the store does not answer. What
was counted while the store did not answer (calls admitted, tokens spent) is handed to the fleet's
counters with the next budget operation that reaches the store in the same window, so an outage
does not leave the fleet's minute or hour short of them.

All are thread-safe (the gate runs on worker threads).
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Budget", "Cache", "DecisionCache", "Shared"]

log = logging.getLogger("busbar.router")
T = TypeVar("T")
#: Seconds between two warnings about store faults (per instance).
WARN_EVERY_S = 60.0
#: Seconds the store is left alone after a fault (this process's guards serve meanwhile).
RETRY_AFTER_S = 5.0
#: An answer slower than this (seconds) is a fault too: used, then the store is left alone.
SLOW_AFTER_S = 0.1
_MISS: Any = object()


class Shared:
    """The instance's shared state and its fault count (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.state: Any = None
        self.errors: Counter[str] = Counter()
        self.clock = clock
        self._warned_at = -WARN_EVERY_S
        self._retry_at = -RETRY_AFTER_S
        self._lock = threading.Lock()

    def error_counts(self) -> dict[str, int]:
        """Faults so far by operation (a copy)."""
        with self._lock:
            return dict(self.errors)

    def attempt(self, op: str, fn: Callable[[Any], T]) -> T:
        """``fn(state)``, or the sentinel :data:`_MISS` when there is no state, it failed (counted
        under ``op``, logged at most once a minute) or failed less than :data:`RETRY_AFTER_S` ago."""
        state = self.state
        started = self.clock()
        if state is None or started < self._retry_at:
            return _MISS  # type: ignore[no-any-return]
        try:
            out = fn(state)
        except Exception as e:  # noqa: BLE001 - a store fault never fails the request
            self._fault(op, f"{type(e).__name__}: {e}")
            return _MISS  # type: ignore[no-any-return]
        took = self.clock() - started
        if took > SLOW_AFTER_S:
            self._fault(op, f"answered in {took * 1000:.0f} ms, over {SLOW_AFTER_S * 1000:g} ms")
        return out

    def _fault(self, op: str, why: str) -> None:
        now = self.clock()
        with self._lock:
            self.errors[op] += 1
            self._retry_at = now + RETRY_AFTER_S
            warn = now >= self._warned_at + WARN_EVERY_S
            if warn:
                self._warned_at = now
        if warn:
            log.warning("busbar-ai-router-hook: the shared store failed (%s: %s); this process's own cache and "
                        "budget serve meanwhile (counted in router_store_errors_total)", op, why)


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

    def put(self, key: str, value: Any, age_s: float = 0.0) -> None:
        """Keep ``value``; ``age_s``: how old it already is (seconds), so it expires on time."""
        if self.size <= 0:
            return
        with self._lock:
            self._data[key] = (self.clock() - age_s, value)
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


class Cache:
    """The two-level decision cache (see the module docstring).

    Args:
        size, ttl_s: the LRU's entries and the entries' life (seconds; both levels).
        shared: the instance's :class:`Shared`.
        scope: a digest of the settings the cached decisions were made under (part of the store key).
        encode, decode: a decision to text and back (``decode`` raises ``ValueError`` on garbage).
        wall: Unix seconds (the store entry's age).
    """

    def __init__(self, size: int, ttl_s: float, shared: Shared, scope: str, encode: Callable[[Any], str],
                 decode: Callable[[str], Any], wall: Callable[[], float] = time.time) -> None:
        self.local = DecisionCache(size, ttl_s)
        self.shared, self.scope, self.encode, self.decode, self.wall = shared, scope, encode, decode, wall
        self.enabled = size > 0 and ttl_s > 0

    def _key(self, key: str) -> str:
        return "cache:" + hashlib.sha256(f"{self.scope}\x1f{key}".encode()).hexdigest()

    def get(self, key: str) -> tuple[Any, str | None]:
        """``(value, "local")``, ``(value, "store")`` or ``(None, None)``."""
        hit = self.local.get(key)
        if hit is not None:
            return hit, "local"
        if not self.enabled:
            return None, None
        text = self.shared.attempt("cache_get", lambda st: st.get(self._key(key)))
        if text is _MISS or text is None:
            return None, None
        try:
            doc = json.loads(text)
            value, age = self.decode(doc["v"]), max(0.0, self.wall() - float(doc["at"]))
        except (ValueError, KeyError, TypeError):
            return None, None
        if age > self.local.ttl_s:
            return None, None
        self.local.put(key, value, age)
        return value, "store"

    def put(self, key: str, value: Any) -> None:
        """Keep a fresh decision in both levels."""
        self.local.put(key, value)
        if self.enabled:
            text = json.dumps({"v": self.encode(value), "at": round(self.wall(), 3)}, separators=(",", ":"))
            self.shared.attempt("cache_put", lambda st: st.put(self._key(key), text, self.local.ttl_s))


class Budget:
    """Call and token caps per clock window (see the module docstring)."""

    def __init__(self, max_calls_per_minute: int | None, max_tokens_per_hour: int | None,
                 shared: Shared | None = None, clock: Callable[[], float] = time.time):
        self.max_calls, self.max_tokens, self.clock = max_calls_per_minute, max_tokens_per_hour, clock
        self.shared = shared or Shared()
        self._minute = self._hour = -1
        self.calls = self.tokens = 0
        #: Calls and tokens of the current windows counted here while the store did not answer.
        self.unsent_calls = self.unsent_tokens = 0
        self._lock = threading.Lock()

    def _roll(self) -> None:
        now = self.clock()
        minute, hour = int(now // 60), int(now // 3600)
        if minute != self._minute:
            self._minute, self.calls, self.unsent_calls = minute, 0, 0
        if hour != self._hour:
            self._hour, self.tokens, self.unsent_tokens = hour, 0, 0

    def _send(self, st: Any) -> None:
        """Hand the fleet's counters what this process counted while the store did not answer (put
        back when the store fails again)."""
        with self._lock:
            self._roll()
            calls, tokens = self.unsent_calls, self.unsent_tokens
            self.unsent_calls = self.unsent_tokens = 0
        if not calls and not tokens:
            return
        try:
            if calls:
                st.add("calls", 60, calls)
                calls = 0
            if tokens:
                st.add("tokens", 3600, tokens)
        except Exception:
            with self._lock:
                self.unsent_calls += calls
                self.unsent_tokens += tokens
            raise

    def _fleet_admit(self, st: Any) -> bool:
        self._send(st)
        if self.max_tokens is not None and st.count("tokens", 3600) >= self.max_tokens:
            return False
        return self.max_calls is None or bool(st.admit("calls", 60, self.max_calls))

    def admit(self) -> bool:
        """Is there room for one more call in both windows? When there is, the call is counted."""
        if self.max_calls is None and self.max_tokens is None:
            return True
        fleet = self.shared.attempt("budget", self._fleet_admit)
        with self._lock:
            self._roll()
            if fleet is _MISS:
                if self.max_calls is not None and self.calls >= self.max_calls:
                    return False
                if self.max_tokens is not None and self.tokens >= self.max_tokens:
                    return False
            elif not fleet:
                return False
            self.calls += 1
            if fleet is _MISS and self.shared.state is not None and self.max_calls is not None:
                self.unsent_calls += 1
            return True

    def spend(self, tokens: int) -> None:
        """Add ``tokens`` (the reply's tokens) to the hour's count (the fleet's too, when shared)."""
        if tokens <= 0:
            return
        with self._lock:
            self._roll()
            self.tokens += tokens
        if self.max_tokens is None:
            return
        if self.shared.attempt("budget", lambda st: self._spend_fleet(st, tokens)) is _MISS \
                and self.shared.state is not None:
            with self._lock:
                self.unsent_tokens += tokens

    def _spend_fleet(self, st: Any, tokens: int) -> None:
        self._send(st)
        st.add("tokens", 3600, tokens)
