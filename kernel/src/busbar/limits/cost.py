"""Pricing: ``rate_card`` × tokens + ``per_request_fee`` × billable requests, in integer math.

Rates are micro-units (1e-6 of the abstract cost unit) per token, as configured; they are held as
integer *pico-units* per token (1e-12: a rate keeps six decimal places exactly), so a sum of costs
never drifts. Budgets and ``per_request_fee`` are integer micro-units.

Cost of one response: input × input rate + cache write × write rate + cache read × read rate +
output × output rate, where output includes reasoning (thought) tokens and input excludes the
cache tiers (the IR :class:`~busbar.ir.model.Usage` is already normalised that way from every
protocol). Case C029: 3 input, 12 304 cache-write, 550 output at 3 / 3.75 / 15 µ/token = 54 399 µ.

``RateCard(card, fee)``; ``card.rates_of(lane_name, upstream_model) -> Rates | None`` (``None``:
a present card has no entry, the request must be refused before forwarding; an absent card prices
every token at 0); ``cost_pico(rates, tiers) -> int``; :func:`micros` rounds pico-units up.

Operation units (docs/beyond-chat.md#usage): the ledger keeps only tiers per model, so the units an
operation used are ledger entries of their own, keyed ``"<model>#<unit>"`` (:func:`unit_key`) with
the count in the ``input`` tier: ``images`` (priced by ``per_image_utok``), ``audio_ms``
(milliseconds of transcribed audio, ``per_audio_second_utok`` per 1 000), ``characters``
(``per_character_utok``) and ``search_units`` (``per_search_unit_utok``). They are units, not
tokens: ``is_unit_key`` keeps them out of token counts, and ``entry_pico(name, tiers)`` prices any
ledger entry, tokens or units (a fraction of a pico-unit rounds up).

Source: docs/limits.md#the-rate-card.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from busbar_sdk.store import TierTokens

__all__ = ["PICO_PER_MICRO", "UNITS", "ZERO", "RateCard", "Rates", "is_unit_key", "micros", "split_unit",
           "tiers_of", "unit_key"]

PICO_PER_MICRO = 1_000_000

UNITS: dict[str, tuple[str, int]] = {
    "images": ("image", 1),
    "audio_ms": ("audio_second", 1000),
    "characters": ("character", 1),
    "search_units": ("search_unit", 1),
}
"""Ledger unit -> (the ``Rates`` field pricing it, units per priced unit): audio is counted in
milliseconds and priced per second."""

UNIT_SEP = "#"


def unit_key(model: str, unit: str) -> str:
    """The ledger entry of ``model``'s ``unit`` (a key of :data:`UNITS`): ``"<model>#<unit>"``."""
    return f"{model}{UNIT_SEP}{unit}"


def split_unit(name: str) -> tuple[str, str | None]:
    """``(model, unit)`` of a ledger entry; ``unit`` is ``None`` for a model's token entry."""
    model, sep, unit = name.rpartition(UNIT_SEP)
    if sep and unit in UNITS:
        return model, unit
    return name, None


def is_unit_key(name: str) -> bool:
    """``True`` for an operation-unit ledger entry (its tiers are not tokens)."""
    return split_unit(name)[1] is not None


@dataclass(frozen=True, slots=True)
class Rates:
    """One model's rates in pico-units per token (input, output, cache read, cache write) and per
    operation unit (image, second of audio, speech character, rerank search unit)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    image: int = 0
    audio_second: int = 0
    character: int = 0
    search_unit: int = 0

    @property
    def worst(self) -> int:
        """The highest per-token rate (what a reservation charges an unknown token)."""
        return max(self.input, self.output, self.cache_read, self.cache_write)


ZERO = Rates()


def _pico(rate: float) -> int:
    return int((Decimal(repr(rate)) * PICO_PER_MICRO).to_integral_value())


def micros(pico: int) -> int:
    """Pico-units -> micro-units, rounded up (a budget never under-counts)."""
    return -(-pico // PICO_PER_MICRO)


def tiers_of(usage: Any) -> TierTokens:
    """An IR ``Usage`` as ledger tiers (reasoning tokens are already inside ``output_tokens``)."""
    return TierTokens(int(usage.input_tokens), int(usage.output_tokens), int(usage.cache_read_tokens),
                      int(usage.cache_write_tokens))


class RateCard:
    """The running ``rate_card`` and ``per_request_fee``.

    Args:
        card: ``cfg.rate_card`` (``{model: RateCardEntry}``) or ``None`` (absent: tokens price 0).
        fee: ``cfg.per_request_fee`` (micro-units per billable request).
    """

    def __init__(self, card: Mapping[str, Any] | None, fee: int = 0) -> None:
        self.present = card is not None
        self.fee_pico = int(fee) * PICO_PER_MICRO
        self.rates: dict[str, Rates] = {
            name: Rates(_pico(e.input_utok), _pico(e.output_utok), _pico(e.cache_read_utok),
                        _pico(e.cache_write_utok), _pico(e.per_image_utok), _pico(e.per_audio_second_utok),
                        _pico(e.per_character_utok), _pico(e.per_search_unit_utok))
            for name, e in (card or {}).items()}

    def rates_of(self, name: str, upstream_model: str | None = None) -> Rates | None:
        """The rates of model ``name`` (else of its wire name ``upstream_model``); :data:`ZERO` when
        no card is configured; ``None`` when a present card does not price it."""
        if not self.present:
            return ZERO
        found = self.rates.get(name)
        if found is None and upstream_model is not None:
            found = self.rates.get(upstream_model)
        return found

    @staticmethod
    def cost_pico(rates: Rates, tiers: TierTokens) -> int:
        """Token cost of ``tiers`` at ``rates`` (pico-units; no fee)."""
        return (tiers.input * rates.input + tiers.output * rates.output
                + tiers.cache_read * rates.cache_read + tiers.cache_write * rates.cache_write)

    @staticmethod
    def unit_pico(rates: Rates, unit: str, count: int) -> int:
        """Cost of ``count`` of ledger ``unit`` (a key of :data:`UNITS`) at ``rates``, pico-units
        (rounded up)."""
        field, per = UNITS[unit]
        rate: int = getattr(rates, field)
        return -(-count * rate // per)

    def entry_pico(self, name: str, tiers: TierTokens) -> int:
        """Cost of one ledger entry at today's rates (pico-units): a model's tokens, or an
        operation unit entry (:func:`unit_key`, its count in ``input``); 0 when not priced."""
        model, unit = split_unit(name)
        rates = self.rates_of(model)
        if rates is None:
            return 0
        if unit is None:
            return self.cost_pico(rates, tiers)
        return self.unit_pico(rates, unit, tiers.input)

    def ledger_pico(self, models: Mapping[str, TierTokens], billable: int) -> int:
        """A ledger's derived spend: every model's tokens and operation units at today's rates plus
        the fee × billable requests (pico-units). A model no longer priced counts 0."""
        total = billable * self.fee_pico
        for name, tiers in models.items():
            total += self.entry_pico(name, tiers)
        return total
