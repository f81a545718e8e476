"""OTLP traces through a real busbar (docs/operations.md#traces-otlp) into a small OTLP/HTTP receiver on
loopback that decodes the protobuf: a span per request with GenAI attributes, a child span per
upstream attempt (the failover hop visible), userinfo sent as ``Authorization: Basic`` and kept out of
the log, spans flushed at shutdown; a remote plain-http or private target is refused at boot."""
from __future__ import annotations

import base64
import os
import signal
import subprocess

import openai
import pytest

from tests.support.gateway import BIN
from tests.support.otlp import attrs

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  tr-a: { provider: up-openai }
  tr-b: { provider: up-openai, upstream_model: tr-b-upstream }
pools:
  traced:
    members: [ { model: tr-a, weight: 1000 }, { model: tr-b, weight: 1 } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 50 } }
observability: { otlp_url: "http://collector:s3cret@127.0.0.1:OTLP/v1/traces" }
"""
ERR_500 = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}


def test_request_and_attempt_spans_reach_the_collector_and_flush_at_shutdown(gateway_factory, mock, receiver):
    gw = gateway_factory(CONFIG.replace("OTLP", str(receiver.port)), mock.url, env={"BUSBAR_LOG": "info"})
    mock.script([{"match": {"model": "tr-a"}, "times": 1, "response": {"status": 500, "body": ERR_500}}])
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    r = client.chat.completions.create(model="traced", messages=[{"role": "user", "content": "hi"}])
    os.kill(gw.proc.pid, signal.SIGTERM)            # the batch is flushed at shutdown
    assert gw.proc.wait(15) == 0
    headers, _ = receiver.requests[0]
    assert headers["authorization"] == "Basic " + base64.b64encode(b"collector:s3cret").decode()
    assert headers["content-type"] == "application/x-protobuf"
    spans = receiver.spans()
    (root,) = [s for s in spans if s.name == "chat traced"]
    attempts = sorted((s for s in spans if s.name.startswith("attempt ")), key=lambda s: s.start_time_unix_nano)
    assert [s.name for s in attempts] == ["attempt tr-a", "attempt tr-b"]
    assert all(s.parent_span_id == root.span_id and s.trace_id == root.trace_id for s in attempts)
    a = attrs(root)
    assert {k: a[k] for k in ("gen_ai.operation.name", "gen_ai.request.model", "gen_ai.provider.name",
                              "gen_ai.response.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                              "http.response.status_code", "busbar.pool", "busbar.lane", "busbar.outcome",
                              "busbar.failover.hops", "busbar.ingress_protocol")} == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "traced", "gen_ai.provider.name": "openai",
        "gen_ai.response.model": "tr-b-upstream", "gen_ai.usage.input_tokens": r.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": r.usage.completion_tokens, "http.response.status_code": 200,
        "busbar.pool": "traced", "busbar.lane": "tr-b", "busbar.outcome": "ok", "busbar.failover.hops": 1,
        "busbar.ingress_protocol": "openai"}
    assert root.kind == 2 and root.status.code == 0             # SERVER, unset (ok)
    first, second = (attrs(s) for s in attempts)
    assert (first["busbar.failover.hop"], first["http.response.status_code"], attempts[0].status.code) == (0, 500, 2)
    assert (second["busbar.failover.hop"], second["busbar.attempt.outcome"], second["busbar.pool"]) == (
        1, "ok", "traced")
    assert root.start_time_unix_nano <= attempts[0].start_time_unix_nano < attempts[1].end_time_unix_nano \
        <= root.end_time_unix_nano
    logs = gw.logs()
    assert f"exporting traces to http://127.0.0.1:{receiver.port}/v1/traces (OTLP/HTTP)" in logs
    assert "s3cret" not in logs


@pytest.mark.parametrize(("url", "line"), [
    ("http://collector.example.com:4318/v1/traces",
     "config.yaml: observability.otlp_url: uses http:// with a non-loopback host (collector.example.com): remote "
     "endpoints must use https://"),
    ("https://10.0.0.5:4318/v1/traces",
     "config.yaml: observability.otlp_url: 10.0.0.5 is a private (RFC 1918 / unique-local) address; refused by the "
     "SSRF guard (only loopback or public https:// endpoints are allowed here)"),
])
def test_a_remote_plaintext_or_private_target_is_refused_at_boot(tmp_path, url, line):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(CONFIG.replace('"http://collector:s3cret@127.0.0.1:OTLP/v1/traces"', f'"{url}"')
                   .replace("{port}", "0").replace("MOCK", "http://127.0.0.1:9"))
    run = subprocess.run([str(BIN / "busbar"), "--config", str(cfg)], env={"T_OPENAI_KEY": "x", "PATH": "/bin"},
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 2
    assert run.stderr.splitlines()[0] == line


def _record(called: str = "smart"):
    from busbar.proxy.record import RequestRecord

    class _Call:
        record = RequestRecord("POST", "/v1/chat/completions", "openai")

    call = _Call()
    call.record.called, call.record.status = called, 200
    return call


def _encode(*records):
    """The export request the exporter's thread would send for ``records`` (no lane served them)."""
    import time

    from busbar.observe.otlp import Origin, Templates, encode
    from busbar.observe.otlp_export import item

    return encode([item(r, r.usage, None, None) for r in records], Origin({"service.name": "busbar"}, "busbar", "t"),
                  Templates(), time.time_ns())


def test_hook_decisions_become_child_spans_of_the_request():
    """A gate decision noted by the hook chain (busbar.observe.decisions) is a ``hook <name>`` child span
    of the request span in what the exporter encodes."""
    from busbar.observe import decisions

    call = _record()
    rec = call.record
    decisions.note(call, "router", None, rec.started)        # off: nothing is noted
    assert "hook_decisions" not in rec.extra
    decisions.enabled = True
    try:
        decisions.note(call, "router", None, rec.started)
        decisions.note(call, "guard", "timeout", rec.started)
    finally:
        decisions.enabled = False
    rec.finish([])
    msg = _encode(rec)
    (rs,) = msg.resource_spans
    assert attrs(rs.resource) == {"service.name": "busbar"}
    (ss,) = rs.scope_spans
    assert (ss.scope.name, ss.scope.version) == ("busbar", "t")
    spans = {s.name: s for s in ss.spans}
    assert set(spans) == {"chat smart", "hook router", "hook guard"}
    root = spans["chat smart"]
    assert (root.parent_span_id, len(root.trace_id), len(root.span_id)) == (b"", 16, 8)
    for name, verdict in (("hook router", "decided"), ("hook guard", "failed: timeout")):
        s = spans[name]
        assert (s.parent_span_id, s.trace_id, s.kind) == (root.span_id, root.trace_id, 1)      # INTERNAL
        assert attrs(s) == {"busbar.hook": name.split()[1], "busbar.hook.verdict": verdict}
        assert root.start_time_unix_nano <= s.start_time_unix_nano <= s.end_time_unix_nano \
            <= root.end_time_unix_nano


def test_every_request_gets_its_own_trace_and_shared_parts_are_not_mixed_up():
    """Span templates are shared between requests (busbar.observe.otlp.Templates): two requests to the
    same pool keep their own ids, tokens and request ids; a failed one has status ERROR."""
    from busbar.ir.model import Usage

    one, two = _record("pool-a").record, _record("pool-a").record
    one._usage, two._usage = Usage(input_tokens=3, output_tokens=4), Usage(input_tokens=30, output_tokens=40)
    two.status = 502
    for r in (one, two):
        r.finish([])
    a, b = _encode(one, two).resource_spans[0].scope_spans[0].spans
    assert a.trace_id != b.trace_id and a.span_id != b.span_id
    assert {k: v for k, v in attrs(a).items() if k.startswith(("gen_ai.usage", "busbar.request_id", "busbar.out"))} \
        == {"gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 4, "busbar.request_id": one.request_id,
            "busbar.outcome": "ok"}
    assert {k: v for k, v in attrs(b).items() if k.startswith(("gen_ai.usage", "busbar.request_id", "busbar.out"))} \
        == {"gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 40, "busbar.request_id": two.request_id,
            "busbar.outcome": "error"}
    assert (a.status.code, b.status.code, b.status.message) == (0, 2, "error")


def test_a_full_queue_drops_and_counts_and_never_blocks(receiver):
    """The request path only appends to a bounded queue: past ``queue`` waiting requests each further one is
    dropped and counted (``busbar_otlp_traces_dropped_total{reason="queue_full"}``); what was queued is
    still sent, in batches of ``batch``; a batch the collector refuses counts as ``export_failed``; a busy
    collector (503) is retried."""
    import requests
    from busbar.observe.otlp_export import Exporter
    from busbar.observe.traces import Tracing
    from prometheus_client import CollectorRegistry, generate_latest

    sent: list[int] = []

    def encoder(items, now_ns):
        sent.append(len(items))
        from busbar.observe.otlp import Origin, Templates, encode

        return encode(items, Origin({}, "busbar", "t"), Templates(), now_ns).SerializeToString()

    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    tracing = Tracing(Exporter(url, {}, requests.Session(), encoder, queue=5, batch=2), "test")
    for _ in range(8):                                    # thread not started: nothing drains the queue
        tracing.finisher(_record().record)
    assert tracing.exporter.dropped == {"queue_full": 3, "export_failed": 0}
    tracing.exporter.flush()                              # sends the 5 queued, 2 + 2 + 1
    assert sent == [2, 2, 1]
    assert len(receiver.spans()) == 5
    tracing.exporter.url = url.replace("/v1/traces", "/refuse")
    tracing.finisher(_record().record)
    tracing.exporter.flush()
    assert tracing.exporter.dropped == {"queue_full": 3, "export_failed": 1}
    holder = type("M", (), {"registry": CollectorRegistry()})()
    tracing.count_into(holder)
    text = generate_latest(holder.registry).decode()
    assert 'busbar_otlp_traces_dropped_total{reason="queue_full"} 3.0\n' in text
    assert 'busbar_otlp_traces_dropped_total{reason="export_failed"} 1.0\n' in text
    assert "busbar_otlp_connect_refused_total 0.0\n" in text
    tracing.exporter.url = url.replace("/v1/traces", "/flaky")
    tracing.finisher(_record().record)
    tracing.exporter.flush()                              # a 503 with Retry-After: 0 is retried, then delivered
    assert receiver.paths == ["/v1/traces"] * 3 + ["/refuse", "/flaky", "/flaky"]
    assert tracing.exporter.dropped == {"queue_full": 3, "export_failed": 1}
    assert (sent, len(receiver.spans())) == ([2, 2, 1, 1, 1], 6)
    tracing.shutdown()                                    # nothing left to send; closes the session
