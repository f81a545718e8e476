"""OpenAI Chat Completions non-stream responses: provider body -> IR and IR -> client body."""

from __future__ import annotations

import json
import re

import pytest
from busbar.ir.model import IrRequest, IrResponse, StopReason, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.openai import DIALECT
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_fixture_text_basic() -> None:
    r = DIALECT.read_response(load("openai-chat/text-basic.response.json"))
    assert r.id == "chatcmpl-908MD9ivBBLb6EaIjlqwFokntayQK"
    assert r.model == "gpt-3.5-turbo-0125"
    assert r.created == 1709819153
    assert r.content == [
        TextBlock("Why did Opentelemetry break up with Tracing? Because it couldn't handle the baggage!")
    ]
    assert r.stop_reason is StopReason.END_TURN and r.stop_sequence is None
    assert r.usage == Usage(input_tokens=15, output_tokens=19)


def test_fixture_image_url_length_is_max_tokens() -> None:
    r = DIALECT.read_response(load("openai-chat/image-url.response.json"))
    assert r.stop_reason is StopReason.MAX_TOKENS
    assert r.usage == Usage(input_tokens=438, output_tokens=16)
    assert r.content == [
        TextBlock("This image depicts a series of smooth, undulating shapes that resemble dunes or")
    ]


def test_fixture_tool_result_followup_with_details() -> None:
    r = DIALECT.read_response(load("openai-chat/tool-result-followup.response.json"))
    assert r.usage == Usage(input_tokens=99, output_tokens=25, cache_read_tokens=0)
    assert r.stop_reason is StopReason.END_TURN
    assert r.model == "gpt-4o-mini-2024-07-18"


def test_cached_tokens_are_cache_reads_and_excluded_from_input() -> None:
    body = {
        "choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 9888,
            "completion_tokens": 40,
            "total_tokens": 9928,
            "prompt_tokens_details": {"cached_tokens": 6752},
            "completion_tokens_details": {"reasoning_tokens": 12},
        },
    }
    assert DIALECT.read_response(body).usage == Usage(
        input_tokens=3136, output_tokens=40, cache_read_tokens=6752, reasoning_tokens=12
    )


def test_c010_vllm_stop_reason_string_is_the_matched_stop_sequence() -> None:
    body = {
        "id": "cmpl-1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "a"},
                "finish_reason": "stop",
                "stop_reason": "###",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1},
    }
    r = DIALECT.read_response(body)
    assert (r.stop_reason, r.stop_sequence) == (StopReason.STOP_SEQUENCE, "###")
    out = ANTHROPIC.write_response(r, "pool", IrRequest())
    assert out["stop_reason"] == "stop_sequence" and out["stop_sequence"] == "###"


@pytest.mark.parametrize("stop_reason", [None, 151645])
def test_c010_no_matched_string_is_end_turn(stop_reason: object) -> None:
    body = {"choices": [{"message": {"content": "a"}, "finish_reason": "stop", "stop_reason": stop_reason}]}
    r = DIALECT.read_response(body)
    assert (r.stop_reason, r.stop_sequence) == (StopReason.END_TURN, None)
    out = ANTHROPIC.write_response(r, "pool", IrRequest())
    assert out["stop_reason"] == "end_turn" and out["stop_sequence"] is None


@pytest.mark.parametrize(
    "finish,expected",
    [
        ("stop", StopReason.END_TURN),
        ("length", StopReason.MAX_TOKENS),
        ("tool_calls", StopReason.TOOL_USE),
        ("function_call", StopReason.TOOL_USE),
        ("content_filter", StopReason.SAFETY),
        ("weird", StopReason.OTHER),
    ],
)
def test_finish_reason_to_ir(finish: str, expected: StopReason) -> None:
    assert (
        DIALECT.read_response(
            {"choices": [{"message": {"content": "x"}, "finish_reason": finish}]}
        ).stop_reason
        is expected
    )


def test_tool_calls_read_and_stop_with_tools_means_tool_use() -> None:
    body = {
        "choices": [
            {
                "message": {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "f", "arguments": '{"count":3,"ratio":0.5}'},
                        }
                    ],
                },
                "finish_reason": "stop",
            }
        ]
    }
    r = DIALECT.read_response(body)
    assert r.content == [ToolUseBlock("call_1", "f", {"count": 3, "ratio": 0.5})]
    assert r.stop_reason is StopReason.TOOL_USE


def test_reasoning_content_and_refusal() -> None:
    body = {
        "choices": [
            {
                "message": {"content": None, "reasoning_content": "think", "refusal": "no"},
                "finish_reason": "stop",
            }
        ]
    }
    r = DIALECT.read_response(body)
    assert r.content == [ThinkingBlock("think"), TextBlock("no")]
    assert r.stop_reason is StopReason.REFUSAL


def test_c013_anthropic_tool_use_to_openai_message() -> None:
    upstream = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "SF"}}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 7},
    }
    out = DIALECT.write_response(ANTHROPIC.read_response(upstream), "pool", IrRequest())
    assert out["choices"][0]["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"SF"}'},
            }
        ],
    }
    assert out["choices"][0]["finish_reason"] == "tool_calls"
    assert out["usage"]["prompt_tokens"] == 20 and out["usage"]["completion_tokens"] == 7


def test_c013_text_and_tool_use_both_kept() -> None:
    resp = IrResponse(
        content=[TextBlock("Let me check."), ToolUseBlock("toolu_1", "get_weather", {"city": "SF"})],
        stop_reason=StopReason.TOOL_USE,
    )
    msg = DIALECT.write_response(resp, "pool", IrRequest())["choices"][0]["message"]
    assert msg["content"] == "Let me check."
    assert msg["tool_calls"][0]["function"]["arguments"] == '{"city":"SF"}'


def test_write_response_envelope_and_usage_folding() -> None:
    resp = IrResponse(
        id="msg_01abc",
        content=[ThinkingBlock("t", "s"), TextBlock("a"), TextBlock("b")],
        stop_reason=StopReason.MAX_TOKENS,
        usage=Usage(input_tokens=4, output_tokens=187, cache_read_tokens=10, cache_write_tokens=1163),
    )
    out = DIALECT.write_response(resp, "my-pool", IrRequest())
    assert re.fullmatch(r"chatcmpl-[A-Za-z0-9]{29}", out["id"])
    assert out["object"] == "chat.completion" and out["model"] == "my-pool"
    assert isinstance(out["created"], int)
    assert out["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "ab"},
            "logprobs": None,
            "finish_reason": "length",
        }
    ]
    assert out["usage"] == {
        "prompt_tokens": 1177,
        "completion_tokens": 187,
        "total_tokens": 1364,
        "prompt_tokens_details": {"cached_tokens": 10},
    }


def test_native_id_and_created_are_preserved() -> None:
    src = load("openai-chat/text-basic.response.json")
    out = DIALECT.write_response(DIALECT.read_response(src), "gpt-3.5-turbo", IrRequest())
    assert out["id"] == src["id"] and out["created"] == src["created"]
    assert out["choices"][0]["message"] == {
        "role": "assistant",
        "content": src["choices"][0]["message"]["content"],
    }
    assert out["usage"] == {**src["usage"], "prompt_tokens_details": {"cached_tokens": 0}}


@pytest.mark.parametrize(
    "reason,finish",
    [
        (StopReason.END_TURN, "stop"),
        (StopReason.STOP_SEQUENCE, "stop"),
        (StopReason.MAX_TOKENS, "length"),
        (StopReason.TOOL_USE, "tool_calls"),
        (StopReason.SAFETY, "content_filter"),
        (StopReason.REFUSAL, "content_filter"),
        (StopReason.PAUSE_TURN, "stop"),
        (StopReason.ERROR, "stop"),
        (StopReason.OTHER, "stop"),
        (None, "stop"),
    ],
)
def test_every_stop_reason_maps_to_a_valid_finish_reason(reason: StopReason | None, finish: str) -> None:
    out = DIALECT.write_response(IrResponse(content=[TextBlock("x")], stop_reason=reason), "m", IrRequest())
    assert out["choices"][0]["finish_reason"] == finish
