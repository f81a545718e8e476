"""limits.upstream_request_timeout_secs through a real gateway (docs/config-at-a-glance.md#limits): a wall-clock cap
on each upstream request, connect through the last body byte.

- before the first byte the capped attempt is a transport failure and the walk fails over;
- after it, a stream still running at the cap ends with the ingress dialect's in-band error
  (never a clean finish, case C003).
"""
from __future__ import annotations

import time

import httpx
import openai

CONFIG = """
listen: "127.0.0.1:{port}"
limits: { upstream_request_timeout_secs: 1 }
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  slow: { provider: up-openai, upstream_model: slow }
  fast: { provider: up-openai, upstream_model: fast }
pools:
  p: { members: [ { model: slow, weight: 1000 }, { model: fast, weight: 1 } ] }
  only-slow: { members: [ { model: slow } ] }
"""


def test_a_stalled_upstream_fails_over_at_the_cap(gateway_factory, mock):
    gw = gateway_factory(CONFIG, mock.url)
    mock.script([{"match": {"model": "slow"}, "times": 1, "response": {"delay_ms": 5000}}])
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    t0 = time.time()
    raw = client.chat.completions.with_raw_response.create(
        model="p", messages=[{"role": "user", "content": "hi"}])
    elapsed = time.time() - t0
    assert raw.headers["x-busbar-route-target"] == "fast"
    assert raw.parse().choices[0].finish_reason == "stop"
    assert 0.9 < elapsed < 3.0


def test_a_stream_running_past_the_cap_ends_with_an_in_band_error(gateway_factory, mock):
    gw = gateway_factory(CONFIG, mock.url)
    mock.script([{"match": {"model": "slow"}, "times": 1,
                  "response": {"chunk_delay_ms": 300, "text": "one two three four five six seven eight"}}])
    t0 = time.time()
    with httpx.stream("POST", gw.url + "/v1/chat/completions", timeout=10,
                      json={"model": "only-slow", "stream": True,
                            "messages": [{"role": "user", "content": "hi"}]}) as r:
        assert r.status_code == 200
        body = r.read().decode()
    elapsed = time.time() - t0
    assert elapsed < 3.0
    assert '"error"' in body and "upstream connection lost mid-stream" in body
    assert "[DONE]" not in body
