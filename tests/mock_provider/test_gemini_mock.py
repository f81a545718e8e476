"""The Gemini endpoints of the mock: google-genai against default replies, both stream framings, faults, Gemini 3."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from busbar.ir.model import BlockDelta, IrMessage, IrRequest, MessageDelta, StopReason, StreamError, TextBlock
from busbar.proto.gemini import DIALECT as GEMINI
from busbar.proto.sse import SseParser
from busbar_mock_provider.process import MockProcess

from .conftest import WEATHER_ARGS, WEATHER_SCHEMA, fixture_bytes

genai = pytest.importorskip(
    "google.genai",
    reason="google-genai is a test dependency (pip install google-genai): the official Gemini SDK must parse our output",
)
errors = pytest.importorskip("google.genai.errors")
types = pytest.importorskip("google.genai.types")

KEY: Any = {"x-goog-api-key": "AIza-test"}
BODY: Any = {"contents": [{"role": "user", "parts": [{"text": "Tell me a joke"}]}]}
GEN = "/v1beta/models/gemini-2.5-flash:generateContent"
SSE = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
ARRAY = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"


@pytest.fixture
def gem(mock: MockProcess) -> Iterator[Any]:
    """google-genai pointed at the mock (v1beta, no retries)."""
    yield genai.Client(
        api_key="AIza-test", http_options=types.HttpOptions(base_url=mock.url, api_version="v1beta")
    )


def decode(raw: bytes) -> list[Any]:
    dec = GEMINI.stream_decoder()
    return dec.feed(raw) + dec.close()


def test_generate_content_default_reply(mock: MockProcess, gem: Any) -> None:
    r = gem.models.generate_content(
        model="gemini-2.5-flash",
        contents="Tell me a joke",
        config=types.GenerateContentConfig(system_instruction="be brief"),
    )
    assert r.text == "Hello from gemini-2.5-flash. You said: Tell me a joke"
    assert r.candidates[0].finish_reason == types.FinishReason.STOP
    assert r.usage_metadata.candidates_token_count == 9 and r.model_version == "gemini-2.5-flash"
    assert len(r.response_id) == 23
    req = mock.requests()[-1]
    assert req["path"] == GEN and req["headers"]["x-goog-api-key"] == "AIza-test"
    assert "model" not in req["body"]  # the log keeps the body as sent; the model is in the URL


def test_stream_sse_with_the_sdk_and_raw_framing(mock: MockProcess, gem: Any) -> None:
    chunks = list(gem.models.generate_content_stream(model="gemini-2.5-flash", contents="Say hi"))
    assert "".join(c.text for c in chunks) == "Hello from gemini-2.5-flash. You said: Say hi"
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert all(c.candidates[0].finish_reason is None for c in chunks[:-1])
    assert mock.requests()[-1]["query"] == "alt=sse"
    r = mock.client.post(SSE, headers=KEY, json=BODY)
    assert r.headers["content-type"] == "text/event-stream" and "content-length" not in r.headers
    assert r.content.startswith(
        b'data: {"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"}'
    )
    assert r.content.endswith(b"\r\n\r\n") and b"[DONE]" not in r.content
    events = decode(r.content)
    assert (
        "".join(e.value for e in events if isinstance(e, BlockDelta))
        == "Hello from gemini-2.5-flash. You said: Tell me a joke"
    )
    assert events[-2].usage.output_tokens == 9


def test_stream_without_alt_is_one_json_array(mock: MockProcess) -> None:
    r = mock.client.post(ARRAY, headers=KEY, json=BODY)
    assert r.headers["content-type"] == "application/json; charset=UTF-8"
    assert r.content.startswith(b"[{\n") and r.content.endswith(b"\r\n]")
    body = json.loads(r.content)
    assert "".join(o["candidates"][0]["content"]["parts"][0]["text"] for o in body) == (
        "Hello from gemini-2.5-flash. You said: Tell me a joke"
    )
    assert body[-1]["candidates"][0]["finishReason"] == "STOP"
    events = decode(r.content)
    assert isinstance(events[-2], MessageDelta) and events[-2].stop_reason is StopReason.END_TURN


def test_tool_call_max_tokens_and_stop_sequences(mock: MockProcess, gem: Any) -> None:
    tool = types.Tool(
        function_declarations=[
            types.FunctionDeclaration(name="get_weather", parameters_json_schema=WEATHER_SCHEMA)
        ]
    )
    r = gem.models.generate_content(
        model="gemini-2.5-flash", contents="weather?", config=types.GenerateContentConfig(tools=[tool])
    )
    assert r.function_calls[0].name == "get_weather" and r.function_calls[0].args == WEATHER_ARGS
    assert r.candidates[0].content.parts[0].thought_signature is None
    r = gem.models.generate_content(
        model="m", contents="Quail pie please", config=types.GenerateContentConfig(max_output_tokens=2)
    )
    assert r.text == "Hello from" and r.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    r = gem.models.generate_content(
        model="m", contents="x", config=types.GenerateContentConfig(stop_sequences=["from"])
    )
    assert r.text == "Hello " and r.candidates[0].finish_reason == types.FinishReason.STOP
    # after a function response: text naming the result
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "w?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": "12C"}}}]},
        ],
        "tools": [
            {"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT", "properties": {}}}]}
        ],
    }
    out = mock.client.post(GEN, headers=KEY, json=body).json()
    assert out["candidates"][0]["content"]["parts"] == [
        {"text": 'Hello from gemini-2.5-flash. The tool returned: {"output":"12C"}'}
    ]


def test_gemini_3_signs_calls_and_refuses_replays_without_the_signature(mock: MockProcess) -> None:
    path = "/v1beta/models/gemini-3-pro-preview:generateContent"
    tools = [{"functionDeclarations": [{"name": "get_weather", "parametersJsonSchema": WEATHER_SCHEMA}]}]
    turn1 = mock.client.post(path, headers=KEY, json={"contents": BODY["contents"], "tools": tools}).json()
    part = turn1["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"]["name"] == "get_weather" and part["thoughtSignature"]
    history = [
        BODY["contents"][0],
        {"role": "model", "parts": [part]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "sun"}}}],
        },
    ]
    ok = mock.client.post(path, headers=KEY, json={"contents": history, "tools": tools})
    assert ok.status_code == 200
    unsigned = [history[0], {"role": "model", "parts": [{"functionCall": part["functionCall"]}]}, history[2]]
    bad = mock.client.post(path, headers=KEY, json={"contents": unsigned, "tools": tools})
    assert bad.status_code == 400
    err = bad.json()["error"]
    assert err["status"] == "INVALID_ARGUMENT"
    assert err["message"].startswith("Function call is missing a thought_signature in functionCall parts.")
    placeholder = [
        history[0],
        {
            "role": "model",
            "parts": [
                {"functionCall": part["functionCall"], "thoughtSignature": "skip_thought_signature_validator"}
            ],
        },
        history[2],
    ]
    assert (
        mock.client.post(path, headers=KEY, json={"contents": placeholder, "tools": tools}).status_code == 200
    )


def test_auth_and_validation_errors(mock: MockProcess) -> None:
    r = mock.client.post(GEN, json=BODY)
    assert r.status_code == 403 and r.json()["error"]["status"] == "PERMISSION_DENIED"
    r = mock.client.post(GEN, headers=KEY, json={"contents": []})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith(
        "* GenerateContentRequest.contents"
    )
    r = mock.client.post(GEN, headers=KEY, content=b"{nope")
    assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    ("status", "capture"),
    [
        (429, "gemini/error-429-resource-exhausted.response.json"),
        (400, "gemini/error-400-api-key-invalid.response.json"),
    ],
)
def test_scripted_status_sends_the_capture_and_the_sdk_raises(
    mock: MockProcess, gem: Any, status: int, capture: str
) -> None:
    mock.script([{"match": {"protocol": "gemini"}, "response": {"status": status}}])
    r = mock.client.post(GEN, headers=KEY, json=BODY)
    assert r.status_code == status and r.content == fixture_bytes(capture)
    mock.script([{"match": {"protocol": "gemini"}, "response": {"status": status}}])
    with pytest.raises(errors.ClientError) as e:
        gem.models.generate_content(model="gemini-2.5-flash", contents="x")
    assert e.value.code == status
    assert (
        GEMINI.read_error(status, fixture_bytes(capture)).type
        == json.loads(fixture_bytes(capture))["error"]["status"]
    )


def test_synthesized_5xx_raises_server_error(mock: MockProcess, gem: Any) -> None:
    mock.script([{"match": {"protocol": "gemini"}, "response": {"status": 503}}])
    with pytest.raises(errors.ServerError) as e:
        gem.models.generate_content(model="m", contents="x")
    assert (e.value.code, e.value.status) == (503, "UNAVAILABLE")


def test_match_model_is_the_model_in_the_url(mock: MockProcess) -> None:
    mock.script(
        [{"match": {"protocol": "gemini", "model": "gemini-other"}, "response": {"text": "scripted"}}]
    )
    plain = mock.client.post(GEN, headers=KEY, json=BODY).json()
    assert plain["candidates"][0]["content"]["parts"][0]["text"].startswith("Hello from gemini-2.5-flash")
    hit = mock.client.post("/v1beta/models/gemini-other:generateContent", headers=KEY, json=BODY).json()
    assert hit["candidates"][0]["content"]["parts"][0]["text"] == "scripted"
    mock.script([{"match": {"protocol": "gemini", "stream": True}, "response": {"text": "streamed"}}])
    assert (
        mock.client.post(GEN, headers=KEY, json=BODY).json()["candidates"][0]["content"]["parts"][0]["text"]
        != "streamed"
    )
    r = mock.client.post(SSE, headers=KEY, json=BODY)
    assert "streamed" in r.text


def test_error_after_is_an_error_chunk_in_both_framings(mock: MockProcess, gem: Any) -> None:
    mock.script([{"match": {"protocol": "gemini"}, "response": {"error_after": 2}}])
    r = mock.client.post(SSE, headers=KEY, json=BODY)
    events = [json.loads(d) for _e, d in SseParser().feed(r.content)]
    assert len(events) == 3 and events[-1] == {
        "error": {
            "code": 500,
            "message": (
                "An internal error has occurred. Please retry or report in "
                "https://developers.generativeai.google/guide/troubleshooting"
            ),
            "status": "INTERNAL",
        }
    }
    assert decode(r.content)[-1] == StreamError("api_error", events[-1]["error"]["message"])
    mock.script([{"match": {"protocol": "gemini"}, "response": {"error_after": 1, "error": "quota gone"}}])
    body = json.loads(mock.client.post(ARRAY, headers=KEY, json=BODY).content)
    assert len(body) == 2 and body[-1]["error"]["message"] == "quota gone"
    mock.script(
        [
            {
                "match": {"protocol": "gemini"},
                "response": {
                    "error_after": 1,
                    "error": {"error": {"code": 429, "message": "slow", "status": "RESOURCE_EXHAUSTED"}},
                },
            }
        ]
    )
    with pytest.raises(errors.ClientError) as e:
        list(gem.models.generate_content_stream(model="gemini-2.5-flash", contents="x"))
    assert e.value.code == 429


def test_drop_after_and_fixture_replay(mock: MockProcess) -> None:
    mock.script([{"match": {"protocol": "gemini"}, "response": {"drop_after": 2}}])
    buf = b""
    with (
        httpx.Client(base_url=mock.url, timeout=5) as c,
        c.stream("POST", SSE, headers=KEY, json=BODY) as r,
        pytest.raises(httpx.HTTPError),
    ):
        for part in r.iter_raw():
            buf += part
    assert decode(buf)[-1] == StreamError("api_error", "upstream stream ended prematurely")
    mock.script(
        [
            {
                "match": {"protocol": "gemini"},
                "response": {"fixture": "gemini/thinking-stream.response.sse.txt", "chunk_delay_ms": 1},
            }
        ]
    )
    r = mock.client.post(SSE, headers=KEY, json=BODY)
    assert r.content == fixture_bytes("gemini/thinking-stream.response.sse.txt")
    assert decode(r.content)[-2].usage.reasoning_tokens == 787


def test_busbar_egress_request_against_the_mock(mock: MockProcess) -> None:
    provider = SimpleNamespace(base_url=mock.url, path=None, path_base=None, api_key="AIza-egress", auth=None)
    ir = IrRequest(messages=[IrMessage("user", [TextBlock("ping")])], max_tokens=3)
    raw = json.dumps(GEMINI.write_request(ir, "gemini-2.5-flash")).encode()
    url, headers, body = GEMINI.egress_request(provider, "gemini-2.5-flash", True, raw, None)
    r = httpx.post(url, headers=headers, content=body)
    assert r.status_code == 200 and mock.requests()[-1]["headers"]["x-goog-api-key"] == "AIza-egress"
    events = decode(r.content)
    assert "".join(e.value for e in events if isinstance(e, BlockDelta)) == "Hello from gemini-2.5-flash."
    assert events[-2].stop_reason is StopReason.MAX_TOKENS
    url, headers, body = GEMINI.egress_request(provider, "gemini-2.5-flash", False, raw, None)
    resp = GEMINI.read_response(httpx.post(url, headers=headers, content=body).json())
    assert (
        resp.content == [TextBlock("Hello from gemini-2.5-flash.")]
        and resp.stop_reason is StopReason.MAX_TOKENS
    )
