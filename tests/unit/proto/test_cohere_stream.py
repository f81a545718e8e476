"""Cohere v2 Chat streams: the event decoder (provider side) and encoder (client side)."""

from __future__ import annotations

import json
from typing import Any

import cohere
import httpx
import httpx2
import openai
import pytest
from busbar.ir.model import (
    BlockDelta,
    BlockStart,
    BlockStop,
    IrRequest,
    MessageDelta,
    MessageStart,
    MessageStop,
    StopReason,
    StreamError,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.base import ErrorKind
from busbar.proto.cohere import DIALECT
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.sse import SseParser
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES
STREAM = FIXTURES / "cohere" / "chat-stream.response.sse.txt"


def decode(raw: bytes, step: int | None = None) -> list[StreamEvent]:
    dec = DIALECT.stream_decoder()
    events: list[StreamEvent] = []
    n = step or max(len(raw), 1)
    for i in range(0, len(raw), n):
        events += dec.feed(raw[i : i + n])
    return events + dec.close()


def frames(*objs: dict[str, Any], done: bool = True) -> bytes:
    out = b"".join(
        b"event: " + o["type"].encode() + b"\ndata: " + json.dumps(o).encode() + b"\n\n" for o in objs
    )
    return out + (b"data: [DONE]\n\n" if done else b"")


def encode(events: list[StreamEvent]) -> bytes:
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    return b"".join(enc.encode(e) for e in events)


def parsed(raw: bytes) -> list[tuple[str | None, Any]]:
    p = SseParser()
    return [(ev, data if data == "[DONE]" else json.loads(data)) for ev, data in p.feed(raw) + p.close()]


def sdk_stream(raw: bytes) -> list[Any]:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=raw)

    client: Any = cohere.ClientV2(
        api_key="k",
        base_url="http://busbar.test",
        max_retries=0,
        httpx_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    return list(client.chat_stream(model="pool", messages=[{"role": "user", "content": "x"}]))


def openai_chunks(raw: bytes) -> list[Any]:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=raw)

    client = openai.OpenAI(
        api_key="k",
        base_url="http://busbar.test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    return list(
        client.chat.completions.create(model="pool", messages=[{"role": "user", "content": "x"}], stream=True)
    )


TOOL_STREAM = frames(
    {
        "id": "11111111-2222-4333-8444-555555555555",
        "type": "message-start",
        "delta": {
            "message": {
                "role": "assistant",
                "content": [],
                "tool_plan": "",
                "tool_calls": [],
                "citations": [],
            }
        },
    },
    {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": "I will"}}},
    {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": " check."}}},
    {
        "type": "tool-call-start",
        "index": 0,
        "delta": {
            "message": {
                "tool_calls": {
                    "id": "get_weather_abc",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            }
        },
    },
    {
        "type": "tool-call-delta",
        "index": 0,
        "delta": {"message": {"tool_calls": {"function": {"arguments": '{"location":'}}}},
    },
    {
        "type": "tool-call-delta",
        "index": 0,
        "delta": {"message": {"tool_calls": {"function": {"arguments": '"Tokyo"}'}}}},
    },
    {"type": "tool-call-end", "index": 0},
    {
        "type": "tool-call-start",
        "index": 1,
        "delta": {
            "message": {
                "tool_calls": {
                    "id": "get_time_def",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"location":"Tokyo"}'},
                }
            }
        },
    },
    {"type": "tool-call-end", "index": 1},
    {
        "type": "message-end",
        "delta": {
            "finish_reason": "TOOL_CALL",
            "usage": {
                "billed_units": {"input_tokens": 62, "output_tokens": 28},
                "tokens": {"input_tokens": 968, "output_tokens": 83},
            },
        },
    },
)


# ---------------------------------------------------------------- decoder: fixture


def test_fixture_chat_stream() -> None:
    raw = STREAM.read_bytes()
    events = decode(raw)
    assert events[:2] == [
        MessageStart(id="6cd6ce61-bb3b-46f6-907e-fcfab45e51b6"),
        BlockStart(0, TextBlock("")),
    ]
    deltas = [e for e in events if isinstance(e, BlockDelta)]
    captured = [d["delta"]["message"]["content"]["text"] for ev, d in parsed(raw) if ev == "content-delta"]
    assert [d.value for d in deltas] == captured and len(captured) == 100
    assert all((d.index, d.kind) == (0, "text") for d in deltas)
    assert "".join(captured).startswith("Arrrr, matey! Shiver me timbers")
    assert events[-3:] == [
        BlockStop(0),
        MessageDelta(StopReason.END_TURN, None, Usage(input_tokens=69, output_tokens=110)),
        MessageStop(),
    ]
    assert decode(raw, step=1) == events


# ---------------------------------------------------------------- decoder: behaviour


def test_tool_plan_and_tool_calls() -> None:
    assert decode(TOOL_STREAM, step=9) == [
        MessageStart(id="11111111-2222-4333-8444-555555555555"),
        BlockStart(0, TextBlock("")),
        BlockDelta(0, "text", "I will"),
        BlockDelta(0, "text", " check."),
        BlockStop(0),
        BlockStart(1, ToolUseBlock("get_weather_abc", "get_weather", {})),
        BlockDelta(1, "input_json", '{"location":'),
        BlockDelta(1, "input_json", '"Tokyo"}'),
        BlockStop(1),
        BlockStart(2, ToolUseBlock("get_time_def", "get_time", {})),
        BlockDelta(2, "input_json", '{"location":"Tokyo"}'),
        BlockStop(2),
        MessageDelta(StopReason.TOOL_USE, None, Usage(input_tokens=968, output_tokens=83)),
        MessageStop(),
    ]


def test_thinking_then_text_and_max_tokens() -> None:
    raw = frames(
        {"id": "x", "type": "message-start", "delta": {"message": {"role": "assistant"}}},
        {
            "type": "content-start",
            "index": 0,
            "delta": {"message": {"content": {"type": "thinking", "thinking": ""}}},
        },
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"thinking": "hm"}}}},
        {"type": "content-end", "index": 0},
        {
            "type": "content-start",
            "index": 1,
            "delta": {"message": {"content": {"type": "text", "text": ""}}},
        },
        {"type": "content-delta", "index": 1, "delta": {"message": {"content": {"text": "A"}}}},
        {"type": "citation-start", "index": 0, "delta": {"message": {"citations": {}}}},
        {"type": "citation-end", "index": 0},
        {
            "type": "message-end",
            "delta": {
                "finish_reason": "MAX_TOKENS",
                "usage": {"tokens": {"input_tokens": 5, "output_tokens": 2}},
            },
        },
    )
    assert decode(raw) == [
        MessageStart(id="x"),
        BlockStart(0, ThinkingBlock()),
        BlockDelta(0, "thinking", "hm"),
        BlockStop(0),
        BlockStart(1, TextBlock("")),
        BlockDelta(1, "text", "A"),
        BlockStop(1),
        MessageDelta(StopReason.MAX_TOKENS, None, Usage(input_tokens=5, output_tokens=2)),
        MessageStop(),
    ]


@pytest.mark.parametrize(
    "delta,error",
    [
        (
            {"finish_reason": "ERROR", "error": "model crashed"},
            StreamError(ErrorKind.API_ERROR, "model crashed"),
        ),
        (
            {"finish_reason": "ERROR_LIMIT"},
            StreamError(ErrorKind.API_ERROR, "upstream finished with ERROR_LIMIT"),
        ),
        ({"finish_reason": "TIMEOUT"}, StreamError(ErrorKind.TIMEOUT, "upstream finished with TIMEOUT")),
    ],
)
def test_c043_error_and_timeout_in_message_end_are_stream_errors(
    delta: dict[str, Any], error: StreamError
) -> None:
    raw = frames(
        {"id": "x", "type": "message-start", "delta": {"message": {"role": "assistant"}}},
        {
            "type": "content-start",
            "index": 0,
            "delta": {"message": {"content": {"type": "text", "text": ""}}},
        },
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "par"}}}},
        {"type": "message-end", "delta": delta},
    )
    events = decode(raw)
    assert events[-1] == error
    assert not any(isinstance(e, (MessageDelta, MessageStop)) for e in events)


@pytest.mark.parametrize(
    "cut",
    [b"event: message-end", b"data: [DONE]"],
    ids=["no-message-end", "done-without-message-end"],
)
def test_truncated_stream_is_a_stream_error(cut: bytes) -> None:
    raw = STREAM.read_bytes()
    body = raw[: raw.index(b"event: message-end")] + (b"data: [DONE]\n\n" if cut == b"data: [DONE]" else b"")
    events = decode(body)
    assert events[-1] == StreamError("api_error", "upstream stream ended prematurely")


def test_malformed_event_is_a_stream_error() -> None:
    assert decode(b"event: message-start\ndata: {oops\n\n") == [
        StreamError("api_error", "upstream sent a malformed stream event")
    ]


# ---------------------------------------------------------------- encoder


def test_cohere_provider_stream_to_openai_client_chunks() -> None:
    dec = DIALECT.stream_decoder()
    enc = OPENAI.stream_encoder("pool", IrRequest(stream=True, include_usage=True))
    out = b"".join(enc.encode(e) for e in dec.feed(TOOL_STREAM) + dec.close())
    chunks = openai_chunks(out)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls: dict[int, dict[str, str]] = {}
    for c in chunks:
        for tc in (c.choices[0].delta.tool_calls or ()) if c.choices else ():
            slot = calls.setdefault(tc.index, {"id": tc.id, "name": tc.function.name, "arguments": ""})
            slot["arguments"] += tc.function.arguments or ""
    assert text == "I will check."
    assert calls == {
        0: {"id": "get_weather_abc", "name": "get_weather", "arguments": '{"location":"Tokyo"}'},
        1: {"id": "get_time_def", "name": "get_time", "arguments": '{"location":"Tokyo"}'},
    }
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage.prompt_tokens == 968 and chunks[-1].usage.completion_tokens == 83


def test_anthropic_stream_to_a_cohere_client_and_the_sdk_parses_it() -> None:
    raw = (FIXTURES / "anthropic/tool-use-stream.response.sse.txt").read_bytes()
    dec = ANTHROPIC.stream_decoder()
    src = dec.feed(raw) + dec.close()
    out = encode(src)
    events = parsed(out)
    assert events[0][0] == "message-start" and events[-1] == (None, "[DONE]")
    assert events[-2][1] == {
        "type": "message-end",
        "delta": {
            "finish_reason": "TOOL_CALL",
            "usage": {
                "billed_units": {"input_tokens": 506, "output_tokens": 153},
                "tokens": {"input_tokens": 506, "output_tokens": 153},
            },
        },
    }
    assert all(ev == d["type"] for ev, d in events[:-1])
    sdk = sdk_stream(out)
    assert next(e.type for e in sdk) == "message-start" and sdk[-1].type == "message-end"
    text = "".join(e.delta.message.content.text for e in sdk if e.type == "content-delta")
    assert text == "".join(e.value for e in src if isinstance(e, BlockDelta) and e.kind == "text")
    starts = [e for e in sdk if e.type == "tool-call-start"]
    assert [(s.index, s.delta.message.tool_calls.function.name) for s in starts] == [
        (0, "get_weather"),
        (1, "get_time"),
    ]
    args: dict[int, str] = {}
    for e in sdk:
        if e.type == "tool-call-delta":
            args[e.index] = args.get(e.index, "") + (e.delta.message.tool_calls.function.arguments or "")
    assert [json.loads(a) for a in args.values()] == [
        {"location": "San Francisco, CA", "unit": "celsius"},
        {"timezone": "America/Los_Angeles"},
    ]
    assert sdk[-1].delta.finish_reason == "TOOL_CALL"
    back = decode(out, step=17)
    assert back[-2] == MessageDelta(StopReason.TOOL_USE, None, Usage(input_tokens=506, output_tokens=153))


def test_content_and_tool_indexes_are_numbered_separately() -> None:
    out = encode(
        [
            MessageStart(),
            BlockStart(3, ThinkingBlock()),
            BlockDelta(3, "thinking", "t"),
            BlockDelta(3, "signature", "S"),
            BlockStop(3),
            BlockStart(7, ToolUseBlock("c1", "f", {"a": 1})),
            BlockStop(7),
            BlockStart(9, TextBlock("after")),
            BlockStop(9),
            MessageDelta(StopReason.TOOL_USE),
            MessageStop(),
        ]
    )
    body = [d for _, d in parsed(out)][1:-2]
    assert body == [
        {
            "type": "content-start",
            "index": 0,
            "delta": {"message": {"content": {"type": "thinking", "thinking": ""}}},
        },
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"thinking": "t"}}}},
        {"type": "content-end", "index": 0},
        {
            "type": "tool-call-start",
            "index": 0,
            "delta": {
                "message": {
                    "tool_calls": {"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
                }
            },
        },
        {
            "type": "tool-call-delta",
            "index": 0,
            "delta": {"message": {"tool_calls": {"function": {"arguments": '{"a":1}'}}}},
        },
        {"type": "tool-call-end", "index": 0},
        {
            "type": "content-start",
            "index": 1,
            "delta": {"message": {"content": {"type": "text", "text": ""}}},
        },
        {"type": "content-delta", "index": 1, "delta": {"message": {"content": {"text": "after"}}}},
        {"type": "content-end", "index": 1},
    ]


def test_c003_error_is_message_end_error_and_nothing_after() -> None:
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    src: list[StreamEvent] = [
        MessageStart(),
        BlockStart(0, TextBlock("")),
        BlockDelta(0, "text", "Hel"),
        StreamError("overloaded", "upstream overloaded"),
    ]
    out = b"".join(enc.encode(e) for e in src)
    last = parsed(out)[-1]
    assert last[0] == "message-end"
    assert last[1]["delta"]["finish_reason"] == "ERROR" and last[1]["delta"]["error"] == "upstream overloaded"
    assert b"[DONE]" not in out
    assert enc.encode(MessageStop()) == b"" and enc.keepalive() == b""
    sdk = sdk_stream(out)
    assert sdk[-1].type == "message-end" and sdk[-1].delta.finish_reason == "ERROR"
    assert sdk[-1].delta.error == "upstream overloaded"
    assert decode(out)[-1] == StreamError(ErrorKind.API_ERROR, "upstream overloaded")


def test_c005_keepalive_is_a_comment_and_message_start_keeps_a_uuid() -> None:
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    out = (
        enc.keepalive()
        + enc.encode(MessageStart(id="6cd6ce61-bb3b-46f6-907e-fcfab45e51b6"))
        + enc.keepalive()
    )
    out += enc.encode(MessageStop())
    assert b": keep-alive\n\n" in out and enc.keepalive() == b""
    events = parsed(out)
    assert events[0][1]["id"] == "6cd6ce61-bb3b-46f6-907e-fcfab45e51b6"
    assert events[1][1] == {
        "type": "message-end",
        "delta": {
            "finish_reason": "COMPLETE",
            "usage": {
                "billed_units": {"input_tokens": 0, "output_tokens": 0},
                "tokens": {"input_tokens": 0, "output_tokens": 0},
            },
        },
    }
    assert sdk_stream(out)[-1].delta.finish_reason == "COMPLETE"


def test_events_without_message_start_still_open_with_message_start() -> None:
    out = encode([BlockStart(0, TextBlock("")), BlockDelta(0, "text", "x"), MessageStop()])
    assert [ev for ev, _ in parsed(out)] == [
        "message-start",
        "content-start",
        "content-delta",
        "content-end",
        "message-end",
        None,
    ]
