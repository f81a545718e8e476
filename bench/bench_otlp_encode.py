"""Where an OTLP trace's CPU goes, per request, busbar's lean path against the opentelemetry-sdk path
it replaced, measured side by side in one process with ``time.process_time`` (CPU, not wall time,
so a loaded box inflates neither much):

- ``finisher``: what runs on the event loop when a request finishes. Lean: ``Tracing.finisher``
  (the lane lookup, ``record.usage``, the record's fields copied into a flat tuple, one bounded-queue
  append). SDK: one ``start_span`` / ``end``
  per span (attribute validation, sampler, context) into a span processor that only collects them
  (the ``BatchSpanProcessor``'s own queue append is not counted, so the SDK figure is a lower bound).
- ``encode``: what the export thread spends turning a batch of 512 requests into the POST body.
  Lean: ``busbar.observe.otlp.encode`` + ``SerializeToString``. SDK: the OTLP exporter's
  ``encode_spans`` + ``SerializePartialToString``.

Each request: a request span, two upstream attempts (a failover hop), no hook decision.

Usage: .venv/bin/python bench/bench_otlp_encode.py [--n 5120 --rounds 5]
(the SDK series needs ``opentelemetry-exporter-otlp-proto-common``; without it only the lean path runs)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _records(n: int) -> list[Any]:
    from busbar.ir.model import Usage
    from busbar.proxy.record import RequestRecord

    out = []
    for _ in range(n):
        r = RequestRecord("POST", "/v1/chat/completions", "openai")
        r.called, r.pool, r.lane, r.status = "traced", "traced", "tr-b", 200
        for lane, outcome, status in (("tr-a", "server_error", 500), ("tr-b", "ok", 200)):
            note = r.attempt_started(lane, "traced")
            note.ended, note.outcome, note.status = time.perf_counter(), outcome, status
        r.ended = time.perf_counter()
        r._usage = Usage(input_tokens=12, output_tokens=34)
        out.append(r)
    return out


def _state() -> Any:
    lane = SimpleNamespace(provider=SimpleNamespace(protocol="openai"), upstream_model="tr-b-upstream")
    return SimpleNamespace(gateway=SimpleNamespace(lanes={"tr-a": lane, "tr-b": lane}))


def lean(records: list[Any]) -> tuple[float, float]:
    """``(finisher µs/request, encode µs/request)`` of busbar's exporter."""
    import requests
    from busbar.observe.otlp import Origin, Templates, encode
    from busbar.observe.otlp_export import Exporter
    from busbar.observe.traces import Tracing

    origin, templates = Origin({"service.name": "busbar"}, "busbar", "bench"), Templates()
    exporter = Exporter("http://127.0.0.1:9/v1/traces", {}, requests.Session(), lambda i, n: b"",
                        queue=len(records) + 1)
    tracing = Tracing(exporter, "bench", state=_state())
    c0 = time.process_time()
    for r in records:
        tracing.finisher(r)
    fin = time.process_time() - c0
    items = list(exporter._queue)
    c0 = time.process_time()
    for i in range(0, len(items), 512):
        encode(items[i:i + 512], origin, templates, time.time_ns()).SerializeToString()
    enc = time.process_time() - c0
    return fin / len(records) * 1e6, enc / len(records) * 1e6


def sdk(records: list[Any]) -> tuple[float, float] | None:
    """The same through opentelemetry-sdk spans and the OTLP exporter's encoder (``None`` without it)."""
    try:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    except ImportError:
        return None
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.trace import SpanKind, Status, StatusCode

    done: list[Any] = []

    class Collect(SpanProcessor):
        def on_end(self, span: Any) -> None:
            done.append(span)

    provider = TracerProvider(resource=Resource.create({"service.name": "busbar"}))
    provider.add_span_processor(Collect())
    tracer = provider.get_tracer("busbar", "bench")
    lanes = _state().gateway.lanes
    c0 = time.process_time()
    for record in records:          # what the replaced finisher did per request
        offset_ns = int(record.started_wall * 1e9) - int(record.started * 1e9)
        usage, lane = record.usage, lanes.get(record.lane)
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": record.called,
                 "gen_ai.usage.input_tokens": usage.input_tokens, "gen_ai.usage.output_tokens": usage.output_tokens,
                 "http.response.status_code": record.status, "busbar.request_id": record.request_id,
                 "busbar.ingress_protocol": record.ingress, "busbar.outcome": record.outcome,
                 "busbar.failover.hops": record.hops, "busbar.pool": record.pool, "busbar.lane": record.lane,
                 "gen_ai.provider.name": lane.provider.protocol, "gen_ai.response.model": lane.upstream_model}
        root = tracer.start_span(f"chat {record.called}", kind=SpanKind.SERVER, attributes=attrs,
                                 start_time=offset_ns + int(record.started * 1e9))
        ctx = trace.set_span_in_context(root)
        for hop, note in enumerate(record.attempts):
            span = tracer.start_span(f"attempt {note.lane}", context=ctx, kind=SpanKind.CLIENT,
                                     attributes={"busbar.lane": note.lane, "busbar.pool": note.pool,
                                                 "busbar.failover.hop": hop, "busbar.attempt.outcome": note.outcome,
                                                 "http.response.status_code": note.status},
                                     start_time=offset_ns + int(note.started * 1e9))
            if note.outcome != "ok":
                span.set_status(Status(StatusCode.ERROR, note.outcome))
            span.end(end_time=offset_ns + int(note.ended * 1e9))
        root.end(end_time=offset_ns + int(record.ended * 1e9))
    fin = time.process_time() - c0
    c0 = time.process_time()
    for i in range(0, len(done), 3 * 512):
        encode_spans(done[i:i + 3 * 512]).SerializePartialToString()
    enc = time.process_time() - c0
    return fin / len(records) * 1e6, enc / len(records) * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5120, help="requests per round")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    res: dict[str, list[tuple[float, float]]] = {"lean": [], "sdk": []}
    for _ in range(a.rounds):                 # interleaved: both paths see the same box
        records = _records(a.n)
        res["lean"].append(lean(records))
        got = sdk(_records(a.n))
        if got is not None:
            res["sdk"].append(got)
    print(f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}; {a.rounds} rounds x {a.n} "
          f"requests (3 spans each); medians, CPU µs per request")
    print("| path | finisher (event loop) | encode (export thread) | total |")
    print("|---|---:|---:|---:|")
    for name, rows in res.items():
        if rows:
            fin = statistics.median(r[0] for r in rows)
            enc = statistics.median(r[1] for r in rows)
            print(f"| {name} | {fin:.1f} | {enc:.1f} | {fin + enc:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
