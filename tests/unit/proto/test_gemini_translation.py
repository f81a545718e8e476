"""Cross-protocol hops through the IR with Gemini: C037 thought signatures across clients, round trips, cost."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from busbar.ir.model import IrMessage, IrRequest, TextBlock, ToolResultBlock, ToolUseBlock
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.gemini import DIALECT as GEMINI
from busbar.proto.gemini import request_writer as gemini_writer
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.sse import SseParser

TURN1_PARTS = [
    {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}, "thoughtSignature": "U0lHX0E="},
    {"functionCall": {"name": "get_time", "args": {"tz": "CET"}}},
]
TURN1 = {
    "candidates": [{"content": {"parts": TURN1_PARTS, "role": "model"}, "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 10, "totalTokenCount": 30},
    "modelVersion": "gemini-3-pro-preview",
    "responseId": "r1",
}
OA_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
        },
    },
]
AN_TOOLS = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in OA_TOOLS]


def expect_turn2(body: dict[str, Any]) -> None:
    """C037's right answer: the model turn is exactly turn 1's parts, then one user turn of two responses."""
    assert body["contents"][1] == {"role": "model", "parts": TURN1_PARTS}
    responses = body["contents"][2]
    assert responses["role"] == "user"
    assert [p["functionResponse"]["name"] for p in responses["parts"]] == ["get_weather", "get_time"]
    assert [p["functionResponse"]["response"] for p in responses["parts"]] == [
        {"output": "12 degrees"},
        {"output": "13:00"},
    ]
    assert all("id" not in p["functionResponse"] for p in responses["parts"])  # minted ids never reach Gemini
    assert "__thought__" not in json.dumps(body)


def openai_turn2(tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "pool",
        "tools": OA_TOOLS,
        "messages": [
            {"role": "user", "content": "weather and time in Oslo?"},
            {"role": "assistant", "content": None, "tool_calls": tool_calls},
            {"role": "tool", "tool_call_id": tool_calls[0]["id"], "content": "12 degrees"},
            {"role": "tool", "tool_call_id": tool_calls[1]["id"], "content": "13:00"},
        ],
    }


def test_c037_openai_client_non_stream() -> None:
    msg = OPENAI.write_response(GEMINI.read_response(TURN1), "pool", IrRequest())["choices"][0]["message"]
    # what openai-python keeps (id, type, function) goes back verbatim, through JSON, to any replica
    calls = json.loads(json.dumps([{k: c[k] for k in ("id", "type", "function")} for c in msg["tool_calls"]]))
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_time"]
    expect_turn2(GEMINI.write_request(OPENAI.read_request(openai_turn2(calls)), "gemini-3-pro-preview"))


def test_c037_openai_client_stream() -> None:
    raw = b"data: " + json.dumps(TURN1).encode() + b"\r\n\r\n"
    dec = GEMINI.stream_decoder()
    enc = OPENAI.stream_encoder("pool", IrRequest(stream=True))
    out = b"".join(enc.encode(e) for e in dec.feed(raw[:37]) + dec.feed(raw[37:]) + dec.close())
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    for _e, data in SseParser().feed(out):
        if data == "[DONE]":
            continue
        ch = json.loads(data)["choices"][0]
        finish = ch["finish_reason"] or finish
        for tc in ch["delta"].get("tool_calls") or ():
            acc = calls.setdefault(
                tc["index"],
                {"id": tc.get("id"), "type": "function", "function": {"name": "", "arguments": ""}},
            )
            acc["function"]["name"] += tc.get("function", {}).get("name") or ""
            acc["function"]["arguments"] += tc.get("function", {}).get("arguments") or ""
    assert finish == "tool_calls" and sorted(calls) == [0, 1]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Oslo"}
    expect_turn2(
        GEMINI.write_request(OPENAI.read_request(openai_turn2([calls[0], calls[1]])), "gemini-3-pro-preview")
    )


@pytest.mark.parametrize("stream", [False, True])
def test_c037_anthropic_client(stream: bool) -> None:
    if stream:
        dec = GEMINI.stream_decoder()
        enc = ANTHROPIC.stream_encoder("pool", IrRequest(stream=True))
        out = b"".join(
            enc.encode(e)
            for e in dec.feed(b"data: " + json.dumps(TURN1).encode() + b"\r\n\r\n") + dec.close()
        )
        blocks = [
            json.loads(d)["content_block"] for e, d in SseParser().feed(out) if e == "content_block_start"
        ]
        for b in blocks:
            b["input"] = {"city": "Oslo"} if b["name"] == "get_weather" else {"tz": "CET"}
    else:
        blocks = ANTHROPIC.write_response(GEMINI.read_response(TURN1), "pool", IrRequest())["content"]
    ids = [b["id"] for b in blocks]
    assert all(re.fullmatch(r"^[a-zA-Z0-9_-]+$", i) for i in ids)
    body = {
        "model": "pool",
        "max_tokens": 100,
        "tools": AN_TOOLS,
        "messages": [
            {"role": "user", "content": "weather and time in Oslo?"},
            {"role": "assistant", "content": blocks},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": ids[0], "content": "12 degrees"},
                    {"type": "tool_result", "tool_use_id": ids[1], "content": "13:00"},
                ],
            },
        ],
    }
    expect_turn2(
        GEMINI.write_request(ANTHROPIC.read_request(json.loads(json.dumps(body))), "gemini-3-pro-preview")
    )


def test_c037_unsigned_history_gets_no_signature_unless_the_lane_opts_in() -> None:
    ir = IrRequest(
        messages=[
            IrMessage("user", [TextBlock("q")]),
            IrMessage("assistant", [ToolUseBlock("toolu_1", "f", {}), ToolUseBlock("toolu_2", "g", {})]),
            IrMessage(
                "user",
                [
                    ToolResultBlock("toolu_1", [TextBlock("a")], name="f"),
                    ToolResultBlock("toolu_2", [TextBlock("b")], name="g"),
                ],
            ),
        ]
    )
    parts = GEMINI.write_request(ir, "m")["contents"][1]["parts"]
    assert all("thoughtSignature" not in p for p in parts)
    parts = gemini_writer.write_request(ir, "m", thought_signature_placeholder=True)["contents"][1]["parts"]
    assert [p.get("thoughtSignature") for p in parts] == ["skip_thought_signature_validator", None]


# ---------------------------------------------------------------- round trips


def test_openai_to_gemini_to_openai_keeps_the_conversation() -> None:
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
        "seed": 5,
    }
    wire = GEMINI.write_request(OPENAI.read_request(body), "gemini-2.5-flash")
    back = OPENAI.write_request(GEMINI.read_request(json.loads(json.dumps(wire))), "gpt")
    assert back["messages"] == [
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
    ]
    assert back["tools"] == body["tools"] and back["tool_choice"] == "required"
    for k in ("max_tokens", "temperature", "top_p", "stop", "seed"):
        assert back[k] == body[k]


def test_anthropic_to_gemini_to_anthropic_keeps_the_conversation() -> None:
    body: dict[str, Any] = {
        "model": "c",
        "max_tokens": 200,
        "system": "Be brief.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "read it"},
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "x"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"hits":2}'}],
            },
        ],
        "tools": [
            {"name": "search", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
        ],
        "top_k": 5,
        "stop_sequences": ["END"],
    }
    wire = GEMINI.write_request(ANTHROPIC.read_request(body), "gemini-2.5-flash")
    assert wire["contents"][2]["parts"] == [
        {"functionResponse": {"name": "search", "id": "toolu_1", "response": {"hits": 2}}}
    ]
    back = ANTHROPIC.write_request(GEMINI.read_request(json.loads(json.dumps(wire))), "claude")
    assert back["messages"] == body["messages"][:2] + [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"hits":2}'}],
        }
    ]
    assert back["system"] == "Be brief." and back["top_k"] == 5 and back["stop_sequences"] == ["END"]


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
    wire = GEMINI.write_request(OPENAI.read_request(body), "gemini-2.5-flash")
    assert len(wire["contents"]) == 19
    to_gemini = _best_us(lambda: GEMINI.write_request(OPENAI.read_request(body), "gemini-2.5-flash"), 150)
    to_openai = _best_us(lambda: OPENAI.write_request(GEMINI.read_request(wire), "gpt"), 150)
    assert to_gemini < 150, f"openai -> gemini took {to_gemini:.1f} us"
    assert to_openai < 150, f"gemini -> openai took {to_openai:.1f} us"
