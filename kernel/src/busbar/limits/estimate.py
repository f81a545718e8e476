"""A request's worst case, counted from its body before anything is forwarded.

Input tokens: the body's byte length, capped per lane by its pool member's ``context_max`` when set.
That is a real upper bound, not an average, for a byte-level BPE tokenizer or one with byte fallback
(the published ones: GPT-2 .. o200k, Llama 3, Gemma's SentencePiece): it never makes a token out of
less than one byte of the text, the JSON body is at least as long as the text it carries (escapes
only lengthen it), and its per-message envelope (``{"role":"user","content":""}``, 28 bytes) is
longer than the few tokens a chat template adds per message. A prompt longer than the model's
context window is refused by the provider (refunded, nothing billed), so ``context_max`` caps it.
What the body does not carry is not bounded: tokens a provider adds on its own (a tool-use system
prompt) and media fetched by URL.
Output tokens: the body's own cap (``max_tokens``, ``max_completion_tokens``,
``max_output_tokens``, Gemini ``generation_config.max_output_tokens``, Bedrock
``inferenceConfig.maxTokens``), else the lane's ``default_max_tokens``, else
``limits.default_max_tokens``; for a pool, the largest over its members. That cap is per choice:
it is multiplied by the number of choices the body asks for (OpenAI ``n`` and the larger
``best_of``, Gemini ``generationConfig.candidateCount`` / ``generation_config.candidate_count``,
Cohere ``num_generations``; 1 when absent). Cost: input at the dearest
input-side rate (input, cache read, cache write) plus output at the output rate, at the dearest
member of the pool (pico-units; the fee is charged separately).

``lane_prices(members, card, default_max)`` (once per pool; members or bare lanes), then per request
``worst_case(body, raw_len, prices) -> Worst``.

Source: docs/limits.md#reservations.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from busbar.limits.cost import RateCard
from busbar.limits.engine import Worst

__all__ = ["BYTES_PER_TOKEN", "UNCAPPED", "choices", "lane_prices", "output_cap", "worst_case"]

UNCAPPED = 1 << 62          # a lane with no ``context_max``: the input bound is the byte length
BYTES_PER_TOKEN = 4         # the average, not a bound: what usage a provider does not report is charged
                            # as (UTF-8 bytes / 4, rounded up); the reservation holds the bytes themselves


# One pass over the body's top-level keys: what each spelling is (nested ones carry their inner key's index).
_CAP, _MANY, _NESTED = 0, 1, 2
_TOP: dict[str, tuple[int, int]] = {
    "max_tokens": (_CAP, 0), "max_completion_tokens": (_CAP, 1), "max_output_tokens": (_CAP, 2),
    "n": (_MANY, 0), "best_of": (_MANY, 0), "candidateCount": (_MANY, 0), "candidate_count": (_MANY, 0),
    "num_generations": (_MANY, 0),
    "generation_config": (_NESTED, 3), "generationConfig": (_NESTED, 4), "inferenceConfig": (_NESTED, 5)}
_INNER_CAP = {3: "max_output_tokens", 4: "maxOutputTokens", 5: "maxTokens"}


def _int(v: Any) -> int | None:
    """A positive integer count, or ``None``; a whole float (``1e5``, which a JSON parser reads as
    ``100000.0`` and an upstream may accept) counts as its integer."""
    if v.__class__ is int:
        return v if v > 0 else None
    if v.__class__ is float and v.is_integer() and 0 < v < 2 ** 63:
        return int(v)
    return None


def _scan(body: Mapping[str, Any]) -> tuple[int | None, int]:
    """``(output cap, choices)`` of ``body`` in one pass over its top-level keys. A body that spells
    the cap more than once gets the largest: the ingress may forward any one of them (the OpenAI
    reader prefers ``max_completion_tokens`` over ``max_tokens``), and a worst case must not be the
    smaller one."""
    cap: int | None = None
    many = 1
    top = _TOP
    for key, v in body.items():
        kind = top.get(key)
        if kind is None:
            continue
        what, order = kind
        if what == _CAP:
            n = _int(v)
            if n is not None and (cap is None or n > cap):
                cap = n
        elif what == _MANY:
            n = _int(v)
            if n is not None and n > many:
                many = n
        elif isinstance(v, dict):
            n = _int(v.get(_INNER_CAP[order]))
            if n is not None and (cap is None or n > cap):
                cap = n
            if order != 5:
                for inner in ("candidateCount", "candidate_count"):
                    n = _int(v.get(inner))
                    if n is not None and n > many:
                        many = n
    return cap, many


def output_cap(body: Mapping[str, Any]) -> int | None:
    """The output-token cap the body asks for, in any protocol's spelling, or ``None``."""
    return _scan(body)[0]


def choices(body: Mapping[str, Any]) -> int:
    """How many choices (completions, candidates, generations) the body asks for: the largest of
    its spellings, 1 when none is a positive integer. Each choice may produce the full output cap."""
    return _scan(body)[1]


def lane_prices(members: Iterable[Any], card: RateCard,
                default_max: int) -> tuple[tuple[int, int, int, int], ...]:
    """Per pool member (or bare lane): ``(dearest input-side rate, output rate, default output cap,
    input cap)`` (pico-units per token; unpriced lanes 0; the input cap is the member's
    ``context_max``, else :data:`UNCAPPED`), computed once per pool."""
    out = []
    for member in members:
        lane = getattr(member, "lane", member)
        rates = card.rates_of(lane.name, lane.upstream_model)
        inp = 0 if rates is None else max(rates.input, rates.cache_read, rates.cache_write)
        out.append((inp, 0 if rates is None else rates.output, lane.default_max_tokens or default_max,
                    getattr(member, "context_max", None) or UNCAPPED))
    return tuple(out)


def worst_case(body: Mapping[str, Any], raw_len: int, prices: tuple[tuple[int, int, int, int], ...]) -> Worst:
    """The worst case of sending ``body`` (``raw_len`` bytes) to any lane of ``prices``
    (:func:`lane_prices`)."""
    cap, many = _scan(body)
    tokens = cost = output = top_in = 0
    for in_rate, out_rate, default_out, in_cap in prices:
        inp = raw_len if raw_len < in_cap else in_cap
        out = (cap if cap is not None else default_out) * many
        c = inp * in_rate + out * out_rate
        if inp + out > tokens:
            tokens, output = inp + out, out
        if inp > top_in:
            top_in = inp
        if c > cost:
            cost = c
    return Worst(tokens, cost, top_in, output)
