"""The ad-hoc lane cache: lanes of ``/{provider}/{model}/v1/messages``, bounded and evicted LRU.

An ad-hoc lane is built on first use from the provider's credential (no pool; its own lane-default
breaker cell) and kept so that its breaker learns from the traffic it serves. The model name is the
client's, so the set of names is unbounded: the cache holds at most ``ADHOC_LANE_CACHE_SIZE`` lanes.
Inserting into a full cache evicts the least recently used lane, preferring one that is idle and
healthy (breaker closed, no cooldown, not hard-down, nothing in flight) among the
``EVICTION_SCAN`` least recently used; when none of those qualifies, the least recently used lane
is evicted anyway, so the bound always holds. A request in flight keeps its own reference to an
evicted lane and finishes normally; the next request for that name builds a fresh lane (closed
breaker). Metrics count every ad-hoc lane of a provider under one label (``Lane.metric_label`` =
``"<provider>/*"``), never under the client's model name.

``AdhocLanes(clock, capacity=ADHOC_LANE_CACHE_SIZE)``; ``get(provider, model) -> Lane``
(``provider`` a built ``Provider``); ``len()`` = lanes held. See docs/routing.md#ad-hoc-routes.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from itertools import islice

from busbar.config.schema import BreakerConfig, ModelConfig
from busbar.proxy.breaker import CLOSED, BreakerCell
from busbar.proxy.runtime import Lane, Provider

ADHOC_LANE_CACHE_SIZE = 1024
"""Most ad-hoc lanes held at once (documented in docs/routing.md#ad-hoc-routes)."""
EVICTION_SCAN = 64
"""How many least-recently-used lanes an insertion inspects for an idle, healthy one to evict."""


class AdhocLanes:
    """LRU cache of ad-hoc lanes keyed by (provider name, model name)."""

    def __init__(self, clock: Callable[[], float], capacity: int = ADHOC_LANE_CACHE_SIZE):
        if capacity < 1:
            raise ValueError(f"ad-hoc lane cache capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._clock = clock
        self._lanes: OrderedDict[tuple[str, str], Lane] = OrderedDict()
        self._breaker = BreakerConfig()

    def __len__(self) -> int:
        return len(self._lanes)

    def get(self, provider: Provider, model: str) -> Lane:
        """The lane for ``model`` at ``provider`` (built and cached on first use; marked recent)."""
        key = (provider.name, model)
        lane = self._lanes.get(key)
        if lane is not None:
            self._lanes.move_to_end(key)
            return lane
        if len(self._lanes) >= self.capacity:
            self._evict_one()
        lane = Lane(model, provider, ModelConfig(provider=provider.name),
                    BreakerCell(self._breaker, hash(key)))
        lane.metric_label = f"{provider.name}/*"
        self._lanes[key] = lane
        return lane

    def _evict_one(self) -> None:
        now = self._clock()
        for key, lane in islice(self._lanes.items(), EVICTION_SCAN):
            cell = lane.default_cell
            if (lane.inflight == 0 and cell.state == CLOSED and now >= cell.cooldown_until
                    and now >= lane.hard_down_until):
                del self._lanes[key]
                return
        self._lanes.popitem(last=False)
