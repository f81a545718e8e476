"""The mock's Cohere v2 Chat endpoint (POST [prefix]/v2/chat) through cohere-python and Busbar's decoder."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import cohere
import httpx
import pytest
from busbar.ir.model import BlockDelta, BlockStart, StopReason, StreamError, TextBlock, ToolUseBlock
from busbar.proto.cohere import DIALECT
from busbar_mock_provider.fixtures import split_sse
from busbar_mock_provider.process import MockProcess

from .conftest import WEATHER_ARGS, WEATHER_SCHEMA, fixture_bytes

AUTH: Any = {"authorization": "Bearer co-test"}
USER: Any = [{"role": "user", "content": "x"}]
TOOLS: Any = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}},
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    },
]


@pytest.fixture
def co(mock: MockProcess) -> Iterator[Any]:
    with httpx.Client(timeout=10) as http:
        yield cohere.ClientV2(api_key="co-test", base_url=mock.url, httpx_client=http, max_retries=0)


def _events(raw: bytes) -> list[tuple[str | None, Any]]:
    out: list[tuple[str | None, Any]] = []
    for frame in split_sse(raw):
        lines = frame.rstrip(b"\n").split(b"\n")
        event = next((ln[7:].decode() for ln in lines if ln.startswith(b"event: ")), None)
        data = next(ln[6:] for ln in lines if ln.startswith(b"data: "))
        out.append((event, data.decode() if data == b"[DONE]" else json.loads(data)))
    return out


def _decode(raw: bytes) -> list[Any]:
    dec = DIALECT.stream_decoder()
    return dec.feed(raw) + dec.close()


def test_text_reply_through_the_sdk(co: Any) -> None:
    r = co.chat(model="command-r", messages=[{"role": "user", "content": "Tell me a joke"}])
    assert str(uuid.UUID(r.id)) == r.id
    assert r.finish_reason == "COMPLETE"
    assert r.message.content[0].text == "Hello from command-r. You said: Tell me a joke"
    assert r.usage.billed_units.output_tokens == 9


def test_stream_matches_the_capture_framing(mock: MockProcess, co: Any) -> None:
    r = mock.client.post(
        "/v2/chat",
        headers=AUTH,
        json={"model": "command", "messages": [{"role": "user", "content": "Say hi"}], "stream": True},
    )
    assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream; charset=utf-8"
    ours, cap = _events(r.content), _events(fixture_bytes("cohere/chat-stream.response.sse.txt"))
    assert [ev for ev, _ in ours] == [
        "message-start",
        "content-start",
        *["content-delta"] * 7,
        "content-end",
        "message-end",
        None,
    ]
    assert ours[-1] == cap[-1] == (None, "[DONE]")
    for mine, theirs in (
        (ours[0], cap[0]),
        (ours[1], cap[1]),
        (ours[2], cap[2]),
        (ours[-3], cap[-3]),
        (ours[-2], cap[-2]),
    ):
        assert mine[0] == theirs[0] and list(mine[1]) == list(theirs[1])
    assert ours[0][1]["delta"] == cap[0][1]["delta"]
    assert list(ours[-2][1]["delta"]["usage"]) == list(cap[-2][1]["delta"]["usage"])
    text = "".join(
        e.delta.message.content.text
        for e in co.chat_stream(model="m", messages=[{"role": "user", "content": "x"}])
        if e.type == "content-delta"
    )
    assert text == "Hello from m. You said: x"
    events = _decode(r.content)
    assert (
        "".join(e.value for e in events if isinstance(e, BlockDelta))
        == "Hello from command. You said: Say hi"
    )
    assert events[-2].stop_reason is StopReason.END_TURN


def test_tool_call_json_and_stream(mock: MockProcess, co: Any) -> None:
    r = co.chat(model="command-r", messages=[{"role": "user", "content": "Weather?"}], tools=TOOLS)
    assert r.finish_reason == "TOOL_CALL" and r.message.tool_plan == "I will use the get_weather tool."
    call = r.message.tool_calls[0]
    assert call.id.startswith("get_weather_") and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == WEATHER_ARGS
    assert (
        co.chat(
            model="m", messages=[{"role": "user", "content": "x"}], tools=TOOLS, tool_choice="NONE"
        ).finish_reason
        == "COMPLETE"
    )
    kinds = [
        e.type
        for e in co.chat_stream(model="m", messages=[{"role": "user", "content": "Weather?"}], tools=TOOLS)
    ]
    assert kinds[0] == "message-start" and kinds[-1] == "message-end"
    assert (
        kinds.index("tool-plan-delta")
        < kinds.index("tool-call-start")
        < kinds.index("tool-call-delta")
        < kinds.index("tool-call-end")
    )
    raw = mock.client.post(
        "/v2/chat",
        headers=AUTH,
        json={"model": "m", "messages": [{"role": "user", "content": "w"}], "tools": TOOLS, "stream": True},
    ).content
    events = _decode(raw)
    starts = [e.block for e in events if isinstance(e, BlockStart)]
    assert (
        isinstance(starts[0], TextBlock)
        and isinstance(starts[1], ToolUseBlock)
        and starts[1].name == "get_weather"
    )
    args = "".join(e.value for e in events if isinstance(e, BlockDelta) and e.kind == "input_json")
    assert json.loads(args) == WEATHER_ARGS and events[-2].stop_reason is StopReason.TOOL_USE


def test_tool_result_max_tokens_and_stop_sequences(co: Any) -> None:
    messages: Any = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "tool_plan": "p",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "12 degrees and rain"},
    ]
    r = co.chat(model="m", messages=messages, tools=TOOLS)
    assert r.message.content[0].text == "Hello from m. The tool returned: 12 degrees and rain"
    r = co.chat(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert r.finish_reason == "MAX_TOKENS" and r.message.content[0].text == "Hello from"
    r = co.chat(model="m", messages=[{"role": "user", "content": "alpha ### beta"}], stop_sequences=["###"])
    assert (
        r.finish_reason == "STOP_SEQUENCE" and r.message.content[0].text == "Hello from m. You said: alpha "
    )


def test_auth_validation_and_errors(mock: MockProcess, co: Any) -> None:
    with httpx.Client(timeout=10) as http, pytest.raises(cohere.UnauthorizedError) as e:
        cohere.ClientV2(api_key="", base_url=mock.url, httpx_client=http, max_retries=0).chat(
            model="m", messages=USER
        )
    assert e.value.body["message"] == "invalid api token"
    with pytest.raises(cohere.BadRequestError):
        co.chat(model="m", messages=[])
    mock.script([{"match": {"protocol": "cohere"}, "response": {"status": 404}}])
    r = mock.client.post(
        "/v2/chat",
        headers=AUTH,
        json={"model": "nonexistent", "messages": [{"role": "user", "content": "x"}]},
    )
    assert r.status_code == 404 and r.content == fixture_bytes(
        "cohere/error-404-model-not-found.response.json"
    )
    mock.script([{"match": {"protocol": "cohere"}, "response": {"status": 429}}])
    with pytest.raises(cohere.TooManyRequestsError):
        co.chat(model="m", messages=[{"role": "user", "content": "x"}])
    mock.script([{"match": {"protocol": "cohere"}, "response": {"status": 503}}])
    with pytest.raises(cohere.ServiceUnavailableError):
        co.chat(model="m", messages=[{"role": "user", "content": "x"}])
    info = DIALECT.read_error(
        429, mock.client.post("/v2/chat", headers=AUTH, json={"model": "m", "messages": []}).content
    )
    assert info.message == "invalid request: messages must not be empty"


def test_fault_error_after_drop_after_and_fixture(mock: MockProcess) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "one two"}], "stream": True}
    mock.script(
        [{"match": {"protocol": "cohere"}, "response": {"error_after": 3, "error": "engine failure"}}]
    )
    raw = mock.client.post("/v2/chat", headers=AUTH, json=body).content
    last = _events(raw)[-1]
    assert last[0] == "message-end" and last[1]["delta"] == {
        "error": "engine failure",
        "finish_reason": "ERROR",
    }
    assert _decode(raw)[-1] == StreamError("api_error", "engine failure")
    mock.script([{"match": {"protocol": "cohere"}, "response": {"drop_after": 4}}])
    buf = b""
    with (
        httpx.Client(base_url=mock.url, timeout=5) as c,
        c.stream("POST", "/v2/chat", headers=AUTH, json=body) as r,
        pytest.raises(httpx.HTTPError),
    ):
        for part in r.iter_raw():
            buf += part
    assert _decode(buf)[-1] == StreamError("api_error", "upstream stream ended prematurely")
    mock.script(
        [{"match": {"path_prefix": "/t1"}, "response": {"fixture": "cohere/chat-stream.response.sse.txt"}}]
    )
    raw = mock.client.post("/t1/v2/chat", headers=AUTH, json=body).content
    assert raw == fixture_bytes("cohere/chat-stream.response.sse.txt")
    assert mock.requests()[-1]["path"] == "/t1/v2/chat"
    raw = mock.client.post("/c2/v2/chat", headers=AUTH, json=body).content
    assert [ev for ev, _ in _events(raw)].count("content-delta") == 2


def test_tool_result_document_parts_are_read(co: Any) -> None:
    messages: Any = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [{"type": "document", "document": {"data": "sunny, 21C"}}],
        },
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": [
                {"type": "text", "text": "wind"},
                {"type": "document", "document": {"data": {"speed": 3}}},
            ],
        },
    ]
    r = co.chat(model="m", messages=messages, tools=TOOLS)
    assert r.message.content[0].text == 'Hello from m. The tool returned: sunny, 21C wind {"speed":3}'
