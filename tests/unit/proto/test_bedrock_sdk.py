"""boto3's bedrock-runtime client parsing what the Bedrock dialect writes, served by a real local HTTP server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import botocore.exceptions  # type: ignore[import-untyped]
import pytest
from botocore.config import Config  # type: ignore[import-untyped]
from busbar.ir.model import IrRequest, MessageStop, StreamError
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.bedrock import DIALECT
from busbar.proto.bedrock.invoke import DIALECT as INVOKE
from busbar.proto.openai import DIALECT as OPENAI

from tests.support.canned import Canned

boto3 = pytest.importorskip(
    "boto3",
    reason="boto3 is a test dependency (pip install boto3): the official Bedrock SDK must parse our output",
)


@pytest.fixture(scope="module")
def server() -> Iterator[Canned]:
    with Canned() as s:
        yield s


@pytest.fixture
def client(server: Canned) -> Any:
    server.replies.clear()
    server.requests.clear()
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id="AKID",
        aws_secret_access_key="SECRET",
        config=Config(retries={"total_max_attempts": 1}),
    )


MSGS = [{"role": "user", "content": [{"text": "hi"}]}]
ANTHROPIC_ANSWER = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude",
    "content": [
        {"type": "thinking", "thinking": "let me see", "signature": "SIG"},
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 11,
        "output_tokens": 9,
        "cache_read_input_tokens": 3,
        "cache_creation_input_tokens": 2,
    },
}


def test_converse_parses_a_translated_answer(server: Canned, client: Any) -> None:
    body = DIALECT.write_response(ANTHROPIC.read_response(ANTHROPIC_ANSWER), "m", IrRequest())
    server.reply(200, {"content-type": "application/json"}, json.dumps(body).encode())
    out = client.converse(modelId="us.anthropic.claude-sonnet-4-5-20250929-v1:0", messages=MSGS)
    assert out["output"]["message"]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "let me see", "signature": "SIG"}}},
        {"text": "Calling."},
        {"toolUse": {"toolUseId": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}},
    ]
    assert out["stopReason"] == "tool_use"
    assert out["usage"] == {
        "inputTokens": 11,
        "outputTokens": 9,
        "totalTokens": 25,
        "cacheReadInputTokens": 3,
        "cacheWriteInputTokens": 2,
    }
    assert server.requests[0]["raw_path"] == b"/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"


def test_converse_stream_parses_the_encoder_output(server: Canned, client: Any) -> None:
    dec = OPENAI.stream_decoder()
    chunks = [
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "g",
            "choices": [{"index": 0, "delta": d, "finish_reason": f}],
        }
        for d, f in [
            ({"role": "assistant", "content": ""}, None),
            ({"content": "Hel"}, None),
            ({"content": "lo"}, None),
            ({}, "length"),
        ]
    ]
    raw = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    enc = DIALECT.stream_encoder("m", IrRequest(stream=True))
    frames = [enc.encode(e) for e in dec.feed(raw) + dec.close()]
    server.reply(200, {"content-type": enc.content_type}, *[f for f in frames if f])
    out = client.converse_stream(modelId="eu.amazon.nova-micro-v1:0", messages=MSGS)
    events = list(out["stream"])
    assert events[0] == {"messageStart": {"role": "assistant"}}
    texts = [e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e]
    assert "".join(texts) == "Hello"
    assert events[-2] == {"messageStop": {"stopReason": "max_tokens"}}
    assert events[-1]["metadata"]["usage"] == {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
    req = server.requests[0]
    assert req["raw_path"] == b"/model/eu.amazon.nova-micro-v1%3A0/converse-stream"


def test_mid_stream_exception_raises_event_stream_error(server: Canned, client: Any) -> None:
    enc = DIALECT.stream_encoder("m", IrRequest(stream=True))
    dec = ANTHROPIC.stream_decoder()
    raw = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"c","usage":{}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n'
        b'event: error\ndata: {"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}\n\n'
    )
    frames = [enc.encode(e) for e in dec.feed(raw)]
    server.reply(200, {"content-type": enc.content_type}, *[f for f in frames if f])
    out = client.converse_stream(modelId="m", messages=MSGS)
    seen: list[Any] = []
    with pytest.raises(botocore.exceptions.EventStreamError) as e:
        seen.extend(out["stream"])
    assert e.value.response["Error"]["Code"] == "throttlingException"
    assert e.value.response["Error"]["Message"] == "slow down"
    assert seen[-1] == {"contentBlockDelta": {"delta": {"text": "Hi"}, "contentBlockIndex": 0}}


@pytest.mark.parametrize(
    ("kind", "status", "exc"),
    [
        ("rate_limit", 429, "ThrottlingException"),
        ("invalid_request", 400, "ValidationException"),
        ("authentication", 401, "AccessDeniedException"),
        ("permission", 403, "AccessDeniedException"),
        ("not_found", 404, "ResourceNotFoundException"),
        ("api_error", 500, "InternalServerException"),
        ("overloaded", 503, "ServiceUnavailableException"),
        ("timeout", 504, "ModelTimeoutException"),
        ("insufficient_quota", 429, "ServiceQuotaExceededException"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_errors_raise_boto3_typed_exceptions(
    server: Canned, client: Any, kind: str, status: int, exc: str, stream: bool
) -> None:
    st, headers, body = DIALECT.error_response(status, kind, "the upstream said no")
    server.reply(st, headers, body)
    call = client.converse_stream if stream else client.converse
    with pytest.raises(getattr(client.exceptions, exc)) as e:
        call(modelId="m", messages=MSGS)
    assert e.value.response["Error"]["Message"] == "the upstream said no"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == st
    assert e.value.response["ResponseMetadata"]["RequestId"] == headers["x-amzn-requestid"]


def test_invoke_with_response_stream_parses_the_invoke_adapter(server: Canned, client: Any) -> None:
    dec = ANTHROPIC.stream_decoder()
    raw = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"c","usage":{"input_tokens":4}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hey"}}\n\n'
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    enc = INVOKE.stream_encoder("claude", IrRequest(stream=True))
    frames = [enc.encode(e) for e in dec.feed(raw) + dec.close()]
    server.reply(200, {"content-type": enc.content_type}, *[f for f in frames if f])
    body = json.dumps(
        {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}],
        }
    )
    out = client.invoke_model_with_response_stream(
        modelId="anthropic.claude-3-haiku-20240307-v1:0", body=body
    )
    events = [json.loads(e["chunk"]["bytes"]) for e in out["body"]]
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[2]["delta"] == {"type": "text_delta", "text": "Hey"}
    assert events[-1]["amazon-bedrock-invocationMetrics"] == {
        "inputTokenCount": 4,
        "outputTokenCount": 2,
        "invocationLatency": 0,
        "firstByteLatency": 0,
    }
    assert (
        server.requests[0]["raw_path"]
        == b"/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke-with-response-stream"
    )
    # ...and our invoke decoder reads the same bytes back
    back = INVOKE.stream_decoder()
    got = [e for f in frames for e in back.feed(f)] + back.close()
    assert isinstance(got[-1], MessageStop)
    assert not any(isinstance(e, StreamError) for e in got)


def test_invoke_stream_error_is_a_bedrock_exception(server: Canned, client: Any) -> None:
    enc = INVOKE.stream_encoder("claude", IrRequest(stream=True))
    server.reply(200, {"content-type": enc.content_type}, enc.encode(StreamError("overloaded", "busy")))
    out = client.invoke_model_with_response_stream(modelId="m", body=b"{}")
    with pytest.raises(botocore.exceptions.EventStreamError) as e:
        list(out["body"])
    assert e.value.response["Error"]["Code"] == "serviceUnavailableException"
