"""OTLP/HTTP traces (``observability.otlp_url``) with opentelemetry-sdk: one span per request, one child
span per upstream attempt, hook decisions as child spans.

:func:`build_tracer` (at boot) checks the URL and returns a :class:`Tracing` (or ``None`` without
``otlp_url``); ``tracing.finisher`` is a process-wide ``RequestRecord`` finisher that turns a finished
request into spans after the fact (the record holds every time, so nothing runs on the request path
before the reply is sent); ``tracing.shutdown()`` flushes what is queued (the lifecycle calls it at
shutdown, after the drain).

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
dropped (not retried). Userinfo
(``https://user:pass@host/v1/traces``) becomes an ``Authorization: Basic`` header and is removed
from the URL the exporter uses and from every log line (:func:`split_userinfo`).

Source: docs/operations.md#traces-otlp
"""
from __future__ import annotations

import base64
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit, urlunsplit

from busbar.faults import FaultList

if TYPE_CHECKING:
    from busbar_sdk.ssrf import HostGuard
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

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
    from busbar_sdk.ssrf import HostGuard, SsrfPolicy

    sec = loaded.config.security
    return HostGuard(SsrfPolicy(sec.blocked_metadata_hosts, sec.allow_metadata_hosts, sec.allow_all_metadata),
                     purpose="observability.otlp_url", allow_private=False)


def _check_resolved(url: str, guard: HostGuard) -> None:
    """Resolve a host name now and judge its addresses by the connect-time rule
    (``HostGuard.check_addresses``, the same one the exporter's connections apply), so a target the
    exporter could never connect to refuses the boot instead of dropping every batch. An IP literal
    was judged with the URL at config time; a name that does not resolve yet is a warning."""
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
        raise TraceSetupError([f"config.yaml: {blocked.reason.replace(' at connect time', '')}"]) from None


@dataclass
class Tracing:
    """The installed exporter: ``provider`` (an SDK ``TracerProvider``), ``tracer``, ``target`` (the
    URL without userinfo, for logs); ``refused``: connections the SSRF guard refused at connect time."""

    provider: TracerProvider
    tracer: Tracer
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
        """Serve :attr:`refused` as ``busbar_otlp_connect_refused_total`` on ``metrics``' registry
        (a ``busbar.proxy.metrics.Metrics``; nothing when metrics are off)."""
        registry = getattr(metrics, "registry", None)
        if registry is not None:
            registry.register(_RefusedCollector(self))

    def finisher(self, record: RequestRecord) -> None:
        """Spans for a finished ``record`` (a ``busbar.proxy.record.Finisher``)."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        offset_ns = int(record.started_wall * 1e9) - int(record.started * 1e9)

        def ns(t: float | None) -> int:
            return offset_ns + int((t if t is not None else time.perf_counter()) * 1e9)

        usage = record.usage
        lane = None
        if self.state is not None and record.lane is not None:
            lane = self.state.gateway.lanes.get(record.lane)
        model = record.called or ""
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": usage.input_tokens, "gen_ai.usage.output_tokens": usage.output_tokens,
            "http.response.status_code": record.status, "busbar.request_id": record.request_id,
            "busbar.ingress_protocol": record.ingress, "busbar.outcome": record.outcome,
            "busbar.failover.hops": record.hops,
        }
        if record.pool is not None:
            attrs["busbar.pool"] = record.pool
        if record.lane is not None:
            attrs["busbar.lane"] = record.lane
        if lane is not None:
            attrs["gen_ai.provider.name"] = lane.provider.protocol
            attrs["gen_ai.response.model"] = lane.upstream_model
        root = self.tracer.start_span(f"chat {model}".strip(), kind=SpanKind.SERVER, attributes=attrs,
                                      start_time=ns(record.started))
        if record.outcome != "ok":
            root.set_status(Status(StatusCode.ERROR, record.outcome))
        ctx = trace.set_span_in_context(root)
        for hop, note in enumerate(record.attempts):
            a_attrs: dict[str, Any] = {"busbar.lane": note.lane, "busbar.pool": note.pool,
                                       "busbar.failover.hop": hop, "busbar.attempt.outcome": note.outcome}
            if note.status is not None:
                a_attrs["http.response.status_code"] = note.status
            span = self.tracer.start_span(f"attempt {note.lane}", context=ctx, kind=SpanKind.CLIENT,
                                          attributes=a_attrs, start_time=ns(note.started))
            if note.outcome != "ok":
                span.set_status(Status(StatusCode.ERROR, note.outcome or "unfinished"))
            span.end(end_time=ns(note.ended if note.ended is not None else record.ended))
        for d in record.extra.get("hook_decisions", ()):
            span = self.tracer.start_span(f"hook {d.get('hook', '')}", context=ctx, kind=SpanKind.INTERNAL,
                                          attributes={"busbar.hook": str(d.get("hook", "")),
                                                      "busbar.hook.verdict": str(d.get("verdict", ""))},
                                          start_time=ns(d.get("started")))
            span.end(end_time=ns(d.get("ended")))
        root.end(end_time=ns(record.ended))

    def shutdown(self) -> None:
        """Flush queued spans and stop the exporter (bounded by the exporter's own timeout)."""
        try:
            self.provider.force_flush(timeout_millis=5000)
        finally:
            self.provider.shutdown()


def build_tracer(loaded: LoadedConfig) -> Tracing | None:
    """The exporter for ``observability.otlp_url`` (``None`` when unset).

    Raises:
        TraceSetupError: the URL's host resolves to an address the sinks' SSRF rule refuses.
    """
    url = loaded.config.observability.otlp_url
    if url is None:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from busbar import __version__
    from busbar.security.sync_session import guarded_session

    target, headers = split_userinfo(url)
    guard = _guard(loaded)
    _check_resolved(target, guard)
    box: list[Tracing] = []
    # checked at connect time; no redirects, no proxy or netrc from the environment
    session = guarded_session(guard, lambda blocked: box[0].connect_refused(blocked))
    exporter = OTLPSpanExporter(endpoint=target, headers=headers, timeout=10, session=session)
    provider = TracerProvider(resource=Resource.create({"service.name": "busbar",
                                                        "service.version": __version__}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    from busbar.observe import decisions

    decisions.enabled = True                       # the hook chain notes its gates' decisions
    log.info("exporting traces to %s (OTLP/HTTP)", target)
    box.append(Tracing(provider, provider.get_tracer("busbar", __version__), target))
    return box[0]


class _RefusedCollector:
    """``busbar_otlp_connect_refused_total``: the exporter's connections refused at connect time."""

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily

        yield CounterMetricFamily("busbar_otlp_connect_refused", "OTLP exporter connections refused at connect "
                                  "time by the SSRF guard", value=self.tracing.refused)
