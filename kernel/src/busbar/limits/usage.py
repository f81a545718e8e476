"""Metering read back as usage reports: per day by model and by key, and a key's all-time totals.

Rows are the store's metering (``(day, key_id, model, provider)``: tokens by tier, requests,
billable requests, flushed every ``advanced.usage_flush_interval_ms``); spend is derived at read
time from the running rate card (``spend_micros``: tokens × rates + operation units × their rates +
fee × billable requests, rounded up to whole micro-units). Operation units are metered as rows of
their own (model ``"<lane>#<unit>"``, busbar.store.metering); a report folds them into their
lane's entry as ``images``, ``audio_ms``, ``characters`` and ``search_units``.

``day_report(rows, card, top=1000) -> dict``; ``totals(rows, card) -> dict``.

Source: docs/limits.md#usage-reports.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from busbar_sdk.store import MeteringRow, TierTokens

from busbar.limits.cost import UNITS, RateCard, micros, split_unit

__all__ = ["FIELDS", "day_report", "totals"]

TOKEN_FIELDS = ("input", "output", "cache_read", "cache_write", "requests", "billable_requests")
FIELDS = (*TOKEN_FIELDS, *UNITS)
"""Every counter of a report entry: the token tiers, requests, and the operation units (``images``,
``audio_ms``, ``characters``, ``search_units``; busbar.limits.cost)."""


def _pico(row: MeteringRow, card: RateCard) -> int:
    tiers = TierTokens(row.input, row.output, row.cache_read, row.cache_write)
    return card.entry_pico(row.model, tiers) + row.billable_requests * card.fee_pico


def _sum(rows: Iterable[MeteringRow], card: RateCard) -> dict[str, int]:
    out = dict.fromkeys(FIELDS, 0)
    pico = 0
    for r in rows:
        unit = split_unit(r.model)[1]
        if unit is not None:         # an operation-unit row: its count is in input
            out[unit] += r.input
        else:
            for f in TOKEN_FIELDS:
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
        by_model.setdefault((split_unit(r.model)[0], r.provider), []).append(r)
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
