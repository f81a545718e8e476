"""OpenAI Chat Completions streams: the chunk decoder (provider side) and encoder (client side)."""

from __future__ import annotations

import json

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
from busbar.proto.openai import DIALECT
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES
from openai._streaming import SSEDecoder

FIXTURES = PACKAGED_FIXTURES


def decode(raw: bytes, step: int | None = None) -> list[StreamEvent]:
    dec = DIALECT.stream_decoder()
    events: list[StreamEvent] = []
    for i in range(0, len(raw), step or max(len(raw), 1)):
        events += dec.feed(raw[i : i + (step or len(raw))])
    return events + dec.close()


def chunks(*objs: object) -> bytes:
    return b"".join(
        b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n" for o in objs
    )


def chunk(delta: dict | None = None, finish: str | None = None, **kw: object) -> dict:
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-x",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish, **kw}],
    }


def encode(events: list[StreamEvent], req: IrRequest | None = None, model: str = "pool") -> bytes:
    enc = DIALECT.stream_encoder(model, req or IrRequest(stream=True))
    return b"".join(enc.encode(e) for e in events)


def sdk_events(raw: bytes) -> list[tuple[str | None, str]]:
    return [(e.event, e.data) for e in SSEDecoder().iter_bytes(iter([raw]))]


def sdk_chunks(raw: bytes) -> list:
    """Run the official openai SDK over ``raw`` as the body of a streamed chat completion."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=raw)

    client = openai.OpenAI(
        api_key="k",
        base_url="http://busbar.test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    stream = client.chat.completions.create(
        model="pool", messages=[{"role": "user", "content": "x"}], stream=True
    )
    return list(stream)


# ---------------------------------------------------------------- decoder: fixtures


def test_fixture_text_stream_include_usage() -> None:
    raw = (FIXTURES / "openai-chat/text-stream-include-usage.response.sse.txt").read_bytes()
    events = decode(raw)
    assert events == [
        MessageStart(id="chatcmpl-ASYMZ4oSykiIFK4lXLReDiKyAjsQl", model="gpt-4-0613"),
        BlockStart(0, TextBlock("")),
        BlockDelta(0, "text", '"This'),
        BlockDelta(0, "text", " is"),
        BlockDelta(0, "text", " a"),
        BlockDelta(0, "text", " test"),
        BlockDelta(0, "text", '."'),
        BlockStop(0),
        MessageDelta(StopReason.END_TURN, None, Usage(input_tokens=12, output_tokens=5)),
        MessageStop(),
    ]
    assert decode(raw, step=1) == events


def test_fixture_parallel_tool_calls() -> None:
    raw = (FIXTURES / "openai-chat/tool-calls-parallel-stream.response.sse.txt").read_bytes()
    events = decode(raw, step=13)
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert starts == [
        BlockStart(0, ToolUseBlock("call_cCPjAyfwTzboEKjVlqFrArNF", "get_current_weather", {})),
        BlockStart(1, ToolUseBlock("call_Zi4He1Ns0mozwT6f85nW1BOW", "get_current_weather", {})),
    ]
    args = {i: "".join(e.value for e in events if isinstance(e, BlockDelta) and e.index == i) for i in (0, 1)}
    assert json.loads(args[0]) == {"location": "San Francisco"}
    assert json.loads(args[1]) == {"location": "Boston"}
    assert [e for e in events if isinstance(e, BlockStop)] == [BlockStop(0), BlockStop(1)]
    assert events[-2:] == [MessageDelta(StopReason.TOOL_USE, None, Usage()), MessageStop()]


# ---------------------------------------------------------------- decoder: behaviour


def test_usage_only_chunk_after_finish_is_merged_before_message_delta() -> None:
    raw = chunks(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "ok"}),
        chunk(finish="stop"),
        {
            "id": "chatcmpl-up",
            "choices": [],
            "usage": {
                "prompt_tokens": 9888,
                "completion_tokens": 40,
                "prompt_tokens_details": {"cached_tokens": 6752},
            },
        },
        b"[DONE]",
    )
    events = decode(raw)
    assert events[-2] == MessageDelta(
        StopReason.END_TURN, None, Usage(input_tokens=3136, output_tokens=40, cache_read_tokens=6752)
    )
    assert events[-1] == MessageStop()


def test_c003_error_chunk_mid_stream_is_a_stream_error() -> None:
    raw = chunks(
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        {"error": {"message": "engine failure", "type": "server_error"}},
    )
    events = decode(raw)
    assert events[-1] == StreamError("api_error", "engine failure")
    assert not any(isinstance(e, (MessageDelta, MessageStop)) for e in events)


@pytest.mark.parametrize(
    "err,kind",
    [
        ({"message": "slow", "type": "rate_limit_error"}, "rate_limit"),
        ({"message": "slow", "type": "tokens", "code": "rate_limit_exceeded"}, "rate_limit"),
        ({"message": "bad", "type": "invalid_request_error"}, "invalid_request"),
        ("just text", "api_error"),
    ],
)
def test_error_chunk_kinds(err: object, kind: str) -> None:
    assert decode(chunks({"error": err}))[-1].kind == kind  # type: ignore[union-attr]


def test_body_ended_without_finish_or_done_is_premature() -> None:
    events = decode(chunks(chunk({"content": "Hel"})))
    assert events[-1] == StreamError("api_error", "upstream stream ended prematurely")
    truncated = chunks(chunk({"content": "Hel"}))[:-2] + b"\n\n" + b'data: {"id":"chatcmpl-up","choi'
    assert decode(truncated)[-1].kind == "api_error"  # type: ignore[union-attr]


def test_body_ended_after_finish_without_done_finishes_cleanly() -> None:
    events = decode(chunks(chunk({"content": "a"}), chunk(finish="length")))
    assert events[-2:] == [MessageDelta(StopReason.MAX_TOKENS, None, Usage()), MessageStop()]


def test_c010_vllm_stop_reason_in_stream() -> None:
    events = decode(chunks(chunk({"content": "a"}), chunk(finish="stop", stop_reason="###"), b"[DONE]"))
    assert events[-2] == MessageDelta(StopReason.STOP_SEQUENCE, "###", Usage())


def test_reasoning_content_becomes_a_thinking_block() -> None:
    events = decode(
        chunks(chunk({"reasoning_content": "hm"}), chunk({"content": "A"}), chunk(finish="stop"), b"[DONE]")
    )
    assert events[1:6] == [
        BlockStart(0, ThinkingBlock()),
        BlockDelta(0, "thinking", "hm"),
        BlockStop(0),
        BlockStart(1, TextBlock("")),
        BlockDelta(1, "text", "A"),
    ]


def test_nothing_after_done() -> None:
    dec = DIALECT.stream_decoder()
    assert dec.feed(chunks(chunk({"content": "a"}), b"[DONE]"))[-1] == MessageStop()
    assert dec.feed(chunks(chunk({"content": "b"}))) == []
    assert dec.close() == []


# ---------------------------------------------------------------- encoder


C001_UPSTREAM = b"".join(
    b"event: " + name.encode() + b"\ndata: " + json.dumps(data).encode() + b"\n\n"
    for name, data in [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_01",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 30, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking."}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"ci'},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": 'ty":"Oslo"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "tool_use", "id": "toolu_B", "name": "get_time", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": '{"tz":"CET"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 2}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 25},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
)


def _anthropic_to_openai(raw: bytes, req: IrRequest) -> bytes:
    dec = ANTHROPIC.stream_decoder()
    enc = DIALECT.stream_encoder("pool", req)
    return b"".join(enc.encode(e) for e in dec.feed(raw) + dec.close())


def test_c001_tool_call_indexes_are_sequential_per_call() -> None:
    out = _anthropic_to_openai(C001_UPSTREAM, IrRequest(stream=True))
    datas = [d for _, d in sdk_events(out)]
    assert datas[-1] == "[DONE]"
    objs = [json.loads(d) for d in datas[:-1]]
    deltas = [o["choices"][0]["delta"] for o in objs]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert {"content": "Checking."} in deltas
    tool_deltas = [tc for d in deltas for tc in d.get("tool_calls", ())]
    assert tool_deltas == [
        {
            "index": 0,
            "id": "toolu_A",
            "type": "function",
            "function": {"name": "get_weather", "arguments": ""},
        },
        {"index": 0, "function": {"arguments": '{"ci'}},
        {"index": 0, "function": {"arguments": 'ty":"Oslo"}'}},
        {"index": 1, "id": "toolu_B", "type": "function", "function": {"name": "get_time", "arguments": ""}},
        {"index": 1, "function": {"arguments": '{"tz":"CET"}'}},
    ]
    assert objs[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert all(o["choices"][0]["finish_reason"] is None for o in objs[:-1])
    assert len({(o["id"], o["created"], o["model"]) for o in objs}) == 1
    assert objs[0]["id"].startswith("chatcmpl-") and objs[0]["model"] == "pool"


def test_c001_official_sdk_accumulates_two_parseable_calls() -> None:
    calls: dict[int, dict] = {}
    text = ""
    finish = None
    for ch in sdk_chunks(_anthropic_to_openai(C001_UPSTREAM, IrRequest(stream=True))):
        d = ch.choices[0].delta
        text += d.content or ""
        for tc in d.tool_calls or ():
            slot = calls.setdefault(tc.index, {"id": tc.id, "name": tc.function.name, "arguments": ""})
            slot["arguments"] += tc.function.arguments or ""
        finish = ch.choices[0].finish_reason or finish
    assert text == "Checking."
    assert calls == {
        0: {"id": "toolu_A", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
        1: {"id": "toolu_B", "name": "get_time", "arguments": '{"tz":"CET"}'},
    }
    assert [json.loads(c["arguments"]) for c in calls.values()] == [{"city": "Oslo"}, {"tz": "CET"}]
    assert finish == "tool_calls"


def test_include_usage_adds_null_usage_and_a_final_usage_chunk() -> None:
    out = _anthropic_to_openai(C001_UPSTREAM, IrRequest(stream=True, include_usage=True))
    objs = [json.loads(d) for _, d in sdk_events(out)[:-1]]
    assert all(o["usage"] is None for o in objs[:-1])
    assert objs[-1]["choices"] == []
    assert objs[-1]["usage"] == {
        "prompt_tokens": 30,
        "completion_tokens": 25,
        "total_tokens": 55,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    chunks_ = sdk_chunks(out)
    assert chunks_[-1].usage.prompt_tokens == 30 and chunks_[-1].usage.completion_tokens == 25


def test_without_include_usage_there_is_no_usage_key() -> None:
    objs = [
        json.loads(d) for _, d in sdk_events(_anthropic_to_openai(C001_UPSTREAM, IrRequest(stream=True)))[:-1]
    ]
    assert all("usage" not in o for o in objs)


def test_c003_error_frame_and_nothing_after_it_and_the_sdk_raises() -> None:
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True))
    out = b"".join(
        enc.encode(e)
        for e in [
            MessageStart(),
            BlockStart(0, TextBlock("")),
            BlockDelta(0, "text", "Hel"),
            StreamError("overloaded", "upstream overloaded"),
        ]
    )
    assert out.endswith(
        b'data: {"error":{"message":"upstream overloaded","type":"server_error",'
        b'"param":null,"code":null}}\n\n'
    )
    assert b"[DONE]" not in out
    assert enc.encode(MessageStop()) == b"" and enc.keepalive() == b""
    with pytest.raises(openai.APIError) as e:
        sdk_chunks(out)
    assert e.value.message == "upstream overloaded"


def test_c005_keepalive_is_a_comment_and_every_event_is_json_or_done() -> None:
    enc = DIALECT.stream_encoder("pool", IrRequest(stream=True, include_usage=True))
    dec = ANTHROPIC.stream_decoder()
    out = enc.keepalive()
    for e in dec.feed(C001_UPSTREAM):
        out += enc.encode(e) + enc.keepalive()
    assert enc.keepalive() == b""
    lines = out.decode().split("\n")
    assert not any(ln.startswith(("id:", "retry:", "event:")) for ln in lines)
    assert ": keep-alive" in lines
    for _, data in sdk_events(out):
        assert data == "[DONE]" or isinstance(json.loads(data), dict)
    sdk_chunks(out)  # the official SDK parses the whole body without error


def test_c010_stop_sequence_finish_is_stop() -> None:
    out = encode([MessageStart(), MessageDelta(StopReason.STOP_SEQUENCE, "###"), MessageStop()])
    assert json.loads(sdk_events(out)[-2][1])["choices"][0]["finish_reason"] == "stop"


def test_thinking_is_not_carried_and_source_block_indexes_are_ignored() -> None:
    out = encode(
        [
            MessageStart(id="chatcmpl-keep"),
            BlockStart(0, ThinkingBlock()),
            BlockDelta(0, "thinking", "hm"),
            BlockDelta(0, "signature", "S"),
            BlockStop(0),
            BlockStart(5, ToolUseBlock("t", "f", {"a": 1})),
            BlockStop(5),
            MessageDelta(StopReason.TOOL_USE),
            MessageStop(),
        ]
    )
    objs = [json.loads(d) for _, d in sdk_events(out)[:-1]]
    assert [o["choices"][0]["delta"] for o in objs] == [
        {"role": "assistant", "content": ""},
        {
            "tool_calls": [
                {"index": 0, "id": "t", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
            ]
        },
        {},
    ]
    assert {o["id"] for o in objs} == {"chatcmpl-keep"}


def test_events_without_message_start_still_open_with_the_role_chunk() -> None:
    out = encode([BlockStart(0, TextBlock("")), BlockDelta(0, "text", "x"), MessageStop()])
    deltas = [json.loads(d)["choices"][0] for _, d in sdk_events(out)[:-1]]
    assert [c["delta"] for c in deltas] == [{"role": "assistant", "content": ""}, {"content": "x"}, {}]
    assert deltas[-1]["finish_reason"] == "stop"
