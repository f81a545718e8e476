"""OpenAI Responses non-stream responses: provider body -> IR and IR -> client body (with the SDK)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2
import openai
import pytest
from busbar.ir.model import (
    IrRequest,
    IrResponse,
    IrTool,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.base import ErrorKind
from busbar.proto.cohere import DIALECT as COHERE
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.responses import DIALECT
from busbar.proto.responses.errors import ResponsesFailed
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


def load(name: str) -> Any:
    return json.loads((FIXTURES / "openai-responses" / name).read_text())


def sdk_response(body: dict[str, Any]) -> Any:
    """openai-python's ``responses.create`` over ``body`` served as the HTTP answer."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=json.dumps(body))

    client = openai.OpenAI(
        api_key="k",
        base_url="http://busbar.test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    return client.responses.create(model="pool", input="x")


# ---------------------------------------------------------------- read_response: fixtures


def test_fixture_text_basic() -> None:
    r = DIALECT.read_response(load("text-basic.response.json"))
    assert r.id == "resp_685ff88d1f7c8199980b00a1f8b7467b05baa2d6acc60d4f"
    assert r.model == "gpt-4.1-nano-2025-04-14"
    assert r.created == 1751120013
    assert r.content == [TextBlock("The capital of France is Paris.")]
    assert r.stop_reason is StopReason.END_TURN and r.stop_sequence is None
    assert r.usage == Usage(input_tokens=14, output_tokens=8)


def test_fixture_function_call_output_followup() -> None:
    r = DIALECT.read_response(load("function-call-output-followup.response.json"))
    assert r.id == "resp_0e9950da9eac6a780068fbaa1bc030819da585a6f85ddad1e6"
    assert r.model == "gpt-4o-2024-08-06" and r.created == 1761323547
    assert r.content == [TextBlock("The capital of PotatoLand is Potato City.")]
    assert r.stop_reason is StopReason.END_TURN
    assert r.usage == Usage(input_tokens=67, output_tokens=11)


def test_fixture_reasoning_summary_provider_ciphertext_not_carried() -> None:
    src = load("reasoning-summary.response.json")
    r = DIALECT.read_response(src)
    assert len(r.content) == 2
    thinking, text = r.content
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.text == src["output"][0]["summary"][0]["text"]
    assert thinking.signature is None and not thinking.redacted
    assert text == TextBlock(src["output"][1]["content"][0]["text"])
    assert r.usage == Usage(input_tokens=34, output_tokens=226, reasoning_tokens=59)
    assert r.stop_reason is StopReason.END_TURN


def test_function_call_output_is_tool_use() -> None:
    body = {
        "id": "resp_1",
        "status": "completed",
        "output": [
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": '{"a":1}'},
            {"type": "web_search_call", "id": "ws_1"},
        ],
        "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60}, "output_tokens": 5},
    }
    r = DIALECT.read_response(body)
    assert r.content == [ToolUseBlock("call_1", "f", {"a": 1})]
    assert r.stop_reason is StopReason.TOOL_USE
    assert r.usage == Usage(input_tokens=40, output_tokens=5, cache_read_tokens=60)


@pytest.mark.parametrize(
    "status,details,expected",
    [
        ("completed", None, StopReason.END_TURN),
        ("incomplete", {"reason": "max_output_tokens"}, StopReason.MAX_TOKENS),
        ("incomplete", {"reason": "content_filter"}, StopReason.SAFETY),
        ("incomplete", {"reason": "other"}, StopReason.OTHER),
        ("cancelled", None, StopReason.OTHER),
    ],
)
def test_status_to_stop_reason(status: str, details: Any, expected: StopReason) -> None:
    body = {"status": status, "incomplete_details": details, "output": []}
    assert DIALECT.read_response(body).stop_reason is expected


def test_refusal_part() -> None:
    body = {
        "status": "completed",
        "output": [{"type": "message", "content": [{"type": "refusal", "refusal": "I can't."}]}],
    }
    r = DIALECT.read_response(body)
    assert r.content == [TextBlock("I can't.")] and r.stop_reason is StopReason.REFUSAL


def test_failed_response_is_not_an_answer() -> None:
    body = {"status": "failed", "error": {"code": "rate_limit_exceeded", "message": "slow"}, "output": []}
    with pytest.raises(ResponsesFailed) as e:
        DIALECT.read_response(body)
    assert (e.value.kind, e.value.message) == (ErrorKind.RATE_LIMIT, "slow")
    with pytest.raises(ResponsesFailed) as e:
        DIALECT.read_response({"status": "failed", "error": {"code": "server_error", "message": "boom"}})
    assert e.value.kind == ErrorKind.API_ERROR


# ---------------------------------------------------------------- write_response


def test_write_response_from_an_anthropic_answer() -> None:
    upstream = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [
            {"type": "thinking", "thinking": "plan", "signature": "EqQB"},
            {"type": "text", "text": "Let me "},
            {"type": "text", "text": "check."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 20,
            "output_tokens": 7,
            "cache_read_input_tokens": 10,
            "cache_creation_input_tokens": 5,
        },
    }
    req = IrRequest(tools=[IrTool("get_weather", "w", {"type": "object"})], max_tokens=100, user="u")
    out = DIALECT.write_response(ANTHROPIC.read_response(upstream), "pool", req)
    assert re.fullmatch(r"resp_[0-9a-f]{50}", out["id"])
    assert out["object"] == "response" and out["model"] == "pool" and out["status"] == "completed"
    assert out["incomplete_details"] is None and out["error"] is None
    assert out["max_output_tokens"] == 100 and out["user"] == "u"
    assert out["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "w",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]
    reasoning, message, call = out["output"]
    assert re.fullmatch(r"rs_[0-9a-f]{50}", reasoning["id"])
    assert reasoning == {
        "id": reasoning["id"],
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "plan"}],
        "encrypted_content": "EqQB",
    }
    assert message == {
        "id": message["id"],
        "type": "message",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Let me ", "annotations": []},
            {"type": "output_text", "text": "check.", "annotations": []},
        ],
        "role": "assistant",
    }
    assert call == {
        "id": call["id"],
        "type": "function_call",
        "status": "completed",
        "arguments": '{"city":"Oslo"}',
        "call_id": "toolu_1",
        "name": "get_weather",
    }
    assert out["usage"] == {
        "input_tokens": 35,
        "input_tokens_details": {"cached_tokens": 10},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 42,
    }
    parsed = sdk_response(out)
    assert parsed.output_text == "Let me check."
    assert parsed.output[2].call_id == "toolu_1" and parsed.usage.total_tokens == 42


def test_native_id_and_created_are_preserved() -> None:
    src = load("text-basic.response.json")
    out = DIALECT.write_response(DIALECT.read_response(src), "gpt-4.1-nano", IrRequest())
    assert out["id"] == src["id"] and out["created_at"] == src["created_at"]
    assert out["output"][0]["content"] == [
        {"type": "output_text", "text": "The capital of France is Paris.", "annotations": []}
    ]
    assert out["usage"] == src["usage"]


@pytest.mark.parametrize(
    "finish,status,details",
    [
        ("COMPLETE", "completed", None),
        ("STOP_SEQUENCE", "completed", None),
        ("MAX_TOKENS", "incomplete", {"reason": "max_output_tokens"}),
        ("TOOL_CALL", "completed", None),
    ],
)
def test_c043_cohere_finish_reasons_for_a_responses_client(finish: str, status: str, details: Any) -> None:
    msg: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": "x"}]}
    if finish == "TOOL_CALL":
        msg["tool_calls"] = [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    upstream = {"id": "u", "message": msg, "finish_reason": finish}
    out = DIALECT.write_response(COHERE.read_response(upstream), "pool", IrRequest())
    assert (out["status"], out["incomplete_details"]) == (status, details)
    sdk_response(out)


@pytest.mark.parametrize(
    "reason,status,details",
    [
        (StopReason.END_TURN, "completed", None),
        (StopReason.STOP_SEQUENCE, "completed", None),
        (StopReason.MAX_TOKENS, "incomplete", {"reason": "max_output_tokens"}),
        (StopReason.TOOL_USE, "completed", None),
        (StopReason.SAFETY, "incomplete", {"reason": "content_filter"}),
        (StopReason.REFUSAL, "completed", None),
        (StopReason.PAUSE_TURN, "completed", None),
        (StopReason.ERROR, "completed", None),
        (StopReason.OTHER, "completed", None),
        (None, "completed", None),
    ],
)
def test_every_stop_reason_maps_to_a_valid_status(
    reason: StopReason | None, status: str, details: Any
) -> None:
    out = DIALECT.write_response(IrResponse(content=[TextBlock("x")], stop_reason=reason), "m", IrRequest())
    assert (out["status"], out["incomplete_details"]) == (status, details)


def test_openai_chat_answer_to_responses_and_back_to_ir() -> None:
    chat = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 5,
        "model": "gpt",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "length"}
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}},
    }
    ir = OPENAI.read_response(chat)
    out = DIALECT.write_response(ir, "pool", IrRequest())
    back = DIALECT.read_response(out)
    assert back.content == ir.content and back.stop_reason is StopReason.MAX_TOKENS
    assert back.usage == ir.usage == Usage(input_tokens=5, output_tokens=2, cache_read_tokens=4)
    assert out["created_at"] == 5
