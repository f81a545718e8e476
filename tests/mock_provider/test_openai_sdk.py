"""The official openai SDK against the mock: text, streams, usage, tools, stop, max_tokens."""

from __future__ import annotations

import json
from typing import Any

import openai
from busbar_mock_provider.process import MockProcess
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall

from .conftest import WEATHER_ARGS, WEATHER_SCHEMA

TOOLS: Any = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}},
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    },
]


def test_text_reply_is_deterministic(oai: openai.OpenAI) -> None:
    r = oai.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Tell me a joke"}]
    )
    assert isinstance(r, ChatCompletion)
    assert r.object == "chat.completion"
    assert r.id.startswith("chatcmpl-") and len(r.id) == len("chatcmpl-") + 29
    assert r.model == "gpt-4o-mini"
    assert r.choices[0].message.content == "Hello from gpt-4o-mini. You said: Tell me a joke"
    assert r.choices[0].finish_reason == "stop"
    assert r.usage is not None
    assert r.usage.completion_tokens == 9
    assert r.usage.prompt_tokens == (len("Tell me a joke") + 4) // 4
    assert r.usage.total_tokens == r.usage.prompt_tokens + 9


def test_stream_with_include_usage(oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "Say hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello from gpt-4o. You said: Say hi"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 7
    assert all(c.usage is None for c in chunks[:-1])


def test_stream_without_usage_has_no_usage_chunk(oai: openai.OpenAI) -> None:
    chunks = list(
        oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)
    )
    assert all(c.choices for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_tool_call_parsed_into_typed_objects(oai: openai.OpenAI) -> None:
    r = oai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Weather in Oslo?"}], tools=TOOLS
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None and len(calls) == 1
    call = calls[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == WEATHER_ARGS


def test_tool_choice_names_the_tool(oai: openai.OpenAI) -> None:
    r = oai.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "time?"}],
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    calls = r.choices[0].message.tool_calls
    assert calls is not None
    call = calls[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.function.name == "get_time"
    assert call.function.arguments == "{}"


def test_tool_choice_none_gives_text(oai: openai.OpenAI) -> None:
    r = oai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], tools=TOOLS, tool_choice="none"
    )
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason == "stop"


def test_streamed_tool_call_accumulates(oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Weather?"}], tools=TOOLS, stream=True
    )
    ids, names, args, finish = set(), [], "", None
    for chunk in stream:
        delta = chunk.choices[0].delta
        for tc in delta.tool_calls or []:
            assert tc.index == 0
            if tc.id:
                ids.add(tc.id)
            if tc.function and tc.function.name:
                names.append(tc.function.name)
            if tc.function and tc.function.arguments:
                args += tc.function.arguments
        finish = chunk.choices[0].finish_reason or finish
    assert len(ids) == 1 and names == ["get_weather"]
    assert json.loads(args) == WEATHER_ARGS
    assert finish == "tool_calls"


def test_stream_helper_final_completion(oai: openai.OpenAI) -> None:
    with oai.chat.completions.stream(
        model="gpt-4o", messages=[{"role": "user", "content": "Weather?"}], tools=TOOLS
    ) as stream:
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert calls is not None and json.loads(calls[0].function.arguments) == WEATHER_ARGS


def test_tool_result_gives_text_naming_it(oai: openai.OpenAI) -> None:
    messages: Any = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "12 degrees and rain"},
    ]
    r = oai.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == "Hello from gpt-4o. The tool returned: 12 degrees and rain"


def test_small_max_tokens_stops_with_length(oai: openai.OpenAI) -> None:
    r = oai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], max_tokens=2
    )
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].message.content == "Hello from"
    assert r.usage is not None and r.usage.completion_tokens == 2
    r = oai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], max_completion_tokens=3
    )
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].message.content == "Hello from gpt-4o."


def test_stop_sequence_cuts_the_text(oai: openai.OpenAI) -> None:
    r = oai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "alpha ### beta"}], stop=["zzz", "###"]
    )
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == "Hello from gpt-4o. You said: alpha "
    stream = oai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "alpha ### beta"}], stop="###", stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from gpt-4o. You said: alpha "


def test_prefix_and_models(mock: MockProcess) -> None:
    with openai.OpenAI(base_url=mock.url + "/tenant-a/d1/v1", api_key="k", max_retries=0) as client:
        r = client.chat.completions.create(model="m1", messages=[{"role": "user", "content": "hi"}])
        assert r.choices[0].message.content == "Hello from m1. You said: hi"
        assert mock.requests()[-1]["path"] == "/tenant-a/d1/v1/chat/completions"
        ids = [m.id for m in client.models.list()]
    assert "gpt-4o-mini" in ids and "mock" in ids


def test_validation_errors_are_openai_shaped(oai: openai.OpenAI) -> None:
    try:
        oai.chat.completions.create(model="gpt-4o", messages=[])
    except openai.BadRequestError as exc:
        assert exc.status_code == 400
        assert exc.code == "empty_array" and exc.param == "messages"
    else:
        raise AssertionError("expected a 400")
