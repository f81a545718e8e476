"""Anthropic Messages streams: the event decoder (provider side) and encoder (client side)."""

from __future__ import annotations

import json

import anthropic
import httpx2
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
from busbar.proto.anthropic import DIALECT
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.sse import SseParser
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES
from openai._streaming import SSEDecoder

FIXTURES = PACKAGED_FIXTURES


def decode(raw: bytes, step: int | None = None) -> list[StreamEvent]:
    dec = DIALECT.stream_decoder()
    n = step or max(len(raw), 1)
    events: list[StreamEvent] = []
    for i in range(0, len(raw), n):
        events += dec.feed(raw[i : i + n])
    return events + dec.close()


def frames(raw: bytes) -> list[tuple[str | None, dict]]:
    p = SseParser()
    return [(e, json.loads(d)) for e, d in p.feed(raw) + p.close()]


def sse(*events: tuple[str, dict]) -> bytes:
    return b"".join(
        b"event: " + n.encode() + b"\ndata: " + json.dumps(d).encode() + b"\n\n" for n, d in events
    )


def openai_upstream(*objs: object) -> bytes:
    return b"".join(
        b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n" for o in objs
    )


def oa_chunk(delta: dict | None = None, finish: str | None = None, **kw: object) -> dict:
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-x",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish, **kw}],
    }


def openai_to_anthropic(raw: bytes, close: bool = True) -> bytes:
    dec = OPENAI.stream_decoder()
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    events = dec.feed(raw) + (dec.close() if close else [])
    return b"".join(enc.encode(e) for e in events)


def sdk_client(raw: bytes) -> anthropic.Anthropic:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=raw)

    return anthropic.Anthropic(
        api_key="k",
        base_url="http://busbar.test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def sdk_final_message(raw: bytes):  # noqa: ANN201 - an anthropic.types.Message
    with sdk_client(raw).messages.stream(
        model="pool", max_tokens=64, messages=[{"role": "user", "content": "x"}]
    ) as stream:
        return stream.get_final_message()


# ---------------------------------------------------------------- decoder: fixtures


def test_fixture_image_base64_stream() -> None:
    raw = (FIXTURES / "anthropic/image-base64-stream.response.sse.txt").read_bytes()
    events = decode(raw)
    assert events == [
        MessageStart(
            "msg_015uV9WrrY9nhNRUqWuTcEtm",
            "claude-sonnet-4-5-20250929",
            Usage(input_tokens=83, output_tokens=1),
        ),
        BlockStart(0, TextBlock("")),
        BlockDelta(0, "text", "Red"),
        BlockDelta(0, "text", " square"),
        BlockDelta(0, "text", ", green"),
        BlockDelta(0, "text", " square"),
        BlockDelta(0, "text", "."),
        BlockStop(0),
        MessageDelta(StopReason.END_TURN, None, Usage(input_tokens=83, output_tokens=9)),
        MessageStop(),
    ]
    assert decode(raw, step=1) == events


def test_fixture_tool_use_stream() -> None:
    raw = (FIXTURES / "anthropic/tool-use-stream.response.sse.txt").read_bytes()
    events = decode(raw, step=11)
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert starts == [
        BlockStart(0, TextBlock("")),
        BlockStart(1, ToolUseBlock("toolu_014x5X91kx3fvdhpLvwXZWE2", "get_weather", {})),
        BlockStart(2, ToolUseBlock("toolu_0121kXsENLvoDZ72LCuAnCCz", "get_time", {})),
    ]
    args = ["".join(e.value for e in events if isinstance(e, BlockDelta) and e.index == i) for i in (1, 2)]
    assert json.loads(args[0]) == {"location": "San Francisco, CA", "unit": "celsius"}
    assert json.loads(args[1]) == {"timezone": "America/Los_Angeles"}
    assert events[-2] == MessageDelta(StopReason.TOOL_USE, None, Usage(input_tokens=506, output_tokens=153))
    assert events[-1] == MessageStop()


def test_fixture_thinking_stream() -> None:
    raw = (FIXTURES / "anthropic/thinking-stream.response.sse.txt").read_bytes()
    events = decode(raw)
    assert events[1] == BlockStart(0, ThinkingBlock())
    thinking = "".join(e.value for e in events if isinstance(e, BlockDelta) and e.kind == "thinking")
    assert thinking.startswith("This is a straightforward question about pedestrian safety.")
    sigs = [e for e in events if isinstance(e, BlockDelta) and e.kind == "signature"]
    assert len(sigs) == 1 and sigs[0].index == 0 and sigs[0].value.startswith("EvMCCkYICxgCKkCHP2cS")
    assert BlockStart(1, TextBlock("")) in events
    assert events[-2] == MessageDelta(StopReason.END_TURN, None, Usage(input_tokens=43, output_tokens=282))


def test_fixture_streams_reencode_for_an_anthropic_client_unchanged_in_substance() -> None:
    raw = (FIXTURES / "anthropic/thinking-stream.response.sse.txt").read_bytes()
    enc = DIALECT.stream_encoder("claude-sonnet-4-0", IrRequest(stream=True))
    out = b"".join(enc.encode(e) for e in decode(raw))
    src = [(e, d) for e, d in frames(raw) if e != "ping"]
    got = frames(out)
    assert [e for e, _ in got] == [e for e, _ in src]
    for (_, a), (_, b) in zip(got[1:-2], src[1:-2], strict=True):
        assert a == b
    msg = sdk_final_message(out)
    assert msg.content[0].type == "thinking" and msg.content[0].signature.startswith("EvMCCkYICxgCKkCHP2cS")
    assert msg.usage.input_tokens == 43 and msg.usage.output_tokens == 282


# ---------------------------------------------------------------- decoder: behaviour


def test_event_error_is_a_stream_error_with_its_kind() -> None:
    raw = sse(
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "usage": {}}}),
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )
    assert decode(raw)[-1] == StreamError("overloaded", "Overloaded")


def test_body_ended_before_message_stop_is_premature() -> None:
    raw = (FIXTURES / "anthropic/image-base64-stream.response.sse.txt").read_bytes()
    cut = raw[: raw.index(b"event: message_delta")]
    events = decode(cut)
    assert events[-1] == StreamError("api_error", "upstream stream ended prematurely")
    assert not any(isinstance(e, MessageStop) for e in events)


def test_c006_signature_only_thinking_block_survives() -> None:
    raw = sse(
        (
            "message_start",
            {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 3}}},
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "SIG1"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        ),
        ("message_stop", {"type": "message_stop"}),
    )
    events = decode(raw)
    assert events[1:4] == [BlockStart(0, ThinkingBlock()), BlockDelta(0, "signature", "SIG1"), BlockStop(0)]
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    got = frames(b"".join(enc.encode(e) for e in events))
    assert got[1:4] == [
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "SIG1"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ]


def test_server_tool_blocks_are_skipped_with_their_deltas() -> None:
    raw = sse(
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "{}"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_stop", {"type": "message_stop"}),
    )
    assert decode(raw) == [MessageStop()]


# ---------------------------------------------------------------- encoder


C002_UPSTREAM = openai_upstream(
    oa_chunk({"role": "assistant", "content": ""}),
    oa_chunk({"content": "Hello"}),
    oa_chunk(finish="stop"),
    {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-x",
        "choices": [],
        "usage": {
            "prompt_tokens": 9888,
            "completion_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 6752},
        },
    },
    b"[DONE]",
)


def test_c002_final_message_delta_carries_cache_split_usage() -> None:
    got = frames(openai_to_anthropic(C002_UPSTREAM))
    assert [e for e, _ in got] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert got[4][1] == {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"input_tokens": 3136, "cache_read_input_tokens": 6752, "output_tokens": 40},
    }
    msg = sdk_final_message(openai_to_anthropic(C002_UPSTREAM))
    assert (msg.usage.input_tokens, msg.usage.cache_read_input_tokens, msg.usage.output_tokens) == (
        3136,
        6752,
        40,
    )
    assert msg.content[0].text == "Hello" and msg.stop_reason == "end_turn"


def test_c002_billing_figures_are_the_same_three() -> None:
    dec = OPENAI.stream_decoder()
    delta = next(e for e in dec.feed(C002_UPSTREAM) if isinstance(e, MessageDelta))
    assert delta.usage == Usage(input_tokens=3136, output_tokens=40, cache_read_tokens=6752)


def test_c003_upstream_error_becomes_event_error_and_the_stream_ends() -> None:
    raw = openai_upstream(
        oa_chunk({"content": "Hel"}),
        oa_chunk({"content": "lo"}),
        {"error": {"message": "engine failure", "type": "server_error"}},
    )
    out = openai_to_anthropic(raw)
    got = frames(out)
    assert [e for e, _ in got] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "error",
    ]
    assert [d["delta"]["text"] for e, d in got if e == "content_block_delta"] == ["Hel", "lo"]
    assert got[-1] == (
        "error",
        {"type": "error", "error": {"type": "api_error", "message": "engine failure"}},
    )
    assert out.endswith(
        b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"engine failure"}}\n\n'
    )
    with pytest.raises(anthropic.APIStatusError) as e:
        sdk_final_message(out)
    assert e.value.body == {"type": "error", "error": {"type": "api_error", "message": "engine failure"}}


def test_c003_truncated_upstream_also_ends_in_error() -> None:
    got = frames(openai_to_anthropic(openai_upstream(oa_chunk({"content": "Hel"}))))
    assert got[-1] == (
        "error",
        {"type": "error", "error": {"type": "api_error", "message": "upstream stream ended prematurely"}},
    )
    assert "message_stop" not in [e for e, _ in got]


def test_nothing_after_the_terminal_event() -> None:
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    assert enc.encode(StreamError("rate_limit", "slow")).startswith(b"event: error\n")
    assert enc.encode(MessageStop()) == b"" and enc.keepalive() == b""
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    assert enc.encode(MessageStop()).endswith(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert enc.encode(StreamError("api_error", "late")) == b"" and enc.keepalive() == b""


def test_c005_keepalive_is_a_ping_event_and_none_after_the_end() -> None:
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    dec = OPENAI.stream_decoder()
    out = enc.keepalive()
    for e in dec.feed(C002_UPSTREAM) + dec.close():  # a slow upstream: a keep-alive between every event
        out += enc.encode(e) + enc.keepalive()
    assert enc.keepalive() == b""
    assert out.startswith(b'event: ping\ndata: {"type": "ping"}\n\n')
    assert out.endswith(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    ours = frames(out)
    sdk = [(e.event, json.loads(e.data)) for e in SSEDecoder().iter_bytes(iter([out]))]
    assert ours == sdk
    assert all(event and isinstance(data, dict) and data.get("type") for event, data in ours)
    assert [d for e, d in ours if e == "ping"] == [{"type": "ping"}] * 6
    assert sdk_final_message(out).content[0].text == "Hello"


def test_c010_stop_sequence_in_message_delta() -> None:
    raw = openai_upstream(oa_chunk({"content": "a"}), oa_chunk(finish="stop", stop_reason="###"), b"[DONE]")
    got = frames(openai_to_anthropic(raw))
    assert got[-2][1]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "###"}


def test_c001_openai_tool_calls_to_anthropic_blocks_renumbered() -> None:
    raw = (FIXTURES / "openai-chat/tool-calls-parallel-stream.response.sse.txt").read_bytes()
    msg = sdk_final_message(openai_to_anthropic(raw))
    assert [(b.type, b.id, b.input) for b in msg.content] == [
        ("tool_use", "call_cCPjAyfwTzboEKjVlqFrArNF", {"location": "San Francisco"}),
        ("tool_use", "call_Zi4He1Ns0mozwT6f85nW1BOW", {"location": "Boston"}),
    ]
    assert msg.stop_reason == "tool_use"


def test_message_start_shape_and_usage_from_the_source() -> None:
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    out = enc.encode(MessageStart("msg_01keep", "claude-x", Usage(input_tokens=5, cache_write_tokens=7)))
    assert frames(out) == [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_01keep",
                    "type": "message",
                    "role": "assistant",
                    "model": "pool",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 5,
                        "cache_creation_input_tokens": 7,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 0,
                    },
                },
            },
        )
    ]
    out = enc.encode(MessageDelta(StopReason.MAX_TOKENS, None, Usage(output_tokens=9)))
    assert frames(out)[0][1]["usage"] == {
        "input_tokens": 5,
        "cache_creation_input_tokens": 7,
        "output_tokens": 9,
    }
    assert frames(out)[0][1]["delta"]["stop_reason"] == "max_tokens"
