"""Undecodable upstream stream events after the first byte, through a real busbar and the mock
provider (issue 11 item 9): the client gets its own protocol's in-band error (never the raw
bytes, never a clean finish) and the lane records a transient failure
(``busbar_upstream_failures_total{disposition="stream_error"}``)."""
from __future__ import annotations

import re

import anthropic
import boto3
import httpx
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import EventStreamError

CONFIG = """
listen: "127.0.0.1:{port}"
metrics: { buffer_seconds: 60 }
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  an: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
  br: { protocol: bedrock, base_url: MOCK, api_key: { env: T_BEDROCK_KEY } }
models:
  oa-typed: { provider: oa }
  oa-junk: { provider: oa }
  an-junk: { provider: an }
  br-junk: { provider: br }
pools:
  typed: { members: [ { model: oa-typed } ] }
  oa-garbage: { members: [ { model: oa-junk } ] }
  an-garbage: { members: [ { model: an-junk } ] }
  br-garbage: { members: [ { model: br-junk } ] }
"""

MSG = [{"role": "user", "content": "hi"}]
OA_CHUNK = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello"}, "finish_reason": None}]}
WRONG_TYPED = {**OA_CHUNK, "choices": "not a list"}
AN_START = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                 "model": "m", "content": [], "stop_reason": None,
                                                 "usage": {"input_tokens": 3, "output_tokens": 0}}}
AN_BLOCK = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
AN_DELTA = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}
GARBAGE = "<html><body>502 Bad Gateway</body></html>\n\n"


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url, env={"T_BEDROCK_KEY": "AKIDEXAMPLE:secretkey"})


def failures(gw, pool: str, model: str) -> float:
    want = f'pool="{pool}"', f'model="{model}"', 'disposition="stream_error"'
    for line in httpx.get(gw.url + "/metrics").text.splitlines():
        if line.startswith("busbar_upstream_failures_total{") and all(w in line for w in want):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_wrong_typed_choices_after_the_first_byte_is_an_anthropic_error_event(gw, mock):
    mock.script([{"match": {"model": "oa-typed"}, "response": {"sse": [OA_CHUNK, WRONG_TYPED, OA_CHUNK, "[DONE]"]}}])
    r = httpx.post(gw.url + "/v1/messages", timeout=10,
                   json={"model": "typed", "max_tokens": 50, "stream": True, "messages": MSG})
    assert r.status_code == 200
    events = re.findall(r"^event: (\S+)", r.text, re.M)
    assert events == ["message_start", "content_block_start", "content_block_delta", "error"]
    assert ('{"type":"error","error":{"type":"api_error",'
            '"message":"upstream sent a malformed stream chunk"}}') in r.text
    assert failures(gw, "typed", "oa-typed") == 1


def test_garbage_on_a_same_protocol_openai_stream_is_not_relayed(gw, mock):
    mock.script([{"match": {"model": "oa-junk"}, "response": {"chunk_delay_ms": 50, "sse": [OA_CHUNK, {"raw": GARBAGE}, "[DONE]"]}}])
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    seen = []
    with pytest.raises(openai.APIError) as e:
        for chunk in client.chat.completions.create(model="oa-garbage", stream=True, messages=MSG):
            seen.append(chunk.choices[0].delta.content)
    assert seen == ["Hello"]
    assert e.value.message == "upstream sent bytes that are not server-sent events"
    mock.script([{"match": {"model": "oa-junk"}, "response": {"chunk_delay_ms": 50, "sse": [OA_CHUNK, {"raw": GARBAGE}, "[DONE]"]}}])
    raw = httpx.post(gw.url + "/v1/chat/completions", timeout=10,
                     json={"model": "oa-garbage", "stream": True, "messages": MSG}).text
    assert "502 Bad Gateway" not in raw and "[DONE]" not in raw
    assert raw.endswith('data: {"error":{"message":"upstream sent bytes that are not server-sent events",'
                        '"type":"server_error","param":null,"code":null}}\n\n')
    assert failures(gw, "oa-garbage", "oa-junk") == 2


def test_garbage_on_a_same_protocol_anthropic_stream_is_an_error_event(gw, mock):
    mock.script([{"match": {"model": "an-junk"}, "response": {"chunk_delay_ms": 50,
        "sse": [AN_START, AN_BLOCK, AN_DELTA, {"raw": GARBAGE}, {"type": "message_stop"}]}}])
    client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as e, \
            client.messages.stream(model="an-garbage", max_tokens=50, messages=MSG) as s:
        for _ in s:
            pass
    assert e.value.body == {"type": "error", "error": {
        "type": "api_error", "message": "upstream sent bytes that are not server-sent events"}}
    assert failures(gw, "an-garbage", "an-junk") == 1


def test_garbage_on_a_same_protocol_bedrock_stream_is_an_exception_message(gw, mock):
    mock.script([{"match": {"path_prefix": "/model/br-junk/"}, "response": {
        "headers": {"content-type": "application/vnd.amazon.eventstream"}, "chunk_delay_ms": 50,
        "sse": [{"messageStart": {"role": "assistant"}},
                {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Hello"}}},
                {"raw": "this is not an eventstream message at all"},
                {"messageStop": {"stopReason": "end_turn"}}]}}])
    client = boto3.client("bedrock-runtime", endpoint_url=gw.url, region_name="us-east-1",
                          aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                          config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
    r = client.converse_stream(modelId="br-garbage", messages=[{"role": "user", "content": [{"text": "hi"}]}])
    seen = []
    with pytest.raises(EventStreamError) as e:
        for ev in r["stream"]:
            seen.append(ev)
    assert [ev["contentBlockDelta"]["delta"]["text"] for ev in seen if "contentBlockDelta" in ev] == ["Hello"]
    assert e.value.response["Error"]["Code"] == "internalServerException"
    assert e.value.response["Error"]["Message"].startswith("malformed upstream eventstream: ")
    assert failures(gw, "br-garbage", "br-junk") == 1
