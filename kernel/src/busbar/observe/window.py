"""Quantiles over a sliding time window: the ``metrics.buffer_seconds`` window of seeds 001.

:class:`WindowedSummary` is a prometheus-client collector exposing a summary whose quantiles
(0.5, 0.9, 0.99) cover only the observations of the last ``window_s`` seconds, while ``_sum`` and
``_count`` stay cumulative (so ``rate()`` works as for any summary). Observations are kept per label
set in a deque of ``(monotonic time, value)``, evicted when older than the window and capped at
``max_samples`` per label set (the oldest go first): memory is bounded by the window and the cap.
Quantiles are computed at scrape time (nearest-rank on the sorted window).

Source: docs/operations.md#prometheus-metrics
"""
from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import Metric, SummaryMetricFamily

__all__ = ["QUANTILES", "WindowedSummary"]

QUANTILES = (0.5, 0.9, 0.99)


class _Series:
    __slots__ = ("samples", "sum", "count")

    def __init__(self, cap: int) -> None:
        self.samples: deque[tuple[float, float]] = deque(maxlen=cap)
        self.sum = 0.0
        self.count = 0


class WindowedSummary:
    """A summary with windowed quantiles (see the module docstring).

    Args:
        name, documentation, labelnames: as a prometheus-client metric.
        window_s: ``metrics.buffer_seconds``.
        max_samples: observations kept per label set.
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], window_s: float,
                 max_samples: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        self.window_s, self.max_samples, self.clock = float(window_s), max_samples, clock
        self._series: dict[tuple[str, ...], _Series] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        """Record ``value`` (seconds) for the label values ``labels``."""
        s = self._series.get(labels)
        if s is None:
            s = self._series[labels] = _Series(self.max_samples)
        s.samples.append((self.clock(), value))
        s.sum += value
        s.count += 1

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        fam = SummaryMetricFamily(self.name, self.documentation, labels=[*self.labelnames, "quantile"])
        horizon = self.clock() - self.window_s
        for labels, s in self._series.items():
            while s.samples and s.samples[0][0] < horizon:
                s.samples.popleft()
            values = sorted(v for _, v in s.samples)
            for q in QUANTILES:
                v = values[max(0, math.ceil(q * len(values)) - 1)] if values else math.nan
                fam.add_sample(self.name, dict(zip([*self.labelnames, "quantile"], [*labels, str(q)],
                                                   strict=True)), v)
            base = dict(zip(self.labelnames, labels, strict=True))
            fam.add_sample(self.name + "_sum", base, s.sum)
            fam.add_sample(self.name + "_count", base, s.count)
        yield fam
