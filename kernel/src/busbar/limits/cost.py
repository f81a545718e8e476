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

Source: docs/limits.md#the-rate-card.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from busbar_sdk.store import TierTokens

__all__ = ["PICO_PER_MICRO", "ZERO", "RateCard", "Rates", "micros", "tiers_of"]

PICO_PER_MICRO = 1_000_000


@dataclass(frozen=True, slots=True)
class Rates:
    """One model's rates in pico-units per token: input, output, cache read, cache write."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

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
                        _pico(e.cache_write_utok)) for name, e in (card or {}).items()}

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

    def ledger_pico(self, models: Mapping[str, TierTokens], billable: int) -> int:
        """A ledger's derived spend: every model's tokens at today's rates plus the fee × billable
        requests (pico-units). A model no longer priced counts 0."""
        total = billable * self.fee_pico
        for name, tiers in models.items():
            rates = self.rates_of(name)
            if rates is not None:
                total += self.cost_pico(rates, tiers)
        return total
