"""Cohere v2 Chat requests: client body -> IR (read_request) and IR -> provider body (write_request)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from busbar.ir.model import (
    DocumentBlock,
    ImageBlock,
    IrMessage,
    IrRequest,
    IrTool,
    ReasoningAsk,
    TextBlock,
    ThinkingBlock,
    ToolChoice,
    ToolResultBlock,
    ToolUseBlock,
)
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.cohere import DIALECT
from busbar.proto.errors import BadRequest
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


def load(name: str) -> Any:
    return json.loads((FIXTURES / "cohere" / name).read_text())


LOCATION = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"}
    },
    "required": ["location"],
}


# ---------------------------------------------------------------- read_request: fixtures


@pytest.mark.parametrize("name,stream", [("chat-text", False), ("chat-stream", True)])
def test_fixture_chat_text_and_stream(name: str, stream: bool) -> None:
    ir = DIALECT.read_request(load(f"{name}.request.json"))
    assert ir.model == "command"
    assert ir.messages == [IrMessage("user", [TextBlock("Tell me a joke, pirate style")])]
    assert ir.stream is stream and ir.extra == {} and ir.tools == []


def test_fixture_tool_call_request() -> None:
    ir = DIALECT.read_request(load("tool-call.request.json"))
    assert ir.model == "command-r"
    assert ir.tools == [
        IrTool("get_weather", "Get the current weather in a given location", LOCATION),
        IrTool("get_time", "Get the current time in a given location", LOCATION),
    ]
    assert ir.tool_choice is None


def test_fixture_tool_result_followup() -> None:
    ir = DIALECT.read_request(load("tool-result-followup.request.json"))
    t, w = "get_time_dp3men9jrvhf", "get_weather_d7arjgsc96yf"
    assert ir.messages == [
        IrMessage("user", [TextBlock("What is the weather and current time in Tokyo?")]),
        IrMessage(
            "assistant",
            [
                ToolUseBlock(t, "get_time", {"location": "Tokyo"}),
                ToolUseBlock(w, "get_weather", {"location": "Tokyo"}),
            ],
        ),
        IrMessage(
            "user",
            [
                ToolResultBlock(t, [TextBlock("4:20 PM")], name="get_time"),
                ToolResultBlock(w, [TextBlock("Sunny 20 degrees Celsius")], name="get_weather"),
            ],
        ),
    ]


def test_fixture_thinking_history() -> None:
    src = load("thinking.request.json")
    ir = DIALECT.read_request(src)
    content = src["messages"][1]["content"]
    assert ir.messages[1] == IrMessage(
        "assistant", [ThinkingBlock(content[0]["thinking"]), TextBlock(content[1]["text"])]
    )
    assert ir.messages[2] == IrMessage("user", [TextBlock(src["messages"][2]["content"])])


# ---------------------------------------------------------------- read_request: shapes


def test_full_request_shapes() -> None:
    body = {
        "model": "command-a",
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,aW1n", "detail": "low"},
                    },
                    {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
                ],
            },
            {
                "role": "assistant",
                "tool_plan": "I will look it up.",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": [
                    {"type": "text", "text": "r1"},
                    {"type": "document", "document": {"data": {"title": "t", "n": 1}, "id": "d1"}},
                ],
            },
        ],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": "REQUIRED",
        "max_tokens": 100,
        "temperature": 0.3,
        "p": 0.8,
        "k": 40,
        "stop_sequences": ["END"],
        "seed": 7,
        "frequency_penalty": 0.1,
        "presence_penalty": 0.2,
        "thinking": {"type": "enabled", "token_budget": 2048},
        "response_format": {"type": "json_object", "json_schema": {"type": "object"}},
        "documents": [{"id": "d", "data": {"text": "x"}}],
        "citation_options": {"mode": "FAST"},
        "safety_mode": "STRICT",
        "stream": True,
    }
    ir = DIALECT.read_request(body)
    assert ir.system == [TextBlock("Be brief.")]
    assert ir.messages == [
        IrMessage(
            "user",
            [
                TextBlock("look"),
                ImageBlock("base64", media_type="image/png", data="aW1n", detail="low"),
                ImageBlock("url", url="https://x.test/a.png"),
            ],
        ),
        IrMessage("assistant", [TextBlock("I will look it up."), ToolUseBlock("c1", "f", {"a": 1})]),
        IrMessage(
            "user", [ToolResultBlock("c1", [TextBlock("r1"), TextBlock('{"title":"t","n":1}')], name="f")]
        ),
    ]
    assert ir.tools == [IrTool("f", None, {"type": "object"})]
    assert ir.tool_choice == ToolChoice("required")
    assert (ir.max_tokens, ir.temperature, ir.top_p, ir.top_k) == (100, 0.3, 0.8, 40)
    assert (ir.stop, ir.seed, ir.frequency_penalty, ir.presence_penalty) == (["END"], 7, 0.1, 0.2)
    assert ir.reasoning == ReasoningAsk(budget_tokens=2048)
    assert ir.response_format == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": {"type": "object"}},
    }
    assert ir.extra == {
        "documents": [{"id": "d", "data": {"text": "x"}}],
        "citation_options": {"mode": "FAST"},
        "safety_mode": "STRICT",
    }
    assert ir.stream is True


@pytest.mark.parametrize(
    "thinking,reasoning,extra",
    [
        ({"type": "disabled"}, None, {}),
        ({"type": "enabled"}, None, {"thinking": {"type": "enabled"}}),
        ({"type": "enabled", "token_budget": 500}, ReasoningAsk(budget_tokens=500), {}),
    ],
)
def test_thinking_shapes(thinking: dict[str, Any], reasoning: object, extra: dict[str, Any]) -> None:
    ir = DIALECT.read_request({"model": "m", "messages": [], "thinking": thinking})
    assert ir.reasoning == reasoning and ir.extra == extra


@pytest.mark.parametrize(
    "body,message",
    [
        ([], "request body must be a JSON object"),
        ({"model": "m"}, "messages: required, must be a list of message objects"),
        ({"messages": [1]}, "messages[0]: must be an object"),
        (
            {"messages": [{"role": "developer", "content": "x"}]},
            "messages[0].role: 'developer' is not one of system, user, assistant, tool",
        ),
        (
            {"messages": [{"role": "tool", "content": "x"}]},
            "messages[0].tool_call_id: required for role 'tool'",
        ),
        (
            {"messages": [{"role": "user", "content": 3}]},
            "messages[0].content: must be a string or a list of content parts",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "document"}]}]},
            "messages[0].content[0].type: 'document' is not supported (text, image_url)",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages[0].content[0].image_url.url: required",
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}]},
            "messages[0].tool_calls[0].function.name: required",
        ),
        (
            {"messages": [], "tools": [{"type": "web"}]},
            "tools[0].type: 'web' is not supported (function tools only)",
        ),
        ({"messages": [], "tool_choice": "AUTO"}, "tool_choice: must be 'REQUIRED' or 'NONE'"),
        (
            {"messages": [], "response_format": {"type": "xml"}},
            "response_format.type: 'xml' is not supported (text, json_object)",
        ),
    ],
)
def test_malformed_bodies_are_400_naming_the_key_path(body: Any, message: str) -> None:
    with pytest.raises(BadRequest) as e:
        DIALECT.read_request(body)
    assert e.value.message == message


# ---------------------------------------------------------------- write_request


def test_c011_no_tools_key_from_an_anthropic_body() -> None:
    src = {"model": "m", "max_tokens": 32, "messages": [{"role": "user", "content": "say ok"}]}
    body = DIALECT.write_request(ANTHROPIC.read_request(src), "command-r")
    assert body == {
        "model": "command-r",
        "messages": [{"role": "user", "content": "say ok"}],
        "max_tokens": 32,
        "stream": False,
    }


def test_write_full_request() -> None:
    ir = IrRequest(
        system=[TextBlock("Be brief."), TextBlock("Metric.")],
        messages=[
            IrMessage(
                "user",
                [
                    TextBlock("look"),
                    ImageBlock("base64", media_type="image/png", data="aW1n", detail="high"),
                    DocumentBlock("text/plain", data="aGVsbG8="),
                ],
            ),
            IrMessage(
                "assistant",
                [
                    ThinkingBlock("hm", "sig"),
                    ThinkingBlock(redacted=True, data="x"),
                    TextBlock("Checking."),
                    ToolUseBlock("c1", "f", {"a": 1}),
                ],
            ),
            IrMessage("user", [ToolResultBlock("c1", [TextBlock("r")], is_error=True), TextBlock("and?")]),
            IrMessage("assistant", [TextBlock("done")]),
        ],
        tools=[IrTool("f", "does f", {"type": "object"}), IrTool("g")],
        tool_choice=ToolChoice("tool", "f"),
        parallel_tool_calls=False,
        max_tokens=100,
        temperature=0.2,
        top_p=0.9,
        top_k=5,
        stop=["END"],
        seed=3,
        frequency_penalty=0.1,
        presence_penalty=0.2,
        reasoning=ReasoningAsk(effort="low"),
        response_format={"type": "json_schema", "json_schema": {"name": "o", "schema": {"type": "object"}}},
        user="u",
        stream=True,
    )
    body = DIALECT.write_request(ir, "command-a")
    assert body == {
        "model": "command-a",
        "messages": [
            {"role": "system", "content": "Be brief.\n\nMetric."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,aW1n", "detail": "high"},
                    },
                    {"type": "text", "text": "hello"},
                ],
            },
            {
                "role": "assistant",
                "tool_plan": "Checking.",
                "content": [{"type": "thinking", "thinking": "hm"}],
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
            {"role": "user", "content": "and?"},
            {"role": "assistant", "content": "done"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "description": "does f", "parameters": {"type": "object"}},
            }
        ],
        "tool_choice": "REQUIRED",
        "max_tokens": 100,
        "temperature": 0.2,
        "p": 0.9,
        "k": 5,
        "stop_sequences": ["END"],
        "seed": 3,
        "frequency_penalty": 0.1,
        "presence_penalty": 0.2,
        "thinking": {"type": "enabled", "token_budget": 4096},
        "response_format": {"type": "json_object", "json_schema": {"type": "object"}},
        "stream": True,
    }
    assert ir.dropped == ["thinking (redacted)", "tool_result.is_error", "parallel_tool_calls", "user"]


@pytest.mark.parametrize(
    "ask,expected",
    [
        (ReasoningAsk(budget_tokens=3000), {"type": "enabled", "token_budget": 3000}),
        (ReasoningAsk(budget_tokens=-1), {"type": "enabled"}),
        (ReasoningAsk(budget_tokens=0), {"type": "disabled"}),
        (ReasoningAsk(effort="high"), {"type": "enabled", "token_budget": 16384}),
        (ReasoningAsk(effort="none"), {"type": "disabled"}),
        (ReasoningAsk(include_thoughts=True), None),
    ],
)
def test_reasoning_to_thinking(ask: ReasoningAsk, expected: object) -> None:
    assert DIALECT.write_request(IrRequest(reasoning=ask), "m").get("thinking") == expected


@pytest.mark.parametrize(
    "choice,expected",
    [(ToolChoice("auto"), None), (ToolChoice("none"), "NONE"), (ToolChoice("required"), "REQUIRED")],
)
def test_tool_choice(choice: ToolChoice, expected: object) -> None:
    body = DIALECT.write_request(IrRequest(tools=[IrTool("f")], tool_choice=choice), "m")
    assert body.get("tool_choice") == expected
    assert "tool_choice" not in DIALECT.write_request(IrRequest(tool_choice=choice), "m")


def test_pdf_document_is_refused() -> None:
    ir = IrRequest(messages=[IrMessage("user", [DocumentBlock("application/pdf", data="UERG")])])
    with pytest.raises(BadRequest, match=r"application/pdf part cannot be sent to a Cohere upstream"):
        DIALECT.write_request(ir, "m")


@pytest.mark.parametrize(
    "name", ["chat-text", "chat-stream", "tool-call", "tool-result-followup", "thinking"]
)
def test_fixture_requests_round_trip_through_the_ir(name: str) -> None:
    src = load(f"{name}.request.json")
    body = DIALECT.write_request(DIALECT.read_request(copy.deepcopy(src)), src["model"])
    for m in src["messages"]:
        if m.get("content", 0) is None:
            del m["content"]
    assert body == src


def test_c048_client_ids_and_names_reach_the_ir_verbatim_and_paired() -> None:
    cid = "call_Q1w2E3|fc_" + "ab" * 38
    body = {
        "messages": [
            {"role": "user", "content": "read it"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": "mcp.files/read", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": cid, "content": "ok"},
        ],
        "tools": [
            {"type": "function", "function": {"name": "mcp.files/read", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "mcp_files_read", "parameters": {"type": "object"}}},
        ],
    }
    ir = DIALECT.read_request(body)
    assert ir.messages[1].content == [ToolUseBlock(cid, "mcp.files/read", {})]
    assert ir.messages[2].content == [ToolResultBlock(cid, [TextBlock("ok")], name="mcp.files/read")]
    wire = DIALECT.write_request(ir, "command-r")  # an id that is not aliased elsewhere is sent byte for byte
    assert wire["messages"][1]["tool_calls"][0]["id"] == wire["messages"][2]["tool_call_id"] == cid
