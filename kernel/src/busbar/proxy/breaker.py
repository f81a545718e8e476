"""The circuit breaker: one ``BreakerCell`` per (pool, lane).

States: CLOSED (usable once ``now >= cooldown_until``), OPEN (tripped; cooling down), HALF_OPEN
(cooldown expired; exactly one probe request admitted via ``try_acquire``). Trip modes:

- ``error_rate``: errors/total ≥ ``threshold`` over the last ``window_secs`` once at least
  ``min_requests`` outcomes are in the window (older outcomes evicted).
- ``consecutive``: ``consecutive_n`` failures in a row.

Cooldown on a trip: ``base × 2^trips`` clamped to ``max_cooldown_secs``, ±10 % jitter; a provider
``Retry-After`` (seconds, already capped by ``limits.max_honored_retry_after_secs``) is a floor.
A new penalty never shortens an existing deadline: ``deadline = max(old, new)`` (case C023).
A cell is ``throttled`` while the deadline that holds it came from a rate-limit failure: a pool whose
every candidate is throttled answers 429, not 503 (docs/reliability.md "on_exhausted").
Reads (``admits``, ``/healthz``) never take the half-open probe.

Times are seconds from an injectable monotonic clock. Source: docs/reliability.md#dispositions
"""
from __future__ import annotations

import random
from collections import deque

from busbar.config.schema import BreakerConfig

CLOSED, OPEN, HALF_OPEN = 0, 1, 2
STATE_NAMES = {CLOSED: "closed", OPEN: "open", HALF_OPEN: "half_open"}


class BreakerCell:
    """Breaker state of one lane inside one pool. Not thread-safe (one event loop owns it)."""

    __slots__ = ("cfg", "state", "streak", "trips", "window", "cooldown_until", "probe_in_flight",
                 "throttled_until", "_rng")

    def __init__(self, cfg: BreakerConfig, seed: int = 0):
        self.cfg = cfg
        self.state = CLOSED
        self.streak = 0             # consecutive failures
        self.trips = 0              # consecutive trips without a recovery (backoff exponent)
        self.window: deque[tuple[float, bool]] = deque(maxlen=1024)   # (t, is_error)
        self.cooldown_until = 0.0
        self.probe_in_flight = False
        self.throttled_until = 0.0  # the latest deadline asked for by a rate-limit failure (upstream 429)
        self._rng = random.Random(seed)

    # ---------------------------------------------------------------- reads
    def admits(self, now: float) -> bool:
        """Would a request be admitted now? Side-effect free (never steals the probe)."""
        if now < self.cooldown_until:
            return False
        return self.state == CLOSED or not self.probe_in_flight

    def throttled(self, now: float) -> bool:
        """Cooling down, and a rate-limit failure is what holds the deadline (not an outage)."""
        return now < self.cooldown_until <= self.throttled_until

    def state_at(self, now: float) -> int:
        """CLOSED / OPEN / HALF_OPEN as an observer sees it at ``now``."""
        if self.state == CLOSED:
            return CLOSED
        return HALF_OPEN if now >= self.cooldown_until else OPEN

    # ---------------------------------------------------------------- admission
    def try_acquire(self, now: float) -> bool | None:
        """Admit one request: ``False`` = not admitted, ``True`` = normal, ``None`` = half-open probe."""
        if now < self.cooldown_until:
            return False
        if self.state == CLOSED:
            return True
        if self.probe_in_flight:
            return False
        self.probe_in_flight = True
        self.state = HALF_OPEN
        return None

    def release_probe(self) -> None:
        """A probe attempt ended without an outcome (client went away): let another probe in."""
        self.probe_in_flight = False

    # ---------------------------------------------------------------- outcomes
    def record_success(self, now: float) -> None:
        """A 2xx outcome: closes a half-open cell and clears the streak."""
        self.window.append((now, False))
        self.streak = 0
        if self.state != CLOSED:
            self.state = CLOSED
            self.trips = 0
            self.cooldown_until = 0.0
        self.probe_in_flight = False

    def record_failure(self, now: float, retry_after: float | None = None, rate_limited: bool = False) -> bool:
        """A transient failure (``rate_limited``: an upstream 429 / rate-limit class, which marks the
        deadline it asks for as a throttle, see ``throttled``). Returns True when this failure
        (re)opened the cell."""
        self.window.append((now, True))
        self.streak += 1
        was_probe = self.state == HALF_OPEN
        self.probe_in_flight = False
        opened = was_probe or self._tripped(now)
        if opened:
            self.state = OPEN
            cooldown = self._cooldown()
            if retry_after:
                cooldown = max(cooldown, retry_after)
            self.trips += 1
        elif retry_after:
            cooldown = retry_after            # honoured even below the trip threshold
        else:
            return False
        self._extend(now + cooldown)
        if rate_limited and now + cooldown > self.throttled_until:
            self.throttled_until = now + cooldown
        return opened

    def hard_down(self, now: float, secs: float) -> None:
        """Auth/billing: open with a sticky cooldown (recovered by a health probe)."""
        self.state = OPEN
        self.probe_in_flight = False
        self._extend(now + secs)

    def recover(self) -> None:
        """A successful health probe: close the cell outright."""
        self.state = CLOSED
        self.streak = 0
        self.trips = 0
        self.cooldown_until = 0.0
        self.probe_in_flight = False
        self.window.clear()

    # ---------------------------------------------------------------- internals
    def _extend(self, deadline: float) -> None:
        if deadline > self.cooldown_until:
            self.cooldown_until = deadline

    def _tripped(self, now: float) -> bool:
        trip = self.cfg.trip
        if trip.mode == "consecutive":
            return self.streak >= trip.consecutive_n
        horizon = now - trip.window_secs
        w = self.window
        while w and w[0][0] < horizon:
            w.popleft()
        total = len(w)
        if total < trip.min_requests:
            return False
        errors = sum(1 for _, e in w if e)
        return errors / total >= trip.threshold

    def _cooldown(self) -> float:
        base: int = self.cfg.base_cooldown_secs * (2 ** min(self.trips, 30))
        target = min(base, self.cfg.max_cooldown_secs)
        jittered = target * (1.0 + self._rng.uniform(-0.1, 0.1))
        return max(max(target / 2, 1.0), min(jittered, self.cfg.max_cooldown_secs))
