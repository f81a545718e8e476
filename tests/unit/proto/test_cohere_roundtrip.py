"""Cross-protocol hops with the Cohere dialect (Cohere <-> IR <-> Anthropic / OpenAI / Responses) and hot-path cost."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.cohere import DIALECT as COHERE
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.responses import DIALECT as RESPONSES
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


def load(name: str) -> Any:
    return json.loads((FIXTURES / "cohere" / name).read_text())


def test_cohere_client_tool_history_to_anthropic_provider_body() -> None:
    ir = COHERE.read_request(load("tool-result-followup.request.json"))
    wire = ANTHROPIC.write_request(ir, "claude")
    assert wire["messages"] == [
        {"role": "user", "content": "What is the weather and current time in Tokyo?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "get_time_dp3men9jrvhf",
                    "name": "get_time",
                    "input": {"location": "Tokyo"},
                },
                {
                    "type": "tool_use",
                    "id": "get_weather_d7arjgsc96yf",
                    "name": "get_weather",
                    "input": {"location": "Tokyo"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "get_time_dp3men9jrvhf", "content": "4:20 PM"},
                {
                    "type": "tool_result",
                    "tool_use_id": "get_weather_d7arjgsc96yf",
                    "content": "Sunny 20 degrees Celsius",
                },
            ],
        },
    ]
    assert [t["name"] for t in wire["tools"]] == ["get_weather", "get_time"]
    assert wire["max_tokens"] == 4096 and "stream" not in wire


@pytest.mark.parametrize("name", ["chat-text", "tool-call", "tool-result-followup"])
def test_cohere_fixture_requests_survive_a_hop_through_openai_and_responses(name: str) -> None:
    src = load(f"{name}.request.json")
    for m in src["messages"]:
        if m.get("content", 0) is None:
            del m["content"]
    via_openai = COHERE.write_request(
        OPENAI.read_request(OPENAI.write_request(COHERE.read_request(copy.deepcopy(src)), "g")), src["model"]
    )
    assert via_openai == src
    via_responses = COHERE.write_request(
        RESPONSES.read_request(RESPONSES.write_request(COHERE.read_request(copy.deepcopy(src)), "g")),
        src["model"],
    )
    assert via_responses == src


def test_anthropic_request_to_cohere_and_back() -> None:
    src = json.loads((FIXTURES / "anthropic" / "tool-use-stream.request.json").read_text())
    ir = ANTHROPIC.read_request(copy.deepcopy(src))
    wire = COHERE.write_request(ir, "command-r")
    assert wire["messages"][0]["role"] == "user" and wire["stream"] is True
    assert all(t["type"] == "function" for t in wire["tools"])
    back = ANTHROPIC.write_request(COHERE.read_request(wire), src["model"])
    assert back == ANTHROPIC.write_request(ANTHROPIC.read_request(copy.deepcopy(src)), src["model"])


def test_openai_structured_output_and_reasoning_reach_cohere() -> None:
    body = {
        "model": "pool",
        "messages": [{"role": "user", "content": "json"}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "o", "schema": {"type": "object"}},
        },
        "reasoning_effort": "medium",
        "user": "u",
    }
    ir = OPENAI.read_request(body)
    wire = COHERE.write_request(ir, "command-a")
    assert wire["response_format"] == {"type": "json_object", "json_schema": {"type": "object"}}
    assert wire["thinking"] == {"type": "enabled", "token_budget": 8192}
    assert ir.dropped == ["user"]


def test_cohere_thinking_history_to_anthropic_drops_only_unsigned_thinking() -> None:
    src = load("thinking.request.json")
    ir = COHERE.read_request(src)
    wire = ANTHROPIC.write_request(ir, "claude")
    text = src["messages"][1]["content"][1]["text"]
    assert wire["messages"][1] == {"role": "assistant", "content": [{"type": "text", "text": text}]}
    assert ir.dropped == ["thinking (unsigned)"]


# ---------------------------------------------------------------- hot-path cost


def _conversation() -> dict[str, Any]:
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "Does a thing. " * 4,
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                    "required": ["a"],
                },
            },
        }
        for i in range(4)
    ]
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant. " * 10}]
    for i in range(6):
        msgs.append({"role": "user", "content": "Please look this up for me. " * 8})
        msgs.append(
            {
                "role": "assistant",
                "tool_plan": "I will look it up.",
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "tool_1", "arguments": '{"a": "x", "b": 2}'},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "The result is 42. " * 6})
    msgs.append({"role": "user", "content": "Summarize."})
    assert len(msgs) == 20
    return {
        "model": "pool",
        "messages": msgs,
        "tools": tools,
        "temperature": 0.3,
        "max_tokens": 1024,
        "stream": True,
    }


def _best_us(fn: Callable[[], object], bound_us: float, n: int = 50, budget_s: float = 4.0) -> float:
    best = float("inf")
    deadline = time.perf_counter() + budget_s
    rounds = 0
    while rounds < 5 or (best >= bound_us and time.perf_counter() < deadline):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
        rounds += 1
    return best


def test_a_20_message_conversation_with_tools_translates_under_150us_per_direction() -> None:
    body = _conversation()
    wire = ANTHROPIC.write_request(COHERE.read_request(body), "claude")
    chat = OPENAI.write_request(COHERE.read_request(body), "gpt")
    to_anthropic = _best_us(lambda: ANTHROPIC.write_request(COHERE.read_request(body), "claude"), 150)
    from_anthropic = _best_us(lambda: COHERE.write_request(ANTHROPIC.read_request(wire), "command-r"), 150)
    from_openai = _best_us(lambda: COHERE.write_request(OPENAI.read_request(chat), "command-r"), 150)
    assert to_anthropic < 150, f"cohere -> anthropic took {to_anthropic:.1f} us"
    assert from_anthropic < 150, f"anthropic -> cohere took {from_anthropic:.1f} us"
    assert from_openai < 150, f"openai -> cohere took {from_openai:.1f} us"
