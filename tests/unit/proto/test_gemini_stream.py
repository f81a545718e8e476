"""Gemini streams: the decoder on the captures (split anywhere), C038/C042 usage and framing, the two encoders."""

from __future__ import annotations

import json
from typing import Any

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
from busbar.proto.gemini import DIALECT
from busbar.proto.gemini.ids import split
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.sse import SseParser
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES
SHIM = "__busbar_gemini_json_array"


def decode(raw: bytes, step: int | None = None) -> list[StreamEvent]:
    dec = DIALECT.stream_decoder()
    n = step or max(len(raw), 1)
    events: list[StreamEvent] = []
    for i in range(0, len(raw), n):
        events += dec.feed(raw[i : i + n])
    return events + dec.close()


def final(events: list[StreamEvent]) -> MessageDelta:
    """The ``MessageDelta`` before ``MessageStop``."""
    last = events[-2]
    assert isinstance(last, MessageDelta)
    return last


def sse(*objs: Any) -> bytes:
    return b"".join(
        b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\r\n\r\n" for o in objs
    )


def chunk(parts: list[dict], finish: str | None = None, usage: dict | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [cand], "modelVersion": "gemini-2.5-flash", "responseId": "rid"}
    if usage:
        out["usageMetadata"] = usage
    return out


def openai_upstream(*objs: Any) -> bytes:
    return b"".join(
        b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n" for o in objs
    )


def oa_chunk(delta: dict | None = None, finish: str | None = None, **kw: Any) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "g",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        **kw,
    }


def hello_events(usage: bool = True) -> list[StreamEvent]:
    """C042's OpenAI member: "Hel", "lo", finish_reason stop, usage."""
    objs: list[Any] = [
        oa_chunk({"role": "assistant", "content": ""}),
        oa_chunk({"content": "Hel"}),
        oa_chunk({"content": "lo"}),
        oa_chunk({}, "stop"),
    ]
    if usage:
        objs.append(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "g",
                "choices": [],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2},
            }
        )
    dec = OPENAI.stream_decoder()
    return dec.feed(openai_upstream(*objs, b"[DONE]")) + dec.close()


def encode(events: list[StreamEvent], array: bool = False) -> tuple[bytes, list[bytes]]:
    req = IrRequest(stream=True, extra={SHIM: True} if array else {})
    enc = DIALECT.stream_encoder("pool", req)
    pieces = [enc.encode(e) for e in events]
    return b"".join(pieces), [p for p in pieces if p]


# ---------------------------------------------------------------- decoder: the captures


@pytest.mark.parametrize("step", [None, 1, 9, 100])
def test_text_stream_capture(step: int | None) -> None:
    raw = (FIXTURES / "gemini" / "text-stream.response.sse.txt").read_bytes()
    assert decode(raw, step) == [
        MessageStart(id="w1peaMz6INOvnvgPgYfPiQY", model="gemini-2.0-flash-exp"),
        BlockStart(0, TextBlock("")),
        BlockDelta(0, "text", "The"),
        BlockDelta(0, "text", " capital of France"),
        BlockDelta(0, "text", " is Paris.\n"),
        BlockStop(0),
        MessageDelta(StopReason.END_TURN, None, Usage(input_tokens=13, output_tokens=8)),
        MessageStop(),
    ]


@pytest.mark.parametrize("step", [None, 7, 333])
def test_thinking_stream_capture(step: int | None) -> None:
    raw = (FIXTURES / "gemini" / "thinking-stream.response.sse.txt").read_bytes()
    events = decode(raw, step)
    assert events[0] == MessageStart(id="beHBaJfEMIi-qtsP3769-Q8", model="gemini-2.5-pro")
    assert events[1] == BlockStart(0, ThinkingBlock())
    thoughts = [e for e in events if isinstance(e, BlockDelta) and e.kind == "thinking"]
    assert len(thoughts) == 4 and thoughts[0].value.startswith("**Clarifying User Goals**")
    text_start = events.index(BlockStart(1, TextBlock("")))
    assert events[text_start - 1] == BlockStop(0)
    text = "".join(e.value for e in events if isinstance(e, BlockDelta) and e.kind == "text")
    assert text.endswith("Always assume a driver might not see you.")
    # C038: the LAST usageMetadata, with thoughts counted as output
    assert events[-2] == MessageDelta(
        StopReason.END_TURN, None, Usage(input_tokens=34, output_tokens=469 + 787, reasoning_tokens=787)
    )


def test_c038_stream_usage_is_the_last_copy_never_a_sum() -> None:
    growing = [
        {"promptTokenCount": 1200, "candidatesTokenCount": 10, "totalTokenCount": 1210},
        {
            "promptTokenCount": 1200,
            "candidatesTokenCount": 100,
            "thoughtsTokenCount": 900,
            "totalTokenCount": 2200,
        },
        {
            "promptTokenCount": 1200,
            "candidatesTokenCount": 200,
            "thoughtsTokenCount": 900,
            "totalTokenCount": 2300,
        },
        {
            "promptTokenCount": 1200,
            "candidatesTokenCount": 300,
            "thoughtsTokenCount": 900,
            "totalTokenCount": 2400,
        },
    ]
    raw = sse(*[chunk([{"text": f"t{i}"}], "STOP" if i == 3 else None, u) for i, u in enumerate(growing)])
    events = decode(raw)
    enc = OPENAI.stream_encoder("p", IrRequest(stream=True, include_usage=True))
    out = b"".join(enc.encode(e) for e in events)
    frames = [json.loads(d) for _e, d in SseParser().feed(out) if d != "[DONE]"]
    assert frames[-1]["usage"] == {
        "prompt_tokens": 1200,
        "completion_tokens": 1200,
        "total_tokens": 2400,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 900},
    }


def test_c042c_an_event_split_inside_a_600_character_signature_arrives_whole() -> None:
    sig = ("QUJD" * 150)[:600]
    raw = sse(chunk([{"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": sig}], "STOP"))
    cut = raw.index(sig.encode()) + 300
    dec = DIALECT.stream_decoder()
    assert dec.feed(raw[:cut]) == []
    events = dec.feed(raw[cut:]) + dec.close()
    start = events[1]
    assert isinstance(start, BlockStart) and isinstance(start.block, ToolUseBlock)
    assert start.block.thought_signature == sig and split(start.block.id)[1] == sig
    assert events[2] == BlockDelta(0, "input_json", '{"a":1}') and events[3] == BlockStop(0)
    assert final(events).stop_reason is StopReason.TOOL_USE


def test_thought_signature_on_a_thought_part_is_a_signature_delta() -> None:
    raw = sse(
        chunk([{"text": "hmm", "thought": True}]),
        chunk([{"text": "", "thought": True, "thoughtSignature": "S1"}]),
        chunk([{"text": "Hi", "thoughtSignature": "S2"}], "STOP"),
    )
    events = decode(raw)
    assert events[1:7] == [
        BlockStart(0, ThinkingBlock()),
        BlockDelta(0, "thinking", "hmm"),
        BlockDelta(0, "signature", "S1"),
        BlockStop(0),
        BlockStart(1, TextBlock("")),
        BlockDelta(1, "text", "Hi"),
    ]


def test_error_chunks_premature_end_and_malformed_chunks() -> None:
    err = {"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}}
    assert decode(sse(err)) == [StreamError("rate_limit", "Resource has been exhausted")]
    events = decode(
        sse(chunk([{"text": "Hel"}]), {"error": {"code": 500, "message": "boom", "status": "INTERNAL"}})
    )
    assert events[-1] == StreamError("api_error", "boom")
    assert decode(sse(chunk([{"text": "Hel"}])))[-1] == StreamError(
        "api_error", "upstream stream ended prematurely"
    )
    assert decode(b"data: {not json\r\n\r\n")[-1] == StreamError(
        "api_error", "upstream sent a malformed stream chunk"
    )


def test_malformed_function_call_finish_is_a_stream_error() -> None:
    events = decode(sse(chunk([], "MALFORMED_FUNCTION_CALL")))
    assert events[-1] == StreamError(
        "api_error", "upstream model failed: finishReason MALFORMED_FUNCTION_CALL"
    )


def test_json_array_framing_from_an_upstream_is_read_too() -> None:
    objs = [
        chunk([{"text": "Hel"}]),
        chunk([{"text": 'lo "}['}], "STOP", {"promptTokenCount": 2, "candidatesTokenCount": 2}),
    ]
    raw = (
        b"["
        + json.dumps(objs[0], indent=2).encode()
        + b"\r\n,\r\n"
        + json.dumps(objs[1], indent=2).encode()
        + b"\r\n]"
    )
    events = decode(raw, 5)
    text = "".join(e.value for e in events if isinstance(e, BlockDelta))
    assert text == 'Hello "}[' and final(events).usage == Usage(input_tokens=2, output_tokens=2)


# ---------------------------------------------------------------- encoder (Gemini clients)


def test_c042a_sse_framing() -> None:
    out, pieces = encode(hello_events())
    assert DIALECT.stream_encoder("p", IrRequest()).content_type == "text/event-stream"
    assert all(p.startswith(b"data: ") and p.endswith(b"\r\n\r\n") for p in pieces)
    assert b"[DONE]" not in out
    frames = [json.loads(d) for _e, d in SseParser().feed(out)]
    assert len(frames) == 3
    assert [f["candidates"][0]["content"]["parts"][0]["text"] for f in frames] == ["Hel", "lo", ""]
    last = frames[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"] == {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}
    assert {f["responseId"] for f in frames} == {frames[0]["responseId"]}
    assert all(f["modelVersion"] == "pool" for f in frames)


def test_c042b_json_array_framing_written_as_it_goes() -> None:
    out, pieces = encode(hello_events(), array=True)
    assert DIALECT.stream_encoder("p", IrRequest(extra={SHIM: True})).content_type == "application/json"
    assert pieces[0].startswith(b"[{") and pieces[1].startswith(b",\r\n{") and out.endswith(b"]")
    assert json.loads(pieces[0][1:])["candidates"][0]["content"]["parts"] == [{"text": "Hel"}]
    body = json.loads(out)
    assert isinstance(body, list) and len(body) == 3
    assert "".join(r["candidates"][0]["content"]["parts"][0]["text"] for r in body) == "Hello"
    assert body[-1]["candidates"][0]["finishReason"] == "STOP"


def test_keepalive_is_never_dispatched_and_stops_after_the_end() -> None:
    enc = DIALECT.stream_encoder("p", IrRequest(stream=True))
    events = hello_events()
    out = enc.keepalive() + enc.encode(events[0]) + enc.encode(events[1]) + enc.keepalive()
    out += b"".join(enc.encode(e) for e in events[2:])
    assert enc.keepalive() == b""
    assert all(json.loads(d) for _e, d in SseParser().feed(out))
    arr = DIALECT.stream_encoder("p", IrRequest(stream=True, extra={SHIM: True}))
    body = arr.keepalive() + b"".join(arr.encode(e) + arr.keepalive() for e in events)
    assert len(json.loads(body)) == 3


def test_tool_calls_are_buffered_into_one_function_call_part() -> None:
    dec = ANTHROPIC.stream_decoder()
    raw = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"c","usage":{"input_tokens":3}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_A","name":"get_weather","input":{}}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"ci"}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"ty\\":\\"Oslo\\"}"}}\n\n'
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    out, _ = encode(dec.feed(raw))
    frames = [json.loads(d) for _e, d in SseParser().feed(out)]
    assert frames[0]["candidates"][0]["content"]["parts"] == [
        {"functionCall": {"id": "toolu_A", "name": "get_weather", "args": {"city": "Oslo"}}}
    ]
    assert frames[1]["candidates"][0]["finishReason"] == "STOP"
    assert frames[1]["usageMetadata"] == {
        "promptTokenCount": 3,
        "candidatesTokenCount": 9,
        "totalTokenCount": 12,
    }


def test_thinking_and_signature_deltas_for_a_gemini_client() -> None:
    events: list[StreamEvent] = [
        MessageStart(),
        BlockStart(0, ThinkingBlock()),
        BlockDelta(0, "thinking", "hm"),
        BlockDelta(0, "signature", "U0lH"),
        BlockDelta(0, "signature", "not base64!"),
        BlockStop(0),
        MessageDelta(StopReason.END_TURN),
        MessageStop(),
    ]
    frames = [json.loads(d) for _e, d in SseParser().feed(encode(events)[0])]
    assert [f["candidates"][0]["content"]["parts"] for f in frames] == [
        [{"text": "hm", "thought": True}],
        [{"text": "", "thought": True, "thoughtSignature": "U0lH"}],
        [{"text": ""}],
    ]


@pytest.mark.parametrize("array", [False, True])
def test_c003_mid_stream_error_is_an_error_chunk_and_nothing_after(array: bool) -> None:
    dec = OPENAI.stream_decoder()
    events = dec.feed(
        openai_upstream(
            oa_chunk({"content": "Hel"}),
            oa_chunk({"content": "lo"}),
            {"error": {"message": "engine failure", "type": "server_error"}},
        )
    )
    enc = DIALECT.stream_encoder("p", IrRequest(stream=True, extra={SHIM: True} if array else {}))
    out = b"".join(enc.encode(e) for e in events)
    assert enc.encode(MessageStop()) == b"" and enc.keepalive() == b""
    if array:
        body = json.loads(out)
    else:
        body = [json.loads(d) for _e, d in SseParser().feed(out)]
    assert body[-1] == {"error": {"code": 500, "message": "engine failure", "status": "INTERNAL"}}
    assert "".join(r["candidates"][0]["content"]["parts"][0]["text"] for r in body[:-1]) == "Hello"
    assert not any("finishReason" in r.get("candidates", [{}])[0] for r in body[:-1])


def test_error_before_any_chunk_in_array_mode_is_a_one_element_array() -> None:
    out, _ = encode([StreamError("rate_limit", "slow down")], array=True)
    assert json.loads(out) == [
        {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}
    ]


def test_gemini_stream_round_trips_through_the_ir() -> None:
    raw = (FIXTURES / "gemini" / "thinking-stream.response.sse.txt").read_bytes()
    events = decode(raw)
    again = decode(encode(events)[0])
    assert [type(e) for e in again] == [type(e) for e in events]
    assert "".join(e.value for e in again if isinstance(e, BlockDelta)) == "".join(
        e.value for e in events if isinstance(e, BlockDelta)
    )
    assert final(again).usage == final(events).usage
