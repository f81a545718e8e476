"""The request record (``busbar.proxy.record``): what every data-plane request leaves for its finishers.

The gateway app runs in-process (its ASGI app under ``httpx.ASGITransport``) against the real mock
provider process, so the test can read the records the finishers receive.
"""
from __future__ import annotations

import asyncio

import httpx
import pytest
from busbar.config.load import load_config_text
from busbar.proxy.gateway import Gateway
from busbar.proxy.record import RequestRecord
from busbar.server.app import AppState, create_app

CONFIG = """
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: K } }
  up-anthropic: { protocol: anthropic, base_url: MOCK, api_key: { env: K } }
models:
  rec-a: { provider: up-openai }
  rec-b: { provider: up-anthropic }
pools:
  rec:
    members: [ { model: rec-a, weight: 100 }, { model: rec-b, weight: 1 } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 50 } }
"""
ERR_503 = {"error": {"message": "The server is overloaded", "type": "server_error", "param": None, "code": None}}
HI = [{"role": "user", "content": "hi"}]


def serve(mock, requests):
    """Send ``requests`` (``(path, json, headers)``) in turn; return the replies and the records."""
    env = {"K": "sk-test"}
    seen: list[RequestRecord] = []

    async def run():
        gw = Gateway.build(load_config_text(CONFIG.replace("MOCK", mock.url), env), env)
        app = create_app(AppState(gateway=gw, finishers=[seen.append]))
        replies = []
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as c:
                for path, body, headers in requests:
                    replies.append(await c.post(path, json=body, headers=headers or {}))
        finally:
            await gw.aclose()
        return replies

    return asyncio.run(run()), seen


def test_a_passthrough_reply_records_lane_usage_and_one_attempt(mock):
    (r,), (rec,) = serve(mock, [("/v1/chat/completions", {"model": "rec", "messages": HI}, {"x-request-id": "c-1"})])
    assert r.status_code == 200
    assert (rec.status, rec.outcome, rec.pool, rec.called, rec.lane, rec.hops) == (200, "ok", "rec", "rec", "rec-a", 0)
    assert (rec.ingress, rec.method, rec.path, rec.client_request_id) == ("openai", "POST", "/v1/chat/completions", "c-1")
    assert (rec.usage.input_tokens, rec.usage.output_tokens) == (r.json()["usage"]["prompt_tokens"],
                                                                 r.json()["usage"]["completion_tokens"])
    assert rec.usage.output_tokens > 0
    assert [(a.lane, a.pool, a.outcome, a.status) for a in rec.attempts] == [("rec-a", "rec", "ok", 200)]
    assert rec.started <= rec.first_byte <= rec.ended
    assert rec.stream is False and rec.stream_ok is None and rec.finished


def test_a_translated_reply_records_the_usage_the_client_saw(mock):
    body = {"model": "rec", "max_tokens": 16, "messages": HI}
    (r,), (rec,) = serve(mock, [("/v1/messages", body, None)])
    assert r.status_code == 200
    assert rec.ingress == "anthropic" and rec.lane == "rec-a"
    assert (rec.usage.input_tokens, rec.usage.output_tokens) == (r.json()["usage"]["input_tokens"],
                                                                 r.json()["usage"]["output_tokens"])


def test_a_stream_records_its_clean_end_and_usage(mock):
    body = {"model": "rec", "stream": True, "stream_options": {"include_usage": True}, "messages": HI}
    (r,), (rec,) = serve(mock, [("/v1/chat/completions", body, None)])
    assert r.status_code == 200 and r.text.rstrip().endswith("data: [DONE]")
    assert (rec.stream, rec.stream_ok, rec.outcome, rec.lane) == (True, True, "ok", "rec-a")
    assert rec.usage.output_tokens > 0
    assert rec.attempts[0].outcome == "ok" and rec.attempts[0].ended is not None


def test_a_failover_hop_is_one_more_attempt(mock):
    mock.script([{"match": {"model": "rec-a"}, "times": 1, "response": {"status": 503, "body": ERR_503}}])
    (r,), (rec,) = serve(mock, [("/v1/chat/completions", {"model": "rec", "messages": HI}, None)])
    assert r.status_code == 200 and r.headers["x-busbar-route-target"] == "rec-b"
    assert [(a.lane, a.outcome, a.status) for a in rec.attempts] == [("rec-a", "server_error", 503), ("rec-b", "ok", 200)]
    assert (rec.hops, rec.lane, rec.outcome) == (1, "rec-b", "ok")


@pytest.mark.parametrize(("body", "status", "called"), [
    ({"model": "nope", "messages": HI}, 404, "nope"),      # the name asked for, for the access log
    ({"messages": HI}, 400, None),
])
def test_a_refused_request_is_recorded_without_attempts(mock, body, status, called):
    (r,), (rec,) = serve(mock, [("/v1/chat/completions", body, None)])
    assert r.status_code == status
    assert (rec.status, rec.attempts, rec.lane, rec.pool, rec.called) == (status, [], None, None, called)
    assert rec.outcome == "client_error" and rec.finished


def test_a_failing_finisher_neither_fails_the_request_nor_stops_the_others():
    rec = RequestRecord("POST", "/v1/chat/completions", "openai")
    calls: list[str] = []

    def bad(_: RequestRecord) -> None:
        calls.append("bad")
        raise RuntimeError("boom")

    rec.on_finish(bad)
    rec.finish([lambda r: calls.append("shared")])
    rec.finish([lambda r: calls.append("again")])          # idempotent
    rec.on_finish(lambda r: calls.append("late"))          # after the end: runs at once
    assert calls == ["bad", "shared", "late"]
    assert rec.outcome == "ok" and rec.usage.input_tokens == 0 and rec.latency_ms() is not None
