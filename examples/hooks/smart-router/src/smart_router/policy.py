"""The smart router's policy: classify on shape, score on live signals, sort (docs/hooks-firstparty.md).

Pure functions over plain values, no I/O, no clock, no randomness: the same payload gives the same
order in-process and in the sidecar, byte for byte.

Step 1, classify the request by shape (first match wins):

===============  ===================================================  ===========
bucket           when                                                 favourite
===============  ===================================================  ===========
``agent``        ``has_tools``                                        ``fable``
``long_form``    ``max_tokens >= 4096`` or ``total_chars >= 24000``   ``opus``
``batch``        ``message_count <= 1`` and not ``stream``            ``haiku``
``interactive``  everything else                                      ``sonnet``
===============  ===================================================  ===========

Step 2, score every candidate ``c`` through the bucket's weights::

    price(c)    = 1 - cost_per_mtok(c) / max(cost_per_mtok)         (the priciest lane scores 0)
    latency(c)  = 1 - latency_ms(c) / max(latency_ms)               (the slowest lane scores 0)
    capacity(c) = available_concurrency(c) / max(available_concurrency)   (0 when all are 0)
                  a missing signal scores the neutral 0.5; a max of 0 makes price/latency 1

    signals(c)  = w_price * price(c) + w_latency * latency(c) + w_capacity * capacity(c)
    boost(c)    = boost  if the bucket's favourite is c's tier or one of c's tags, else 0
    trim(c)     = min(1, rate_headroom(c) / near_limit)  when rate_headroom is present, else 1
    score(c)    = trim(c) * (signals(c) + boost(c))

==============  =======  =========  ==========
bucket          price    latency    capacity
==============  =======  =========  ==========
``agent``       0.2      0.4        0.4
``long_form``   0.3      0.2        0.5
``batch``       0.6      0.1        0.3
``interactive`` 0.2      0.6        0.2
==============  =======  =========  ==========

with ``boost = 0.5`` and ``near_limit = 0.2`` (a lane with less than 20 % of its rate limit left
loses score in proportion; at 0 % it scores 0 whatever it is).

Step 3, sort by score, highest first (ties: lower ``idx`` first); that is the ``order`` reply. The
favourite gets a head start, not the win: saturated and slow, it scores its boost alone and a
healthy lane outranks it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BUCKETS", "Bucket", "Lane", "Policy", "Shape", "classify", "rank", "score_lanes"]

BUCKETS = ("agent", "long_form", "batch", "interactive")


@dataclass(frozen=True)
class Bucket:
    """One task bucket: its favourite lane label and its weights over the live signals."""

    favourite: str
    price: float
    latency: float
    capacity: float


@dataclass(frozen=True)
class Policy:
    """Every dial of the policy (the plugin's settings)."""

    buckets: Mapping[str, Bucket] = field(default_factory=lambda: {
        "agent": Bucket("fable", 0.2, 0.4, 0.4),
        "long_form": Bucket("opus", 0.3, 0.2, 0.5),
        "batch": Bucket("haiku", 0.6, 0.1, 0.3),
        "interactive": Bucket("sonnet", 0.2, 0.6, 0.2),
    })
    boost: float = 0.5
    near_limit: float = 0.2
    long_form_max_tokens: int = 4096
    long_form_chars: int = 24000


@dataclass(frozen=True)
class Shape:
    """The request signals the classifier reads."""

    has_tools: bool = False
    max_tokens: int | None = None
    total_chars: int = 0
    message_count: int = 0
    stream: bool = False


@dataclass(frozen=True)
class Lane:
    """One candidate's labels and live signals (``None`` = absent on the wire)."""

    idx: int
    tier: str | None = None
    tags: Sequence[str] = ()
    cost_per_mtok: float | None = None
    latency_ms: float | None = None
    available_concurrency: int | None = None
    rate_headroom: float | None = None


def classify(shape: Shape, policy: Policy) -> str:
    """Step 1: the task bucket of a request, from its shape alone."""
    if shape.has_tools:
        return "agent"
    if (shape.max_tokens is not None and shape.max_tokens >= policy.long_form_max_tokens) \
            or shape.total_chars >= policy.long_form_chars:
        return "long_form"
    if shape.message_count <= 1 and not shape.stream:
        return "batch"
    return "interactive"


def _inverse(values: list[float | None]) -> list[float]:
    present = [v for v in values if v is not None]
    top = max(present) if present else 0.0
    return [0.5 if v is None else (1.0 if top <= 0 else 1.0 - v / top) for v in values]


def _direct(values: list[float | None]) -> list[float]:
    present = [v for v in values if v is not None]
    top = max(present) if present else 0.0
    return [0.5 if v is None else (0.0 if top <= 0 else v / top) for v in values]


def _is_favourite(lane: Lane, favourite: str) -> bool:
    fav = favourite.lower()
    return (lane.tier is not None and lane.tier.lower() == fav) or any(t.lower() == fav for t in lane.tags)


def score_lanes(lanes: Sequence[Lane], bucket: Bucket, policy: Policy) -> list[dict[str, Any]]:
    """Step 2: per lane, its normalized signals, signal score, boost, trim and final score."""
    price = _inverse([None if ln.cost_per_mtok is None else max(0.0, ln.cost_per_mtok) for ln in lanes])
    latency = _inverse([None if ln.latency_ms is None else max(0.0, ln.latency_ms) for ln in lanes])
    capacity = _direct([None if ln.available_concurrency is None else float(max(0, ln.available_concurrency))
                        for ln in lanes])
    out = []
    for i, lane in enumerate(lanes):
        signals = bucket.price * price[i] + bucket.latency * latency[i] + bucket.capacity * capacity[i]
        boost = policy.boost if _is_favourite(lane, bucket.favourite) else 0.0
        trim = 1.0
        if lane.rate_headroom is not None and policy.near_limit > 0:
            trim = min(1.0, max(0.0, lane.rate_headroom) / policy.near_limit)
        out.append({"idx": lane.idx, "price": price[i], "latency": latency[i], "capacity": capacity[i],
                    "signals": signals, "boost": boost, "trim": trim, "score": trim * (signals + boost)})
    return out


def rank(shape: Shape, lanes: Sequence[Lane], policy: Policy) -> tuple[str, list[int]]:
    """Steps 1-3: the bucket and the candidate indices, best first."""
    bucket = classify(shape, policy)
    scored = score_lanes(lanes, policy.buckets[bucket], policy)
    scored.sort(key=lambda s: (-s["score"], s["idx"]))
    return bucket, [s["idx"] for s in scored]
