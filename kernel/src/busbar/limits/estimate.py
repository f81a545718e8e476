"""A request's worst case, counted from its body before anything is forwarded.

Input tokens: the body's UTF-8 bytes / 4, rounded up (the JSON envelope included, so it errs high
on short prompts). Output tokens: the body's own cap (the largest of ``max_tokens``, ``max_completion_tokens``,
``max_output_tokens``, Gemini ``generation_config.max_output_tokens``, Bedrock
``inferenceConfig.maxTokens``), else the lane's ``default_max_tokens``, else
``limits.default_max_tokens``; for a pool, the largest over its members. That cap is per choice:
it is multiplied by the number of choices the body asks for (OpenAI ``n`` and the larger
``best_of``, Gemini ``generationConfig.candidateCount`` / ``generation_config.candidate_count``,
Cohere ``num_generations``; 1 when absent). Cost: input at the dearest
input-side rate (input, cache read, cache write) plus output at the output rate, at the dearest
member of the pool (pico-units; the fee is charged separately).

``lane_prices(lanes, card, default_max)`` (once per pool), then per request
``worst_case(body, raw_len, prices) -> Worst``.

Source: docs/limits.md#reservations.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from busbar.limits.cost import RateCard
from busbar.limits.engine import Worst

__all__ = ["choices", "lane_prices", "output_cap", "worst_case"]

BYTES_PER_TOKEN = 4


def _int(v: Any) -> int | None:
    """A positive integer count, or ``None``; a whole float (``1e5``, which a JSON parser reads as
    ``100000.0`` and an upstream may accept) counts as its integer."""
    if isinstance(v, float) and v.is_integer() and 0 < v < 2 ** 63:
        return int(v)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def output_cap(body: Mapping[str, Any]) -> int | None:
    """The output-token cap the body asks for, in any protocol's spelling, or ``None``. A body
    that spells it more than once gets the largest: the ingress may forward any one of them (the
    OpenAI reader prefers ``max_completion_tokens`` over ``max_tokens``), and a worst case must not
    be the smaller one."""
    caps: list[int] = []
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        v = _int(body.get(key))
        if v is not None:
            caps.append(v)
    for outer, inner in (("generation_config", "max_output_tokens"), ("generationConfig", "maxOutputTokens"),
                         ("inferenceConfig", "maxTokens")):
        sub = body.get(outer)
        if isinstance(sub, dict):
            v = _int(sub.get(inner))
            if v is not None:
                caps.append(v)
    return max(caps) if caps else None


def choices(body: Mapping[str, Any]) -> int:
    """How many choices (completions, candidates, generations) the body asks for: the largest of
    its spellings, 1 when none is a positive integer. Each choice may produce the full output cap."""
    n = 1
    for key in ("n", "best_of", "candidateCount", "candidate_count", "num_generations"):
        v = _int(body.get(key))
        if v is not None and v > n:
            n = v
    for outer in ("generation_config", "generationConfig"):
        sub = body.get(outer)
        if isinstance(sub, dict):
            for key in ("candidateCount", "candidate_count"):
                v = _int(sub.get(key))
                if v is not None and v > n:
                    n = v
    return n


def lane_prices(lanes: Iterable[Any], card: RateCard, default_max: int) -> tuple[tuple[int, int, int], ...]:
    """Per lane: ``(dearest input-side rate, output rate, default output cap)`` (pico-units per
    token; unpriced lanes 0), computed once per pool."""
    out = []
    for lane in lanes:
        rates = card.rates_of(lane.name, lane.upstream_model)
        inp = 0 if rates is None else max(rates.input, rates.cache_read, rates.cache_write)
        out.append((inp, 0 if rates is None else rates.output, lane.default_max_tokens or default_max))
    return tuple(out)


def worst_case(body: Mapping[str, Any], raw_len: int, prices: tuple[tuple[int, int, int], ...]) -> Worst:
    """The worst case of sending ``body`` to any lane of ``prices`` (:func:`lane_prices`)."""
    inp = -(-raw_len // BYTES_PER_TOKEN)
    cap = output_cap(body)
    many = choices(body)
    tokens = cost = output = 0
    for in_rate, out_rate, default_out in prices:
        out = (cap if cap is not None else default_out) * many
        c = inp * in_rate + out * out_rate
        if inp + out > tokens:
            tokens, output = inp + out, out
        if c > cost:
            cost = c
    return Worst(tokens, cost, inp if prices else 0, output)
