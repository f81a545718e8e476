"""Byte-level framing of the default streams and bodies, compared with the captured shapes."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from busbar_mock_provider.fixtures import split_sse
from busbar_mock_provider.process import MockProcess

from .conftest import WEATHER_SCHEMA, fixture_bytes

OAI: Any = {"authorization": "Bearer sk-test"}
ANT: Any = {"x-api-key": "sk-ant", "anthropic-version": "2023-06-01"}


def _events(raw: bytes) -> list[tuple[str | None, bytes]]:
    out: list[tuple[str | None, bytes]] = []
    for frame in split_sse(raw):
        lines = frame.rstrip(b"\n").split(b"\n")
        event = next((ln[7:].decode() for ln in lines if ln.startswith(b"event: ")), None)
        data = next(ln[6:] for ln in lines if ln.startswith(b"data: "))
        out.append((event, data))
    return out


def test_openai_stream_matches_capture_framing(mock: MockProcess) -> None:
    body = {
        "model": "gpt-4",
        "messages": [{"role": "user", "content": "Say this is a test"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    r = mock.client.post("/v1/chat/completions", headers=OAI, json=body)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert "content-length" not in r.headers
    assert r.headers["x-request-id"].startswith("req_")
    ours, captured = (
        _events(r.content),
        _events(fixture_bytes("openai-chat/text-stream-include-usage.response.sse.txt")),
    )
    assert all(ev is None for ev, _ in ours + captured)  # OpenAI sends data lines only
    assert ours[-1][1] == captured[-1][1] == b"[DONE]"
    chunks = [json.loads(d) for _, d in ours[:-1]]
    cap = [json.loads(d) for _, d in captured[:-1]]
    assert len(chunks) == 13  # role, 10 text pieces, finish, usage
    for mine, theirs in (
        (chunks[0], cap[0]),
        (chunks[1], cap[1]),
        (chunks[-2], cap[-2]),
        (chunks[-1], cap[-1]),
    ):
        assert list(mine) == list(theirs)  # same keys, same order
    assert list(chunks[1]["choices"][0]) == list(cap[1]["choices"][0])
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert chunks[-2]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    assert chunks[-1]["choices"] == [] and set(chunks[-1]["usage"]) == set(cap[-1]["usage"])
    assert all(c["usage"] is None for c in chunks[:-1])
    assert r.content.endswith(b"\n\ndata: [DONE]\n\n")


def test_openai_tool_stream_matches_capture(mock: MockProcess) -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}]
    body = {"model": "m", "messages": [{"role": "user", "content": "w"}], "tools": tools, "stream": True}
    ours = [
        json.loads(d)
        for _, d in _events(mock.client.post("/v1/chat/completions", headers=OAI, json=body).content)[:-1]
    ]
    cap = [
        json.loads(d)
        for _, d in _events(fixture_bytes("openai-chat/tool-calls-parallel-stream.response.sse.txt"))[:-1]
    ]
    assert "usage" not in ours[0]
    assert (
        ours[0]["choices"][0]["delta"]
        == cap[0]["choices"][0]["delta"]
        == {"role": "assistant", "content": None}
    )
    first, cap_first = (
        ours[1]["choices"][0]["delta"]["tool_calls"][0],
        cap[1]["choices"][0]["delta"]["tool_calls"][0],
    )
    assert list(first) == list(cap_first) == ["index", "id", "type", "function"]
    assert first["function"] == {"name": "get_weather", "arguments": ""}
    assert list(ours[2]["choices"][0]["delta"]["tool_calls"][0]) == ["index", "function"]
    assert ours[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_anthropic_stream_framing(mock: MockProcess) -> None:
    body = {
        "model": "claude",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    r = mock.client.post("/v1/messages", headers=ANT, json=body)
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert r.headers["request-id"].startswith("req_011C")
    events = _events(r.content)
    names = [ev for ev, _ in events]
    assert names == ["message_start", "content_block_start", "ping"] + ["content_block_delta"] * 6 + [
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert b'event: ping\ndata: {"type": "ping"}\n\n' in r.content
    padded = [d for _, d in events if d.endswith(b" ")]
    assert len(padded) >= 5  # the API's trailing-space padding inside data lines
    for name, data in events:
        assert json.loads(data)["type"] == name
    delta = json.loads(events[-2][1])
    assert delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] == 6
    captured = [ev for ev, _ in _events(fixture_bytes("anthropic/image-base64-stream.response.sse.txt"))]
    assert captured[:3] == names[:3] and captured[-3:] == names[-3:]


def test_anthropic_json_keys_follow_capture(mock: MockProcess) -> None:
    body = {"model": "claude", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    ours = mock.client.post("/v1/messages", headers=ANT, json=body).json()
    cap = orjson.loads(fixture_bytes("anthropic/prompt-cache-write.response.json"))
    assert list(ours) == list(cap)


def test_openai_json_keys_follow_capture(mock: MockProcess) -> None:
    body = {"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}
    r = mock.client.post("/v1/chat/completions", headers=OAI, json=body)
    assert r.headers["content-type"] == "application/json"
    assert int(r.headers["content-length"]) == len(r.content)
    cap = orjson.loads(fixture_bytes("openai-chat/tool-result-followup.response.json"))
    ours = r.json()
    assert list(ours) == list(cap)
    assert list(ours["choices"][0]["message"]) == list(cap["choices"][0]["message"])
    assert list(ours["usage"]) == list(cap["usage"])


def test_ids_are_provider_shaped(mock: MockProcess) -> None:
    body = {"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}
    a = mock.client.post("/v1/chat/completions", headers=OAI, json=body).json()["id"]
    b = mock.client.post("/v1/chat/completions", headers=OAI, json=body).json()["id"]
    assert a != b
    assert re.fullmatch(r"chatcmpl-[A-Za-z0-9]{29}", a)
