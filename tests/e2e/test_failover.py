"""Failover, breaker and error relaying through a real busbar, faults injected by the mock provider."""
from __future__ import annotations

import time

import anthropic
import httpx
import openai
import pytest

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  up-anthropic: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
models:
  fo-a: { provider: up-openai }
  fo-b: { provider: up-anthropic }
  solo: { provider: up-openai }
  br-a: { provider: up-openai }
  down-a: { provider: up-openai }
  down-b: { provider: up-anthropic }
  rl-a: { provider: up-openai }
  keyleak: { provider: up-openai }
pools:
  keyleak-pool: { members: [ { model: keyleak } ] }
  failover:
    members: [ { model: fo-a, weight: 100 }, { model: fo-b, weight: 1 } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 50 } }
  single: { members: [ { model: solo } ] }
  breaker:
    members: [ { model: br-a } ]
    breaker:
      trip: { mode: consecutive, consecutive_n: 2 }
      base_cooldown_secs: 1
      max_cooldown_secs: 1
  alldown:
    members: [ { model: down-a }, { model: down-b } ]
    breaker:
      trip: { mode: consecutive, consecutive_n: 1 }
      base_cooldown_secs: 30
      max_cooldown_secs: 60
  ratelimited: { members: [ { model: rl-a } ] }
"""

ERR_503 = {"error": {"message": "The server is overloaded", "type": "server_error", "param": None,
                     "code": None}}


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url)


def oa(gw):
    return openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)


def an(gw):
    return anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0)


def models_called(mock):
    return [r["body"]["model"] for r in mock.requests() if r["path"].startswith("/v1/")]


@pytest.mark.parametrize("stream", [False, True])
def test_first_member_503_second_serves(gw, mock, stream):
    mock.script([{"match": {"model": "fo-a"}, "times": 1, "response": {"status": 503, "body": ERR_503}}])
    client = oa(gw)
    if stream:
        with client.chat.completions.with_streaming_response.create(
                model="failover", stream=True, messages=[{"role": "user", "content": "hi"}]) as resp:
            target = resp.headers["x-busbar-route-target"]
            text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
        assert "hi" in text
    else:
        raw = client.chat.completions.with_raw_response.create(
            model="failover", messages=[{"role": "user", "content": "hi"}])
        target = raw.headers["x-busbar-route-target"]
        assert raw.status_code == 200
    assert target == "fo-b"
    assert models_called(mock) == ["fo-a", "fo-b"]


def test_client_error_relayed_without_failover(gw, mock):
    body = {"error": {"message": "Unsupported value: 'temperature'", "type": "invalid_request_error",
                      "param": "temperature", "code": "unsupported_value"}}
    mock.script([{"match": {"model": "fo-a"}, "times": 1, "response": {"status": 400, "body": body}}])
    with pytest.raises(openai.BadRequestError) as ei:
        oa(gw).chat.completions.create(model="failover", messages=[{"role": "user", "content": "hi"}])
    assert ei.value.status_code == 400
    assert ei.value.body == body["error"]          # same-protocol: relayed verbatim
    assert models_called(mock) == ["fo-a"]


def test_404_model_not_found_is_not_retried(gw, mock):
    """Case C021: exactly one upstream request; the client gets the 404 with the upstream message."""
    body = {"error": {"message": "The model `solo` does not exist", "type": "invalid_request_error",
                      "param": None, "code": "model_not_found"}}
    mock.script([{"match": {"model": "solo"}, "times": 1, "response": {"status": 404, "body": body}}])
    with pytest.raises(openai.NotFoundError) as ei:
        oa(gw).chat.completions.create(model="single", messages=[{"role": "user", "content": "hi"}])
    assert ei.value.body["message"] == "The model `solo` does not exist"
    assert models_called(mock) == ["solo"]


def test_client_error_cross_protocol_is_reenveloped(gw, mock):
    """An Anthropic-protocol 400 reaches an OpenAI client in OpenAI's envelope (C020)."""
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too big"}}
    mock.script([{"match": {"model": "fo-b"}, "times": 1, "response": {"status": 400, "body": body}}])
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model="fo-b", messages=[{"role": "user", "content": "hi"}])
    assert ei.value.body == {"message": "max_tokens: too big", "type": "invalid_request_error",
                             "param": None, "code": None}


def test_upstream_429_stays_429(gw, mock):
    """Case C018: a single-member pool whose member throttles answers 429, not 500."""
    mock.script([{"match": {"model": "rl-a"}, "times": 1, "response": {
        "status": 429, "headers": {"retry-after": "7"},
        "body": {"error": {"message": "Rate limit reached", "type": "requests", "param": None,
                           "code": "rate_limit_exceeded"}}}}])
    with pytest.raises(openai.RateLimitError) as ei:
        oa(gw).chat.completions.create(model="ratelimited", messages=[{"role": "user", "content": "hi"}])
    assert ei.value.status_code == 429
    assert ei.value.response.headers["retry-after"] == "7"
    assert ei.value.body["code"] == "rate_limit_exceeded"


def test_all_members_down_503_retry_after(gw, mock):
    mock.script([{"match": {"model": "down-a"}, "times": -1, "response": {"status": 500, "body": ERR_503}},
                 {"match": {"model": "down-b"}, "times": -1, "response": {"status": 529, "body": {
                     "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}}])
    with pytest.raises(anthropic.InternalServerError) as ei:       # first: both attempts fail
        an(gw).messages.create(model="alldown", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert ei.value.status_code == 503
    assert ei.value.body["type"] == "error" and ei.value.body["error"]["type"] == "overloaded_error"
    assert models_called(mock) in (["down-a", "down-b"], ["down-b", "down-a"])
    with pytest.raises(openai.InternalServerError) as ei2:        # now both breakers are open
        oa(gw).chat.completions.create(model="alldown", messages=[{"role": "user", "content": "x"}])
    assert ei2.value.status_code == 503
    retry_after = int(ei2.value.response.headers["retry-after"])
    assert 25 <= retry_after <= 34                                 # 30 s ± 10 % jitter, ceiled
    assert ei2.value.body["type"] == "server_error"
    assert "pool 'alldown': no healthy upstream available" in ei2.value.body["message"]
    assert len(models_called(mock)) == 2                           # no upstream call while open


def test_breaker_trips_after_streak_and_recovers(gw, mock):
    mock.script([{"match": {"model": "br-a"}, "times": 2, "response": {"status": 500, "body": ERR_503}}])
    client = oa(gw)
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="breaker", messages=[{"role": "user", "content": "x"}])
    assert models_called(mock) == ["br-a", "br-a"]
    with pytest.raises(openai.InternalServerError) as ei:          # open: rejected without a call
        client.chat.completions.create(model="breaker", messages=[{"role": "user", "content": "x"}])
    assert "no healthy upstream" in ei.value.body["message"]
    assert models_called(mock) == ["br-a", "br-a"]
    assert httpx.get(gw.url + "/healthz").status_code == 200       # other pools still usable
    time.sleep(1.3)                                                # cooldown 1 s (+10 % jitter)
    ok = client.chat.completions.create(model="breaker", messages=[{"role": "user", "content": "x"}])
    assert ok.choices[0].finish_reason == "stop"                    # the half-open probe closed it
    ok2 = client.chat.completions.create(model="breaker", messages=[{"role": "user", "content": "x"}])
    assert ok2.choices[0].finish_reason == "stop"
    assert models_called(mock) == ["br-a"] * 4


def test_upstream_auth_error_text_never_reaches_the_client(gw, mock):
    """Case C020: OpenAI's 401 text carries a masked fragment of the operator's key; the client sees
    a neutral message instead."""
    body = {"error": {"message": "Incorrect API key provided: sk-XXXXX...1234.", "type": "invalid_request_error",
                      "param": None, "code": "invalid_api_key"}}
    mock.script([{"match": {"model": "keyleak"}, "times": 1, "response": {"status": 401, "body": body}}])
    with pytest.raises(anthropic.InternalServerError) as ei:
        an(gw).messages.create(model="keyleak-pool", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert ei.value.status_code == 503
    assert ei.value.body["error"]["message"] == ("all upstream attempts failed; last: upstream auth failure "
                                                 "at lane 'keyleak'")
    assert "sk-" not in str(ei.value.body)
