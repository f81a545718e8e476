"""Scripted responses: status/body/headers, captured errors, fixtures, sse, drop/error mid-stream, FIFO."""

from __future__ import annotations

import json
import time
from typing import Any

import anthropic
import httpx
import openai
import pytest
from busbar_mock_provider.process import MockProcess

from .conftest import fixture_bytes

OAI: Any = {"authorization": "Bearer sk-test"}
ANT: Any = {"x-api-key": "sk-ant"}
CHAT: Any = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
CHAT_STREAM: Any = {**CHAT, "stream": True}
MSG: Any = {"model": "claude", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
MSG_STREAM: Any = {**MSG, "stream": True}


def _chat(
    mock: MockProcess, body: dict[str, object] = CHAT, path: str = "/v1/chat/completions"
) -> httpx.Response:
    return mock.client.post(path, headers=OAI, json=body)


def _read_until_error(
    mock: MockProcess, path: str, headers: dict[str, str], body: dict[str, object]
) -> tuple[int, bytes, Exception | None]:
    buf = b""
    with (
        httpx.Client(base_url=mock.url, timeout=5) as c,
        c.stream("POST", path, headers=headers, json=body) as r,
    ):
        try:
            for part in r.iter_raw():
                buf += part
        except httpx.HTTPError as exc:
            return r.status_code, buf, exc
    return r.status_code, buf, None


def test_status_body_headers(mock: MockProcess) -> None:
    mock.script(
        [
            {
                "match": {"protocol": "openai"},
                "response": {
                    "status": 429,
                    "body": {
                        "error": {
                            "message": "slow down",
                            "type": "requests",
                            "param": None,
                            "code": "rate_limit_exceeded",
                        }
                    },
                    "headers": {"Retry-After": "7", "x-ratelimit-remaining-requests": 0},
                },
            }
        ]
    )
    r = _chat(mock)
    assert r.status_code == 429
    assert r.headers["retry-after"] == "7"
    assert r.headers["x-ratelimit-remaining-requests"] == "0"
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["message"] == "slow down"
    assert _chat(mock).status_code == 200  # times defaults to 1


def test_sdk_sees_scripted_rate_limit(mock: MockProcess, oai: openai.OpenAI) -> None:
    mock.script([{"response": {"status": 429, "headers": {"retry-after": "1"}}}])
    with pytest.raises(openai.RateLimitError) as info:
        oai.chat.completions.create(**CHAT)
    assert info.value.code == "rate_limit_exceeded"


@pytest.mark.parametrize(
    ("status", "path", "headers", "body", "capture"),
    [
        (401, "/v1/chat/completions", OAI, CHAT, "openai-chat/error-401-invalid-api-key.response.json"),
        (404, "/v1/chat/completions", OAI, CHAT, "openai-chat/error-404-model-not-found.response.json"),
        (400, "/v1/chat/completions", OAI, CHAT, "openai-chat/error-400-unsupported-value.response.json"),
        (400, "/v1/messages", ANT, MSG, "anthropic/error-400-invalid-request.response.json"),
        (404, "/v1/messages", ANT, MSG, "anthropic/error-404-model-not-found.response.json"),
        (429, "/v1/messages", ANT, MSG, "anthropic/error-429-rate-limit.response.json"),
    ],
    ids=["oai-401", "oai-404", "oai-400", "ant-400", "ant-404", "ant-429"],
)
def test_status_only_replays_captured_error(
    mock: MockProcess, status: int, path: str, headers: dict[str, str], body: dict[str, object], capture: str
) -> None:
    mock.script([{"response": {"status": status}}])
    r = mock.client.post(path, headers=headers, json=body)
    assert r.status_code == status
    assert r.content == fixture_bytes(capture)


def test_status_only_synthesized_errors(mock: MockProcess) -> None:
    mock.script([{"response": {"status": 529}}, {"response": {"status": 500}}])
    r = mock.client.post("/v1/messages", headers=ANT, json=MSG)
    assert r.status_code == 529
    assert r.json()["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    r = _chat(mock)
    assert r.status_code == 500
    assert r.json() == {
        "error": {
            "message": "The server had an error while processing your request. Sorry about that!",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


def test_rules_match_and_fifo(mock: MockProcess) -> None:
    mock.script(
        [
            {"match": {"model": "gpt-b"}, "times": 2, "response": {"status": 503}},
            {"match": {"protocol": "anthropic"}, "response": {"status": 500}},
            {
                "match": {"path_prefix": "/lane2"},
                "times": -1,
                "response": {"status": 502, "body": "bad gateway"},
            },
            {"match": {"model": "gpt-b"}, "response": {"status": 418}},
        ]
    )
    assert _chat(mock).status_code == 200
    b = {**CHAT, "model": "gpt-b"}
    assert [_chat(mock, b).status_code for _ in range(4)] == [503, 503, 418, 200]
    assert [_chat(mock, path="/lane2/v1/chat/completions").status_code for _ in range(3)] == [502] * 3
    r = _chat(mock, path="/lane2/v1/chat/completions")
    assert r.text == "bad gateway" and r.headers["content-type"] == "text/plain; charset=utf-8"
    assert mock.client.post("/v1/messages", headers=ANT, json=MSG).status_code == 500
    pending = mock.pending_rules()
    assert len(pending) == 1 and pending[0]["times"] == -1
    assert mock.client.delete("/_mock/script").json() == {"cleared": 1}
    assert _chat(mock, path="/lane2/v1/chat/completions").status_code == 200


def test_stream_match_and_text_override(mock: MockProcess) -> None:
    mock.script([{"match": {"stream": True}, "response": {"text": "Quail"}}])
    assert _chat(mock).json()["choices"][0]["message"]["content"] == "Hello from gpt-4o. You said: hi"
    r = _chat(mock, CHAT_STREAM)
    assert b'"content":"Quail"' in r.content and r.content.endswith(b"data: [DONE]\n\n")


def test_delay_ms(mock: MockProcess) -> None:
    mock.script([{"response": {"delay_ms": 300}}])
    t0 = time.monotonic()
    assert _chat(mock).status_code == 200
    assert time.monotonic() - t0 >= 0.3


def test_fixture_replay_sse_is_byte_exact(mock: MockProcess) -> None:
    rel = "anthropic/tool-use-stream.response.sse.txt"
    mock.script([{"response": {"fixture": rel, "chunk_delay_ms": 1}}])
    r = mock.client.post("/v1/messages", headers=ANT, json=MSG_STREAM)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert r.content == fixture_bytes(rel)


def test_fixture_replay_json_and_error_status(mock: MockProcess) -> None:
    mock.script(
        [
            {"response": {"fixture": "openai-chat/text-basic.response.json"}},
            {"response": {"fixture": "openai-chat/error-400-context-length-exceeded.response.json"}},
        ]
    )
    r = _chat(mock)
    assert r.status_code == 200 and r.content == fixture_bytes("openai-chat/text-basic.response.json")
    r = _chat(mock)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "context_length_exceeded"


def test_fixture_parsed_by_sdk(mock: MockProcess, oai: openai.OpenAI) -> None:
    mock.script([{"response": {"fixture": "openai-chat/tool-calls-parallel-stream.response.sse.txt"}}])
    with oai.chat.completions.stream(**CHAT) as stream:
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert calls is not None
    assert [json.loads(c.function.arguments) for c in calls] == [
        {"location": "San Francisco"},
        {"location": "Boston"},
    ]


def test_sse_list_and_raw_text(mock: MockProcess) -> None:
    mock.script(
        [
            {
                "response": {
                    "sse": [{"type": "message_start", "message": {}}, {"raw": ": comment\n\n"}, "[DONE]"]
                }
            },
            {"response": {"sse": 'data: {"a":1}\n\ndata: [DONE]\n\n', "status": 200}},
        ]
    )
    r = mock.client.post("/v1/messages", headers=ANT, json=MSG)
    start = b'event: message_start\ndata: {"type":"message_start","message":{}}\n\n'
    assert r.content == start + b": comment\n\ndata: [DONE]\n\n"
    r = _chat(mock)
    assert r.content == b'data: {"a":1}\n\ndata: [DONE]\n\n'
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"


def test_chunk_delay_paces_frames(mock: MockProcess) -> None:
    mock.script([{"response": {"chunk_delay_ms": 60}}])
    t0 = time.monotonic()
    r = _chat(mock, CHAT_STREAM)  # role + 6 text + finish + [DONE] = 9 frames, 8 pauses
    assert r.content.count(b"data: ") == 9
    assert time.monotonic() - t0 >= 8 * 0.06


def test_drop_after_aborts_stream(mock: MockProcess) -> None:
    mock.script([{"response": {"drop_after": 3, "chunk_delay_ms": 5}}])
    status, buf, exc = _read_until_error(mock, "/v1/chat/completions", OAI, CHAT_STREAM)
    assert status == 200
    assert isinstance(exc, httpx.RemoteProtocolError)
    assert buf.count(b"data: ") == 3 and b"[DONE]" not in buf
    mock.script([{"response": {"drop_after": 4}}])  # unpaced: one write, then abort
    status, buf, exc = _read_until_error(mock, "/v1/messages", ANT, MSG_STREAM)
    assert isinstance(exc, httpx.RemoteProtocolError)
    assert buf.count(b"event: ") == 4 and b"message_stop" not in buf


def test_drop_after_truncates_json_body(mock: MockProcess) -> None:
    mock.script([{"response": {"drop_after": 10}}])
    status, buf, exc = _read_until_error(mock, "/v1/chat/completions", OAI, CHAT)
    assert status == 200 and isinstance(exc, httpx.RemoteProtocolError)
    assert buf == b'{"id":"cha'


def test_drop_after_seen_by_sdk(mock: MockProcess, oai: openai.OpenAI) -> None:
    mock.script([{"response": {"drop_after": 2}}])
    with pytest.raises(openai.APIError):
        list(oai.chat.completions.create(**CHAT_STREAM))


def test_error_after_openai(mock: MockProcess) -> None:
    mock.script(
        [
            {"response": {"error_after": 3}},
            {
                "response": {
                    "error_after": 2,
                    "error": {"error": {"message": "engine failure", "type": "server_error"}},
                }
            },
        ]
    )
    status, buf, exc = _read_until_error(mock, "/v1/chat/completions", OAI, CHAT_STREAM)
    assert status == 200 and exc is None
    frames = buf.split(b"\n\n")[:-1]
    assert len(frames) == 4 and b"[DONE]" not in buf
    assert json.loads(frames[-1][6:]) == {
        "error": {
            "message": "The server had an error while processing your request. Sorry about that!",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    _, buf, _ = _read_until_error(mock, "/v1/chat/completions", OAI, CHAT_STREAM)
    assert buf.split(b"\n\n")[-2] == b'data: {"error":{"message":"engine failure","type":"server_error"}}'


def test_error_after_anthropic_and_sdk(mock: MockProcess) -> None:
    mock.script([{"response": {"error_after": 4}}])
    _, buf, exc = _read_until_error(mock, "/v1/messages", ANT, MSG_STREAM)
    assert exc is None
    assert buf.endswith(
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )
    assert b"message_stop" not in buf
    mock.script([{"response": {"error_after": 4, "error": "engine failure"}}])
    with (
        anthropic.Anthropic(base_url=mock.url, api_key="k", max_retries=0) as client,
        pytest.raises(anthropic.APIStatusError) as info,
    ):
        list(client.messages.create(**MSG_STREAM))
    assert "engine failure" in str(info.value)


def test_hang_holds_connection(mock: MockProcess) -> None:
    mock.script([{"response": {"hang": True}}])
    with httpx.Client(base_url=mock.url, timeout=0.5) as c, pytest.raises(httpx.ReadTimeout):
        c.post("/v1/chat/completions", headers=OAI, json=CHAT)
    events = mock.wait_for_events(1)
    assert events[0]["type"] == "client_disconnected" and events[0]["phase"] == "hang"
    assert events[0]["after_ms"] >= 450


def test_invalid_script_lists_every_fault(mock: MockProcess) -> None:
    rules = [
        {
            "match": {"protocol": "grpc", "colour": 1},
            "times": 0,
            "response": {"status": 99, "fixture": "../x"},
        },
        {"response": {"body": {}, "sse": [], "drop_after": 1, "error_after": 2, "delay_ms": -1}},
        {"respond": {}},
        {"response": {"sse": [{"raw": 1}]}},
    ]
    r = mock.client.post("/_mock/script", json={"rules": rules})
    assert r.status_code == 400
    assert r.json() == {
        "error": "invalid script",
        "faults": [
            "rules[0].match.colour: unknown key; allowed: protocol, model, path_prefix, stream",
            "rules[0].match.protocol: 'grpc' is not one of openai, anthropic, responses, gemini, "
            "bedrock, cohere or null",
            "rules[0].times: 0 is not a positive count or -1 (forever); default 1",
            "rules[0].response.status: 99 is not an HTTP status (an int 100-599)",
            f"rules[0].response.fixture: fixture '../x': resolves outside {mock_fixtures_root()}; "
            "give a path relative to the fixtures dir",
            "rules[1].response.delay_ms: -1 is not a number of milliseconds in 0..3600000",
            "rules[1].response: body and sse are exclusive; keep one",
            "rules[1].response: drop_after and error_after are exclusive; keep one",
            "rules[2].respond: unknown key; allowed: match, times, response",
            "rules[2].response: missing; give at least {} (the default reply)",
            'rules[3].response.sse[0]: a raw item is exactly {"raw": "<text>"}',
        ],
    }
    assert mock.pending_rules() == []


def mock_fixtures_root() -> str:
    from .conftest import FIXTURES

    return str(FIXTURES.resolve())
