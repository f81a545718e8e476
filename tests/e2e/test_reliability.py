"""Reliability machinery through a real busbar: per-attempt timeouts, deadlines, hops, exclusions,
on_exhausted, context-length failover, hard-down, Retry-After, mid-stream failures, budgets, metrics."""
from __future__ import annotations

import re
import time

import anthropic
import httpx
import openai
import pytest

from tests.support.waiting import wait_until

CONFIG = """
listen: "127.0.0.1:{port}"
metrics: { buffer_seconds: 60 }
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  an: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
models:
  hang-a: { provider: oa, attempt_timeout_ms: 5000 }
  ok-b: { provider: oa }
  dl-a: { provider: oa }
  dl-b: { provider: oa }
  hop-a: { provider: oa }
  hop-b: { provider: oa }
  hop-c: { provider: oa }
  ex-a: { provider: oa }
  ex-b: { provider: oa }
  lb-a: { provider: oa }
  fb-a: { provider: oa }
  fb-b: { provider: an }
  ctx-small: { provider: oa }
  ctx-big: { provider: oa }
  auth-a: { provider: oa }
  auth-b: { provider: oa }
  ra-a: { provider: oa }
  ra-b: { provider: oa }
  ms-oa: { provider: oa }
  budget-a: { provider: oa, max_requests: 2 }
  budget-b: { provider: oa }
  conc: { provider: oa, max_concurrent: 1 }
pools:
  attempt-timeout:
    members: [ { model: hang-a, weight: 100, attempt_timeout_ms: 300 }, { model: ok-b } ]
  deadline:
    members: [ { model: dl-a }, { model: dl-b } ]
    failover: { timeout_secs: 1 }
  hops:
    members: [ { model: hop-a, weight: 100 }, { model: hop-b, weight: 10 }, { model: hop-c } ]
    failover: { max_hops: 1 }
    breaker: { trip: { mode: consecutive, consecutive_n: 99 } }
  exclusions:
    members: [ { model: ex-a, weight: 100 }, { model: ex-b } ]
    failover: { exclusions: [ ex-a ] }
  leastbad:
    members: [ { model: lb-a } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 1 }, base_cooldown_secs: 60, max_cooldown_secs: 60 }
    on_exhausted: least-bad
  primary:
    members: [ { model: fb-a } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 1 }, base_cooldown_secs: 60, max_cooldown_secs: 60 }
    on_exhausted: { fallback_pool: secondary }
  secondary:
    members: [ { model: fb-b } ]
  context:
    members: [ { model: ctx-small, weight: 100, context_max: 4097 }, { model: ctx-big, context_max: 200000 } ]
  hard:
    members: [ { model: auth-a, weight: 100 }, { model: auth-b } ]
  retry-after:
    members: [ { model: ra-a, weight: 100 }, { model: ra-b } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 99 } }
  midstream: { members: [ { model: ms-oa } ] }
  budget:
    members: [ { model: budget-a, weight: 100 }, { model: budget-b } ]
  conc-1: { members: [ { model: conc } ] }
  conc-2: { members: [ { model: conc } ] }
"""

ERR_500 = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}
MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url)


def oa(gw):
    return openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0, timeout=30)


def called(mock):
    return [r["body"]["model"] for r in mock.requests() if r["path"].startswith("/v1/")]


def metric(gw, name: str, **labels) -> float:
    text = httpx.get(gw.url + "/metrics").text
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{{{want}}} not found")


def test_attempt_timeout_fails_over_and_is_recorded(gw, mock):
    """Member cap 300 ms beats the model's 5000 ms; the hung attempt counts as attempt_timeout."""
    mock.script([{"match": {"model": "hang-a"}, "times": 1, "response": {"delay_ms": 3000}}])
    t0 = time.monotonic()
    raw = oa(gw).chat.completions.with_raw_response.create(model="attempt-timeout", messages=MSG)
    elapsed = time.monotonic() - t0
    assert raw.headers["x-busbar-route-target"] == "ok-b"
    assert 0.28 <= elapsed < 1.5
    assert metric(gw, "busbar_upstream_failures_total", pool="attempt-timeout", model="hang-a",
                  disposition="attempt_timeout") == 1
    assert metric(gw, "busbar_failovers_total", pool="attempt-timeout", reason="attempt_timeout") == 1


def test_attempt_timeout_never_cuts_a_streaming_body(gw, mock):
    """Case C025 (a): headers at once, then a chunk every 0.5 s for ~2.5 s, past the 300 ms cap."""
    mock.script([{"match": {"model": "hang-a"}, "times": 1,
                  "response": {"text": "one two three four five six", "chunk_delay_ms": 500}}])
    with oa(gw).chat.completions.with_streaming_response.create(
            model="attempt-timeout", stream=True, messages=MSG) as resp:
        assert resp.headers["x-busbar-route-target"] == "hang-a"
        chunks = list(resp.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three four five six"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert called(mock) == ["hang-a"]


def test_failover_deadline_503_at_once(gw, mock):
    mock.script([{"match": {"model": "dl-a"}, "times": 1, "response": {"hang": True}},
                 {"match": {"model": "dl-b"}, "times": 1, "response": {"hang": True}}])
    t0 = time.monotonic()
    with pytest.raises(openai.InternalServerError) as ei:
        oa(gw).chat.completions.create(model="deadline", messages=MSG)
    elapsed = time.monotonic() - t0
    assert ei.value.status_code == 503
    assert ei.value.body["message"] == "pool 'deadline': failover deadline of 1s exceeded"
    assert 0.9 <= elapsed < 1.8


def test_max_hops_bounds_attempts(gw, mock):
    mock.script([{"match": {"model": m}, "times": 1, "response": {"status": 500, "body": ERR_500}}
                 for m in ("hop-a", "hop-b", "hop-c")])
    with pytest.raises(openai.InternalServerError) as ei:
        oa(gw).chat.completions.create(model="hops", messages=MSG)
    assert ei.value.status_code == 503
    assert called(mock) == ["hop-a", "hop-b"]          # 1 + max_hops attempts
    assert ei.value.response.headers["retry-after"] == "1"


def test_exclusions_are_never_selected(gw, mock):
    targets = {oa(gw).chat.completions.with_raw_response.create(model="exclusions", messages=MSG)
               .headers["x-busbar-route-target"] for _ in range(4)}
    assert targets == {"ex-b"}


def test_on_exhausted_least_bad_serves_degraded(gw, mock):
    mock.script([{"match": {"model": "lb-a"}, "times": 1, "response": {"status": 500, "body": ERR_500}}])
    with pytest.raises(openai.InternalServerError):
        oa(gw).chat.completions.create(model="leastbad", messages=MSG)          # trips the only member
    raw = oa(gw).chat.completions.with_raw_response.create(model="leastbad", messages=MSG)
    assert raw.status_code == 200 and raw.headers["x-busbar-route-target"] == "lb-a"
    assert called(mock) == ["lb-a", "lb-a"]


def test_on_exhausted_fallback_pool(gw, mock):
    mock.script([{"match": {"model": "fb-a"}, "times": 1, "response": {"status": 500, "body": ERR_500}}])
    with pytest.raises(openai.InternalServerError):
        oa(gw).chat.completions.create(model="primary", messages=MSG)
    raw = oa(gw).chat.completions.with_raw_response.create(model="primary", messages=MSG)
    assert raw.headers["x-busbar-route-target"] == "fb-b"      # secondary's full selection
    assert called(mock) == ["fb-a", "fb-b"]


def test_context_length_fails_over_without_penalty(gw, mock):
    body = {"error": {"message": "This model's maximum context length is 4097 tokens.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
    mock.script([{"match": {"model": "ctx-small"}, "times": 3, "response": {"status": 400, "body": body}}])
    for _ in range(3):
        raw = oa(gw).chat.completions.with_raw_response.create(model="context", messages=MSG)
        assert raw.headers["x-busbar-route-target"] == "ctx-big"
    assert metric(gw, "busbar_lane_state", pool="context", lane="ctx-small") == 0   # never penalized
    assert called(mock) == ["ctx-small", "ctx-big"] * 3


def test_auth_failure_sets_lane_hard_down(gw, mock):
    body = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                      "param": None, "code": "invalid_api_key"}}
    mock.script([{"match": {"model": "auth-a"}, "times": 1, "response": {"status": 401, "body": body}}])
    for _ in range(3):
        raw = oa(gw).chat.completions.with_raw_response.create(model="hard", messages=MSG)
        assert raw.headers["x-busbar-route-target"] == "auth-b"
    assert called(mock) == ["auth-a", "auth-b", "auth-b", "auth-b"]
    assert metric(gw, "busbar_lane_state", pool="hard", lane="auth-a") == 2
    assert metric(gw, "busbar_upstream_failures_total", pool="hard", model="auth-a", disposition="auth") == 1


def test_retry_after_opens_the_member_below_the_trip_threshold(gw, mock):
    mock.script([{"match": {"model": "ra-a"}, "times": 1, "response": {
        "status": 429, "headers": {"retry-after": "30"}, "body": {"error": {
            "message": "slow down", "type": "requests", "param": None, "code": "rate_limit_exceeded"}}}}])
    for _ in range(3):
        raw = oa(gw).chat.completions.with_raw_response.create(model="retry-after", messages=MSG)
        assert raw.headers["x-busbar-route-target"] == "ra-b"
    assert called(mock) == ["ra-a", "ra-b", "ra-b", "ra-b"]


def test_midstream_error_is_in_band_not_a_clean_finish(gw, mock):
    """Case C003: OpenAI upstream sends two chunks then an error chunk; an Anthropic client gets
    `event: error`, no end_turn message_delta and no message_stop; the member is penalized."""
    mock.script([{"match": {"model": "ms-oa"}, "times": 1, "response": {
        "text": "Hello", "error_after": 2,
        "error": {"error": {"message": "engine failure", "type": "server_error"}}}}])
    r = httpx.post(gw.url + "/v1/messages", json={
        "model": "midstream", "max_tokens": 50, "stream": True, "messages": MSG}, timeout=10)
    assert r.status_code == 200
    events = re.findall(r"^event: (\S+)", r.text, re.M)
    assert "error" in events
    assert events[-1] == "error"
    assert "message_stop" not in events
    assert '"stop_reason":"end_turn"' not in r.text
    assert '"type":"error","error":{"type":"api_error"' in r.text.replace(" ", "")
    assert metric(gw, "busbar_upstream_failures_total", pool="midstream", model="ms-oa",
                  disposition="stream_error") == 1
    with pytest.raises(anthropic.APIStatusError):
        client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0)
        mock.script([{"match": {"model": "ms-oa"}, "times": 1, "response": {
            "text": "Hello", "error_after": 1,
            "error": {"error": {"message": "engine failure", "type": "server_error"}}}}])
        with client.messages.stream(model="midstream", max_tokens=50, messages=MSG) as s:
            for _ in s:
                pass


def test_midstream_drop_refunds_the_budget(gw, mock):
    """max_requests is decremented on 2xx headers and refunded when the body then fails."""
    mock.script([{"match": {"model": "budget-a"}, "times": 1,
                  "response": {"text": "a b c d", "drop_after": 2}}])
    with oa(gw).chat.completions.with_streaming_response.create(model="budget", stream=True,
                                                               messages=MSG) as resp, pytest.raises(openai.APIError):
        list(resp.parse())
    assert metric(gw, "busbar_lane_budget_remaining", lane="budget-a") == 2        # refunded
    for _ in range(2):
        raw = oa(gw).chat.completions.with_raw_response.create(model="budget", messages=MSG)
        assert raw.headers["x-busbar-route-target"] == "budget-a"
    assert metric(gw, "busbar_lane_budget_remaining", lane="budget-a") == 0
    raw = oa(gw).chat.completions.with_raw_response.create(model="budget", messages=MSG)
    assert raw.headers["x-busbar-route-target"] == "budget-b"                    # budget spent


def test_max_concurrent_is_shared_across_pools(gw, mock):
    import threading
    mock.script([{"match": {"model": "conc"}, "times": 1, "response": {"delay_ms": 1500}}])
    results = {}
    t = threading.Thread(target=lambda: results.setdefault(
        "slow", oa(gw).chat.completions.create(model="conc-1", messages=MSG)))
    t.start()
    wait_until(lambda: metric(gw, "busbar_lane_available_permits", lane="conc") == 0,
               what="the slow request to take the lane's only permit")
    with pytest.raises(openai.InternalServerError) as ei:                      # skipped, not queued
        oa(gw).chat.completions.create(model="conc-2", messages=MSG)
    assert ei.value.status_code == 503
    t.join()
    assert results["slow"].choices[0].finish_reason == "stop"
    assert metric(gw, "busbar_lane_inflight", lane="conc") == 0
