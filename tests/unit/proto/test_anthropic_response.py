"""Anthropic Messages non-stream responses: provider body -> IR and IR -> client body."""

from __future__ import annotations

import json
import re

import pytest
from busbar.ir.model import IrRequest, IrResponse, StopReason, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from busbar.proto.anthropic import DIALECT
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.openai.parts import RawArguments
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_fixture_text_basic_2024_usage_shape() -> None:
    src = load("anthropic/text-basic.response.json")
    r = DIALECT.read_response(src)
    assert r.id == "msg_01TPXhkPo8jy6yQMrMhjpiAE"
    assert r.model == "claude-3-opus-20240229"
    assert r.content == [TextBlock(src["content"][0]["text"])]
    assert r.stop_reason is StopReason.END_TURN and r.stop_sequence is None
    assert r.usage == Usage(input_tokens=17, output_tokens=220)


def test_fixture_prompt_cache_write() -> None:
    r = DIALECT.read_response(load("anthropic/prompt-cache-write.response.json"))
    assert r.id == "msg_01EF3r8zYyZntM4Sg9a5kc6k"
    assert r.usage == Usage(input_tokens=4, output_tokens=187, cache_write_tokens=1163, cache_read_tokens=0)
    out = OPENAI.write_response(r, "pool", IrRequest())
    assert out["usage"] == {
        "prompt_tokens": 1167,
        "completion_tokens": 187,
        "total_tokens": 1354,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def test_fixture_round_trips_through_the_ir() -> None:
    src = load("anthropic/prompt-cache-write.response.json")
    out = DIALECT.write_response(DIALECT.read_response(src), src["model"], IrRequest())
    assert out == src


def test_thinking_tool_use_and_unknown_blocks() -> None:
    body = {
        "id": "msg_1",
        "content": [
            {"type": "thinking", "thinking": "", "signature": "SIG1"},
            {"type": "redacted_thinking", "data": "R"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
        ],
        "stop_reason": "tool_use",
        "usage": {
            "input_tokens": 1,
            "output_tokens": 2,
            "cache_creation_input_tokens": None,
            "cache_read_input_tokens": 5,
        },
    }
    r = DIALECT.read_response(body)
    assert r.content == [
        ThinkingBlock("", "SIG1"),
        ThinkingBlock(redacted=True, data="R"),
        ToolUseBlock("toolu_1", "f", {"a": 1}),
    ]
    assert r.usage == Usage(input_tokens=1, output_tokens=2, cache_read_tokens=5)


@pytest.mark.parametrize(
    "wire,ir",
    [
        ("end_turn", StopReason.END_TURN),
        ("stop_sequence", StopReason.STOP_SEQUENCE),
        ("max_tokens", StopReason.MAX_TOKENS),
        ("tool_use", StopReason.TOOL_USE),
        ("pause_turn", StopReason.PAUSE_TURN),
        ("refusal", StopReason.REFUSAL),
        ("model_context_window_exceeded", StopReason.MAX_TOKENS),
        ("novel", StopReason.OTHER),
    ],
)
def test_stop_reason_to_ir(wire: str, ir: StopReason) -> None:
    assert DIALECT.read_response({"content": [], "stop_reason": wire}).stop_reason is ir


def test_c010_reverse_stop_sequence_becomes_openai_stop() -> None:
    r = DIALECT.read_response(
        {
            "id": "msg_1",
            "content": [{"type": "text", "text": "a"}],
            "stop_reason": "stop_sequence",
            "stop_sequence": "###",
        }
    )
    assert (r.stop_reason, r.stop_sequence) == (StopReason.STOP_SEQUENCE, "###")
    assert OPENAI.write_response(r, "p", IrRequest())["choices"][0]["finish_reason"] == "stop"


def test_write_response_envelope() -> None:
    resp = IrResponse(
        id="chatcmpl-x",
        content=[ThinkingBlock("t"), TextBlock("hi"), ToolUseBlock("call_1", "f", {"a": 1})],
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=3136, output_tokens=40, cache_read_tokens=6752),
    )
    out = DIALECT.write_response(resp, "my-pool", IrRequest())
    assert re.fullmatch(r"msg_01[A-Za-z0-9]{22}", out["id"])
    assert {k: v for k, v in out.items() if k != "id"} == {
        "type": "message",
        "role": "assistant",
        "model": "my-pool",
        "content": [
            {"type": "thinking", "thinking": "t", "signature": ""},
            {"type": "text", "text": "hi"},
            {"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 3136,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 6752,
            "output_tokens": 40,
        },
    }


def test_openai_response_to_anthropic_client() -> None:
    src = load("openai-chat/image-url.response.json")
    out = DIALECT.write_response(OPENAI.read_response(src), "pool", IrRequest())
    assert out["stop_reason"] == "max_tokens"
    assert out["content"] == [{"type": "text", "text": src["choices"][0]["message"]["content"]}]
    assert out["usage"] == {
        "input_tokens": 438,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 16,
    }


def test_malformed_model_arguments_reach_an_anthropic_client_as_an_object() -> None:
    resp = IrResponse(content=[ToolUseBlock("c", "f", RawArguments('{"a":')), ToolUseBlock("d", "g", None)])
    content = DIALECT.write_response(resp, "p", IrRequest())["content"]
    assert content[0]["input"] == {"_raw": '{"a":'}
    assert content[1]["input"] == {}


@pytest.mark.parametrize(
    "reason,wire",
    [
        (StopReason.END_TURN, "end_turn"),
        (StopReason.STOP_SEQUENCE, "stop_sequence"),
        (StopReason.MAX_TOKENS, "max_tokens"),
        (StopReason.TOOL_USE, "tool_use"),
        (StopReason.SAFETY, "refusal"),
        (StopReason.REFUSAL, "refusal"),
        (StopReason.PAUSE_TURN, "pause_turn"),
        (StopReason.ERROR, "end_turn"),
        (StopReason.OTHER, "end_turn"),
        (None, "end_turn"),
    ],
)
def test_every_stop_reason_maps_to_a_valid_anthropic_value(reason: StopReason | None, wire: str) -> None:
    assert DIALECT.write_response(IrResponse(stop_reason=reason), "m", IrRequest())["stop_reason"] == wire
