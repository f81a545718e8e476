"""The mock's OpenAI Responses endpoint (POST [prefix]/v1/responses) through openai-python and Busbar's decoder."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from busbar.ir.model import BlockDelta, BlockStart, MessageDelta, StopReason, StreamError, ToolUseBlock
from busbar.proto.responses import DIALECT
from busbar_mock_provider.fixtures import split_sse
from busbar_mock_provider.process import MockProcess

from .conftest import WEATHER_ARGS, WEATHER_SCHEMA, fixture_bytes

AUTH: Any = {"authorization": "Bearer sk-test"}
TOOLS: Any = [
    {"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA, "strict": False},
    {
        "type": "function",
        "name": "get_time",
        "parameters": {"type": "object", "properties": {}},
        "strict": False,
    },
]


@pytest.fixture
def oai(mock: MockProcess) -> Iterator[Any]:
    with openai.OpenAI(base_url=mock.url + "/v1", api_key="sk-test", max_retries=0, timeout=10) as client:
        yield client


def _events(raw: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    out = []
    for frame in split_sse(raw):
        lines = frame.rstrip(b"\n").split(b"\n")
        event = next((ln[7:].decode() for ln in lines if ln.startswith(b"event: ")), None)
        data = next(ln[6:] for ln in lines if ln.startswith(b"data: "))
        out.append((event, json.loads(data)))
    return out


def _decode(raw: bytes) -> list[Any]:
    dec = DIALECT.stream_decoder()
    return dec.feed(raw) + dec.close()


def test_text_reply_through_the_sdk(oai: Any) -> None:
    r = oai.responses.create(model="gpt-4o", input="Tell me a joke")
    assert re.fullmatch(r"resp_[0-9a-f]{50}", r.id)
    assert r.status == "completed" and r.model == "gpt-4o"
    assert r.output_text == "Hello from gpt-4o. You said: Tell me a joke"
    assert r.usage is not None and r.usage.output_tokens == 9
    assert r.usage.total_tokens == r.usage.input_tokens + 9


def test_stream_lifecycle_matches_the_capture(mock: MockProcess) -> None:
    body = {"model": "gpt-4.1-nano", "input": "Say hi", "stream": True}
    r = mock.client.post("/v1/responses", headers=AUTH, json=body)
    assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert "content-length" not in r.headers and r.headers["x-request-id"].startswith("req_")
    ours = _events(r.content)
    cap = _events(fixture_bytes("openai-responses/text-stream.response.sse.txt"))
    kinds = [ev for ev, _ in ours]
    assert kinds == [d["type"] for _, d in ours]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 7,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [d["sequence_number"] for _, d in ours] == list(range(len(ours)))
    by_type = {d["type"]: d for _, d in cap}
    for _, d in ours:
        assert list(d) == list(by_type[d["type"]]), d["type"]  # same keys, same order
    assert list(ours[0][1]["response"]) == list(cap[0][1]["response"])
    final = ours[-1][1]["response"]
    assert final["output"][0]["content"][0]["text"] == "Hello from gpt-4.1-nano. You said: Say hi"
    assert final["usage"]["output_tokens"] == 7


def test_stream_helper_and_busbar_decoder(mock: MockProcess, oai: Any) -> None:
    with oai.responses.stream(model="gpt-4o", input="hello there") as stream:
        final = stream.get_final_response()
    assert final.output_text == "Hello from gpt-4o. You said: hello there"
    raw = mock.client.post(
        "/v1/responses", headers=AUTH, json={"model": "m", "input": "x", "stream": True}
    ).content
    events = _decode(raw)
    assert "".join(e.value for e in events if isinstance(e, BlockDelta)) == "Hello from m. You said: x"
    assert events[-2] == MessageDelta(StopReason.END_TURN, None, events[-2].usage)


def test_tool_call_json_and_stream(mock: MockProcess, oai: Any) -> None:
    r = oai.responses.create(model="gpt-4o", input="Weather in Oslo?", tools=TOOLS)
    call = r.output[0]
    assert call.type == "function_call" and call.name == "get_weather" and call.call_id.startswith("call_")
    assert json.loads(call.arguments) == WEATHER_ARGS
    r = oai.responses.create(
        model="gpt-4o", input="time?", tools=TOOLS, tool_choice={"type": "function", "name": "get_time"}
    )
    assert r.output[0].name == "get_time" and r.output[0].arguments == "{}"
    with oai.responses.stream(model="gpt-4o", input="Weather?", tools=TOOLS) as stream:
        types = [e.type for e in stream]
        final = stream.get_final_response()
    assert types[2:4] == ["response.output_item.added", "response.function_call_arguments.delta"]
    assert "response.function_call_arguments.done" in types
    assert json.loads(final.output[0].arguments) == WEATHER_ARGS
    raw = mock.client.post(
        "/v1/responses", headers=AUTH, json={"model": "m", "input": "w", "tools": TOOLS, "stream": True}
    ).content
    events = _decode(raw)
    start = next(e for e in events if isinstance(e, BlockStart))
    assert isinstance(start.block, ToolUseBlock) and start.block.name == "get_weather"
    assert json.loads("".join(e.value for e in events if isinstance(e, BlockDelta))) == WEATHER_ARGS
    assert events[-2].stop_reason is StopReason.TOOL_USE


def test_tool_result_and_tool_choice_none(oai: Any) -> None:
    items: Any = [
        {"role": "user", "content": "Weather?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "12 degrees and rain"},
    ]
    r = oai.responses.create(model="gpt-4o", input=items, tools=TOOLS)
    assert r.output_text == "Hello from gpt-4o. The tool returned: 12 degrees and rain"
    r = oai.responses.create(model="gpt-4o", input="hi", tools=TOOLS, tool_choice="none")
    assert r.output[0].type == "message"


def test_max_output_tokens_is_incomplete(mock: MockProcess, oai: Any) -> None:
    r = oai.responses.create(model="gpt-4o", input="hi", max_output_tokens=2)
    assert r.status == "incomplete" and r.incomplete_details is not None
    assert r.incomplete_details.reason == "max_output_tokens" and r.output_text == "Hello from"
    raw = mock.client.post(
        "/v1/responses",
        headers=AUTH,
        json={"model": "m", "input": "x", "max_output_tokens": 2, "stream": True},
    ).content
    assert _events(raw)[-1][0] == "response.incomplete"
    assert _decode(raw)[-2].stop_reason is StopReason.MAX_TOKENS


def test_auth_validation_and_captured_errors(mock: MockProcess, oai: Any) -> None:
    r = mock.client.post("/v1/responses", json={"model": "m", "input": "x"})
    assert r.status_code == 401 and r.content == fixture_bytes(
        "openai-chat/error-401-invalid-api-key.response.json"
    )
    with pytest.raises(openai.BadRequestError) as e:
        oai.responses.create(model="", input="x")
    assert e.value.code == "missing_required_parameter" and e.value.param == "model"
    mock.script([{"match": {"protocol": "responses"}, "response": {"status": 400}}])
    r = mock.client.post("/v1/responses", headers=AUTH, json={"model": "m", "input": "x"})
    assert r.content == fixture_bytes("openai-responses/error-400-invalid-parameter.response.json")
    mock.script(
        [{"match": {"protocol": "responses"}, "response": {"status": 429, "headers": {"retry-after": "3"}}}]
    )
    with pytest.raises(openai.RateLimitError) as limited:
        oai.responses.create(model="gpt-4o", input="x")
    assert limited.value.code == "rate_limit_exceeded"
    assert limited.value.response.headers["retry-after"] == "3"


def test_fault_error_after_and_drop_after(mock: MockProcess, oai: Any) -> None:
    mock.script([{"match": {"protocol": "responses", "stream": True}, "response": {"error_after": 4}}])
    body = {"model": "m", "input": "one two three", "stream": True}
    raw = mock.client.post("/v1/responses", headers=AUTH, json=body).content
    events = _events(raw)
    assert [ev for ev, _ in events][-2:] == ["error", "response.failed"]
    assert isinstance(_decode(raw)[-1], StreamError)
    mock.script(
        [{"match": {"protocol": "responses"}, "response": {"error_after": 3, "error": "engine failure"}}]
    )
    with pytest.raises(openai.APIError, match="engine failure"):
        list(oai.responses.create(model="m", input="x", stream=True))
    mock.script([{"match": {"protocol": "responses"}, "response": {"drop_after": 5}}])
    buf = b""
    with (
        httpx.Client(base_url=mock.url, timeout=5) as c,
        c.stream("POST", "/v1/responses", headers=AUTH, json=body) as r,
        pytest.raises(httpx.HTTPError),
    ):
        for part in r.iter_raw():
            buf += part
    assert len(split_sse(buf)) == 5
    assert _decode(buf)[-1] == StreamError("api_error", "upstream stream ended prematurely")


def test_fixture_replay_and_prefix_knobs(mock: MockProcess) -> None:
    mock.script(
        [
            {
                "match": {"path_prefix": "/team"},
                "response": {"fixture": "openai-responses/function-call-stream.response.sse.txt"},
            }
        ]
    )
    raw = mock.client.post(
        "/team/v1/responses", headers=AUTH, json={"model": "m", "input": "x", "stream": True}
    ).content
    assert raw == fixture_bytes("openai-responses/function-call-stream.response.sse.txt")
    assert mock.requests()[-1]["path"] == "/team/v1/responses"
    raw = mock.client.post(
        "/c3/v1/responses", headers=AUTH, json={"model": "m", "input": "x", "stream": True}
    ).content
    assert [ev for ev, _ in _events(raw)].count("response.output_text.delta") == 3


# ---------------------------------------------------------------- account-bound state (C046)


def _account(mock: MockProcess, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=mock.url + "/v1", api_key=key, max_retries=0, timeout=10)


def test_encrypted_reasoning_is_readable_only_by_the_account_that_created_it(mock: MockProcess) -> None:
    a, b = _account(mock, "sk-acct-a"), _account(mock, "sk-acct-b")
    first = a.responses.create(model="gpt-5-mini", input="Plan a trip.", store=False,
                               include=["reasoning.encrypted_content"], reasoning={"effort": "low"})
    thought = first.output[0]
    assert (thought.type, thought.summary[0].text) == ("reasoning", "Considering: Plan a trip.")
    assert thought.encrypted_content.startswith("gAAAAAB") and first.store is False
    replay = [thought.model_dump(exclude_none=True), {"role": "user", "content": "And then?"}]
    assert a.responses.create(model="gpt-5-mini", input=replay).output_text == \
        "Hello from gpt-5-mini. You said: And then?"
    with pytest.raises(openai.BadRequestError) as e:
        b.responses.create(model="gpt-5-mini", input=replay)
    assert e.value.body == {"message": f"The encrypted content for item {thought.id} could not be verified.",
                            "type": "invalid_request_error", "param": None, "code": "invalid_encrypted_content"}
    stripped = [{k: v for k, v in replay[0].items() if k != "encrypted_content"}, replay[1]]
    assert b.responses.create(model="gpt-5-mini", input=stripped).status == "completed"


def test_previous_response_id_is_found_only_by_the_account_that_stored_it(mock: MockProcess) -> None:
    a, b = _account(mock, "sk-acct-a"), _account(mock, "sk-acct-b")
    first = a.responses.create(model="gpt-5-mini", input="Hi.")
    second = a.responses.create(model="gpt-5-mini", input="More.", previous_response_id=first.id)
    assert second.previous_response_id == first.id
    with pytest.raises(openai.NotFoundError) as e:
        b.responses.create(model="gpt-5-mini", input="More.", previous_response_id=first.id)
    assert e.value.body == {"message": f"Previous response with id '{first.id}' not found.",
                            "type": "invalid_request_error", "param": "previous_response_id",
                            "code": "previous_response_not_found"}
    unstored = a.responses.create(model="gpt-5-mini", input="Hi.", store=False)
    with pytest.raises(openai.NotFoundError):
        a.responses.create(model="gpt-5-mini", input="More.", previous_response_id=unstored.id)
