"""The official google-genai SDK parsing what the Gemini dialect writes, served by a real local HTTP server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from busbar.ir.model import IrRequest, StreamEvent, TextBlock
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.gemini import DIALECT
from busbar.proto.openai import DIALECT as OPENAI

from tests.support.canned import Canned

genai = pytest.importorskip(
    "google.genai",
    reason="google-genai is a test dependency (pip install google-genai): the official Gemini SDK must parse our output",
)
errors = pytest.importorskip("google.genai.errors")
types = pytest.importorskip("google.genai.types")


@pytest.fixture(scope="module")
def server() -> Iterator[Canned]:
    with Canned() as s:
        yield s


@pytest.fixture
def client(server: Canned) -> Any:
    server.replies.clear()
    server.requests.clear()
    return genai.Client(
        api_key="AIza-test", http_options=types.HttpOptions(base_url=server.url, api_version="v1beta")
    )


def openai_events(*chunks: dict, usage: dict | None = None, error: dict | None = None) -> list[StreamEvent]:
    objs = [
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "g", "choices": [c]}
        for c in chunks
    ]
    if usage:
        objs.append(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "g",
                "choices": [],
                "usage": usage,
            }
        )
    raw = b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs)
    if error:
        raw += b"data: " + json.dumps(error).encode() + b"\n\n"
    else:
        raw += b"data: [DONE]\n\n"
    dec = OPENAI.stream_decoder()
    return dec.feed(raw) + dec.close()


def delta(d: dict, finish: str | None = None) -> dict:
    return {"index": 0, "delta": d, "finish_reason": finish}


def test_generate_content_parses_a_translated_answer(server: Canned, client: Any) -> None:
    ans = ANTHROPIC.read_response(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "c",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "U0lHX0E="},
                {"type": "text", "text": "Calling."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 6},
        }
    )
    body = DIALECT.write_response(ans, "claude-pool", IrRequest())
    server.reply(200, {"content-type": "application/json"}, json.dumps(body).encode())
    r = client.models.generate_content(model="claude-pool", contents="weather in Oslo?")
    parts = r.candidates[0].content.parts
    assert parts[0].thought is True and parts[0].text == "plan" and parts[0].thought_signature == b"SIG_A"
    assert parts[1].text == "Calling."
    fc = r.function_calls[0]
    assert (fc.id, fc.name, fc.args) == ("toolu_1", "get_weather", {"city": "Oslo"})
    assert r.candidates[0].finish_reason == types.FinishReason.STOP
    assert r.usage_metadata.prompt_token_count == 10 and r.usage_metadata.candidates_token_count == 6
    assert r.model_version == "claude-pool"
    req = server.requests[0]
    assert req["path"] == "/v1beta/models/claude-pool:generateContent"
    assert req["headers"]["x-goog-api-key"] == "AIza-test"
    # the SDK's own request is one the Gemini reader takes
    ir = DIALECT.read_request(json.loads(req["body"]))
    assert ir.messages[0].content == [TextBlock("weather in Oslo?")]


def test_generate_content_stream_parses_sse_chunks(server: Canned, client: Any) -> None:
    events = openai_events(
        delta({"role": "assistant", "content": ""}),
        delta({"content": "Hel"}),
        delta({"content": "lo"}),
        delta({}, "stop"),
        usage={
            "prompt_tokens": 5,
            "completion_tokens": 2,
            "completion_tokens_details": {"reasoning_tokens": 1},
        },
    )
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    frames = [f for f in (enc.encode(e) for e in events) if f]
    server.reply(200, {"content-type": enc.content_type}, frames[0], enc.keepalive(), *frames[1:])
    chunks = list(client.models.generate_content_stream(model="pool", contents="hi"))
    assert [c.text for c in chunks] == ["Hel", "lo", ""]
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.thoughts_token_count == 1
    assert chunks[-1].usage_metadata.candidates_token_count == 1
    assert server.requests[0]["query"] == b"alt=sse"


def test_stream_max_tokens_and_tool_calls(server: Canned, client: Any) -> None:
    events = openai_events(
        delta(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a":'},
                    }
                ]
            }
        ),
        delta({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        delta({}, "tool_calls"),
    )
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    server.reply(200, {"content-type": enc.content_type}, *[f for f in (enc.encode(e) for e in events) if f])
    chunks = list(client.models.generate_content_stream(model="pool", contents="hi"))
    assert chunks[0].function_calls[0].name == "f" and chunks[0].function_calls[0].args == {"a": 1}
    assert chunks[0].function_calls[0].id == "call_1"


@pytest.mark.parametrize(
    ("kind", "status", "exc", "code", "name"),
    [
        ("rate_limit", 429, errors.ClientError, 429, "RESOURCE_EXHAUSTED"),
        ("invalid_request", 400, errors.ClientError, 400, "INVALID_ARGUMENT"),
        ("authentication", 401, errors.ClientError, 400, "INVALID_ARGUMENT"),
        ("permission", 403, errors.ClientError, 403, "PERMISSION_DENIED"),
        ("not_found", 404, errors.ClientError, 404, "NOT_FOUND"),
        ("api_error", 500, errors.ServerError, 500, "INTERNAL"),
        ("overloaded", 503, errors.ServerError, 503, "UNAVAILABLE"),
        ("timeout", 504, errors.ServerError, 504, "DEADLINE_EXCEEDED"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_errors_raise_typed_sdk_exceptions(
    server: Canned,
    client: Any,
    kind: str,
    status: int,
    exc: type[Exception],
    code: int,
    name: str,
    stream: bool,
) -> None:
    st, headers, body = DIALECT.error_response(status, kind, "the upstream said no")
    server.reply(st, headers, body)
    with pytest.raises(exc) as e:
        if stream:
            list(client.models.generate_content_stream(model="pool", contents="hi"))
        else:
            client.models.generate_content(model="pool", contents="hi")
    err: Any = e.value
    assert (err.code, err.status, err.message) == (code, name, "the upstream said no")


def test_mid_stream_error_chunk_raises_server_error(server: Canned, client: Any) -> None:
    events = openai_events(
        delta({"content": "Hel"}), error={"error": {"message": "engine failure", "type": "server_error"}}
    )
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    server.reply(200, {"content-type": enc.content_type}, *[f for f in (enc.encode(e) for e in events) if f])
    got = []
    with pytest.raises(errors.ServerError) as e:
        for c in client.models.generate_content_stream(model="pool", contents="hi"):
            got.append(c.text)
    assert got == ["Hel"]
    assert (e.value.code, e.value.message) == (500, "engine failure")
