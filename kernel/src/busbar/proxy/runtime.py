"""Runtime objects built once from the validated config: providers, lanes, pools, members.

- ``Provider``: the merged catalog + deployment entry with its resolved credential and dialect.
- ``Lane``: one ``models:`` entry (model at a provider). Lane-global state shared by every pool:
  the ``max_concurrent`` permit counter, the ``max_requests`` lifetime budget, the hard-down
  deadline, the latency EWMA (α = 0.2, ms) and outcome counters. ``metric_label`` is the name
  metrics count it under: the model name, or ``"<provider>/*"`` for an ad-hoc lane
  (``busbar.proxy.adhoc``), so no client-chosen string becomes a label.
- ``Member``: a lane inside a pool with its weight, SWRR ``current`` weight, overrides and its own
  ``BreakerCell`` (breaker state is per (pool, lane)).
- ``Pool``: members + breaker/failover/on_exhausted/affinity config.

Source: docs/config-at-a-glance.md#providers, docs/config-at-a-glance.md#models, docs/config-at-a-glance.md#pools
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from busbar.config.operations import lane_operations
from busbar.config.schema import FallbackPool, MemberConfig, ModelConfig, PoolConfig
from busbar.proxy.breaker import BreakerCell

if TYPE_CHECKING:
    from busbar.proto.base import Dialect


@dataclass(slots=True)
class Provider:
    name: str
    protocol: str
    dialect: Dialect
    base_url: str                # trailing slash trimmed
    path: str | None
    path_base: str | None
    auth: str | None
    error_map: dict[str, str]
    api_key: str
    token_url: str | None = None
    scope: str | None = None
    subject: str | None = None
    health: dict[str, Any] | None = None   # {mode, interval_secs, timeout_secs} or None (= mode none)
    extra_headers: dict[str, str] = field(default_factory=dict)


class Lane:
    """One model at one provider. ``inflight``/``max_concurrent`` form a non-blocking semaphore."""

    __slots__ = ("name", "provider", "upstream_model", "max_concurrent", "inflight", "budget",
                 "default_max_tokens", "attempt_timeout_ms", "reasoning", "prompt_caching",
                 "hard_down_until", "latency_ms", "ok", "err", "client_fault", "default_cell",
                 "metric_label", "operations")

    def __init__(self, name: str, provider: Provider, cfg: ModelConfig, default_cell: BreakerCell):
        self.name = name
        self.provider = provider
        self.upstream_model = cfg.upstream_model or name
        self.max_concurrent = cfg.max_concurrent
        self.inflight = 0
        self.budget = cfg.max_requests            # -1 = unlimited
        self.default_max_tokens = cfg.default_max_tokens
        self.attempt_timeout_ms = cfg.attempt_timeout_ms
        self.reasoning = cfg.reasoning
        self.prompt_caching = cfg.prompt_caching
        self.hard_down_until = 0.0
        self.latency_ms: float | None = None
        self.ok = self.err = self.client_fault = 0
        self.default_cell = default_cell          # the cell for direct / ad-hoc routes
        self.metric_label = name                  # metrics' lane/model label ("<provider>/*" ad-hoc)
        self.operations = lane_operations(provider.protocol, cfg.operations)   # busbar.proxy.operation

    def has_permit(self) -> bool:
        return self.max_concurrent is None or self.inflight < self.max_concurrent

    def usable(self, now: float) -> bool:
        """Lane-global usability: not hard-down, budget left, a permit free (``has_permit``, inlined:
        this runs for every candidate of every request)."""
        cap = self.max_concurrent
        return now >= self.hard_down_until and self.budget != 0 and (cap is None or self.inflight < cap)

    def acquire(self) -> bool:
        if self.max_concurrent is not None and self.inflight >= self.max_concurrent:
            return False
        self.inflight += 1
        return True

    def release(self) -> None:
        self.inflight -= 1

    def observe_latency(self, ms: float) -> None:
        self.latency_ms = ms if self.latency_ms is None else 0.8 * self.latency_ms + 0.2 * ms


class Member:
    """A lane in a pool, with the pool's breaker cell for it and SWRR state."""

    __slots__ = ("lane", "weight", "current", "cell", "context_max", "attempt_timeout_ms",
                 "reasoning", "tier", "tags", "index")

    def __init__(self, lane: Lane, cfg: MemberConfig, cell: BreakerCell, index: int):
        self.lane = lane
        self.weight = cfg.weight
        self.current = 0
        self.cell = cell
        self.context_max = cfg.context_max
        self.attempt_timeout_ms = cfg.attempt_timeout_ms if cfg.attempt_timeout_ms is not None \
            else lane.attempt_timeout_ms
        self.reasoning = cfg.reasoning if cfg.reasoning is not None else lane.reasoning
        self.tier = cfg.tier
        self.tags = list(cfg.tags)
        self.index = index

    def usable(self, now: float) -> bool:
        return self.lane.usable(now) and self.cell.admits(now)


class Pool:
    """A named weighted group of members. ``members`` keep config order (idx = position)."""

    __slots__ = ("name", "members", "cfg", "fallback", "exclusions", "excluded_idx", "affinity_header")

    def __init__(self, name: str, cfg: PoolConfig, members: list[Member]):
        self.name = name
        self.cfg = cfg
        self.members = members
        self.fallback = cfg.on_exhausted.fallback_pool if isinstance(cfg.on_exhausted, FallbackPool) \
            else None
        self.exclusions = frozenset(cfg.failover.exclusions)
        self.excluded_idx = frozenset(m.index for m in members if m.lane.name in self.exclusions)
        self.affinity_header = cfg.affinity.header_name.lower() if cfg.affinity else None

    @property
    def on_exhausted(self) -> str:
        return "fallback" if self.fallback else str(self.cfg.on_exhausted)
