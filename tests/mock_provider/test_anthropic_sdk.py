"""The official anthropic SDK against the mock: text, streams, tools, stop sequences, max_tokens."""

from __future__ import annotations

from typing import Any

import anthropic
from anthropic.types import Message, TextBlock, ToolUseBlock
from busbar_mock_provider.process import MockProcess

from .conftest import WEATHER_ARGS, WEATHER_SCHEMA

TOOLS: Any = [
    {"name": "get_weather", "description": "weather", "input_schema": WEATHER_SCHEMA},
    {"name": "get_time", "description": "time", "input_schema": {"type": "object", "properties": {}}},
]


def test_text_reply(ant: anthropic.Anthropic) -> None:
    m = ant.messages.create(
        model="claude-mock-1", max_tokens=100, messages=[{"role": "user", "content": "Tell me a joke"}]
    )
    assert isinstance(m, Message)
    assert m.id.startswith("msg_01") and len(m.id) == 28
    assert m.model == "claude-mock-1"
    assert m.stop_reason == "end_turn" and m.stop_sequence is None
    assert len(m.content) == 1 and isinstance(m.content[0], TextBlock)
    assert m.content[0].text == "Hello from claude-mock-1. You said: Tell me a joke"
    assert m.usage.output_tokens == 9
    assert m.usage.cache_read_input_tokens == 0


def test_stream_final_message(ant: anthropic.Anthropic) -> None:
    with ant.messages.stream(
        model="claude", max_tokens=100, system="be brief", messages=[{"role": "user", "content": "Say hi"}]
    ) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == "Hello from claude. You said: Say hi"
    assert len(texts) == 7
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 7


def test_raw_stream_event_order(ant: anthropic.Anthropic) -> None:
    events = list(
        ant.messages.create(
            model="c", max_tokens=50, stream=True, messages=[{"role": "user", "content": "x"}]
        )
    )
    kinds = [e.type for e in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"}


def test_tool_use_typed(ant: anthropic.Anthropic) -> None:
    m = ant.messages.create(
        model="claude",
        max_tokens=100,
        tools=TOOLS,
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
    )
    assert m.stop_reason == "tool_use"
    block = m.content[0]
    assert isinstance(block, ToolUseBlock)
    assert block.name == "get_weather" and block.id.startswith("toolu_01")
    assert block.input == WEATHER_ARGS


def test_tool_choice_variants(ant: anthropic.Anthropic) -> None:
    m = ant.messages.create(
        model="c",
        max_tokens=100,
        tools=TOOLS,
        tool_choice={"type": "tool", "name": "get_time"},
        messages=[{"role": "user", "content": "time?"}],
    )
    assert isinstance(m.content[0], ToolUseBlock) and m.content[0].name == "get_time"
    assert m.content[0].input == {}
    m = ant.messages.create(
        model="c",
        max_tokens=100,
        tools=TOOLS,
        tool_choice={"type": "none"},
        messages=[{"role": "user", "content": "hi"}],
    )
    assert m.stop_reason == "end_turn" and isinstance(m.content[0], TextBlock)


def test_streamed_tool_use(ant: anthropic.Anthropic) -> None:
    with ant.messages.stream(
        model="claude",
        max_tokens=100,
        tools=TOOLS,
        messages=[{"role": "user", "content": "Weather?"}],
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    block = final.content[0]
    assert isinstance(block, ToolUseBlock) and block.input == WEATHER_ARGS


def test_tool_result_followup(ant: anthropic.Anthropic) -> None:
    messages: Any = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Oslo"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "city not found"}],
                    "is_error": True,
                }
            ],
        },
    ]
    m = ant.messages.create(model="claude", max_tokens=100, tools=TOOLS, messages=messages)
    assert m.stop_reason == "end_turn"
    assert isinstance(m.content[0], TextBlock)
    assert m.content[0].text == "Hello from claude. The tool returned: city not found"


def test_max_tokens_and_stop_sequences(ant: anthropic.Anthropic) -> None:
    m = ant.messages.create(model="claude", max_tokens=3, messages=[{"role": "user", "content": "hi"}])
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 3
    assert isinstance(m.content[0], TextBlock) and m.content[0].text == "Hello from claude."
    m = ant.messages.create(
        model="claude",
        max_tokens=100,
        stop_sequences=["###"],
        messages=[{"role": "user", "content": "one ### two"}],
    )
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == "###"
    assert isinstance(m.content[0], TextBlock) and m.content[0].text == "Hello from claude. You said: one "
    with ant.messages.stream(
        model="claude",
        max_tokens=100,
        stop_sequences=["###"],
        messages=[{"role": "user", "content": "one ### two"}],
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == "###"


def test_validation_error_is_anthropic_shaped(mock: MockProcess) -> None:
    r = mock.client.post(
        "/v1/messages",
        headers={"x-api-key": "k"},
        json={"model": "c", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert r.status_code == 400
    assert r.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
    }
    assert r.headers["request-id"].startswith("req_011C")


def test_prefix_base_url(mock: MockProcess) -> None:
    with anthropic.Anthropic(base_url=mock.url + "/some/prefix", api_key="k", max_retries=0) as client:
        m = client.messages.create(model="c", max_tokens=10, messages=[{"role": "user", "content": "yo"}])
    assert isinstance(m.content[0], TextBlock) and m.content[0].text == "Hello from c. You said: yo"
    assert mock.requests()[-1]["path"] == "/some/prefix/v1/messages"
