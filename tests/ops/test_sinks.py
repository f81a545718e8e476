"""Request-log sinks (docs/operations.md#request-log-sinks): the webhook through a real busbar to an
HTTPS receiver on loopback (one document per request, overflow dropped and counted, never queued),
and the JSONL file (one line per request, rotation)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import openai
import pytest
from busbar.observe.sinks import FileSink
from busbar.proxy.record import RequestRecord

from tests.support.waiting import wait_until

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  sk-a: { provider: up-openai }
pools:
  sunk: { members: [ { model: sk-a } ] }
metrics: { buffer_seconds: 60 }
observability:
  request_log_webhook_url: "https://127.0.0.1:HOOK/in"
  max_inflight_webhook_deliveries: 1
  request_log_file: "LOGFILE"
"""


class HttpsReceiver:
    """A JSON POST receiver over TLS; ``gate`` (when set) holds each delivery until it is released."""

    def __init__(self, pki) -> None:
        self.docs: list[dict] = []
        self.headers: list[dict] = []
        self.gate: threading.Event | None = None
        self.arrived = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                outer.arrived += 1
                if outer.gate is not None:
                    outer.gate.wait(10)
                outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                outer.docs.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        import ssl

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki.server.cert_path, pki.server.key_path)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver(pki):
    r = HttpsReceiver(pki)
    yield r
    r.server.shutdown()


def test_webhook_documents_overflow_drops_and_the_jsonl_file(gateway_factory, mock, receiver, pki, tmp_path):
    logfile = tmp_path / "requests.jsonl"
    gw = gateway_factory(CONFIG.replace("HOOK", str(receiver.port)).replace("LOGFILE", str(logfile)), mock.url,
                         env={"SSL_CERT_FILE": str(pki.ca.cert_path)})
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    r = client.chat.completions.create(model="sunk", messages=[{"role": "user", "content": "hi"}])
    wait_until(lambda: receiver.docs, what="the first document")
    doc = receiver.docs[0]
    assert set(doc) == {"ts", "ingress_protocol", "pool", "outcome", "latency_ms", "model", "lane", "status", "hops",
                        "input_tokens", "output_tokens", "request_id"}
    assert {k: doc[k] for k in ("ingress_protocol", "pool", "outcome", "model", "lane", "status", "hops",
                                "input_tokens", "output_tokens")} == {
        "ingress_protocol": "openai", "pool": "sunk", "outcome": "ok", "model": "sunk", "lane": "sk-a",
        "status": 200, "hops": 0, "input_tokens": r.usage.prompt_tokens, "output_tokens": r.usage.completion_tokens}
    assert 0 < doc["latency_ms"] < 10_000
    assert receiver.headers[0]["content-type"] == "application/json"
    receiver.gate = threading.Event()              # the next delivery stays in flight ...
    client.chat.completions.create(model="sunk", messages=[{"role": "user", "content": "x"}])
    wait_until(lambda: receiver.arrived == 2, what="the second delivery to arrive and be held")
    for _ in range(3):                             # ... so these three overflow the cap of 1
        client.chat.completions.create(model="sunk", messages=[{"role": "user", "content": "x"}])
    receiver.gate.set()
    wait_until(lambda: len(receiver.docs) == 2, what="the held delivery")
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'busbar_request_log_webhook_dropped_total{reason="overflow"} 3.0' in metrics
    lines = [json.loads(ln) for ln in logfile.read_text().splitlines()]
    assert len(lines) == 5
    assert lines[0] == doc                           # the file gets the webhook's document, every request
    assert [ln["status"] for ln in lines] == [200] * 5


def test_the_jsonl_file_rotates_at_its_size(tmp_path):
    path = tmp_path / "r.jsonl"
    sink = FileSink(str(path), max_bytes=1000)
    for i in range(20):
        rec = RequestRecord("POST", "/v1/chat/completions", "openai")
        rec.called, rec.status = f"m{i}", 200
        rec.finish([sink.finisher])
    sink.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files[:2] == ["r.jsonl", "r.jsonl.1"]
    assert all(p.stat().st_size <= 1000 for p in tmp_path.iterdir())
    newest = [json.loads(ln)["model"] for ln in path.read_text().splitlines()]
    assert newest[-1] == "m19"


@pytest.mark.parametrize(("where", "line"), [
    ("nodir/req.jsonl", "directory {tmp}/nodir does not exist; create it or choose another path"),
    (".", "{tmp}/. is a directory; give a file path"),
])
def test_a_request_log_file_the_boot_cannot_open_is_a_config_error_in_both_modes(tmp_path, where, line):
    """It was a traceback at boot (FileNotFoundError from the rotating handler) after --validate said valid."""
    from tests.plugins.test_validate_equals_boot import both

    cfg = tmp_path / "config.yaml"
    cfg.write_text(f'listen: "127.0.0.1:0"\nobservability: {{ request_log_file: "{tmp_path}/{where}" }}\n'
                   'providers:\n  up: { protocol: openai, base_url: "http://127.0.0.1:9", api_key: { env: K } }\n'
                   'models:\n  m: { provider: up }\npools:\n  p: { members: [ { model: m } ] }\n')
    assert both(cfg) == [f"config.yaml: observability.request_log_file: {line.format(tmp=tmp_path)}",
                         "busbar: 1 config error(s); refusing to start"]
