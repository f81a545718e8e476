"""Prometheus series of the hook engine, read at scrape time from the live engine's facades.

- ``busbar_hook_calls_total{hook}``: gate messages queued (decide + transform);
- ``busbar_hook_failures_total{hook,reason}``: reason ``timeout`` | ``error`` | ``garbage`` |
  ``saturated`` (each one applied the gate's ``on_error``);
- ``busbar_tap_notifications_dropped_total{hook}``: tap observations dropped (queue full);
- ``busbar_tap_failures_total{hook}``: tap calls that raised (swallowed, logged);
- ``busbar_hook_latency_us{hook}``: the gate's latency EWMA in µs;
- ``busbar_gate_shadow_verdicts_total{gate,arm}``: what ``shadow: true`` gates answered (never
  applied); ``arm``: abstain | reject | restrict | order | rewrite | a failure reason.

- ``busbar_<name>{hook,<labels>}``: the counters, gauges and quantiles a plugin whose manifest
  declares ``x-busbar-status-metrics`` reports in its ``status`` reply, read at scrape time
  (``STATUS_TIMEOUT_S`` per hook; a hook that does not answer in time is skipped for that scrape).

The route-policy counters (``busbar_route_policy_selections_total``,
``busbar_route_policy_rejections_total``) live with the request metrics (``busbar.proxy.metrics``).

"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from busbar.proxy.context import GatewayContext

__all__ = ["STATUS_TIMEOUT_S", "HookCollector", "status_families"]

#: How long one scrape waits for a plugin's ``status`` reply (s).
STATUS_TIMEOUT_S = 0.25


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
        if engine is not None:
            yield from status_families([f for f in engine.facades if f.exports_status])


def status_families(facades: list[Any]) -> list[Metric]:
    """Prometheus families of the ``status`` metrics of ``facades`` (see the module docstring):
    ``counter`` entries as counters (``_total`` dropped from the family name, the client adds it
    back), ``gauge`` entries as gauges, ``quantiles`` as a gauge with a ``quantile`` label. Several
    instances of one hook report under the same ``hook`` label: counters add up, gauges keep the
    largest value."""
    kinds: dict[tuple[str, tuple[str, ...]], tuple[str, str]] = {}
    values: dict[tuple[str, tuple[str, ...]], dict[tuple[str, ...], float]] = {}

    def put(name: str, kind: str, help_text: str, labels: dict[str, str], value: float) -> None:
        key = (name, tuple(labels))
        kinds.setdefault(key, (kind, help_text))
        series = values.setdefault(key, {})
        lv = tuple(labels.values())
        old = series.get(lv)
        series[lv] = value if old is None else (old + value if kind == "counter" else max(old, value))

    for f in facades:
        report = f.status(timeout_s=STATUS_TIMEOUT_S)
        if report is None:
            continue
        for m in report.metrics:
            labels = {"hook": f.name, **m.get("labels", {})}
            base = "busbar_" + str(m["name"])
            kind = m.get("type")
            help_text = str(m.get("help", ""))
            if "quantiles" in m:
                for q, v in m["quantiles"].items():
                    put(base, "gauge", help_text, {**labels, "quantile": str(q)}, float(v))
            elif kind in ("counter", "gauge") and "value" in m:
                put(base.removesuffix("_total") if kind == "counter" else base, str(kind), help_text, labels,
                    float(m["value"]))
    out: list[Metric] = []
    for (name, keys), (kind, help_text) in kinds.items():
        fam = (CounterMetricFamily(name, help_text, labels=list(keys)) if kind == "counter"
               else GaugeMetricFamily(name, help_text, labels=list(keys)))
        for lv, v in values[(name, keys)].items():
            fam.add_metric(list(lv), v)
        out.append(fam)
    return out
