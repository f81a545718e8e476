"""Bedrock ConverseStream: the decoder on the captures and on synthesized frames, the encoder read back."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from botocore.eventstream import EventStreamBuffer  # type: ignore[import-untyped]
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
from busbar.proto.bedrock import DIALECT
from busbar.proto.bedrock.eventstream import encode_event, encode_exception, encode_message, header
from busbar.proto.openai import DIALECT as OPENAI
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


def decode(raw: bytes, step: int | None = None) -> list[StreamEvent]:
    dec = DIALECT.stream_decoder()
    n = step or max(len(raw), 1)
    events: list[StreamEvent] = []
    for i in range(0, len(raw), n):
        events += dec.feed(raw[i : i + n])
    return events + dec.close()


def ev(name: str, payload: dict[str, Any]) -> bytes:
    return encode_event(name, orjson.dumps(payload))


def botocore_events(raw: bytes) -> list[tuple[str, Any]]:
    """(event or exception type, parsed payload) per message, as botocore reads the bytes."""
    buf = EventStreamBuffer()
    buf.add_data(raw)
    out = []
    for m in buf:
        h = m.headers
        kind = h.get(":event-type") or h.get(":exception-type")
        out.append((kind, json.loads(m.payload)))
    return out


def encode(events: list[StreamEvent], model: str = "m") -> bytes:
    enc = DIALECT.stream_encoder(model, IrRequest(stream=True))
    return b"".join(enc.encode(e) for e in events)


# ---------------------------------------------------------------- decoder: the captures


@pytest.mark.parametrize("step", [None, 1, 13, 200])
def test_text_capture_decodes_to_one_text_block(step: int | None) -> None:
    raw = (FIXTURES / "bedrock" / "converse-stream-text.response.eventstream").read_bytes()
    events = decode(raw, step)
    assert events[0] == MessageStart()
    assert events[1] == BlockStart(0, TextBlock(""))
    deltas = [e for e in events if isinstance(e, BlockDelta)]
    assert len(deltas) == 29 and all(d.kind == "text" and d.index == 0 for d in deltas)
    text = "".join(d.value for d in deltas)
    assert text.startswith("The capital of France is Paris. Paris is not only the capital city")
    assert text.endswith('"The City of Love."')
    assert events[-3:] == [
        BlockStop(0),
        MessageDelta(StopReason.END_TURN, None, Usage(input_tokens=13, output_tokens=82)),
        MessageStop(),
    ]


def test_reasoning_capture_decodes_thinking_with_signature_then_text() -> None:
    raw = (FIXTURES / "bedrock" / "converse-stream-reasoning.response.eventstream").read_bytes()
    events = decode(raw, 50)
    assert events[:2] == [MessageStart(), BlockStart(0, ThinkingBlock())]
    thinking = "".join(e.value for e in events if isinstance(e, BlockDelta) and e.kind == "thinking")
    assert thinking.startswith('The user has greeted me with a simple "Hello".')
    sigs = [e for e in events if isinstance(e, BlockDelta) and e.kind == "signature"]
    assert (
        len(sigs) == 1 and sigs[0].index == 0 and sigs[0].value.startswith("Eu0CCkgIBxABGAIqQJDccbDQkr81n7Qj")
    )
    i = events.index(BlockStop(0))
    assert events[i + 1] == BlockStart(1, TextBlock(""))
    text = "".join(e.value for e in events if isinstance(e, BlockDelta) and e.kind == "text")
    assert text == "Hello! It's nice to meet you. How can I help you today?"
    assert events[-2] == MessageDelta(StopReason.END_TURN, None, Usage(input_tokens=36, output_tokens=73))


def test_capture_translated_for_an_anthropic_client() -> None:
    raw = (FIXTURES / "bedrock" / "converse-stream-reasoning.response.eventstream").read_bytes()
    enc = ANTHROPIC.stream_encoder("pool", IrRequest(stream=True))
    out = b"".join(enc.encode(e) for e in decode(raw)).decode()
    assert '"content_block":{"type":"thinking","thinking":"","signature":""}' in out
    assert '"type":"signature_delta","signature":"Eu0CCkgIBxABGAIqQJDccbDQkr81n7Qj' in out
    assert '"usage":{"input_tokens":36,"output_tokens":73}' in out
    assert out.endswith('event: message_stop\ndata: {"type":"message_stop"}\n\n')


# ---------------------------------------------------------------- decoder: synthesized frames


def test_tool_use_stream() -> None:
    raw = b"".join(
        [
            ev("messageStart", {"role": "assistant"}),
            ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Checking."}}),
            ev("contentBlockStop", {"contentBlockIndex": 0}),
            ev(
                "contentBlockStart",
                {
                    "contentBlockIndex": 1,
                    "start": {"toolUse": {"toolUseId": "tooluse_A", "name": "get_weather"}},
                },
            ),
            ev("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"ci'}}}),
            ev("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": 'ty":"Oslo"}'}}}),
            ev("contentBlockStop", {"contentBlockIndex": 1}),
            ev("messageStop", {"stopReason": "tool_use"}),
            ev(
                "metadata",
                {
                    "usage": {
                        "inputTokens": 10,
                        "outputTokens": 5,
                        "totalTokens": 15,
                        "cacheReadInputTokens": 4,
                    },
                    "metrics": {"latencyMs": 9},
                },
            ),
        ]
    )
    assert decode(raw) == [
        MessageStart(),
        BlockStart(0, TextBlock("")),
        BlockDelta(0, "text", "Checking."),
        BlockStop(0),
        BlockStart(1, ToolUseBlock("tooluse_A", "get_weather", {})),
        BlockDelta(1, "input_json", '{"ci'),
        BlockDelta(1, "input_json", 'ty":"Oslo"}'),
        BlockStop(1),
        MessageDelta(StopReason.TOOL_USE, None, Usage(input_tokens=10, output_tokens=5, cache_read_tokens=4)),
        MessageStop(),
    ]


def test_c001_bedrock_tool_stream_reaches_an_openai_client_with_sequential_indexes() -> None:
    raw = b"".join(
        [
            ev("messageStart", {"role": "assistant"}),
            ev(
                "contentBlockStart",
                {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "A", "name": "f"}}},
            ),
            ev("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{}"}}}),
            ev("contentBlockStop", {"contentBlockIndex": 1}),
            ev("messageStop", {"stopReason": "tool_use"}),
            ev(
                "metadata",
                {
                    "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                    "metrics": {"latencyMs": 1},
                },
            ),
        ]
    )
    enc = OPENAI.stream_encoder("pool", IrRequest(stream=True))
    out = b"".join(enc.encode(e) for e in decode(raw)).decode()
    assert (
        '"tool_calls":[{"index":0,"id":"A","type":"function","function":{"name":"f","arguments":""}}]' in out
    )
    assert '"finish_reason":"tool_calls"' in out and out.endswith("data: [DONE]\n\n")


def test_c018_throttling_exception_before_content_is_the_first_event() -> None:
    raw = ev("messageStart", {"role": "assistant"}) + encode_exception(
        "throttlingException", b'{"message":"Too many requests, please wait before trying again."}'
    )
    assert decode(raw) == [StreamError("rate_limit", "Too many requests, please wait before trying again.")]


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        ("throttlingException", "rate_limit"),
        ("serviceUnavailableException", "overloaded"),
        ("validationException", "invalid_request"),
        ("internalServerException", "api_error"),
        ("modelStreamErrorException", "api_error"),
        ("modelTimeoutException", "timeout"),
    ],
)
def test_every_modeled_exception_maps_to_a_kind(exc: str, kind: str) -> None:
    raw = (
        ev("messageStart", {"role": "assistant"})
        + ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}})
        + encode_exception(exc, b'{"message":"m"}')
        + ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}})
    )
    events = decode(raw)
    assert events[-1] == StreamError(kind, "m")
    assert [type(e).__name__ for e in events] == ["MessageStart", "BlockStart", "BlockDelta", "StreamError"]


def test_generic_error_message_type() -> None:
    raw = encode_message(
        header(":message-type", "error")
        + header(":error-code", "InternalFailure")
        + header(":error-message", "bad"),
        b"",
    )
    assert decode(raw) == [StreamError("api_error", "bad")]


@pytest.mark.parametrize("stop", ["malformed_model_output", "malformed_tool_use"])
def test_c047_malformed_stop_reasons_are_stream_errors(stop: str) -> None:
    raw = (
        ev("messageStart", {"role": "assistant"})
        + ev(
            "contentBlockStart",
            {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t", "name": "f"}}},
        )
        + ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"a":'}}})
        + ev("messageStop", {"stopReason": stop})
    )
    events = decode(raw)
    assert events[-1] == StreamError("api_error", f"upstream model failed: stopReason {stop}")
    assert not any(isinstance(e, (MessageDelta, MessageStop)) for e in events)


@pytest.mark.parametrize(
    ("stop", "ir"),
    [
        ("guardrail_intervened", StopReason.SAFETY),
        ("content_filtered", StopReason.SAFETY),
        ("model_context_window_exceeded", StopReason.MAX_TOKENS),
        ("stop_sequence", StopReason.STOP_SEQUENCE),
        ("future_thing", StopReason.OTHER),
    ],
)
def test_c047_stream_and_non_stream_agree(stop: str, ir: StopReason) -> None:
    raw = ev("messageStop", {"stopReason": stop}) + ev(
        "metadata",
        {"usage": {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3}, "metrics": {"latencyMs": 1}},
    )
    last = decode(raw)[-2]
    assert isinstance(last, MessageDelta) and last.stop_reason is ir


def test_premature_end_truncated_frame_and_bad_crc_are_errors() -> None:
    start = ev("messageStart", {"role": "assistant"}) + ev(
        "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "a"}}
    )
    assert decode(start)[-1] == StreamError("api_error", "upstream stream ended prematurely")
    frame = ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "b"}})
    assert decode(start + frame[:20])[-1] == StreamError("api_error", "upstream stream ended prematurely")
    bad = bytearray(frame)
    bad[-1] ^= 1
    assert decode(start + bytes(bad))[-1] == StreamError(
        "api_error", "malformed upstream eventstream: message CRC mismatch"
    )


def test_stop_without_metadata_still_finishes() -> None:
    raw = ev("messageStart", {"role": "assistant"}) + ev("messageStop", {"stopReason": "end_turn"})
    assert decode(raw) == [MessageStart(), MessageDelta(StopReason.END_TURN, None, Usage()), MessageStop()]


# ---------------------------------------------------------------- encoder


def openai_upstream(*objs: object) -> bytes:
    return b"".join(
        b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n" for o in objs
    )


def oa_chunk(delta: dict | None = None, finish: str | None = None, **kw: object) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "g",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        **kw,
    }


def test_openai_upstream_to_bedrock_client_has_one_metadata_after_message_stop() -> None:
    dec = OPENAI.stream_decoder()
    raw = openai_upstream(
        oa_chunk({"role": "assistant", "content": ""}),
        oa_chunk({"content": "Hel"}),
        oa_chunk({"content": "lo"}),
        oa_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "f", "arguments": ""},
                    }
                ]
            }
        ),
        oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":1}'}}]}),
        oa_chunk({}, "tool_calls"),
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "g",
            "choices": [],
            "usage": {
                "prompt_tokens": 20,
                "completion_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 5},
            },
        },
        b"[DONE]",
    )
    events = dec.feed(raw) + dec.close()
    out = encode(events)
    got = botocore_events(out)
    kinds = [k for k, _ in got]
    assert kinds == [
        "messageStart",
        "contentBlockDelta",
        "contentBlockDelta",
        "contentBlockStop",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    assert kinds.count("metadata") == 1
    payloads = [{k: v for k, v in p.items() if k != "p"} for _, p in got]
    assert payloads[0] == {"role": "assistant"}
    assert payloads[1] == {"contentBlockIndex": 0, "delta": {"text": "Hel"}}
    assert payloads[4] == {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "call_1", "name": "f"}}}
    assert payloads[5] == {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"a":1}'}}}
    assert payloads[7] == {"stopReason": "tool_use"}
    assert payloads[8] == {
        "usage": {"inputTokens": 15, "outputTokens": 7, "totalTokens": 27, "cacheReadInputTokens": 5},
        "metrics": {"latencyMs": 0},
    }
    assert all(isinstance(p.get("p"), str) for _, p in got)


def test_encoder_output_decodes_back_to_the_same_ir() -> None:
    raw = (FIXTURES / "bedrock" / "converse-stream-reasoning.response.eventstream").read_bytes()
    events = decode(raw)
    assert decode(encode(events)) == events


def test_c003_error_mid_stream_is_an_exception_frame_and_nothing_after() -> None:
    dec = OPENAI.stream_decoder()
    events = dec.feed(
        openai_upstream(
            oa_chunk({"content": "Hel"}),
            oa_chunk({"content": "lo"}),
            {"error": {"message": "engine failure", "type": "server_error"}},
        )
    )
    enc = DIALECT.stream_encoder("m", IrRequest(stream=True))
    out = b"".join(enc.encode(e) for e in events)
    assert enc.encode(MessageStop()) == b"" and enc.keepalive() == b""
    got = botocore_events(out)
    assert [k for k, _ in got] == [
        "messageStart",
        "contentBlockDelta",
        "contentBlockDelta",
        "internalServerException",
    ]
    assert got[-1][1] == {"message": "engine failure"}


@pytest.mark.parametrize(
    ("kind", "exc"),
    [
        ("rate_limit", "throttlingException"),
        ("overloaded", "serviceUnavailableException"),
        ("invalid_request", "validationException"),
        ("api_error", "internalServerException"),
        ("timeout", "modelStreamErrorException"),
    ],
)
def test_stream_error_kinds_pick_the_exception_type(kind: str, exc: str) -> None:
    out = encode([StreamError(kind, "x")])
    buf = EventStreamBuffer()
    buf.add_data(out)
    [m] = list(buf)
    assert m.headers == {
        ":exception-type": exc,
        ":content-type": "application/json",
        ":message-type": "exception",
    }


def test_encoder_synthesizes_message_start_and_keepalive_is_empty() -> None:
    enc = DIALECT.stream_encoder("m", IrRequest(stream=True))
    assert enc.content_type == "application/vnd.amazon.eventstream"
    assert enc.keepalive() == b""
    out = enc.encode(BlockStart(3, TextBlock("hi")))
    assert [k for k, _ in botocore_events(out)] == ["messageStart", "contentBlockDelta"]
    assert enc.encode(MessageStart()) == b""
