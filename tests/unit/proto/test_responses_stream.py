"""OpenAI Responses streams: the typed-event decoder (provider side) and encoder (client side)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import pytest
from busbar.ir.model import (
    BlockDelta,
    BlockStart,
    BlockStop,
    IrRequest,
    IrTool,
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
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.responses import DIALECT
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES
from openai._streaming import SSEDecoder

FIXTURES = PACKAGED_FIXTURES
RESP = FIXTURES / "openai-responses"


def decode(raw: bytes, step: int | None = None) -> list[StreamEvent]:
    dec = DIALECT.stream_decoder()
    events: list[StreamEvent] = []
    n = step or max(len(raw), 1)
    for i in range(0, len(raw), n):
        events += dec.feed(raw[i : i + n])
    return events + dec.close()


def frames(*objs: dict[str, Any]) -> bytes:
    return b"".join(
        b"event: " + o["type"].encode() + b"\ndata: " + json.dumps(o).encode() + b"\n\n" for o in objs
    )


def encode(events: list[StreamEvent], req: IrRequest | None = None, model: str = "pool") -> bytes:
    enc = DIALECT.stream_encoder(model, req or IrRequest(stream=True))
    return b"".join(enc.encode(e) for e in events)


def sse(raw: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    return [(e.event, json.loads(e.data)) for e in SSEDecoder().iter_bytes(iter([raw]))]


def sdk_client(raw: bytes) -> openai.OpenAI:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=raw)

    return openai.OpenAI(
        api_key="k",
        base_url="http://busbar.test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


# ---------------------------------------------------------------- decoder: fixtures


def test_fixture_text_stream() -> None:
    raw = (RESP / "text-stream.response.sse.txt").read_bytes()
    events = decode(raw)
    assert events[:2] == [
        MessageStart(
            id="resp_0fef0f8a68937870006911e9ecf124819491634b434678464a", model="gpt-4.1-nano-2025-04-14"
        ),
        BlockStart(0, TextBlock("")),
    ]
    deltas = [e for e in events if isinstance(e, BlockDelta)]
    assert len(deltas) == 78 and {(d.index, d.kind) for d in deltas} == {(0, "text")}
    assert deltas[0].value == "Once" and deltas[-1].value == "."
    done = next(
        json.loads(d)
        for ev, d in ((e.event, e.data) for e in SSEDecoder().iter_bytes(iter([raw])))
        if ev == "response.output_text.done"
    )
    assert "".join(d.value for d in deltas) == done["text"]
    assert events[-3:] == [
        BlockStop(0),
        MessageDelta(StopReason.END_TURN, None, Usage(input_tokens=18, output_tokens=79)),
        MessageStop(),
    ]
    assert decode(raw, step=7) == events


def test_fixture_function_call_stream_without_sequence_numbers() -> None:
    raw = (RESP / "function-call-stream.response.sse.txt").read_bytes()
    events = decode(raw, step=11)
    assert events == [
        MessageStart(id="resp_67e554a155508191900ee113293c4c830794405d35281ae2", model="gpt-4o-2024-08-06"),
        BlockStart(0, ToolUseBlock("call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", {})),
        BlockDelta(0, "input_json", '{"'),
        BlockDelta(0, "input_json", "country"),
        BlockDelta(0, "input_json", '":"'),
        BlockDelta(0, "input_json", "France"),
        BlockDelta(0, "input_json", '"}'),
        BlockStop(0),
        MessageDelta(StopReason.TOOL_USE, None, Usage(input_tokens=255, output_tokens=16)),
        MessageStop(),
    ]


def test_fixture_error_in_stream_chunks() -> None:
    lines = (RESP / "error-in-stream.response.chunks.jsonl").read_bytes().splitlines()
    raw = b"".join(b"data: " + ln + b"\n\n" for ln in lines if ln.strip())
    events = decode(raw)
    assert events == [
        MessageStart(
            id="resp_05500b38c2cd9bfc00691c7c9d222481a3b595421266dab424", model="gpt-5-nano-2025-08-07"
        ),
        StreamError(
            ErrorKind.RATE_LIMIT,
            "You exceeded your current quota, please check your plan and billing details. For more "
            "information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
        ),
    ]
    # response.failed alone (no preceding error event) is a StreamError too
    assert decode(raw.split(b"\n\n")[0] + b"\n\n" + raw.split(b"\n\n")[3] + b"\n\n")[-1] == StreamError(
        ErrorKind.RATE_LIMIT,
        events[1].message,  # type: ignore[union-attr]
    )


# ---------------------------------------------------------------- decoder: behaviour


def test_truncated_stream_is_a_stream_error() -> None:
    raw = (RESP / "text-stream.response.sse.txt").read_bytes()
    cut = raw[: raw.index(b"event: response.completed")]
    events = decode(cut)
    assert events[-1] == StreamError("api_error", "upstream stream ended prematurely")
    assert not any(isinstance(e, MessageStop) for e in events)


def test_malformed_event_is_a_stream_error() -> None:
    assert decode(b"event: response.created\ndata: {nope\n\n") == [
        StreamError("api_error", "upstream sent a malformed stream event")
    ]


def test_reasoning_summary_parts_and_incomplete() -> None:
    raw = frames(
        {"type": "response.created", "response": {"id": "resp_r", "model": "o3"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "reasoning", "id": "rs_1", "summary": []},
        },
        {"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 0, "part": {}},
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "summary_index": 0,
            "delta": "one",
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "summary_index": 1,
            "delta": "two",
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAAB"},
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "reasoning", "id": "rs_2", "summary": []},
        },
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {
                "type": "reasoning",
                "id": "rs_2",
                "summary": [{"type": "summary_text", "text": "late"}],
            },
        },
        {"type": "response.output_item.added", "output_index": 2, "item": {"type": "message", "id": "m"}},
        {
            "type": "response.content_part.added",
            "output_index": 2,
            "content_index": 0,
            "part": {"type": "output_text", "text": ""},
        },
        {"type": "response.output_text.delta", "output_index": 2, "content_index": 0, "delta": "Hi"},
        {
            "type": "response.incomplete",
            "response": {
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "usage": {"input_tokens": 3, "output_tokens": 16},
            },
        },
    )
    assert decode(raw) == [
        MessageStart(id="resp_r", model="o3"),
        BlockStart(0, ThinkingBlock()),
        BlockDelta(0, "thinking", "one"),
        BlockDelta(0, "thinking", "\n\n"),
        BlockDelta(0, "thinking", "two"),
        BlockStop(0),
        BlockStart(1, ThinkingBlock()),
        BlockDelta(1, "thinking", "late"),
        BlockStop(1),
        BlockStart(2, TextBlock("")),
        BlockDelta(2, "text", "Hi"),
        BlockStop(2),
        MessageDelta(StopReason.MAX_TOKENS, None, Usage(input_tokens=3, output_tokens=16)),
        MessageStop(),
    ]


# ---------------------------------------------------------------- encoder: C045


C045_UPSTREAM = (
    b"".join(
        b"data: " + json.dumps(o).encode() + b"\n\n"
        for o in [
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "g",
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": "Let me "}, "finish_reason": None}
                ],
            },
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "g",
                "choices": [{"index": 0, "delta": {"content": "check."}, "finish_reason": None}],
            },
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "g",
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_9",
                                    "type": "function",
                                    "function": {"name": "get_weather", "arguments": ""},
                                }
                            ]
                        },
                        "finish_reason": None,
                    }
                ],
            },
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "g",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]},
                        "finish_reason": None,
                    }
                ],
            },
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "g",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]},
                        "finish_reason": None,
                    }
                ],
            },
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "g",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
            },
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "g",
                "choices": [],
                "usage": {"prompt_tokens": 50, "completion_tokens": 12},
            },
        ]
    )
    + b"data: [DONE]\n\n"
)

C045_REQUEST = {
    "model": "pool",
    "input": "What's the weather in Oslo?",
    "stream": True,
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ],
}


def c045_stream() -> tuple[bytes, IrRequest]:
    req = DIALECT.read_request(C045_REQUEST)
    dec = OPENAI.stream_decoder()
    enc = DIALECT.stream_encoder("pool", req)
    out = b"".join(enc.encode(e) for e in dec.feed(C045_UPSTREAM) + dec.close())
    return out, req


def test_c045_lifecycle_order_and_sequence_numbers() -> None:
    out, _ = c045_stream()
    events = sse(out)
    assert (
        [ev for ev, _ in events]
        == [d["type"] for _, d in events]
        == [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    )
    assert [d["sequence_number"] for _, d in events] == list(range(15))
    assert b"[DONE]" not in out
    d = [d for _, d in events]
    assert d[2]["output_index"] == 0 and d[2]["item"]["type"] == "message"
    assert d[6]["text"] == "Let me check."
    assert d[7]["part"] == {"type": "output_text", "text": "Let me check.", "annotations": []}
    assert d[8]["item"]["content"] == [{"type": "output_text", "text": "Let me check.", "annotations": []}]
    assert d[9]["output_index"] == 1
    assert {k: d[9]["item"][k] for k in ("type", "call_id", "name", "arguments")} == {
        "type": "function_call",
        "call_id": "call_9",
        "name": "get_weather",
        "arguments": "",
    }
    assert [x["delta"] for x in d[10:12]] == ['{"city":', '"Oslo"}']
    assert d[12]["arguments"] == '{"city":"Oslo"}'
    assert d[13]["item"]["arguments"] == '{"city":"Oslo"}' and d[13]["item"]["status"] == "completed"
    final = d[14]["response"]
    assert final["id"].startswith("resp_") and final["status"] == "completed"
    assert [i["type"] for i in final["output"]] == ["message", "function_call"]
    assert final["output"] == [d[8]["item"], d[13]["item"]]
    assert {k: final["usage"][k] for k in ("input_tokens", "output_tokens", "total_tokens")} == {
        "input_tokens": 50,
        "output_tokens": 12,
        "total_tokens": 62,
    }
    assert {e["response"]["id"] for e in (d[0], d[1], d[14])} == {final["id"]}


def test_c045_completed_response_equals_the_non_stream_body_apart_from_timing() -> None:
    out, req = c045_stream()
    final = sse(out)[-1][1]["response"]
    chat = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "g",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Let me check.",
                    "tool_calls": [
                        {
                            "id": "call_9",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 12},
    }
    body = DIALECT.write_response(OPENAI.read_response(chat), "pool", req)

    def strip(r: dict[str, Any]) -> dict[str, Any]:
        r = json.loads(json.dumps(r))
        r.pop("id"), r.pop("created_at")
        for item in r["output"]:
            item.pop("id")
        return r

    assert strip(final) == strip(body)


def test_c045_openai_sdk_stream_helper_and_raw_events() -> None:
    out, _ = c045_stream()
    with sdk_client(out).responses.stream(model="pool", input="weather?") as stream:
        types = [e.type for e in stream]
        final = stream.get_final_response()
    assert types[-1] == "response.completed" and len(types) == 15
    assert final.output_text == "Let me check."
    assert final.status == "completed"
    call = final.output[1]
    assert call.type == "function_call" and call.call_id == "call_9" and call.arguments == '{"city":"Oslo"}'
    assert final.usage is not None and final.usage.total_tokens == 62
    raw = list(sdk_client(out).responses.create(model="pool", input="weather?", stream=True))
    assert [e.sequence_number for e in raw] == list(range(15))


def test_anthropic_thinking_stream_to_a_responses_client() -> None:
    raw = (FIXTURES / "anthropic/thinking-stream.response.sse.txt").read_bytes()
    dec = ANTHROPIC.stream_decoder()
    ir_events = dec.feed(raw) + dec.close()
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    out = b"".join(enc.encode(e) for e in ir_events)
    with sdk_client(out).responses.stream(model="pool", input="x") as stream:
        final = stream.get_final_response()
    reasoning, _message = final.output
    thinking = "".join(e.value for e in ir_events if isinstance(e, BlockDelta) and e.kind == "thinking")
    signature = "".join(e.value for e in ir_events if isinstance(e, BlockDelta) and e.kind == "signature")
    assert reasoning.type == "reasoning" and reasoning.summary[0].text == thinking
    assert reasoning.encrypted_content == signature and signature
    text = "".join(e.value for e in ir_events if isinstance(e, BlockDelta) and e.kind == "text")
    assert final.output_text == text
    assert final.usage is not None and final.usage.input_tokens == 43 and final.usage.output_tokens == 282
    # the client's replay of that item carries the signature back to an Anthropic upstream (C006)
    replay = {
        "input": [
            {"role": "user", "content": "q"},
            reasoning.model_dump(exclude_none=True),
            {"role": "assistant", "content": text},
        ]
    }
    wire = ANTHROPIC.write_request(DIALECT.read_request(replay), "claude")
    assert wire["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": thinking,
        "signature": signature,
    }


def test_encoder_output_decodes_back_to_the_same_answer() -> None:
    raw = (FIXTURES / "anthropic/tool-use-stream.response.sse.txt").read_bytes()
    dec = ANTHROPIC.stream_decoder()
    src = dec.feed(raw) + dec.close()
    back = decode(encode(src), step=5)
    assert [type(e) for e in back if isinstance(e, (BlockStart, BlockStop))] == [
        type(e) for e in src if isinstance(e, (BlockStart, BlockStop))
    ]
    for kind in ("text", "input_json"):  # empty source fragments have no frame
        assert [e.value for e in back if isinstance(e, BlockDelta) and e.kind == kind] == [
            e.value for e in src if isinstance(e, BlockDelta) and e.kind == kind and e.value
        ]
    assert [b.block.id for b in back if isinstance(b, BlockStart) and isinstance(b.block, ToolUseBlock)] == [
        b.block.id for b in src if isinstance(b, BlockStart) and isinstance(b.block, ToolUseBlock)
    ]
    assert back[-2] == MessageDelta(StopReason.TOOL_USE, None, Usage(input_tokens=506, output_tokens=153))


def test_max_tokens_ends_with_response_incomplete() -> None:
    out = encode(
        [
            MessageStart(),
            BlockStart(0, TextBlock("")),
            BlockDelta(0, "text", "cut"),
            MessageDelta(StopReason.MAX_TOKENS),
            MessageStop(),
        ]
    )
    last = sse(out)[-1]
    assert last[0] == "response.incomplete"
    assert last[1]["response"]["status"] == "incomplete"
    assert last[1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert decode(out)[-2] == MessageDelta(StopReason.MAX_TOKENS, None, Usage())


def test_c003_error_is_error_then_response_failed_and_the_sdk_raises() -> None:
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    src: list[StreamEvent] = [
        MessageStart(),
        BlockStart(0, TextBlock("")),
        BlockDelta(0, "text", "Hel"),
        StreamError("overloaded", "upstream overloaded"),
    ]
    out = b"".join(enc.encode(e) for e in src)
    events = sse(out)
    assert [ev for ev, _ in events][-2:] == ["error", "response.failed"]
    assert events[-2][1]["error"] == {
        "message": "upstream overloaded",
        "type": "server_error",
        "param": None,
        "code": None,
    }
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "server_error", "message": "upstream overloaded"}
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert enc.encode(MessageStop()) == b"" and enc.keepalive() == b""
    with pytest.raises(openai.APIError) as e:
        list(sdk_client(out).responses.create(model="pool", input="x", stream=True))
    assert e.value.message == "upstream overloaded"
    # the OpenAI envelope has no "overloaded" type (server_error): it reads back as api_error
    assert decode(out)[-1] == StreamError("api_error", "upstream overloaded")


def test_rate_limit_error_before_any_event() -> None:
    out = encode([StreamError("rate_limit", "slow down")])
    events = sse(out)
    assert [ev for ev, _ in events] == ["error", "response.failed"]
    assert events[1][1]["response"]["error"]["code"] == "rate_limit_exceeded"
    assert decode(out) == [StreamError("rate_limit", "slow down")]


def test_c005_keepalive_is_a_comment() -> None:
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    out = enc.keepalive() + enc.encode(MessageStart()) + enc.keepalive()
    out += enc.encode(MessageStop())
    assert enc.keepalive() == b""
    assert b": keep-alive\n\n" in out
    assert [ev for ev, _ in sse(out)] == ["response.created", "response.in_progress", "response.completed"]


def test_echoes_request_settings_and_source_resp_id() -> None:
    req = IrRequest(
        system=[TextBlock("Be brief.")],
        tools=[IrTool("f")],
        max_tokens=64,
        temperature=0.3,
        response_format={"type": "json_object"},
        stream=True,
    )
    out = encode([MessageStart(id="resp_keep"), MessageStop()], req)
    created = sse(out)[0][1]["response"]
    assert created["id"] == "resp_keep"
    assert (created["instructions"], created["max_output_tokens"], created["temperature"]) == (
        "Be brief.",
        64,
        0.3,
    )
    assert created["text"] == {"format": {"type": "json_object"}}
    assert (
        created["tools"][0]["name"] == "f" and created["status"] == "in_progress" and created["usage"] is None
    )
