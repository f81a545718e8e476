"""Issue 11 item 10: a pool (or a direct lane) whose every candidate cools down after upstream 429s
answers 429 in the caller's own dialect with the soonest Retry-After; an outage stays 503
(docs/reliability.md "When nothing can be tried").
"""
from __future__ import annotations

import httpx
import pytest

from tests.e2e.matrix_clients import CLIENTS

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  rl-a: { provider: up }
  rl-b: { provider: up }
  rl-direct: { provider: up }
  down-a: { provider: up }
  down-b: { provider: up }
  mix-rl: { provider: up }
  mix-down: { provider: up }
pools:
  rl: { members: [ { model: rl-a }, { model: rl-b } ], breaker: { trip: { mode: consecutive, consecutive_n: 1 } } }
  down: { members: [ { model: down-a }, { model: down-b } ],
          breaker: { trip: { mode: consecutive, consecutive_n: 1 } } }
  mixed: { members: [ { model: mix-rl }, { model: mix-down } ],
           breaker: { trip: { mode: consecutive, consecutive_n: 1 } } }
"""
MSG = [{"role": "user", "content": "hi"}]


def _chat(gw, model: str) -> httpx.Response:
    return httpx.post(gw.url + "/v1/chat/completions", json={"model": model, "messages": MSG}, timeout=30)


def _fail(mock, models, status: int, retry_after: int) -> None:
    mock.script([{"match": {"model": m}, "times": 1,
                  "response": {"status": status, "headers": {"retry-after": str(retry_after)}}} for m in models])


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    gw = gateway_factory(CONFIG, mock.url)
    mock.clear()
    _fail(mock, ["rl-a", "rl-b"], 429, 30)
    assert _chat(gw, "rl").status_code == 429           # both tried, both 429: relayed (case C018)
    _fail(mock, ["rl-direct"], 429, 40)
    assert _chat(gw, "rl-direct").status_code == 429
    _fail(mock, ["down-a", "down-b"], 500, 30)
    assert _chat(gw, "down").status_code == 503
    _fail(mock, ["mix-rl"], 429, 30)
    _fail(mock, ["mix-down"], 500, 30)
    assert _chat(gw, "mixed").status_code in (429, 503)
    mock.clear()
    return gw


# one request per ingress dialect: (method path, body)
INGRESS = {
    "openai": ("/v1/chat/completions", {"model": "rl", "messages": MSG}),
    "responses": ("/v1/responses", {"model": "rl", "input": "hi"}),
    "anthropic": ("/v1/messages", {"model": "rl", "max_tokens": 16, "messages": MSG}),
    "gemini": ("/v1beta/models/rl:generateContent", {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    "bedrock": ("/model/rl/converse", {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}),
    "cohere": ("/v2/chat", {"model": "rl", "messages": MSG}),
}


def _expected(proto: str, msg: str) -> dict:
    return {
        "openai": {"error": {"message": msg, "type": "rate_limit_error", "param": None, "code": "rate_limit_exceeded"}},
        "responses": {"error": {"message": msg, "type": "rate_limit_error", "param": None,
                                "code": "rate_limit_exceeded"}},
        "anthropic": {"type": "error", "error": {"type": "rate_limit_error", "message": msg}},
        "gemini": {"error": {"code": 429, "message": msg, "status": "RESOURCE_EXHAUSTED"}},
        "bedrock": {"message": msg},
        "cohere": {"message": msg},
    }[proto]


@pytest.mark.parametrize("proto", list(INGRESS))
def test_a_pool_cooling_down_after_429s_answers_429_in_the_callers_dialect(gw, mock, proto):
    path, body = INGRESS[proto]
    r = httpx.post(gw.url + path, json=body, timeout=30)
    assert r.status_code == 429, r.text
    wait = int(r.headers["retry-after"])
    assert 1 <= wait <= 30
    assert r.json() == _expected(proto, f"pool 'rl': every upstream is rate-limited; retry after {wait}s")
    if proto == "bedrock":
        assert r.headers["x-amzn-errortype"].startswith("ThrottlingException")
    assert mock.requests() == []                          # nothing was sent upstream


@pytest.mark.parametrize("client", list(CLIENTS))
def test_the_official_sdks_see_their_rate_limit_error(gw, mock, client):
    CLIENTS[client](gw.url).expect_rate_limited("rl")
    assert mock.requests() == []


def test_a_direct_lane_cooling_down_after_a_429_answers_429(gw, mock):
    r = _chat(gw, "rl-direct")
    assert r.status_code == 429
    wait = int(r.headers["retry-after"])
    assert 1 <= wait <= 40
    assert r.json()["error"] == {"message": f"'rl-direct': every upstream is rate-limited; retry after {wait}s",
                                 "type": "rate_limit_error", "param": None, "code": "rate_limit_exceeded"}


@pytest.mark.parametrize("pool", ["down", "mixed"])
def test_an_outage_stays_503(gw, mock, pool):
    """Every lane out after 5xx, or one after a 429 and one after a 5xx: not a rate limit."""
    r = _chat(gw, pool)
    assert r.status_code == 503
    assert 1 <= int(r.headers["retry-after"]) <= 30
    assert r.json()["error"] == {"message": f"pool '{pool}': no healthy upstream available; retry later",
                                 "type": "server_error", "param": None, "code": None}
