"""The bedrock-invoke adapter: Anthropic Messages bodies on /model/{id}/invoke[-with-response-stream]."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace

import orjson
from botocore.eventstream import EventStreamBuffer  # type: ignore[import-untyped]
from busbar.ir.model import BlockDelta, IrRequest, MessageStart, MessageStop, StreamError
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.bedrock.eventstream import encode_event, encode_exception
from busbar.proto.bedrock.invoke import DIALECT, chunk_event
from busbar.proto.openai import DIALECT as OPENAI

BODY = {
    "anthropic_version": "bedrock-2023-05-31",
    "max_tokens": 64,
    "system": "terse",
    "messages": [{"role": "user", "content": "hello"}],
}


def test_read_request_reuses_the_anthropic_reader_and_keeps_the_version() -> None:
    ir = DIALECT.read_request(BODY)
    assert ir.model is None and ir.max_tokens == 64
    assert ir.extra == {"anthropic_version": "bedrock-2023-05-31"}
    assert DIALECT.write_request(ir, "anthropic.claude-3-haiku") == BODY
    assert (DIALECT.name, DIALECT.requires_max_tokens) == ("bedrock-invoke", True)


def test_write_request_from_openai_has_no_model_or_stream_and_the_bedrock_version() -> None:
    ir = OPENAI.read_request(
        {"model": "p", "stream": True, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    )
    ir.extra.clear()
    body = DIALECT.write_request(ir, "anthropic.claude-3-haiku")
    assert body == {
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}],
        "anthropic_version": "bedrock-2023-05-31",
    }


def test_non_stream_answer_is_the_anthropic_message() -> None:
    resp = ANTHROPIC.read_response(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "c",
            "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    assert DIALECT.read_response(ANTHROPIC.write_response(resp, "c", IrRequest())).content == resp.content
    out = DIALECT.write_response(resp, "claude", IrRequest())
    assert (
        out["type"] == "message"
        and out["model"] == "claude"
        and out["content"] == [{"type": "text", "text": "hi"}]
    )


def test_chunk_events_wrap_base64_json_and_decode_back() -> None:
    ev1 = {"type": "message_start", "message": {"id": "msg_1", "model": "c", "usage": {"input_tokens": 3}}}
    ev2 = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    ev3 = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hey"}}
    raw = b"".join(chunk_event(orjson.dumps(e)) for e in (ev1, ev2, ev3))
    buf = EventStreamBuffer()
    buf.add_data(raw)
    msgs = list(buf)
    assert msgs[0].headers[":event-type"] == "chunk"
    assert json.loads(base64.b64decode(json.loads(msgs[2].payload)["bytes"])) == ev3
    dec = DIALECT.stream_decoder()
    events = dec.feed(raw[:30]) + dec.feed(raw[30:])
    assert isinstance(events[0], MessageStart) and events[-1] == BlockDelta(0, "text", "Hey")
    assert dec.close() == [StreamError("api_error", "upstream stream ended prematurely")]


def test_decoder_maps_exceptions() -> None:
    dec = DIALECT.stream_decoder()
    raw = encode_exception("throttlingException", b'{"message":"slow"}')
    assert dec.feed(raw) == [StreamError("rate_limit", "slow")]
    dec = DIALECT.stream_decoder()
    assert dec.feed(encode_event("chunk", b'{"nope":1}')) == [
        StreamError("api_error", "upstream sent a malformed chunk")
    ]


def test_encoder_ends_after_message_stop_and_keepalive_is_empty() -> None:
    enc = DIALECT.stream_encoder("claude", IrRequest(stream=True))
    assert enc.keepalive() == b""
    out = enc.encode(MessageStop())
    buf = EventStreamBuffer()
    buf.add_data(out)
    types = [json.loads(base64.b64decode(json.loads(m.payload)["bytes"]))["type"] for m in buf]
    assert types == ["message_start", "message_delta", "message_stop"]
    assert enc.encode(MessageStop()) == b""


def test_egress_request_urls() -> None:
    p = SimpleNamespace(
        base_url="https://bedrock-runtime.us-east-1.amazonaws.com",
        api_key="AK:SK",
        auth=None,
        path=None,
        path_base=None,
    )
    url, headers, _ = DIALECT.egress_request(p, "anthropic.claude-3-haiku-20240307-v1:0", True, b"{}", None)
    assert url.endswith("/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke-with-response-stream")
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AK/")
    url, headers, _ = DIALECT.egress_request(p, "m", False, b"{}", {"authorization": "Bearer x"})
    assert url.endswith("/model/m/invoke") and headers["authorization"] == "Bearer x"
