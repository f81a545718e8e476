"""Cross-protocol hops through the IR with Bedrock Converse: round trips with OpenAI and Anthropic, and cost."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from busbar.ir.model import IrRequest
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.bedrock import DIALECT as BEDROCK
from busbar.proto.gemini import DIALECT as GEMINI
from busbar.proto.openai import DIALECT as OPENAI


def test_openai_to_bedrock_to_openai_keeps_the_conversation() -> None:
    body = {
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
        "max_tokens": 300,
        "temperature": 0.4,
        "top_p": 0.9,
        "stop": ["###"],
    }
    wire = BEDROCK.write_request(OPENAI.read_request(body), "us.amazon.nova-pro-v1:0")
    back = OPENAI.write_request(BEDROCK.read_request(json.loads(json.dumps(wire))), "gpt")
    assert back["messages"] == body["messages"]
    assert back["tools"] == body["tools"] and back["tool_choice"] == "required"
    for k in ("max_tokens", "temperature", "top_p", "stop"):
        assert back[k] == body[k]


def test_anthropic_to_bedrock_to_anthropic_keeps_thinking_cache_and_tools() -> None:
    body = {
        "model": "c",
        "max_tokens": 4000,
        "system": [{"type": "text", "text": "Long system.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "", "signature": "SIG1"},
                    {"type": "redacted_thinking", "data": "RED"},
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done", "is_error": True}
                ],
            },
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {}}}],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
    }
    wire = BEDROCK.write_request(ANTHROPIC.read_request(body), "anthropic.claude", prompt_caching=True)
    assert wire["messages"][1]["content"][0] == {
        "reasoningContent": {"reasoningText": {"text": "", "signature": "SIG1"}}
    }
    assert wire["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    back = ANTHROPIC.write_request(BEDROCK.read_request(json.loads(json.dumps(wire))), "claude")
    assert back["messages"] == body["messages"]
    assert back["system"] == body["system"] and back["thinking"] == body["thinking"]
    assert back["tools"] == body["tools"]


def test_gemini_client_to_bedrock_member() -> None:
    gem = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "hi"},
                    {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0x"}},
                ],
            }
        ],
        "generationConfig": {"maxOutputTokens": 9, "stopSequences": ["x"]},
    }
    ir = GEMINI.read_request(gem)
    ir.extra.clear()  # the proxy's leak guard before a foreign writer
    assert BEDROCK.write_request(ir, "m") == {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"text": "hi"},
                    {"document": {"format": "pdf", "name": "document-1", "source": {"bytes": "JVBERi0x"}}},
                ],
            }
        ],
        "inferenceConfig": {"maxTokens": 9, "stopSequences": ["x"]},
    }


def test_bedrock_client_to_gemini_member_and_back() -> None:
    conv = {
        "messages": [
            {"role": "user", "content": [{"text": "hi"}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "f", "input": {"a": 1}}}],
            },
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "tooluse_1", "content": [{"json": {"r": 2}}]}}],
            },
        ],
        "toolConfig": {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}]},
        "inferenceConfig": {"maxTokens": 50},
    }
    wire = GEMINI.write_request(BEDROCK.read_request(conv), "gemini-2.5-flash")
    assert wire["contents"][2]["parts"] == [
        {"functionResponse": {"name": "f", "id": "tooluse_1", "response": {"r": 2}}}
    ]
    resp = GEMINI.read_response(
        {
            "candidates": [
                {"content": {"parts": [{"text": "ok"}], "role": "model"}, "finishReason": "MAX_TOKENS"}
            ]
        }
    )
    out = BEDROCK.write_response(resp, "m", IrRequest())
    assert out["stopReason"] == "max_tokens" and out["output"]["message"]["content"] == [{"text": "ok"}]


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
    """Best per-call CPU time over rounds of ``n`` calls (``process_time``: other processes on a shared
    machine do not count), sampling up to ``budget_s`` while above ``bound_us``."""
    best = float("inf")
    deadline = time.perf_counter() + budget_s
    rounds = 0
    while rounds < 5 or (best >= bound_us and time.perf_counter() < deadline):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - t0) / n * 1e6)
        rounds += 1
    return best


def test_a_20_message_conversation_with_tools_translates_under_150us_per_direction() -> None:
    body = _conversation()
    wire = BEDROCK.write_request(OPENAI.read_request(body), "us.amazon.nova-pro-v1:0")
    assert len(wire["messages"]) == 19
    to_bedrock = _best_us(lambda: BEDROCK.write_request(OPENAI.read_request(body), "m"), 150)
    to_openai = _best_us(lambda: OPENAI.write_request(BEDROCK.read_request(wire), "gpt"), 150)
    assert to_bedrock < 150, f"openai -> bedrock took {to_bedrock:.1f} us"
    assert to_openai < 150, f"bedrock -> openai took {to_openai:.1f} us"
