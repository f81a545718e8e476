"""OpenAI Chat Completions requests: client body -> IR (reader) and IR -> provider body (writer)."""

from __future__ import annotations

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
from busbar.proto.errors import BadRequest
from busbar.proto.openai import DIALECT
from busbar.proto.openai.parts import RawArguments
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES / "openai-chat"


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


# ---------------------------------------------------------------- reader: fixtures


def test_fixture_text_basic() -> None:
    ir = DIALECT.read_request(load("text-basic.request.json"))
    assert ir.model == "gpt-3.5-turbo"
    assert ir.system == []
    assert ir.messages == [IrMessage("user", [TextBlock("Tell me a joke about opentelemetry")])]
    assert ir.stream is False and ir.include_usage is False
    assert ir.max_tokens is None and ir.tools == [] and ir.tool_choice is None
    assert ir.extra == {} and ir.dropped == []


def test_fixture_image_url() -> None:
    ir = DIALECT.read_request(load("image-url.request.json"))
    assert ir.model == "gpt-4-vision-preview"
    assert ir.messages == [
        IrMessage(
            "user",
            [
                TextBlock("What is in this image?"),
                ImageBlock("url", url="https://source.unsplash.com/8xznAGy4HcY/800x400"),
            ],
        )
    ]


def test_fixture_stream_include_usage() -> None:
    ir = DIALECT.read_request(load("text-stream-include-usage.request.json"))
    assert ir.model == "gpt-4"
    assert ir.stream is True
    assert ir.include_usage is True
    assert ir.messages == [IrMessage("user", [TextBlock("Say this is a test")])]
    assert "stream_options" not in ir.extra


def test_fixture_tool_result_followup_merges_consecutive_tool_messages() -> None:
    ir = DIALECT.read_request(load("tool-result-followup.request.json"))
    assert ir.system == [TextBlock("You're a helpful assistant.")]
    assert [m.role for m in ir.messages] == ["user", "assistant", "user"]
    assert ir.messages[1].content == [
        ToolUseBlock("call_JpNb8OiAkbIbHzDggfpdDHpi", "get_current_weather", {"location": "Seattle, WA"}),
        ToolUseBlock(
            "call_vaFQc3zK6hHTRZKXRI5Eo2cJ", "get_current_weather", {"location": "San Francisco, CA"}
        ),
    ]
    assert ir.messages[2].content == [
        ToolResultBlock(
            "call_JpNb8OiAkbIbHzDggfpdDHpi", [TextBlock("50 degrees and raining")], name="get_current_weather"
        ),
        ToolResultBlock(
            "call_vaFQc3zK6hHTRZKXRI5Eo2cJ", [TextBlock("70 degrees and sunny")], name="get_current_weather"
        ),
    ]


# ---------------------------------------------------------------- reader: fields


def test_all_modelled_fields_and_extra() -> None:
    body = {
        "model": "pool-a",
        "messages": [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "description": "d",
                    "parameters": {"type": "object", "properties": {"x": {}}},
                },
            },
            {"type": "function", "function": {"name": "g"}},
        ],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "parallel_tool_calls": False,
        "max_tokens": 50,
        "temperature": 0.2,
        "top_p": 0.9,
        "frequency_penalty": 0.1,
        "presence_penalty": 0.3,
        "seed": 7,
        "stop": "END",
        "response_format": {"type": "json_object"},
        "user": "u-1",
        "reasoning_effort": "low",
        "stream": True,
        "logprobs": True,
        "n": 2,
        "logit_bias": {"1": 2},
        "store": True,
        "metadata": {"k": "v"},
        "service_tier": "flex",
    }
    ir = DIALECT.read_request(body)
    assert ir.model == "pool-a"
    assert ir.system == [TextBlock("be brief")]
    assert ir.tools == [
        IrTool("f", "d", {"type": "object", "properties": {"x": {}}}),
        IrTool("g", None, {"type": "object", "properties": {}}),
    ]
    assert ir.tool_choice == ToolChoice("tool", "f")
    assert ir.parallel_tool_calls is False
    assert (ir.max_tokens, ir.temperature, ir.top_p) == (50, 0.2, 0.9)
    assert (ir.frequency_penalty, ir.presence_penalty, ir.seed) == (0.1, 0.3, 7)
    assert ir.stop == ["END"]
    assert ir.response_format == {"type": "json_object"}
    assert ir.user == "u-1"
    assert ir.reasoning == ReasoningAsk(effort="low")
    assert ir.stream is True and ir.include_usage is False
    assert ir.extra == {
        "logprobs": True,
        "n": 2,
        "logit_bias": {"1": 2},
        "store": True,
        "metadata": {"k": "v"},
        "service_tier": "flex",
    }


@pytest.mark.parametrize(
    "choice,expected",
    [
        ("auto", ToolChoice("auto")),
        ("none", ToolChoice("none")),
        ("required", ToolChoice("required")),
    ],
)
def test_tool_choice_words(choice: str, expected: ToolChoice) -> None:
    body = {"messages": [], "tool_choice": choice}
    assert DIALECT.read_request(body).tool_choice == expected


def test_max_completion_tokens_fills_max_tokens_and_remembers_the_spelling() -> None:
    ir = DIALECT.read_request({"messages": [], "max_completion_tokens": 100, "max_tokens": 5})
    assert ir.max_tokens == 100
    assert ir.extra == {"max_completion_tokens": 100}
    body = DIALECT.write_request(ir, "gpt-x")
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body


def test_stop_list() -> None:
    assert DIALECT.read_request({"messages": [], "stop": ["a", "b"]}).stop == ["a", "b"]


def test_c015_data_uri_image_becomes_base64_and_https_stays_url() -> None:
    content = [
        {"type": "text", "text": "what is this"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,aW1n"}},
        {"type": "image_url", "image_url": {"url": "https://example.test/a.png", "detail": "low"}},
    ]
    ir = DIALECT.read_request({"messages": [{"role": "user", "content": content}]})
    assert ir.messages[0].content == [
        TextBlock("what is this"),
        ImageBlock("base64", media_type="image/png", data="aW1n"),
        ImageBlock("url", url="https://example.test/a.png", detail="low"),
    ]


def test_c040_file_and_audio_parts_become_documents() -> None:
    content = [
        {"type": "text", "text": "total?"},
        {
            "type": "file",
            "file": {"filename": "invoice.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"},
        },
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    ]
    ir = DIALECT.read_request({"messages": [{"role": "user", "content": content}]})
    assert ir.messages[0].content == [
        TextBlock("total?"),
        DocumentBlock("application/pdf", data="JVBERi0x", name="invoice.pdf"),
        DocumentBlock("audio/wav", data="UklGRg=="),
    ]


def test_file_part_with_bare_base64_takes_mime_from_filename() -> None:
    part = {"type": "file", "file": {"filename": "a.pdf", "file_data": "JVBERi0x"}}
    ir = DIALECT.read_request({"messages": [{"role": "user", "content": [part]}]})
    assert ir.messages[0].content == [DocumentBlock("application/pdf", data="JVBERi0x", name="a.pdf")]


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("{}", {}),
        ("", {}),
        (None, {}),
        ("null", None),
        ('{"count":3,"ratio":0.5}', {"count": 3, "ratio": 0.5}),
    ],
)
def test_tool_call_arguments_are_parsed(raw: str | None, expected: object) -> None:
    msg = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": raw}}],
    }
    ir = DIALECT.read_request({"messages": [msg]})
    assert ir.messages[0].content == [ToolUseBlock("c1", "f", expected)]


def test_unparsable_arguments_are_kept_verbatim_and_round_trip() -> None:
    msg = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":'}}],
    }
    ir = DIALECT.read_request({"messages": [msg]})
    block = ir.messages[0].content[0]
    assert isinstance(block, ToolUseBlock) and isinstance(block.input, RawArguments)
    assert block.input == '{"a":'
    out = DIALECT.write_request(ir, "m")
    assert out["messages"][0]["tool_calls"][0]["function"]["arguments"] == '{"a":'


def test_assistant_reasoning_content_and_text() -> None:
    ir = DIALECT.read_request(
        {"messages": [{"role": "assistant", "content": "answer", "reasoning_content": "hmm"}]}
    )
    assert ir.messages[0].content == [ThinkingBlock(text="hmm"), TextBlock("answer")]


@pytest.mark.parametrize(
    "body,message",
    [
        ([], "request body must be a JSON object"),
        ({"model": "m"}, "messages: required, must be a list of message objects"),
        ({"messages": {"role": "user"}}, "messages: required, must be a list of message objects"),
        ({"messages": ["hi"]}, "messages[0]: must be an object"),
        (
            {"messages": [{"role": "bot", "content": "x"}]},
            "messages[0].role: 'bot' is not one of system, developer, user, assistant, tool",
        ),
        (
            {"messages": [{"role": "user", "content": 3}]},
            "messages[0].content: must be a string or a list of content parts",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "video"}]}]},
            "messages[0].content[0].type: 'video' is not supported (text, image_url, input_audio, file)",
        ),
        (
            {"messages": [{"role": "tool", "content": "x"}]},
            "messages[0].tool_call_id: required for role 'tool'",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}]},
            "messages[0].content[0].file.file_id: file references are not supported by this gateway; "
            "send the file inline as file_data",
        ),
        (
            {"messages": [], "tools": [{"type": "custom", "custom": {"name": "x"}}]},
            "tools[0].type: 'custom' is not supported (function tools only)",
        ),
        (
            {"messages": [], "tool_choice": "sometimes"},
            "tool_choice: must be 'auto', 'none', 'required' or "
            '{"type": "function", "function": {"name": ...}}',
        ),
    ],
)
def test_malformed_bodies_raise_bad_request(body: object, message: str) -> None:
    with pytest.raises(BadRequest) as e:
        DIALECT.read_request(body)  # type: ignore[arg-type]
    assert e.value.message == message
    assert e.value.status == 400


# ---------------------------------------------------------------- writer


def test_c011_no_empty_collections() -> None:
    ir = IrRequest(messages=[IrMessage("user", [TextBlock("say ok")])], max_tokens=32, model="m")
    assert DIALECT.write_request(ir, "gpt-4o") == {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "say ok"}],
        "max_tokens": 32,
    }


def test_tool_choice_and_parallel_only_with_tools() -> None:
    ir = IrRequest(
        messages=[IrMessage("user", [TextBlock("x")])],
        tool_choice=ToolChoice("auto"),
        parallel_tool_calls=False,
    )
    body = DIALECT.write_request(ir, "m")
    assert "tool_choice" not in body and "parallel_tool_calls" not in body and "tools" not in body
    ir.tools = [IrTool("f", None)]
    ir.tool_choice = ToolChoice("tool", "f")
    body = DIALECT.write_request(ir, "m")
    assert body["tools"] == [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert body["parallel_tool_calls"] is False


def test_c002_stream_always_asks_for_usage() -> None:
    ir = IrRequest(messages=[IrMessage("user", [TextBlock("x")])], stream=True, include_usage=False)
    body = DIALECT.write_request(ir, "m")
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_c010_stop_sequences_become_stop() -> None:
    ir = IrRequest(messages=[IrMessage("user", [TextBlock("x")])], stop=["###"])
    assert DIALECT.write_request(ir, "m")["stop"] == ["###"]


def test_c017_max_tokens_is_never_invented() -> None:
    ir = IrRequest(messages=[IrMessage("user", [TextBlock("essay")])])
    assert "max_tokens" not in DIALECT.write_request(ir, "m")
    assert "max_completion_tokens" not in DIALECT.write_request(ir, "m")


@pytest.mark.parametrize(
    "ask,effort",
    [
        (ReasoningAsk(effort="high"), "high"),
        (ReasoningAsk(budget_tokens=1024), "minimal"),
        (ReasoningAsk(budget_tokens=5000), "low"),
        (ReasoningAsk(budget_tokens=9000), "medium"),
        (ReasoningAsk(budget_tokens=60000), "high"),
        (ReasoningAsk(budget_tokens=-1), "medium"),
    ],
)
def test_reasoning_ask_becomes_an_effort_word(ask: ReasoningAsk, effort: str) -> None:
    ir = IrRequest(messages=[IrMessage("user", [TextBlock("x")])], reasoning=ask, max_tokens=9)
    body = DIALECT.write_request(ir, "o3")
    assert body["reasoning_effort"] == effort
    assert body["max_completion_tokens"] == 9 and "max_tokens" not in body


def test_zero_budget_sends_no_reasoning_effort() -> None:
    ir = IrRequest(messages=[IrMessage("user", [TextBlock("x")])], reasoning=ReasoningAsk(budget_tokens=0))
    assert "reasoning_effort" not in DIALECT.write_request(ir, "m")


def test_anthropic_history_to_openai_messages() -> None:
    ir = IrRequest(
        system=[TextBlock("sys", cache_control={"type": "ephemeral"})],
        messages=[
            IrMessage("user", [TextBlock("q"), ImageBlock("base64", media_type="image/png", data="aW1n")]),
            IrMessage(
                "assistant",
                [
                    ThinkingBlock("plan", signature="SIG"),
                    TextBlock("calling"),
                    ToolUseBlock("toolu_1", "f", {"a": 1}),
                ],
            ),
            IrMessage(
                "user",
                [
                    ToolResultBlock("toolu_1", [TextBlock("r1"), TextBlock("r2")], is_error=True),
                    TextBlock("and?"),
                ],
            ),
        ],
        top_k=5,
        user="u",
    )
    body = DIALECT.write_request(ir, "gpt")
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "q"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aW1n"}},
            ],
        },
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "r1\nr2"},
        {"role": "user", "content": "and?"},
    ]
    assert body["user"] == "u"
    assert "top_k" not in body
    assert ir.dropped == ["cache_control", "thinking", "tool_result.is_error", "top_k"]


def test_documents_to_openai_parts() -> None:
    ir = IrRequest(
        messages=[
            IrMessage(
                "user",
                [
                    DocumentBlock("application/pdf", data="JVBERi0x", name="invoice.pdf"),
                    DocumentBlock("audio/wav", data="UklGRg=="),
                    DocumentBlock("application/pdf", data="JVBERi0x"),
                ],
            )
        ]
    )
    assert DIALECT.write_request(ir, "m")["messages"][0]["content"] == [
        {
            "type": "file",
            "file": {"filename": "invoice.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"},
        },
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {
            "type": "file",
            "file": {"filename": "document.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"},
        },
    ]


def test_document_by_url_is_refused_with_a_clear_message() -> None:
    ir = IrRequest(
        messages=[IrMessage("user", [DocumentBlock("application/pdf", url="https://x.test/a.pdf")])]
    )
    with pytest.raises(BadRequest) as e:
        DIALECT.write_request(ir, "m")
    assert e.value.message == (
        "document part (application/pdf) given by URL cannot be sent to an OpenAI "
        "Chat Completions upstream; send it inline as base64"
    )


def test_same_protocol_extra_is_carried() -> None:
    body = {"model": "p", "messages": [{"role": "user", "content": "x"}], "logprobs": True, "n": 1}
    out = DIALECT.write_request(DIALECT.read_request(body), "gpt-4o")
    assert out == {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "x"}],
        "logprobs": True,
        "n": 1,
    }


@pytest.mark.parametrize(
    "name", ["text-basic", "image-url", "text-stream-include-usage", "tool-result-followup"]
)
def test_fixture_requests_round_trip_through_the_ir(name: str) -> None:
    src = load(f"{name}.request.json")
    out = DIALECT.write_request(DIALECT.read_request(src), src["model"])
    for m in out["messages"]:
        for tc in m.get("tool_calls", ()):
            tc["function"]["arguments"] = json.loads(tc["function"]["arguments"])
    for m in src["messages"]:
        m.setdefault("content", None)
        for tc in m.get("tool_calls", ()):
            tc["function"]["arguments"] = json.loads(tc["function"]["arguments"])
    assert out == src
