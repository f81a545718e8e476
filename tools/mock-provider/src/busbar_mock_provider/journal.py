"""What the mock saw: the request log (``/_mock/requests``) and the event log (``/_mock/events``).

Both are bounded deques (``--record-max``, default 10 000 entries each) so a benchmark run cannot
grow the process without limit; the oldest entries fall off first.

Request entry: ``{"ts", "method", "path", "query", "headers", "body"}`` -- ``ts`` in Unix seconds,
``headers`` a dict with lower-case names exactly as received (credentials included: this is a test
double), ``body`` the parsed JSON, or the text when the body is not JSON (``""`` when empty).

Event entry: ``{"type": "client_disconnected", "ts", "method", "path", "protocol", "model",
"phase", "after_ms", "frames_sent"}``; ``phase`` is ``waiting`` (during a delay), ``hang`` or
``streaming``; ``after_ms`` counts from the request's arrival.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

__all__ = ["Journal"]


class Journal:
    """Bounded request and event logs.

    Args:
        max_entries: cap per log; 0 disables request logging (events are still kept, capped at 1000).
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        self.record_requests = max_entries > 0
        self.requests: deque[dict[str, Any]] = deque(maxlen=max(max_entries, 1))
        self.events: deque[dict[str, Any]] = deque(maxlen=max(max_entries, 1000))

    def request(self, method: str, path: str, query: str, headers: dict[str, str], body: Any,
                raw_path: str | None = None) -> None:
        """Append one received request. ``path`` is percent-decoded; ``raw_path`` is the path exactly
        as it arrived on the request line (``None`` when the server did not report it)."""
        if self.record_requests:
            self.requests.append(
                {
                    "ts": time.time(),
                    "method": method,
                    "path": path,
                    "raw_path": raw_path,
                    "query": query,
                    "headers": headers,
                    "body": body,
                }
            )

    def event(self, kind: str, **fields: Any) -> None:
        """Append one event of type ``kind`` with the given fields."""
        self.events.append({"type": kind, "ts": time.time(), **fields})

    def clear_requests(self) -> int:
        """Empty the request log; return how many entries were dropped."""
        n = len(self.requests)
        self.requests.clear()
        return n

    def clear_events(self) -> int:
        """Empty the event log; return how many entries were dropped."""
        n = len(self.events)
        self.events.clear()
        return n
