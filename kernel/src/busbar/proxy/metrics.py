"""Prometheus metrics of the request path (prometheus-client, one registry per process: a config apply
hands it to the new gateway, ``Metrics.follow``).

Opt-in (docs/config-at-a-glance.md#metrics): with no ``metrics:`` block, ``NullMetrics`` records nothing and
``/metrics`` is not mounted. Counters:

- ``busbar_requests_total{ingress_protocol,pool,outcome}``  outcome: ok | client_error | exhausted | error
- ``busbar_upstream_attempts_total{pool,lane}``
- ``busbar_upstream_failures_total{pool,model,disposition}``  disposition: the class
  (rate_limit, overloaded, server_error, timeout, network, auth, billing, client_error,
  context_length) or ``attempt_timeout``
- ``busbar_failovers_total{pool,reason}``  reason: attempt_timeout | connect | timeout | the class
- ``busbar_breaker_trips_total{pool,lane}``
- ``busbar_route_policy_selections_total{policy,pool}`` / ``busbar_route_policy_rejections_total{policy,pool,status}``

Latency and tokens (recorded when a request finishes, ``Metrics.finished``; a
``busbar.proxy.record.RequestRecord`` finisher):

- ``busbar_request_duration_seconds{ingress_protocol,pool}`` histogram, arrival to the reply's end
- ``busbar_request_ttfb_seconds{ingress_protocol,pool}`` histogram, to the response head (a stream's
  first byte: the time to first token as the client sees it)
- ``busbar_request_latency_window_seconds{ingress_protocol,pool,quantile}`` summary whose 0.5 / 0.9 /
  0.99 quantiles cover the last ``metrics.buffer_seconds`` (``_sum`` / ``_count`` cumulative;
  ``busbar.observe.window``)
- ``busbar_upstream_attempt_duration_seconds{lane}`` histogram, each upstream attempt
- ``busbar_tokens_total{pool,model,direction}`` direction: input | output; model: the lane that served
- ``busbar_inbound_inflight`` gauge, data-plane requests in progress
- ``busbar_hook_decision_duration_seconds{pool,hook,outcome}`` histogram, each gate call (decide,
  transform, an ``on_error`` fallback, a shadow gate) from its message being queued to its reply or
  its cut; outcome: ok | timeout | error | garbage | grant | saturated (``busbar.hooks.fire.Result``);
  ``hook`` is a configured hook name, ``pool`` a configured pool or ``""`` (direct routes)

Scrape-time gauges (side-effect free; they never take a half-open probe):
``busbar_lane_state{pool,lane}`` (0 closed, 1 half-open, 2 open), ``busbar_lane_inflight{lane}``,
``busbar_lane_available_permits{lane}`` (-1 = unbounded), ``busbar_lane_budget_remaining{lane}``
(-1 = unlimited), ``busbar_adhoc_lanes`` (lanes held in the bounded ad-hoc lane cache). Direct and
ad-hoc routes use pool ``""``.

Label cardinality is bounded by the config: ``pool`` is a configured pool name or ``""``, ``lane`` /
``model`` a configured model name or, for an ad-hoc lane, ``"<provider>/*"`` (``Lane.metric_label``):
a client-chosen model name never becomes a label value.

Source: docs/config-at-a-glance.md#metrics, docs/config-at-a-glance.md#limits
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from busbar.observe.window import WindowedSummary
from busbar.proxy.breaker import CLOSED, HALF_OPEN, OPEN

if TYPE_CHECKING:
    from busbar.proxy.gateway import Gateway
    from busbar.proxy.record import RequestRecord

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Latency histogram buckets (seconds): from a cached reply to a long generation."""

_HOOK_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                 5.0, 10.0)
"""Hook decision latency buckets (seconds): from an inline gate's tens of µs to a long ``timeout_ms``."""

_STATE_VALUE = {CLOSED: 0, HALF_OPEN: 1, OPEN: 2}


class NullMetrics:
    """Records nothing (metrics disabled)."""

    enabled = False

    def request(self, proto: str, pool: str, outcome: str) -> None: ...
    def attempt(self, pool: str, lane: str) -> None: ...
    def failure(self, pool: str, model: str, disposition: str) -> None: ...
    def failover(self, pool: str, reason: str) -> None: ...
    def trip(self, pool: str, lane: str) -> None: ...
    def policy_selection(self, policy: str, pool: str) -> None: ...
    def policy_rejection(self, policy: str, pool: str, status: int) -> None: ...
    def hook_decision(self, pool: str, hook: str, outcome: str, seconds: float) -> None: ...
    def finished(self, record: RequestRecord, gateway: Gateway) -> None: ...

    def render(self) -> bytes:
        """Nothing is recorded: the empty exposition (``/metrics`` is not served while disabled)."""
        return b""


class Metrics(NullMetrics):
    """Live counters plus a scrape-time collector over the gateway's lanes and cells."""

    enabled = True

    def __init__(self, gateway: Gateway):
        self.registry = _Registry()
        r = self.registry
        self._requests = Counter("busbar_requests", "Client requests by outcome",
                                 ["ingress_protocol", "pool", "outcome"], registry=r)
        self._attempts = Counter("busbar_upstream_attempts", "Upstream attempts", ["pool", "lane"], registry=r)
        self._failures = Counter("busbar_upstream_failures", "Upstream failures by disposition",
                                 ["pool", "model", "disposition"], registry=r)
        self._failovers = Counter("busbar_failovers", "Failover hops by reason", ["pool", "reason"], registry=r)
        self._trips = Counter("busbar_breaker_trips", "Breaker trips", ["pool", "lane"], registry=r)
        self._sel = Counter("busbar_route_policy_selections", "Routing decisions by policy",
                            ["policy", "pool"], registry=r)
        self._rej = Counter("busbar_route_policy_rejections", "Gate rejections by policy",
                            ["policy", "pool", "status"], registry=r)
        r.register(_LaneCollector(gateway))
        window = gateway.config.metrics.buffer_seconds if gateway.config.metrics is not None else 60
        self._latency = Histogram("busbar_request_duration_seconds", "Request latency, arrival to the reply's end",
                                  ["ingress_protocol", "pool"], buckets=_BUCKETS, registry=r)
        self._ttfb = Histogram("busbar_request_ttfb_seconds", "Time to the response head (a stream's first byte)",
                               ["ingress_protocol", "pool"], buckets=_BUCKETS, registry=r)
        self._upstream = Histogram("busbar_upstream_attempt_duration_seconds", "Upstream attempt latency per lane",
                                   ["lane"], buckets=_BUCKETS, registry=r)
        self._tokens = Counter("busbar_tokens", "Tokens by pool, model (the lane that served) and direction",
                               ["pool", "model", "direction"], registry=r)
        self._window = WindowedSummary("busbar_request_latency_window_seconds",
                                       f"Request latency quantiles over the last {window} s (metrics.buffer_seconds)",
                                       ["ingress_protocol", "pool"], window)
        r.register(self._window)
        self.inbound: Callable[[], int] = lambda: 0
        self._hook = Histogram("busbar_hook_decision_duration_seconds", "Gate call latency, queued to reply or cut, "
                               "by pool, hook and outcome", ["pool", "hook", "outcome"], buckets=_HOOK_BUCKETS,
                               registry=r)
        self._hook_children: dict[tuple[str, str, str], Any] = {}
        r.register(_InboundCollector(self))

    def request(self, proto: str, pool: str, outcome: str) -> None:
        self._requests.labels(proto, pool, outcome).inc()

    def attempt(self, pool: str, lane: str) -> None:
        self._attempts.labels(pool, lane).inc()

    def failure(self, pool: str, model: str, disposition: str) -> None:
        self._failures.labels(pool, model, disposition).inc()

    def failover(self, pool: str, reason: str) -> None:
        self._failovers.labels(pool, reason).inc()

    def trip(self, pool: str, lane: str) -> None:
        self._trips.labels(pool, lane).inc()

    def policy_selection(self, policy: str, pool: str) -> None:
        self._sel.labels(policy, pool).inc()

    def policy_rejection(self, policy: str, pool: str, status: int) -> None:
        self._rej.labels(policy, pool, str(status)).inc()

    def hook_decision(self, pool: str, hook: str, outcome: str, seconds: float) -> None:
        """Observe one gate call: ``seconds`` (wall time the request waited for it) under ``(pool, hook,
        outcome)``; label values are configured names and a fixed outcome set (bounded)."""
        key = (pool, hook, outcome)
        child = self._hook_children.get(key)
        if child is None:
            child = self._hook_children[key] = self._hook.labels(pool, hook, outcome)
        child.observe(seconds)

    def finished(self, record: RequestRecord, gateway: Gateway) -> None:
        """Record a finished request: latency and TTFB histograms, the windowed latency summary,
        upstream attempt latency per lane, tokens. Label values are configured names only."""
        pool = record.pool if record.pool is not None else ""
        proto = record.ingress
        ended = record.ended if record.ended is not None else record.started
        latency = ended - record.started
        self._latency.labels(proto, pool).observe(latency)
        self._window.observe((proto, pool), latency)
        if record.first_byte is not None:
            self._ttfb.labels(proto, pool).observe(record.first_byte - record.started)
        for note in record.attempts:
            if note.ended is not None:
                self._upstream.labels(_lane_label(gateway, note.lane)).observe(note.ended - note.started)
        if record.lane is not None:
            usage = record.usage
            model = _lane_label(gateway, record.lane)
            if usage.input_tokens:
                self._tokens.labels(pool, model, "input").inc(usage.input_tokens)
            if usage.output_tokens:
                self._tokens.labels(pool, model, "output").inc(usage.output_tokens)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    def follow(self, gateway: Gateway) -> None:
        """Keep serving after a config apply: every collector that reads a gateway (``.gw``: the lane
        gauges, the hook collector) now reads ``gateway``; counters simply continue. A hook
        collector is added when ``gateway`` has hooks and none is registered yet."""
        hooks_seen = False
        for collector in self.registry.collectors:
            if hasattr(collector, "gw"):
                collector.gw = gateway
                hooks_seen = hooks_seen or type(collector).__name__ == "HookCollector"
        if gateway.hooks is not None and not hooks_seen:
            from busbar.hooks.metrics import HookCollector

            self.registry.register(HookCollector(gateway))


class _Registry(CollectorRegistry):
    """A registry that remembers what was registered (``collectors``), for :meth:`Metrics.follow`."""

    def __init__(self) -> None:
        super().__init__(auto_describe=True)
        self.collectors: list[Collector] = []

    def register(self, collector: Collector) -> None:
        super().register(collector)
        self.collectors.append(collector)

    def unregister(self, collector: Collector) -> None:
        super().unregister(collector)
        self.collectors.remove(collector)


def _lane_label(gateway: Gateway, lane: str) -> str:
    """A configured lane's name, or ``"adhoc"`` (an ad-hoc lane's name carries a client-chosen model)."""
    return lane if lane in gateway.lanes else "adhoc"


class _InboundCollector:
    """``busbar_inbound_inflight``: data-plane requests in progress (``Metrics.inbound``)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("busbar_inbound_inflight", "Data-plane requests in progress (inbound concurrency)",
                                value=self.metrics.inbound())


class _LaneCollector:
    def __init__(self, gateway: Gateway):
        self.gw = gateway

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        gw = self.gw
        now = gw.clock()
        state = GaugeMetricFamily("busbar_lane_state", "Breaker state per (pool, lane): 0 closed, "
                                  "1 half-open, 2 open", labels=["pool", "lane"])
        for pool in gw.pools.values():
            for m in pool.members:
                st = m.cell.state_at(now)
                if now < m.lane.hard_down_until:
                    st = OPEN
                state.add_metric([pool.name, m.lane.name], _STATE_VALUE[st])
        for lane in gw.lanes.values():
            state.add_metric(["", lane.name], _STATE_VALUE[lane.default_cell.state_at(now)])
        inflight = GaugeMetricFamily("busbar_lane_inflight", "In-flight requests per lane", labels=["lane"])
        permits = GaugeMetricFamily("busbar_lane_available_permits",
                                    "Free max_concurrent permits per lane (-1 = unbounded)", labels=["lane"])
        budget = GaugeMetricFamily("busbar_lane_budget_remaining",
                                   "Remaining max_requests budget per lane (-1 = unlimited)", labels=["lane"])
        for lane in gw.lanes.values():
            inflight.add_metric([lane.name], lane.inflight)
            permits.add_metric([lane.name], -1 if lane.max_concurrent is None
                               else lane.max_concurrent - lane.inflight)
            budget.add_metric([lane.name], lane.budget)
        adhoc = GaugeMetricFamily("busbar_adhoc_lanes", "Ad-hoc lanes held in the bounded ad-hoc lane "
                                  "cache", value=len(gw.adhoc))
        yield state
        yield adhoc
        yield inflight
        yield permits
        yield budget
