"""Prometheus series of the hook engine, read at scrape time from the live engine's facades.

- ``busbar_hook_calls_total{hook}``: gate messages queued (decide + transform);
- ``busbar_hook_failures_total{hook,reason}``: reason ``timeout`` | ``error`` | ``garbage`` |
  ``saturated`` (each one applied the gate's ``on_error``);
- ``busbar_tap_notifications_dropped_total{hook}``: tap observations dropped (queue full);
- ``busbar_tap_failures_total{hook}``: tap calls that raised (swallowed, logged);
- ``busbar_hook_latency_us{hook}``: the gate's latency EWMA in µs;
- ``busbar_gate_shadow_verdicts_total{gate,arm}``: what ``shadow: true`` gates answered (never
  applied); ``arm``: abstain | reject | restrict | order | rewrite | a failure reason.

The route-policy counters (``busbar_route_policy_selections_total``,
``busbar_route_policy_rejections_total``) live with the request metrics (``busbar.proxy.metrics``).

"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from busbar.proxy.context import GatewayContext

__all__ = ["HookCollector"]


class HookCollector:
    """A prometheus-client collector over ``gateway.hooks`` (swapped on a plugin reload)."""

    def __init__(self, gateway: GatewayContext):
        self.gw = gateway

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        engine = self.gw.hooks
        calls = CounterMetricFamily("busbar_hook_calls", "Gate messages sent, per hook", labels=["hook"])
        fails = CounterMetricFamily("busbar_hook_failures", "Gate failures (on_error applied), per hook and reason",
                                    labels=["hook", "reason"])
        dropped = CounterMetricFamily("busbar_tap_notifications_dropped", "Tap observations dropped (queue full)",
                                      labels=["hook"])
        tap_fail = CounterMetricFamily("busbar_tap_failures", "Tap calls that raised", labels=["hook"])
        latency = GaugeMetricFamily("busbar_hook_latency_us", "Gate latency EWMA (µs)", labels=["hook"])
        shadow = CounterMetricFamily("busbar_gate_shadow_verdicts", "Shadow gates' verdicts (not applied), per "
                                     "gate and arm", labels=["gate", "arm"])
        shadow_totals: dict[tuple[str, str], int] = {}
        totals: dict[str, list[float]] = {}
        for f in engine.facades if engine is not None else ():
            t = totals.setdefault(f.name, [0.0] * 8)
            for i, v in enumerate((f.calls, f.timeouts, f.errors, f.garbage, f.saturated, f.tap_dropped,
                                   f.tap_errors)):
                t[i] += v
            t[7] = max(t[7], f.latency_us)
            for arm, seen in list(f.shadow_verdicts.items()):
                shadow_totals[(f.name, arm)] = shadow_totals.get((f.name, arm), 0) + seen
        for (gate, arm), seen in sorted(shadow_totals.items()):
            shadow.add_metric([gate, arm], seen)
        for name, t in totals.items():
            calls.add_metric([name], t[0])
            for reason, n in zip(("timeout", "error", "garbage", "saturated"), t[1:5]):
                fails.add_metric([name, reason], n)
            dropped.add_metric([name], t[5])
            tap_fail.add_metric([name], t[6])
            latency.add_metric([name], t[7])
        yield calls
        yield fails
        yield dropped
        yield tap_fail
        yield latency
        yield shadow
