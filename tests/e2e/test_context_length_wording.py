"""Context-length failover on the providers' own wordings, through a real busbar (issue 11 item 23):
an Anthropic 400 "input length and `max_tokens` exceed context limit: …" on the small lane is a
context-length failure — the request goes to the larger lane, the small one is not penalized."""
from __future__ import annotations

import anthropic
import httpx
import pytest

CONFIG = """
listen: "127.0.0.1:{port}"
metrics: { buffer_seconds: 60 }
providers:
  an: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
  gm: { protocol: gemini, base_url: MOCK, api_key: { env: T_GEMINI_KEY } }
models:
  small: { provider: an }
  big: { provider: an }
  gsmall: { provider: gm }
pools:
  ctx:
    members: [ { model: small, weight: 1000, context_max: 8192 }, { model: big, context_max: 200000 } ]
  gctx:
    members: [ { model: gsmall, weight: 1000, context_max: 8192 }, { model: big, context_max: 200000 } ]
"""

MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url, env={"T_GEMINI_KEY": "g-key"})


def lane_state(gw, pool: str, lane: str) -> float:
    for line in httpx.get(gw.url + "/metrics").text.splitlines():
        if line.startswith("busbar_lane_state{") and f'pool="{pool}"' in line and f'lane="{lane}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no busbar_lane_state for {pool}/{lane}")


def test_anthropic_input_plus_max_tokens_wording_fails_over_to_the_larger_lane(gw, mock):
    body = {"type": "error", "error": {"type": "invalid_request_error", "message":
            "input length and `max_tokens` exceed context limit: 8000 + 1024 > 8192, "
            "decrease input length or `max_tokens` and try again"}}
    mock.script([{"match": {"model": "small"}, "times": 2, "response": {"status": 400, "body": body}}])
    client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0)
    for _ in range(2):
        raw = client.messages.with_raw_response.create(model="ctx", max_tokens=1024, messages=MSG)
        assert raw.status_code == 200
        assert raw.headers["x-busbar-route-target"] == "big"
    assert [r["body"]["model"] for r in mock.requests()] == ["small", "big", "small", "big"]
    assert lane_state(gw, "ctx", "small") == 0          # not penalized


def test_gemini_input_token_count_wording_fails_over_to_the_larger_lane(gw, mock):
    body = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
            "The input token count (9000) exceeds the maximum number of tokens allowed (8192)."}}
    mock.script([{"match": {"protocol": "gemini"}, "times": 1, "response": {"status": 400, "body": body}}])
    client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0)
    raw = client.messages.with_raw_response.create(model="gctx", max_tokens=1024, messages=MSG)
    assert raw.headers["x-busbar-route-target"] == "big"
    assert raw.parse().stop_reason == "end_turn"
    assert lane_state(gw, "gctx", "gsmall") == 0
