"""OTLP/HTTP traces (``observability.otlp_url``): one span per request, one child span per upstream
attempt, hook decisions as child spans.

:func:`build_tracer` (at boot) checks the URL and returns a :class:`Tracing` (or ``None`` without
``otlp_url``); ``tracing.finisher`` is a process-wide ``RequestRecord`` finisher that only queues the
finished record (``busbar.observe.otlp_export.Exporter.put``: bounded, never blocks, a full queue
drops and counts); the exporter's thread turns batches of records straight into OTLP protobuf
(``busbar.observe.otlp.encode``: opentelemetry-proto messages, no opentelemetry-sdk span objects, so
the event loop pays one append per request) and POSTs them; ``tracing.start()`` starts that thread
and ``tracing.shutdown()`` sends what is queued (the lifecycle calls it at shutdown, after the
drain). The resource is opentelemetry-sdk's ``Resource.create`` (``service.name`` ``busbar``,
``service.version``, the ``telemetry.sdk.*`` and ``OTEL_RESOURCE_ATTRIBUTES`` ones), built once.

Spans (start and end times are the request's own; ``perf_counter`` times mapped onto the wall clock):

- ``<operation> <model>`` (kind SERVER; ``chat gpt-4o``), the request: ``gen_ai.operation.name``
  (``chat``; ``embeddings``/``count_tokens`` never occur on these routes), ``gen_ai.request.model``
  (the pool or model asked for), ``gen_ai.provider.name`` (the serving lane's provider protocol),
  ``gen_ai.response.model`` (the serving lane's upstream model), ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, ``http.response.status_code``, and busbar's ``busbar.request_id``,
  ``busbar.ingress_protocol``, ``busbar.pool``, ``busbar.lane``, ``busbar.outcome``,
  ``busbar.failover.hops``; status ERROR unless the outcome is ``ok``.
- ``attempt <lane>`` (kind CLIENT), each upstream attempt in order: ``busbar.lane``, ``busbar.pool``,
  ``busbar.failover.hop`` (0 = the first attempt), ``busbar.attempt.outcome``,
  ``http.response.status_code`` (when the upstream answered); status ERROR unless ``ok``.
- ``hook <name>`` (kind INTERNAL), each gate decision the hook chain waited for
  (``busbar.observe.decisions`` notes them in ``record.extra["hook_decisions"]`` while traces are
  on): ``busbar.hook``, ``busbar.hook.verdict`` (``decided`` or ``failed: <reason>``).

Target rules (seeds' observability section): loopback ``http://`` is allowed, anything else must be
``https://``; the URL is SSRF-checked by ``busbar_sdk.ssrf`` (config validation) and a host name is
resolved here at boot and its addresses judged by the connect-time rule (a name that resolves to a
metadata, private or, unless it is ``localhost``, loopback address refuses the boot); redirects are
never followed. The exporter's own HTTP client
checks again at connect time (``busbar.security.sync_session``): every new connection resolves the
host once, judges every address with the sdk's rule (``HostGuard.check_addresses``) and connects to
a checked literal only, so a name that resolves to a refused address later (DNS rebinding) is never
connected to; each refusal is counted (``busbar_otlp_connect_refused_total`` with a ``metrics:``
block; :attr:`Tracing.refused`) and logged at most once a minute, and that batch of spans is
dropped (not retried). Requests whose spans were dropped (queue full, batch not delivered) count in
``busbar_otlp_traces_dropped_total{reason}``. Userinfo
(``https://user:pass@host/v1/traces``) becomes an ``Authorization: Basic`` header and is removed
from the URL the exporter uses and from every log line (:func:`split_userinfo`).

Source: docs/operations.md#traces-otlp
"""
from __future__ import annotations

import base64
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit, urlunsplit

from busbar.faults import FaultList
from busbar.observe.otlp_export import Exporter, Item, item

if TYPE_CHECKING:
    from busbar_sdk.ssrf import HostGuard

    from busbar.config.load import LoadedConfig
    from busbar.proxy.record import RequestRecord
    from busbar.server.app import AppState

__all__ = ["TraceSetupError", "Tracing", "build_tracer", "split_userinfo"]

log = logging.getLogger("busbar.traces")
_WARN_EVERY_S = 60.0


class TraceSetupError(FaultList):
    """``observability.otlp_url`` cannot be used (one line per fault)."""


def split_userinfo(url: str) -> tuple[str, dict[str, str]]:
    """``(url without userinfo, headers)``: ``user:pass@`` becomes ``{"authorization": "Basic ..."}``
    (percent-decoded first); a URL without userinfo comes back unchanged with no headers."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, {}
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    creds = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return clean, {"authorization": "Basic " + base64.b64encode(creds).decode("ascii")}


def _guard(loaded: LoadedConfig) -> HostGuard:
    """The exporter's SSRF guard: ``security:``'s policy, loopback only, no private ranges."""
    from busbar_sdk.ssrf import HostGuard

    from busbar.security.ssrf import policy_of

    sec = loaded.config.security
    return HostGuard(policy_of(sec),
                     purpose="observability.otlp_url", allow_private=False)


def _check_resolved(url: str, guard: HostGuard, src: str = "config.yaml") -> None:
    """Resolve a host name now and judge its addresses by the connect-time rule
    (``HostGuard.check_addresses``, the same one the exporter's connections apply), so a target the
    exporter could never connect to refuses the boot instead of dropping every batch. An IP literal
    was judged with the URL at config time; a name that does not resolve yet is a warning. ``src``:
    the config file's name, the label of the fault line (as ``busbar --validate`` labels it)."""
    from busbar_sdk.ssrf import SsrfBlocked, canonical_host

    from busbar.security.sync_session import default_resolver

    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        canon = canonical_host(host)
    except ValueError:
        return                              # refused with the URL at config time
    if not isinstance(canon, str):
        return
    try:
        addresses = default_resolver(canon, parts.port or (443 if parts.scheme == "https" else 80))
    except OSError as e:
        log.warning("observability.otlp_url: cannot resolve %s now (%s); spans are queued and retried", host,
                    e.strerror or e)
        return
    try:
        guard.check_addresses(host, addresses)
    except SsrfBlocked as blocked:
        raise TraceSetupError([f"{src}: {blocked.reason.replace(' at connect time', '')}"]) from None


@dataclass
class Tracing:
    """The installed exporter: ``exporter`` (queue and thread), ``target`` (the URL without
    userinfo, for logs); ``state``: the running app (for the serving lane's provider and upstream
    model); ``refused``: connections the SSRF guard refused at connect time."""

    exporter: Exporter
    target: str
    state: AppState | None = None
    refused: int = 0
    _warned: float = field(default=-_WARN_EVERY_S, repr=False)

    def connect_refused(self, blocked: Exception) -> None:
        """The exporter's client was refused a connection (``busbar.security.sync_session``): count
        it, and log it at most once every ``_WARN_EVERY_S`` seconds (a rebinding name is refused on
        every batch)."""
        self.refused += 1
        now = time.monotonic()
        if now - self._warned >= _WARN_EVERY_S:
            self._warned = now
            log.warning("observability.otlp_url: connection refused by the SSRF guard, spans dropped: %s "
                        "(%d refusal(s) so far)", blocked, self.refused)

    def count_into(self, metrics: Any) -> None:
        """Serve :attr:`refused` as ``busbar_otlp_connect_refused_total`` and the exporter's drops as
        ``busbar_otlp_traces_dropped_total{reason}`` on ``metrics``' registry (a
        ``busbar.proxy.metrics.Metrics``; nothing when metrics are off)."""
        registry = getattr(metrics, "registry", None)
        if registry is not None:
            registry.register(_Collector(self))

    def finisher(self, record: RequestRecord) -> None:
        """Queue a finished ``record`` for export (a ``busbar.proxy.record.Finisher``) as a flat
        ``busbar.observe.otlp_export.Item`` (its fields, usage and the serving lane's provider
        protocol and upstream model, read now); the spans are made on the exporter's thread."""
        provider = upstream = None
        if record.lane is not None and self.state is not None:
            lane = self.state.gateway.lanes.get(record.lane)
            if lane is not None:
                provider, upstream = lane.provider.protocol, lane.upstream_model
        self.exporter.put(item(record, record.usage, provider, upstream))

    def start(self) -> None:
        """Start the exporter's thread (the lifecycle calls it once the app runs)."""
        self.exporter.start()

    def shutdown(self) -> None:
        """Send what is queued and stop the exporter (bounded by the exporter's own timeout)."""
        self.exporter.close()


def build_tracer(loaded: LoadedConfig) -> Tracing | None:
    """The exporter for ``observability.otlp_url`` (``None`` when unset).

    Raises:
        TraceSetupError: the URL's host resolves to an address the sinks' SSRF rule refuses.
    """
    url = loaded.config.observability.otlp_url
    if url is None:
        return None
    from opentelemetry.sdk.resources import Resource

    from busbar import __version__
    from busbar.observe import decisions
    from busbar.observe.otlp import Origin, Templates, encode
    from busbar.security.sync_session import guarded_session

    target, headers = split_userinfo(url)
    guard = _guard(loaded)
    _check_resolved(target, guard, loaded.config_path.name)
    box: list[Tracing] = []
    # checked at connect time; no redirects, no proxy or netrc from the environment
    session = guarded_session(guard, lambda blocked: box[0].connect_refused(blocked))
    resource = Resource.create({"service.name": "busbar", "service.version": __version__})
    origin, templates = Origin(dict(resource.attributes), "busbar", __version__), Templates()

    def encoder(items: Sequence[Item], now_ns: int) -> bytes:
        body: bytes = encode(items, origin, templates, now_ns).SerializeToString()
        return body

    decisions.enabled = True                       # the hook chain notes its gates' decisions
    log.info("exporting traces to %s (OTLP/HTTP)", target)
    box.append(Tracing(Exporter(target, headers, session, encoder), target))
    return box[0]


class _Collector:
    """``busbar_otlp_connect_refused_total`` (the exporter's connections refused at connect time) and
    ``busbar_otlp_traces_dropped_total{reason}`` (requests whose spans were dropped)."""

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily

        yield CounterMetricFamily("busbar_otlp_connect_refused", "OTLP exporter connections refused at connect "
                                  "time by the SSRF guard", value=self.tracing.refused)
        dropped = CounterMetricFamily("busbar_otlp_traces_dropped", "Requests whose OTLP spans were dropped: "
                                      "queue_full (the export queue was full), export_failed (not delivered)",
                                      labels=["reason"])
        for reason, n in self.tracing.exporter.dropped.items():
            dropped.add_metric([reason], n)
        yield dropped
