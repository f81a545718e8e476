"""Operation units on the ledger: what a non-chat request used and what it may use, priced by the card.

A served non-chat reply carries its normalised usage (``busbar.ir.ops.OpUsage``, on
``record.extra["op_usage"]``; docs/beyond-chat.md#usage). Tokens (embedding input tokens) are
charged like chat's; the other units become ledger entries of their own (``busbar.limits.cost``:
``"<model>#<unit>"``, the count in the ``input`` tier), priced by the model's per-operation rates:

- images: ``images`` (images answered), priced by ``per_image_utok``;
- audio transcription / translation: ``audio_ms`` (the seconds the answer reports × 1000, rounded
  up), priced by ``per_audio_second_utok`` per 1000;
- audio speech: ``characters`` (of ``input``), priced by ``per_character_utok``;
- rerank: ``search_units``, priced by ``per_search_unit_utok``.

- ``unit_entries(lane, usage) -> {unit_key: TierTokens}``: the entries a served reply adds.
- ``reservable(op) -> {unit: count}``: what a request may use, known from its body before it is
  forwarded: ``n`` images, the speech ``input``'s characters, one search unit per started hundred
  documents. A transcription's seconds are not known until it is answered: they are charged after
  (post-paid, like a stream's tokens).
- ``unit_worst(op, lanes, card) -> int``: the dearest member's price of ``reservable(op)``
  (pico-units), added to the request's worst-case reservation.

Source: docs/limits.md#operation-units.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from busbar_sdk.store import TierTokens

from busbar.ir.ops import ImageRequest, OpUsage, RerankRequest
from busbar.limits.cost import RateCard, unit_key
from busbar.proto.ops.rerank import search_units

__all__ = ["reservable", "unit_counts", "unit_entries", "unit_worst"]


def unit_counts(usage: OpUsage | None) -> dict[str, int]:
    """The ledger units of one reply's ``usage`` (zero counts left out)."""
    if usage is None:
        return {}
    counts = {"images": usage.images, "audio_ms": math.ceil(usage.audio_seconds * 1000),
              "characters": usage.characters, "search_units": usage.search_units}
    return {unit: n for unit, n in counts.items() if n > 0}


def unit_entries(lane: str, usage: OpUsage | None) -> dict[str, TierTokens]:
    """``{"<lane>#<unit>": TierTokens(input=count)}`` for each unit ``usage`` reports."""
    return {unit_key(lane, unit): TierTokens(n) for unit, n in unit_counts(usage).items()}


def reservable(op: Any) -> dict[str, int]:
    """The units request ``op`` (a ``busbar.proxy.operation.Operation``) may use, from its body."""
    req = op.req
    if isinstance(req, ImageRequest):
        return {"images": req.n}
    if isinstance(req, RerankRequest):
        return {"search_units": search_units(len(req.documents))}
    if op.name == "audio" and getattr(op, "kind", "") == "speech":
        return {"characters": len(str(req.get("input", "")))}
    return {}


def unit_worst(op: Any, lanes: Iterable[Any], card: RateCard) -> int:
    """The worst cost of ``reservable(op)`` over ``lanes`` (pico-units; unpriced lanes 0)."""
    units = reservable(op)
    if not units:
        return 0
    worst = 0
    for lane in lanes:
        rates = card.rates_of(lane.name, lane.upstream_model)
        if rates is not None:
            worst = max(worst, sum(card.unit_pico(rates, unit, n) for unit, n in units.items()))
    return worst
