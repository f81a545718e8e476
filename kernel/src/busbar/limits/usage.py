"""Metering read back as usage reports: per day by model and by key, and a key's all-time totals.

Rows are the store's metering (``(day, key_id, model, provider)``: tokens by tier, requests,
billable requests, flushed every ``advanced.usage_flush_interval_ms``); spend is derived at read
time from the running rate card (``spend_micros``: tokens × rates + fee × billable requests,
rounded up to whole micro-units).

``day_report(rows, card, top=1000) -> dict``; ``totals(rows, card) -> dict``.

Source: docs/limits.md#usage-reports.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from busbar_sdk.store import MeteringRow, TierTokens

from busbar.limits.cost import RateCard, micros

__all__ = ["FIELDS", "day_report", "totals"]

FIELDS = ("input", "output", "cache_read", "cache_write", "requests", "billable_requests")


def _pico(row: MeteringRow, card: RateCard) -> int:
    rates = card.rates_of(row.model)
    tokens = 0 if rates is None else card.cost_pico(rates, TierTokens(row.input, row.output, row.cache_read,
                                                                          row.cache_write))
    return tokens + row.billable_requests * card.fee_pico


def _sum(rows: Iterable[MeteringRow], card: RateCard) -> dict[str, int]:
    out = dict.fromkeys(FIELDS, 0)
    pico = 0
    for r in rows:
        for f in FIELDS:
            out[f] += getattr(r, f)
        pico += _pico(r, card)
    out["spend_micros"] = micros(pico)
    return out


def totals(rows: Iterable[MeteringRow], card: RateCard) -> dict[str, int]:
    """Every counter of ``rows`` summed, plus their derived ``spend_micros``."""
    return _sum(rows, card)


def day_report(day: str, rows: list[MeteringRow], card: RateCard, top: int = 1000) -> dict[str, Any]:
    """``{"day", "totals", "by_model": [{model, provider, ...}], "by_key": [{key_id, ...}] (the
    ``top`` highest spenders, then by key id), "others": {...} | None (the rest summed)}``."""
    by_model: dict[tuple[str, str], list[MeteringRow]] = {}
    by_key: dict[str, list[MeteringRow]] = {}
    for r in rows:
        by_model.setdefault((r.model, r.provider), []).append(r)
        by_key.setdefault(r.key_id, []).append(r)
    models: list[dict[str, Any]] = [{"model": m, "provider": p, **_sum(rs, card)}
                                    for (m, p), rs in sorted(by_model.items())]
    sums = sorted(((k, _sum(rs, card)) for k, rs in by_key.items()),
                  key=lambda kv: (-kv[1]["spend_micros"], -kv[1]["requests"], kv[0]))
    keys: list[dict[str, Any]] = [{"key_id": k, **v} for k, v in sums[:top]]
    others: dict[str, int] | None = None
    if len(sums) > top:
        rest = [v for _, v in sums[top:]]
        others = {"keys": len(rest), **{f: sum(v[f] for v in rest) for f in (*FIELDS, "spend_micros")}}
    return {"day": day, "totals": _sum(rows, card), "by_model": models, "by_key": keys, "others": others}
