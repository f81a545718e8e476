"""Anthropic Messages requests: client body -> IR (reader) and IR -> provider body (writer)."""

from __future__ import annotations

import copy
import json

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
from busbar.proto.anthropic import DIALECT
from busbar.proto.errors import BadRequest
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.openai.parts import RawArguments
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES / "anthropic"


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def user(text: str = "x") -> IrMessage:
    return IrMessage("user", [TextBlock(text)])


# ---------------------------------------------------------------- reader: fixtures


def test_fixture_text_basic() -> None:
    ir = DIALECT.read_request(load("text-basic.request.json"))
    assert ir.model == "claude-3-opus-20240229"
    assert ir.max_tokens == 1024
    assert ir.messages == [user("Tell me a joke about OpenTelemetry")]
    assert ir.system == [] and ir.stream is False and ir.extra == {}


def test_fixture_image_base64_stream() -> None:
    src = load("image-base64-stream.request.json")
    ir = DIALECT.read_request(src)
    assert ir.stream is True and ir.temperature == 1.0 and ir.max_tokens == 8192
    img, text = ir.messages[0].content
    assert img == ImageBlock(
        "base64", media_type="image/png", data=src["messages"][0]["content"][0]["source"]["data"]
    )
    assert text == TextBlock("Describe image in three words")


def test_fixture_prompt_cache_write_keeps_cache_markers() -> None:
    src = load("prompt-cache-write.request.json")
    ir = DIALECT.read_request(src)
    assert ir.system == [TextBlock(src["system"][0]["text"])]
    blocks = ir.messages[0].content
    assert [b.cache_control for b in blocks] == [
        b.get("cache_control") for b in src["messages"][0]["content"]
    ]
    assert blocks[0].cache_control == {"type": "ephemeral"}
    out = DIALECT.write_request(ir, src["model"])
    assert out["messages"] == src["messages"]
    assert out["system"] == src["system"][0]["text"]  # a lone plain block is written in string form


def test_fixture_thinking_stream() -> None:
    ir = DIALECT.read_request(load("thinking-stream.request.json"))
    assert ir.reasoning == ReasoningAsk(budget_tokens=1024)
    assert ir.max_tokens == 4096 and ir.stream is True


def test_fixture_thinking_tool_result_followup() -> None:
    src = load("thinking-tool-result-followup.request.json")
    ir = DIALECT.read_request(src)
    assert ir.reasoning == ReasoningAsk(budget_tokens=3000)
    assert ir.tool_choice == ToolChoice("auto")
    assert ir.tools == [
        IrTool("get_user_country", "", {"additionalProperties": False, "properties": {}, "type": "object"})
    ]
    thinking, text, call = ir.messages[1].content
    src_thinking = src["messages"][1]["content"][0]
    assert thinking == ThinkingBlock(src_thinking["thinking"], src_thinking["signature"])
    assert text == TextBlock(src["messages"][1]["content"][1]["text"])
    assert call == ToolUseBlock("toolu_01YGzqpRE16Vricda3Aqcejo", "get_user_country", {})
    assert ir.messages[2].content == [
        ToolResultBlock("toolu_01YGzqpRE16Vricda3Aqcejo", [TextBlock("Mexico")], name="get_user_country")
    ]


def test_fixture_tool_use_stream_tools() -> None:
    src = load("tool-use-stream.request.json")
    ir = DIALECT.read_request(src)
    assert [t.name for t in ir.tools] == ["get_weather", "get_time"]
    assert ir.tools[0].input_schema == src["tools"][0]["input_schema"]
    assert ir.tools[1].description == "Get the current time in a given time zone"


@pytest.mark.parametrize(
    "name",
    [
        "text-basic",
        "image-base64-stream",
        "prompt-cache-write",
        "thinking-stream",
        "thinking-tool-result-followup",
        "tool-use-stream",
    ],
)
def test_fixture_requests_round_trip_through_the_ir(name: str) -> None:
    src = load(f"{name}.request.json")
    out = DIALECT.write_request(DIALECT.read_request(copy.deepcopy(src)), src["model"])
    if name == "thinking-tool-result-followup":  # normalized: is_error false is the default
        del src["messages"][2]["content"][0]["is_error"]
    if src.get("stream") is False:
        del src["stream"]
    for m in [*src["messages"], src]:  # a single plain text block is written in string form
        key = "content" if "role" in m else "system"
        c = m.get(key)
        if isinstance(c, list) and len(c) == 1 and c[0]["type"] == "text" and "cache_control" not in c[0]:
            m[key] = c[0]["text"]
    assert out == src


# ---------------------------------------------------------------- reader: fields


def test_fields_tool_choice_metadata_and_extra() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "system": "be brief",
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "hi"},
                        "title": "t",
                    },
                    {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}},
                    {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
                    {"type": "redacted_thinking", "data": "opaque"},
                ],
            }
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "top_k": 3,
        "top_p": 0.5,
        "stop_sequences": ["###"],
        "metadata": {"user_id": "u-9"},
        "service_tier": "auto",
        "thinking": {"type": "disabled"},
    }
    ir = DIALECT.read_request(body)
    assert ir.system == [TextBlock("be brief")]
    assert ir.messages[0].content == [
        DocumentBlock("text/plain", data="aGk=", name="t"),
        DocumentBlock("application/pdf", url="https://x.test/a.pdf"),
        ImageBlock("url", url="https://x.test/a.png"),
        ThinkingBlock(redacted=True, data="opaque"),
    ]
    assert ir.tools == [IrTool("f", None, {"type": "object"}, {"type": "ephemeral"})]
    assert ir.tool_choice == ToolChoice("required") and ir.parallel_tool_calls is False
    assert (ir.top_k, ir.top_p, ir.stop, ir.user) == (3, 0.5, ["###"], "u-9")
    assert ir.reasoning is None
    assert ir.extra == {"service_tier": "auto"}


@pytest.mark.parametrize(
    "body,message",
    [
        ("x", "request body must be a JSON object"),
        ({"max_tokens": 1}, "messages: required, must be a list of message objects"),
        (
            {"messages": [{"role": "system", "content": "x"}]},
            "messages.0.role: 'system' is not one of user, assistant",
        ),
        (
            {"messages": [{"role": "user", "content": 5}]},
            "messages.0.content: must be a string or a list of content blocks",
        ),
        (
            {"messages": [{"role": "user", "content": [{"text": "no type"}]}]},
            "messages.0.content.0: must be a content block object with a 'type'",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "a"}, {"type": "container_upload"}],
                    }
                ]
            },
            "messages.0.content.1.type: 'container_upload' is not supported "
            "(text, image, document, tool_use, tool_result, thinking, redacted_thinking)",
        ),
        (
            {"messages": [], "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
            "tools.0.type: 'web_search_20250305' is not supported (client tools only)",
        ),
        (
            {"messages": [], "tool_choice": {"type": "sometimes"}},
            "tool_choice.type: must be one of auto, any, tool, none",
        ),
    ],
)
def test_malformed_bodies_raise_bad_request(body: object, message: str) -> None:
    with pytest.raises(BadRequest) as e:
        DIALECT.read_request(body)  # type: ignore[arg-type]
    assert e.value.message == message


# ---------------------------------------------------------------- writer


def test_c010_c002_anthropic_client_to_openai_upstream_stop_and_usage() -> None:
    ir = DIALECT.read_request(
        {
            "model": "m",
            "max_tokens": 32,
            "stream": True,
            "stop_sequences": ["###"],
            "messages": [{"role": "user", "content": "count"}],
        }
    )
    body = OPENAI.write_request(ir, "gpt")
    assert body["stop"] == ["###"]
    assert body["stream_options"] == {"include_usage": True}


def test_c011_anthropic_body_to_openai_has_no_tools_key() -> None:
    ir = DIALECT.read_request(
        {"model": "m", "max_tokens": 32, "messages": [{"role": "user", "content": "say ok"}]}
    )
    assert OPENAI.write_request(ir, "vllm-model") == {
        "model": "vllm-model",
        "messages": [{"role": "user", "content": "say ok"}],
        "max_tokens": 32,
    }


def test_c011_writer_never_emits_empty_collections() -> None:
    ir = IrRequest(messages=[user("hi")], tool_choice=ToolChoice("auto"))
    assert DIALECT.write_request(ir, "claude") == {
        "model": "claude",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "hi"}],
    }


@pytest.mark.parametrize(
    "client_body,expected",
    [
        ({"messages": [{"role": "user", "content": "essay"}]}, 8192),
        ({"messages": [{"role": "user", "content": "essay"}], "max_tokens": 100}, 100),
        ({"messages": [{"role": "user", "content": "essay"}], "max_completion_tokens": 100}, 100),
    ],
)
def test_c017_lane_default_max_tokens(client_body: dict, expected: int) -> None:
    ir = OPENAI.read_request(client_body)
    if ir.max_tokens is None:  # what the proxy does for a target that requires max_tokens
        ir.max_tokens = 8192
    assert DIALECT.write_request(ir, "claude")["max_tokens"] == expected


def test_c017_writer_fallback_is_4096_never_256() -> None:
    assert DIALECT.write_request(IrRequest(messages=[user()]), "c")["max_tokens"] == 4096


def test_c015_images_to_anthropic() -> None:
    ir = OPENAI.read_request(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what is this"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,aW1n"}},
                        {"type": "image_url", "image_url": {"url": "https://example.test/a.png"}},
                    ],
                }
            ]
        }
    )
    assert DIALECT.write_request(ir, "c")["messages"][0]["content"] == [
        {"type": "text", "text": "what is this"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aW1n"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.test/a.png"}},
    ]


def test_c040_pdf_to_anthropic_and_audio_refused() -> None:
    ir = OPENAI.read_request(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "total?"},
                        {
                            "type": "file",
                            "file": {
                                "filename": "invoice.pdf",
                                "file_data": "data:application/pdf;base64,JVBERi0x",
                            },
                        },
                    ],
                }
            ]
        }
    )
    assert DIALECT.write_request(ir, "c")["messages"][0]["content"][1] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
    }
    ir = OPENAI.read_request(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
                    ],
                }
            ]
        }
    )
    with pytest.raises(BadRequest) as e:
        DIALECT.write_request(ir, "c")
    assert e.value.message == (
        "audio/wav part cannot be sent to an Anthropic upstream (it takes PDF and plain-text documents only)"
    )


def test_c006_signed_empty_thinking_and_redacted_kept_unchanged() -> None:
    history = [
        {"type": "thinking", "thinking": "", "signature": "SIG1"},
        {"type": "redacted_thinking", "data": "R1"},
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
    ]
    body = {
        "model": "m",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": copy.deepcopy(history)},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        ],
    }
    out = DIALECT.write_request(DIALECT.read_request(body), "claude")
    assert out["messages"][1]["content"] == history
    assert out["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]


def test_unsigned_thinking_and_empty_text_are_not_sent() -> None:
    ir = IrRequest(
        messages=[
            user(),
            IrMessage("assistant", [ThinkingBlock("from gemini"), TextBlock(""), TextBlock("answer")]),
        ]
    )
    assert DIALECT.write_request(ir, "c")["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "answer"}],
    }
    assert ir.dropped == ["thinking (unsigned)"]


@pytest.mark.parametrize(
    "ask,max_tokens,budget",
    [
        (ReasoningAsk(effort="high"), 32000, 16384),
        (ReasoningAsk(effort="minimal"), 32000, 1024),
        (ReasoningAsk(effort="low"), 32000, 4096),
        (ReasoningAsk(effort="medium"), 32000, 8192),
        (ReasoningAsk(effort="high"), 10000, 8976),  # clamped: leaves 1024 answer tokens
        (ReasoningAsk(budget_tokens=6000), 32000, 6000),  # number to number is a copy
        (ReasoningAsk(budget_tokens=500), 32000, 1024),  # raised to the API minimum
        (ReasoningAsk(budget_tokens=-1), 32000, 8192),  # Gemini dynamic -> medium
    ],
)
def test_reasoning_ask_to_thinking_budget(ask: ReasoningAsk, max_tokens: int, budget: int) -> None:
    ir = IrRequest(
        messages=[user()], reasoning=ask, max_tokens=max_tokens, temperature=0.3, top_k=4, top_p=0.99
    )
    body = DIALECT.write_request(ir, "c")
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert "temperature" not in body and "top_k" not in body
    assert body["top_p"] == 0.99
    assert ir.dropped == ["temperature", "top_k"]


@pytest.mark.parametrize(
    "ask,max_tokens",
    [
        (ReasoningAsk(effort="high"), 2047),
        (ReasoningAsk(effort="none"), 32000),
        (ReasoningAsk(budget_tokens=0), 32000),
    ],
)
def test_reasoning_dropped_when_nothing_fits(ask: ReasoningAsk, max_tokens: int) -> None:
    ir = IrRequest(messages=[user()], reasoning=ask, max_tokens=max_tokens, temperature=0.3)
    body = DIALECT.write_request(ir, "c")
    assert "thinking" not in body and body["temperature"] == 0.3
    assert ir.dropped == ["reasoning"]


def test_thinking_dropped_when_tool_choice_forces_a_tool() -> None:
    ir = IrRequest(
        messages=[user()],
        tools=[IrTool("f")],
        tool_choice=ToolChoice("tool", "f"),
        reasoning=ReasoningAsk(effort="low"),
        max_tokens=9000,
    )
    body = DIALECT.write_request(ir, "c")
    assert "thinking" not in body and body["tool_choice"] == {"type": "tool", "name": "f"}


def test_tools_tool_choice_parallel_metadata_stream() -> None:
    ir = IrRequest(
        messages=[user()],
        tools=[IrTool("f", "d", {"type": "object"})],
        parallel_tool_calls=False,
        stop=["END"],
        user="u1",
        stream=True,
        seed=3,
        response_format={"type": "json_object"},
    )
    body = DIALECT.write_request(ir, "c")
    assert body == {
        "model": "c",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        "stop_sequences": ["END"],
        "metadata": {"user_id": "u1"},
        "stream": True,
    }
    assert ir.dropped == ["seed", "response_format"]


def test_openai_tool_history_to_anthropic_blocks() -> None:
    ir = OPENAI.read_request(
        json.loads((FIXTURES.parent / "openai-chat" / "tool-result-followup.request.json").read_text())
    )
    body = DIALECT.write_request(ir, "c")
    assert body["system"] == "You're a helpful assistant."
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "call_JpNb8OiAkbIbHzDggfpdDHpi",
                "name": "get_current_weather",
                "input": {"location": "Seattle, WA"},
            },
            {
                "type": "tool_use",
                "id": "call_vaFQc3zK6hHTRZKXRI5Eo2cJ",
                "name": "get_current_weather",
                "input": {"location": "San Francisco, CA"},
            },
        ],
    }
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_JpNb8OiAkbIbHzDggfpdDHpi",
                "content": "50 degrees and raining",
            },
            {
                "type": "tool_result",
                "tool_use_id": "call_vaFQc3zK6hHTRZKXRI5Eo2cJ",
                "content": "70 degrees and sunny",
            },
        ],
    }


@pytest.mark.parametrize("value,expected", [(None, {}), ({"a": 1}, {"a": 1})])
def test_tool_input_objects(value: object, expected: dict) -> None:
    ir = IrRequest(messages=[IrMessage("assistant", [ToolUseBlock("c1", "f", value)])])
    assert DIALECT.write_request(ir, "c")["messages"][0]["content"][0]["input"] == expected


def test_non_object_tool_arguments_are_a_400_naming_the_call() -> None:
    ir = IrRequest(messages=[IrMessage("assistant", [ToolUseBlock("call_9", "f", RawArguments('{"a":'))])])
    with pytest.raises(BadRequest) as e:
        DIALECT.write_request(ir, "c")
    assert (
        e.value.message == "tool call 'call_9' (f): arguments must be a JSON object for an Anthropic upstream"
    )
