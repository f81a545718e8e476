"""Cross-protocol hops through the IR (OpenAI -> IR -> Anthropic -> IR -> OpenAI and back); hot-path cost."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable

import pytest
from busbar.ir.model import IrRequest
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.openai import DIALECT as OPENAI
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES

RICH_OPENAI = {
    "model": "pool",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aW1n"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q":"img"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
        {"role": "user", "content": "thanks"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look up",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
        }
    ],
    "tool_choice": "required",
    "parallel_tool_calls": False,
    "max_tokens": 300,
    "temperature": 0.4,
    "top_p": 0.9,
    "stop": ["###"],
    "user": "u-1",
    "stream": True,
    "stream_options": {"include_usage": True},
}


def _normalize_args(body: dict) -> dict:
    body = copy.deepcopy(body)
    for m in body["messages"]:
        for tc in m.get("tool_calls", ()):
            tc["function"]["arguments"] = json.loads(tc["function"]["arguments"])
    return body


def openai_via_anthropic(body: dict, model: str) -> tuple[dict, dict, IrRequest]:
    ir = OPENAI.read_request(copy.deepcopy(body))
    ir.extra.clear()  # the proxy's leak guard before a foreign writer
    wire = ANTHROPIC.write_request(ir, "claude")
    back = ANTHROPIC.read_request(wire)
    return wire, OPENAI.write_request(back, model), ir


def test_rich_openai_request_survives_a_hop_through_anthropic() -> None:
    wire, back, ir = openai_via_anthropic(RICH_OPENAI, "pool")
    assert wire == {
        "model": "claude",
        "max_tokens": 300,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "aW1n"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": "img"}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "a cat"}],
            },
            {"role": "user", "content": "thanks"},
        ],
        "system": "You are terse.",
        "tools": [
            {
                "name": "lookup",
                "description": "Look up",
                "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
        ],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "temperature": 0.4,
        "top_p": 0.9,
        "stop_sequences": ["###"],
        "metadata": {"user_id": "u-1"},
        "stream": True,
    }
    assert _normalize_args(back) == _normalize_args(RICH_OPENAI) | {"model": "pool"}
    assert ir.dropped == []


@pytest.mark.parametrize("name", ["text-basic", "image-url", "tool-result-followup"])
def test_openai_fixture_requests_survive_a_hop_through_anthropic(name: str) -> None:
    src = json.loads((FIXTURES / "openai-chat" / f"{name}.request.json").read_text())
    _, back, _ = openai_via_anthropic(src, src["model"])
    for m in src["messages"]:
        m.setdefault("content", None)
    assert _normalize_args(back) == _normalize_args(src) | {"max_tokens": 4096}


def test_reasoning_effort_round_trips_as_a_budget() -> None:
    body = {
        "messages": [{"role": "user", "content": "think"}],
        "reasoning_effort": "high",
        "max_tokens": 20000,
    }
    wire, back, _ = openai_via_anthropic(body, "o3")
    assert wire["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert back["reasoning_effort"] == "high" and back["max_completion_tokens"] == 20000


@pytest.mark.parametrize("name", ["text-basic", "image-base64-stream", "tool-use-stream"])
def test_anthropic_fixture_requests_survive_a_hop_through_openai(name: str) -> None:
    src = json.loads((FIXTURES / "anthropic" / f"{name}.request.json").read_text())
    ir = ANTHROPIC.read_request(copy.deepcopy(src))
    wire = OPENAI.write_request(ir, "gpt")
    back = ANTHROPIC.write_request(OPENAI.read_request(wire), src["model"])
    expected = ANTHROPIC.write_request(ANTHROPIC.read_request(copy.deepcopy(src)), src["model"])
    assert back == expected


def test_anthropic_thinking_history_drops_only_the_thinking_through_openai() -> None:
    src = json.loads((FIXTURES / "anthropic" / "thinking-tool-result-followup.request.json").read_text())
    ir = ANTHROPIC.read_request(src)
    wire = OPENAI.write_request(ir, "gpt")
    assert ir.dropped == ["thinking"]
    assert wire["messages"][1] == {
        "role": "assistant",
        "content": src["messages"][1]["content"][1]["text"],
        "tool_calls": [
            {
                "id": "toolu_01YGzqpRE16Vricda3Aqcejo",
                "type": "function",
                "function": {"name": "get_user_country", "arguments": "{}"},
            }
        ],
    }
    assert wire["messages"][2] == {
        "role": "tool",
        "tool_call_id": "toolu_01YGzqpRE16Vricda3Aqcejo",
        "content": "Mexico",
    }
    assert wire["reasoning_effort"] == "low" and wire["max_completion_tokens"] == 4096


# ---------------------------------------------------------------- hot-path cost


def _conversation() -> dict:
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
    msgs: list[dict] = [{"role": "system", "content": "You are a helpful assistant. " * 10}]
    for i in range(6):
        msgs.append({"role": "user", "content": "Please look this up for me. " * 8})
        msgs.append(
            {
                "role": "assistant",
                "content": None,
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
        "tool_choice": "auto",
        "temperature": 0.3,
        "max_tokens": 1024,
        "stream": True,
    }


def _best_us(fn: Callable[[], object], bound_us: float, n: int = 50, budget_s: float = 4.0) -> float:
    """Best per-call time over rounds of ``n`` calls; keeps sampling (up to ``budget_s``) while above
    ``bound_us`` so that a burst of load from other processes on a shared machine is not a failure."""
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
    ir = OPENAI.read_request(body)
    wire = ANTHROPIC.write_request(ir, "claude")
    openai_to_anthropic = _best_us(lambda: ANTHROPIC.write_request(OPENAI.read_request(body), "claude"), 150)
    anthropic_to_openai = _best_us(lambda: OPENAI.write_request(ANTHROPIC.read_request(wire), "gpt"), 150)
    assert openai_to_anthropic < 150, f"openai -> anthropic took {openai_to_anthropic:.1f} us"
    assert anthropic_to_openai < 150, f"anthropic -> openai took {anthropic_to_openai:.1f} us"
