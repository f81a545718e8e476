"""The OTLP exporter's connect-time SSRF check (docs/operations.md#traces-otlp): the URL is checked at
boot, and the exporter's own HTTP client checks every address again on each new connection, so a
name that resolves to a refused address later (DNS rebinding) is never connected to: the refusal is
counted and logged, and the same exporter connects again once the name resolves to loopback."""
from __future__ import annotations

import logging

import pytest
import requests
from busbar.config.load import load_config_text
from busbar.observe import decisions
from busbar.observe.traces import build_tracer
from busbar.security import sync_session
from busbar.security.sync_session import guarded_session
from busbar_sdk.ssrf import HostGuard, SsrfBlocked, SsrfPolicy
from prometheus_client import CollectorRegistry, generate_latest

ENV = {"K": "sk-test"}
BASE = "providers:\n  anthropic: { api_key: { env: K } }\nmodels:\n  claude: { provider: anthropic }\n"


@pytest.fixture
def answers(monkeypatch):
    """What the resolver seam answers at connect time (the boot check uses the system resolver)."""
    box = {"addrs": ["127.0.0.1"], "asked": []}

    def resolve(host: str, port: int) -> list[str]:
        box["asked"].append((host, port))
        return list(box["addrs"])
    monkeypatch.setattr(sync_session, "system_resolver", resolve)
    monkeypatch.setattr(decisions, "enabled", False)     # build_tracer turns it on; restored after
    return box


def _export_one(tracing, name: str) -> None:
    from busbar.proxy.record import RequestRecord

    record = RequestRecord("POST", "/v1/chat/completions", "openai")
    record.called, record.status = name, 200
    record.finish([tracing.finisher])
    tracing.exporter.flush()


def test_a_name_that_rebinds_to_a_metadata_address_is_refused_at_connect_time(receiver, answers, caplog):
    loaded = load_config_text(BASE + f"observability: {{ otlp_url: 'http://localhost:{receiver.port}/v1/traces' }}\n",
                              ENV)
    tracing = build_tracer(loaded)
    assert tracing is not None
    try:
        answers["addrs"] = ["169.254.169.254"]             # the name now points at the metadata service
        with caplog.at_level(logging.WARNING, logger="busbar.traces"):
            _export_one(tracing, "refused")
        assert answers["asked"] == [("localhost", receiver.port)] * 2     # at boot, then at connect time
        assert receiver.requests == []
        assert tracing.refused == 1
        (line,) = [r.getMessage() for r in caplog.records if r.name == "busbar.traces"]
        assert line == ("observability.otlp_url: connection refused by the SSRF guard, spans dropped: "
                        "observability.otlp_url: localhost resolved to 169.254.169.254, a cloud-metadata address; "
                        "refused at connect time by the SSRF guard (1 refusal(s) so far)")
        answers["addrs"] = ["127.0.0.1", "10.0.0.5"]       # a mixed answer is refused whole
        _export_one(tracing, "mixed")
        assert (tracing.refused, receiver.requests) == (2, [])
        answers["addrs"] = ["127.0.0.1"]                   # back to loopback: the same exporter connects
        _export_one(tracing, "served")
        assert [s.name for s in receiver.spans()] == ["chat served"]
        assert tracing.exporter.dropped == {"queue_full": 0, "export_failed": 2}   # the two refused batches
        assert tracing.refused == 2
        holder = type("M", (), {"registry": CollectorRegistry()})()
        tracing.count_into(holder)                         # what /metrics serves with a metrics: block
        assert "busbar_otlp_connect_refused_total 2.0\n" in generate_latest(holder.registry).decode()
    finally:
        tracing.shutdown()


@pytest.mark.parametrize(("addrs", "line"), [
    (["10.0.0.5"], "config.yaml: observability.otlp_url: localhost resolved to 10.0.0.5, a private (RFC 1918 / "
                   "unique-local) address; refused (DNS rebinding guard: a localhost name must resolve to loopback "
                   "only)"),
    (["169.254.169.254"], "config.yaml: observability.otlp_url: localhost resolved to 169.254.169.254, a "
                          "cloud-metadata address; refused by the SSRF guard"),
])
def test_a_name_that_resolves_to_a_refused_address_at_boot_refuses_the_boot(answers, addrs, line):
    from busbar.observe.traces import TraceSetupError

    answers["addrs"] = addrs
    loaded = load_config_text(BASE + "observability: { otlp_url: 'http://localhost:4318/v1/traces' }\n", ENV)
    with pytest.raises(TraceSetupError) as info:
        build_tracer(loaded)
    assert info.value.faults == [line]
    assert answers["asked"] == [("localhost", 4318)]


def _guard() -> HostGuard:
    return HostGuard(SsrfPolicy(), purpose="observability.otlp_url", allow_private=False)


@pytest.mark.parametrize(("addrs", "reason"), [
    (["10.0.0.5"], "observability.otlp_url: localhost resolved to 10.0.0.5, a private (RFC 1918 / unique-local) "
                   "address; refused at connect time (DNS rebinding guard: a localhost name must resolve to "
                   "loopback only)"),
    (["127.0.0.1", "10.0.0.5"], "observability.otlp_url: localhost resolved to 10.0.0.5, a private (RFC 1918 / "
                                "unique-local) address; refused at connect time (DNS rebinding guard: a localhost "
                                "name must resolve to loopback only)"),
])
def test_the_guarded_session_never_connects_to_a_refused_address(receiver, answers, addrs, reason):
    refused: list[str] = []
    answers["addrs"] = addrs
    with guarded_session(_guard(), lambda e: refused.append(e.reason)) as session, \
            pytest.raises(SsrfBlocked) as info:
        session.post(f"http://localhost:{receiver.port}/v1/traces", data=b"")
    assert info.value.reason == reason
    assert refused == [reason]
    assert receiver.requests == []


def test_the_guarded_session_connects_to_the_checked_literal_and_refuses_redirects(receiver, answers):
    with guarded_session(_guard(), lambda e: None) as session:
        assert (session.max_redirects, session.trust_env) == (0, False)
        r = session.post(f"http://localhost:{receiver.port}/v1/traces", data=b"")
        assert r.status_code == 200
    assert answers["asked"] == [("localhost", receiver.port)]
    assert len(receiver.requests) == 1
    answers["addrs"] = []
    with guarded_session(_guard(), lambda e: None) as session, \
            pytest.raises(requests.ConnectionError, match="localhost resolved to no addresses"):
        session.post(f"http://localhost:{receiver.port}/v1/traces", data=b"")
