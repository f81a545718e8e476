"""Scores of a router over labelled cases: accuracy, confusion matrix, reliability bins, ECE, latency.

Pure functions over :class:`Scored` rows (one per case): ``expect`` (the labels the case accepts),
``got`` (the predicted label, ``(swrr)`` when no gate decided, ``(reject)`` for a refusal),
``correct``, ``confidence`` (the router's probability for its answer; a deterministic gate's
answer is 1.0, no decision 0.0) and ``latency_us``.

- :func:`reliability`: ``bins`` equal-width confidence bins over [0, 1] (the last one closed), each
  ``{lo, hi, count, accuracy, confidence}``; :func:`ece` is the expected calibration error,
  ``sum(count_b / N * |accuracy_b - confidence_b|)``.
- :func:`confusion`: ``{expected label: {predicted label: count}}`` (expected = the case's first label).
- :func:`percentile`: nearest-rank percentile.

Source: docs/router.md#busbar-hooks-test.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Scored", "confusion", "ece", "percentile", "reliability", "summary"]


@dataclass(frozen=True, slots=True)
class Scored:
    """One scored case (see the module docstring)."""

    expect: tuple[str, ...]
    got: str
    correct: bool
    confidence: float
    latency_us: float


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank ``q`` percentile (0..100) of ``values``; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(1, math.ceil(q / 100.0 * len(ordered)))
    return float(ordered[min(k, len(ordered)) - 1])


def reliability(rows: Sequence[Scored], bins: int = 10) -> list[dict[str, Any]]:
    """Equal-width reliability bins (empty bins included, ``accuracy``/``confidence`` ``None``)."""
    out: list[dict[str, Any]] = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [r for r in rows if lo <= r.confidence < hi or (b == bins - 1 and r.confidence == 1.0)]
        n = len(inside)
        out.append({"lo": round(lo, 3), "hi": round(hi, 3), "count": n,
                    "accuracy": round(sum(r.correct for r in inside) / n, 4) if n else None,
                    "confidence": round(sum(r.confidence for r in inside) / n, 4) if n else None})
    return out


def ece(rows: Sequence[Scored], bins: int = 10) -> float:
    """Expected calibration error over :func:`reliability` bins (0.0 for no rows)."""
    total = len(rows)
    if not total:
        return 0.0
    err = 0.0
    for b in reliability(rows, bins):
        if b["count"]:
            err += b["count"] / total * abs(b["accuracy"] - b["confidence"])
    return err


def confusion(rows: Sequence[Scored]) -> dict[str, dict[str, int]]:
    """``{expected: {predicted: count}}``, expected = each case's first label."""
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        row = out.setdefault(r.expect[0] if r.expect else "", {})
        row[r.got] = row.get(r.got, 0) + 1
    return out


def summary(rows: Sequence[Scored], bins: int = 10) -> dict[str, Any]:
    """Everything ``busbar hooks test`` prints, as one JSON-ready dict."""
    n = len(rows)
    lat = [r.latency_us for r in rows]
    return {"cases": n, "correct": sum(r.correct for r in rows),
            "accuracy": round(sum(r.correct for r in rows) / n, 4) if n else 0.0,
            "ece": round(ece(rows, bins), 4), "reliability": reliability(rows, bins),
            "confusion": confusion(rows),
            "latency_us": {"p50": round(percentile(lat, 50), 1), "p99": round(percentile(lat, 99), 1)}}
