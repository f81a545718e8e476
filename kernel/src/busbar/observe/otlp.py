"""Finished requests straight into OTLP protobuf: :func:`encode` turns a batch of queued
``busbar.observe.otlp_export.Item`` (a finished request's fields as a flat tuple) into one
``ExportTraceServiceRequest`` (``opentelemetry-proto``'s generated classes, C-backed protobuf), with
no opentelemetry-sdk span objects in between.

Per request (start and end times are the request's own ``perf_counter`` times mapped onto the wall
clock with the record's ``started_wall``; ids from :func:`os.urandom`, a fresh trace per request):

- ``<operation> <model>`` (kind SERVER): :func:`_root_fixed`'s attributes plus
  ``gen_ai.usage.input_tokens`` / ``output_tokens`` and ``busbar.request_id``; status ERROR (message:
  the outcome) unless the outcome is ``ok``;
- ``attempt <lane>`` (kind CLIENT), one per upstream attempt in order: ``busbar.lane``,
  ``busbar.pool``, ``busbar.failover.hop`` (0 = the first attempt), ``busbar.attempt.outcome``,
  ``http.response.status_code`` when the upstream answered; status ERROR unless ``ok``;
- ``hook <name>`` (kind INTERNAL), one per gate decision noted in ``record.extra["hook_decisions"]``
  (``busbar.observe.decisions``): ``busbar.hook``, ``busbar.hook.verdict``.

Source: docs/operations.md#traces-otlp
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from busbar.observe.otlp_export import Item

__all__ = ["YIELD_EVERY", "Origin", "Templates", "encode"]

_SERVER, _CLIENT, _INTERNAL = Span.SPAN_KIND_SERVER, Span.SPAN_KIND_CLIENT, Span.SPAN_KIND_INTERNAL
_ERROR = Status.STATUS_CODE_ERROR
_FLAGS = 0x101            # sampled; the parent's remoteness is known (not remote)
YIELD_EVERY = 32
"""Requests encoded between two GIL releases (about 0.5 ms of CPU)."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Who sends the spans: ``resource`` attributes (``service.name``, ``service.version``, the
    ``OTEL_RESOURCE_ATTRIBUTES`` ones, ...) and the instrumentation scope ``scope`` / ``version``."""

    resource: Mapping[str, Any]
    scope: str
    version: str


def _value(v: Any) -> AnyValue:
    """An attribute value: ``bool``, ``int``, ``float``, ``str``; anything else as its ``str``."""
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    return AnyValue(string_value=v if isinstance(v, str) else str(v))


def _kvs(attrs: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=_value(v)) for k, v in attrs.items()]


def _root_fixed(item: Item) -> dict[str, str | int]:
    """The request span's attributes that many requests share: ``gen_ai.operation.name`` (``chat``),
    ``gen_ai.request.model`` (the pool or model asked for), ``http.response.status_code``,
    ``busbar.ingress_protocol``, ``busbar.outcome``, ``busbar.failover.hops``; ``busbar.pool`` /
    ``busbar.lane`` when known; ``gen_ai.provider.name`` / ``gen_ai.response.model`` when a lane
    served it. (The tokens and ``busbar.request_id`` are added per request.)"""
    _, called, pool, lane, ingress, status, outcome, *_, attempts, _, provider, upstream = item
    attrs: dict[str, str | int] = {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": called, "http.response.status_code": status,
        "busbar.ingress_protocol": ingress, "busbar.outcome": outcome,
        "busbar.failover.hops": max(0, len(attempts) - 1),
    }
    if pool is not None:
        attrs["busbar.pool"] = pool
    if lane is not None:
        attrs["busbar.lane"] = lane
    if provider is not None:
        attrs["gen_ai.provider.name"] = provider
    if upstream is not None:
        attrs["gen_ai.response.model"] = upstream
    return attrs


class Templates:
    """Serialized span parts that repeat across requests (name, kind, flags, status and the
    attributes that depend on configured names, statuses and outcomes only), keyed by what they are
    made of: a span is then one ``add`` with its ids and times plus one ``MergeFromString`` of its
    template, instead of a protobuf message per attribute. At most ``limit`` entries (cleared when
    full; the keys come from configured names, so a working set is small)."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._cache: dict[tuple[Any, ...], bytes] = {}

    def _get(self, key: tuple[Any, ...], make: Any) -> bytes:
        got = self._cache.get(key)
        if got is None:
            if len(self._cache) >= self.limit:
                self._cache.clear()
            got = self._cache[key] = make().SerializeToString()
        return got

    def root(self, item: Item) -> bytes:
        """The request span's template: name, kind SERVER, status, :func:`_root_fixed` attributes."""
        _, called, pool, lane, ingress, status, outcome, *_, attempts, _, provider, upstream = item
        key = ("r", called, status, ingress, outcome, len(attempts), pool, lane, provider, upstream)

        def make() -> Span:
            span = Span(name=f"chat {called}".strip(), kind=_SERVER, flags=_FLAGS, attributes=_kvs(_root_fixed(item)))
            if outcome != "ok":
                span.status.code, span.status.message = _ERROR, outcome
            return span
        return self._get(key, make)

    def attempt(self, lane: str, pool: str, hop: int, outcome: str, status: int | None) -> bytes:
        """An attempt span's template: name, kind CLIENT, status and all its attributes."""
        key = ("a", lane, pool, hop, outcome, status)

        def make() -> Span:
            attrs: dict[str, str | int] = {"busbar.lane": lane, "busbar.pool": pool, "busbar.failover.hop": hop,
                                           "busbar.attempt.outcome": outcome}
            if status is not None:
                attrs["http.response.status_code"] = status
            span = Span(name=f"attempt {lane}", kind=_CLIENT, flags=_FLAGS, attributes=_kvs(attrs))
            if outcome != "ok":
                span.status.code, span.status.message = _ERROR, outcome or "unfinished"
            return span
        return self._get(key, make)

    def hook(self, hook: str, verdict: str) -> bytes:
        """A hook decision span's template: name, kind INTERNAL, ``busbar.hook``, ``busbar.hook.verdict``."""
        return self._get(("h", hook, verdict), lambda: Span(
            name=f"hook {hook}", kind=_INTERNAL, flags=_FLAGS,
            attributes=_kvs({"busbar.hook": hook, "busbar.hook.verdict": verdict})))


def _add_spans(spans: Any, item: Item, templates: Templates, now_ns: int) -> None:
    """Append the request span and its children for one item to the repeated field ``spans``
    (``now_ns``: the end of anything unfinished)."""
    request_id, _, _, _, _, _, _, started_wall, started, ended, tokens_in, tokens_out, attempts, hooks, _, _ = item
    offset_ns = int(started_wall * 1e9) - int(started * 1e9)

    def ns(t: float | None) -> int:
        return now_ns if t is None else offset_ns + int(t * 1e9)

    ids = os.urandom(24 + 8 * (len(attempts) + len(hooks)))
    trace_id, root_id = ids[:16], ids[16:24]
    root_end = ns(ended)
    root = spans.add(trace_id=trace_id, span_id=root_id, start_time_unix_nano=ns(started), end_time_unix_nano=root_end)
    root.MergeFromString(templates.root(item))
    add = root.attributes.add
    add(key="gen_ai.usage.input_tokens").value.int_value = tokens_in
    add(key="gen_ai.usage.output_tokens").value.int_value = tokens_out
    add(key="busbar.request_id").value.string_value = request_id
    at = 24
    for hop, (lane, pool, a_start, a_end, outcome, status) in enumerate(attempts):
        spans.add(trace_id=trace_id, span_id=ids[at:at + 8], parent_span_id=root_id,
                  start_time_unix_nano=ns(a_start), end_time_unix_nano=root_end if a_end is None else ns(a_end),
                  ).MergeFromString(templates.attempt(lane, pool, hop, outcome, status))
        at += 8
    for hook, h_start, h_end, verdict in hooks:
        spans.add(trace_id=trace_id, span_id=ids[at:at + 8], parent_span_id=root_id,
                  start_time_unix_nano=ns(h_start), end_time_unix_nano=ns(h_end),
                  ).MergeFromString(templates.hook(hook, verdict))
        at += 8


def encode(items: Sequence[Item], origin: Origin, templates: Templates, now_ns: int) -> ExportTraceServiceRequest:
    """One export request for ``items``: one resource, one scope, every item's spans in order
    (``templates``: the exporter's :class:`Templates`, kept across batches). ``now_ns`` (Unix
    nanoseconds) ends what a record left unfinished. Every :data:`YIELD_EVERY` requests the GIL is
    released for a moment, so a batch never holds the event loop for a whole switch interval."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend(_kvs(origin.resource))
    ss = rs.scope_spans.add()
    ss.scope.name, ss.scope.version = origin.scope, origin.version
    spans = ss.spans
    for n, item in enumerate(items, 1):
        _add_spans(spans, item, templates, now_ns)
        if n % YIELD_EVERY == 0:
            time.sleep(0)                  # let the event loop's thread take the GIL between slices
    return req
