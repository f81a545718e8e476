"""The group tree from ``groups:``: each group's chain (leaf to root) and its effective limits.

``GroupTree(groups) -> tree``; ``tree.chain(name) -> tuple[Group, ...]`` (leaf first) or ``None``
for a group the running config does not have. Each :class:`Group` keeps its limits de-duplicated:
a metric repeated for the same window + pool scope keeps the most restrictive amount (a shadow
limit never displaces an enforced one, and a node-local limit never displaces a strict one: both are
kept, the node's counters check one and the shared store the other). Bucket names follow the ledger's spelling
``group:<name>@<window>`` and ``group:<name>@<window>#<pool>`` for pool-scoped limits.

Source: docs/limits.md#the-group-tree.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Group", "GroupTree", "Limit", "bucket_name"]

METRICS = ("requests", "tokens", "budget", "concurrent")


def bucket_name(group: str, per: str, pool: str | None) -> str:
    """The ledger bucket of ``group``'s ``per`` window (``#pool`` when pool-scoped)."""
    return f"group:{group}@{per}" + (f"#{pool}" if pool else "")


@dataclass(frozen=True, slots=True)
class Limit:
    """One enforced (or shadow) limit.

    Attributes:
        group: the group that declares it.
        metric: ``requests`` | ``tokens`` | ``budget`` | ``concurrent``.
        amount: the cap (requests, tokens, budget micro-units, in-flight requests).
        per: the window (``None`` for ``concurrent``).
        pool: the pool scope, or ``None`` for group-wide.
        shadow: counted and logged, never enforced.
        strict: admitted by one atomic store operation (fleet-exact).
        downgrade_to: the pool a spent pool-scoped budget re-admits through, or ``None``.
    """

    group: str
    metric: str
    amount: int
    per: str | None
    pool: str | None
    shadow: bool = False
    strict: bool = False
    downgrade_to: str | None = None

    bucket: str = ""
    """The ledger bucket this limit reads (derived; ``group:<g>@concurrent`` for the gauge)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "bucket", bucket_name(self.group, self.per or "concurrent", self.pool))

    @property
    def label(self) -> str:
        """How a rejection names it: ``requests per minute``, ``budget per month in pool 'x'``."""
        what = self.metric if self.per is None else f"{self.metric} per {self.per}"
        return what + (f" in pool '{self.pool}'" if self.pool else "")


@dataclass(frozen=True, slots=True)
class Group:
    """One group of the running config: ``enabled`` false freezes it and its descendants."""

    name: str
    parent: str | None
    enabled: bool
    limits: tuple[Limit, ...] = field(default_factory=tuple)


def _limits(name: str, raw: list[Any]) -> tuple[Limit, ...]:
    kept: dict[tuple[str, str | None, str | None, bool, bool], Limit] = {}
    for lim in raw:
        metrics = lim.metrics()
        if len(metrics) != 1:
            continue          # validation refuses this config; nothing to enforce
        metric = metrics[0]
        amount = int(getattr(lim, metric))
        new = Limit(name, metric, amount, lim.per, lim.pool, bool(getattr(lim, "shadow", False)),
                    bool(getattr(lim, "strict", False)),
                    lim.downgrade_to if lim.on_exhaust == "downgrade" else None)
        key = (metric, lim.per, lim.pool, new.shadow, new.strict)
        old = kept.get(key)
        if old is None or new.amount < old.amount:
            kept[key] = new
    return tuple(kept.values())


class GroupTree:
    """The running ``groups:`` tree.

    Args:
        groups: ``cfg.groups`` (``{name: GroupConfig}``), already validated acyclic.
    """

    def __init__(self, groups: Mapping[str, Any]) -> None:
        self.groups: dict[str, Group] = {
            name: Group(name, g.parent, g.enabled, _limits(name, g.limits)) for name, g in groups.items()}
        self._chains: dict[str, tuple[Group, ...]] = {}
        for name in self.groups:
            chain: list[Group] = []
            cur: str | None = name
            while cur is not None and cur in self.groups and len(chain) <= len(self.groups):
                chain.append(self.groups[cur])
                cur = self.groups[cur].parent
            self._chains[name] = tuple(chain)
        self._buckets = frozenset(lim.bucket for g in self.groups.values() for lim in g.limits)

    def chain(self, name: str) -> tuple[Group, ...] | None:
        """``name`` and every ancestor, leaf first; ``None`` when ``name`` is not configured."""
        return self._chains.get(name)

    def __len__(self) -> int:
        return len(self.groups)

    def all_limits(self) -> list[Limit]:
        """Every limit of every group (config order)."""
        return [lim for g in self.groups.values() for lim in g.limits]

    def bucket_names(self) -> frozenset[str]:
        """Every bucket a limit of the tree reads (``concurrent`` ones included)."""
        return self._buckets
