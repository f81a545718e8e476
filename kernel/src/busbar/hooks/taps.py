"""Tap delivery: fire-and-forget, bounded, dropped under pressure, never on the request path.

:class:`TapQueue` is one bounded queue and one daemon thread per tap instance. ``offer(payload)``
is a non-blocking put: when the queue is full the observation is dropped and counted
(``dropped``), never buffered without limit and never waited for. The worker calls the plugin's
``busbar_call`` with the ``notify`` message and discards the reply; an exception is counted
(``errors``) and logged with the hook's name (the first few, then every 1000th), never raised.

So a tap that raises, sleeps or hangs cannot delay, reorder or fail a request, and a stream's
bytes never wait for a tap: taps see copies of stage events (request, route, attempt,
completion), built before the offer.

Source: docs/hooks.md#taps, docs/hooks.md#fail-safety
(taps); C054 (b)-(d).
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("busbar.hooks")

__all__ = ["TapQueue"]


class TapQueue:
    """The bounded delivery of one tap.

    Attributes:
        name: the tap's instance name.
        delivered, dropped, errors: counters (delivered = calls that returned).
    """

    def __init__(self, name: str, call: Callable[[dict[str, Any]], Any], *, capacity: int = 1024):
        self.name = name
        self._call = call
        self._q: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=capacity)
        self.delivered = self.dropped = self.errors = 0
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=f"busbar-tap-{name}", daemon=True)
        self._thread.start()

    def offer(self, payload: dict[str, Any]) -> bool:
        """Queue one ``notify`` message; False (dropped, counted) when full or closed."""
        if self._closed:
            self.dropped += 1
            return False
        try:
            self._q.put_nowait(payload)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("tap '%s': delivery queue full; %d observation(s) dropped so far", self.name,
                            self.dropped)
            return False
        return True

    def _work(self) -> None:
        q, call = self._q, self._call
        while True:
            payload = q.get()
            if payload is None:
                return
            try:
                call(payload)
            except Exception as e:  # noqa: BLE001 - plugin code: swallowed, counted, logged
                self.errors += 1
                if self.errors <= 5 or self.errors % 1000 == 0:
                    log.warning("tap '%s' failed on a %s observation (%d failure(s) so far): %s: %s", self.name,
                                payload.get("stage", {}).get("at", "?"), self.errors, type(e).__name__, e)
            else:
                self.delivered += 1

    @property
    def pending(self) -> int:
        return self._q.qsize()

    def close(self) -> None:
        """Stop accepting; the worker exits after the queued observations (or never, if hung)."""
        self._closed = True
        try:
            self._q.put_nowait(None)
        except queue.Full:
            pass
