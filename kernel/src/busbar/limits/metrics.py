"""Prometheus metrics of limits (bounded labels: configured groups, pools and models only).

- ``busbar_limit_rejections_total{metric}``: admissions refused, by the refusing metric
  (``requests``, ``tokens``, ``budget``, ``concurrent``, ``frozen``, ``unconfigured``).
- ``busbar_limit_shadow_rejections_total{group,metric,window}``: a shadow limit would have refused.
- ``busbar_limit_strict_store_failures_total{op}``: strict admissions (``admit``: refused 503) and
  settlements (``settle``: given up, the reservation held until the window rolls) the store failed.
- ``busbar_limit_reservations``: requests admitted and not yet settled (their worst case held).
- ``busbar_limit_tokens_total{pool,model,tier}``, ``busbar_limit_units_total{pool,model,unit}``
  (operation units: ``images``, ``audio_ms``, ``characters``, ``search_units``) and
  ``busbar_limit_spend_micros_total{pool,model}`` (tokens and units): what settled requests used
  (``pool`` ``""`` for a direct route; an ad-hoc model is ``<provider>/*``).

With metrics off (no ``metrics:`` block) nothing is exported; the shadow and rejection counts are
still kept in ``shadow_counts`` / ``rejection_counts`` (read by the admin API).

Source: docs/limits.md#metrics.
"""
from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from busbar.limits.cost import split_unit

if TYPE_CHECKING:
    from busbar_sdk.store import TierTokens

    from busbar.limits.cost import RateCard
    from busbar.limits.tree import Limit

__all__ = ["LimitMetrics"]

_TIERS = ("input", "output", "cache_read", "cache_write")


class LimitMetrics:
    """The counters above on ``registry`` (``None``: kept in memory only)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.registry = registry
        self.shadow_counts: Tally[tuple[str, str, str]] = Tally()
        self.rejection_counts: Tally[str] = Tally()
        self.strict_failures: Tally[str] = Tally()
        self._rej = self._shadow = self._tokens = self._spend = self._units = self._strict = None
        self._children: dict[tuple[str, str], tuple[tuple[Any, ...], Any]] = {}   # (pool, label) -> children
        if registry is not None:
            self._rej = Counter("busbar_limit_rejections", "Admissions refused by a group limit", ["metric"],
                                registry=registry)
            self._shadow = Counter("busbar_limit_shadow_rejections", "Requests a shadow limit would have "
                                   "refused (not enforced)", ["group", "metric", "window"], registry=registry)
            self._tokens = Counter("busbar_limit_tokens", "Tokens of settled requests", ["pool", "model", "tier"],
                                   registry=registry)
            self._spend = Counter("busbar_limit_spend_micros", "Derived spend (tokens and operation units) "
                                  "of settled requests (micro-units)", ["pool", "model"], registry=registry)
            self._units = Counter("busbar_limit_units", "Operation units of settled requests (images, "
                                  "audio_ms, characters, search_units)", ["pool", "model", "unit"],
                                  registry=registry)
            self._strict = Counter("busbar_limit_strict_store_failures", "Strict admissions refused (503) and "
                                   "settlements given up because the store failed", ["op"], registry=registry)

    def watch(self, reservations: Callable[[], int]) -> None:
        """Export ``reservations()`` (open reservations) as a scrape-time gauge."""
        if self.registry is not None:
            Gauge("busbar_limit_reservations", "Admitted requests holding a worst-case reservation",
                  registry=self.registry).set_function(reservations)

    def refused(self, lim: Limit | None) -> None:
        """Count one refusal (``None``: a frozen or unconfigured group)."""
        metric = lim.metric if lim is not None else "group"
        self.rejection_counts[metric] += 1
        if self._rej is not None:
            self._rej.labels(metric).inc()

    def strict_failed(self, op: str, n: int = 1) -> None:
        """Count ``n`` strict store operations that failed (``op``: ``admit`` or ``settle``)."""
        self.strict_failures[op] += n
        if self._strict is not None:
            self._strict.labels(op).inc(n)

    def shadow(self, lim: Limit) -> None:
        """Count one would-be refusal of a shadow limit."""
        key = (lim.group, lim.metric, lim.per or "")
        self.shadow_counts[key] += 1
        if self._shadow is not None:
            self._shadow.labels(*key).inc()

    def used(self, pool: str, gw: Any, model: str, tiers: TierTokens, card: RateCard) -> None:
        """Count one settled request's tokens and spend (the label children of each pool × model
        are resolved once, not per request)."""
        if self._tokens is None or self._spend is None:
            return
        label = model if model in gw.lanes else "adhoc"      # ad-hoc names are unbounded: one label
        children = self._children.get((pool, label))
        if children is None:
            children = self._children[(pool, label)] = (
                tuple(self._tokens.labels(pool, label, tier) for tier in _TIERS), self._spend.labels(pool, label))
        (inp, out, read, write), spend = children
        if tiers.input:
            inp.inc(tiers.input)
        if tiers.output:
            out.inc(tiers.output)
        if tiers.cache_read:
            read.inc(tiers.cache_read)
        if tiers.cache_write:
            write.inc(tiers.cache_write)
        rates = card.rates_of(model)
        if rates is not None:
            spend.inc(card.cost_pico(rates, tiers) / 1_000_000)

    def used_units(self, pool: str, gw: Any, entries: Mapping[str, TierTokens], card: RateCard) -> None:
        """Count one settled request's operation units (``{unit_key: count in input}``) and their
        spend (``busbar_limit_units_total{pool,model,unit}``, ``busbar_limit_spend_micros_total``)."""
        if self._units is None or self._spend is None:
            return
        for name, count in entries.items():
            model, unit = split_unit(name)
            label = model if gw.lanes.get(model) is not None else "adhoc"
            self._units.labels(pool, label, unit or "").inc(count.input)
            self._spend.labels(pool, label).inc(card.entry_pico(name, count) / 1_000_000)
