"""A small OTLP/HTTP trace receiver on loopback, for the tests of the OTLP exporter.

:class:`Receiver` decodes every POST body as ``ExportTraceServiceRequest`` (``/refuse`` answers 400,
the first ``/flaky`` 503); :func:`attrs` reads span attributes; ``receiver`` is a fixture (a started
receiver, shut down after the test) that a conftest imports.
"""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = ["Receiver", "attrs", "receiver"]


class Receiver:
    """An OTLP/HTTP trace receiver: every POST body decoded as ``ExportTraceServiceRequest``."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], ExportTraceServiceRequest]] = []
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                outer.paths.append(self.path)
                if self.path == "/refuse" or (self.path == "/flaky" and outer.paths.count("/flaky") == 1):
                    self.send_response(400 if self.path == "/refuse" else 503)   # rejected / busy once
                    self.send_header("retry-after", "0")
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                msg = ExportTraceServiceRequest()
                msg.ParseFromString(body)
                outer.requests.append(({k.lower(): v for k, v in self.headers.items()}, msg))
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list:
        return [s for _, m in self.requests for rs in m.resource_spans for ss in rs.scope_spans for s in ss.spans]


def attrs(span) -> dict:
    """A span's (or resource's) attributes as ``{key: string or int value}``."""
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = v.string_value if v.HasField("string_value") else v.int_value
    return out


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()
