"""The forwarder's self-reported metrics (the ``status`` reply's ``metrics`` array)."""
from __future__ import annotations

import threading
from collections import Counter, deque
from typing import Any

__all__ = ["Metrics"]

_QUANTILES = (("0.5", 0.5), ("0.95", 0.95), ("0.99", 0.99))


class Metrics:
    """Thread-safe counters and a bounded latency reservoir (the last 1024 samples)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: Counter[str] = Counter()
        self._errors: Counter[tuple[str, str]] = Counter()
        self._latency_ms: deque[float] = deque(maxlen=1024)
        self._samples = 0
        self.in_flight = 0

    def begin(self) -> None:
        with self._lock:
            self.in_flight += 1

    def end(self, op: str, elapsed_ms: float, error: str | None) -> None:
        with self._lock:
            self.in_flight -= 1
            self._messages[op] += 1
            if error is None:
                self._latency_ms.append(elapsed_ms)
                self._samples += 1
            else:
                self._errors[(op, error)] += 1

    def snapshot(self) -> list[dict[str, Any]]:
        """OpenMetrics-shaped entries: names ``^[a-z][a-z0-9_]{0,63}$``, at most 2 labels each."""
        with self._lock:
            out: list[dict[str, Any]] = [
                {"name": "webrequest_messages_total", "type": "counter", "value": n, "labels": {"op": op},
                 "help": "Messages forwarded to the sidecar, by op"}
                for op, n in sorted(self._messages.items())]
            out += [{"name": "webrequest_errors_total", "type": "counter", "value": n,
                     "labels": {"op": op, "reason": reason},
                     "help": "Forwarded messages that failed (the gate's on_error applied), by reason"}
                    for (op, reason), n in sorted(self._errors.items())]
            out.append({"name": "webrequest_in_flight", "type": "gauge", "value": self.in_flight,
                        "help": "Messages currently waiting on the sidecar"})
            samples = sorted(self._latency_ms)
            latency: dict[str, Any] = {"name": "webrequest_latency_ms", "type": "histogram",
                                       "value": self._samples, "unit": "ms",
                                       "help": "Round trip to the sidecar (last 1024 successful messages)"}
            if samples:
                latency["quantiles"] = {label: round(samples[min(len(samples) - 1, int(q * len(samples)))], 3)
                                        for label, q in _QUANTILES}
            out.append(latency)
            return out
