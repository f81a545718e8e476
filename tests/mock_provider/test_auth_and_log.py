"""Auth realism (401 with the captured bodies), the request log, health, unknown paths, control errors."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from busbar_mock_provider.process import MockProcess

from .conftest import fixture_bytes

CHAT: Any = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
MSG: Any = {"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def test_openai_missing_key_gets_captured_401(mock: MockProcess) -> None:
    r = mock.client.post("/v1/chat/completions", json=CHAT)
    assert r.status_code == 401
    assert r.headers["content-type"] == "application/json"
    assert r.content == fixture_bytes("openai-chat/error-401-invalid-api-key.response.json")
    r = mock.client.post("/v1/chat/completions", json=CHAT, headers={"authorization": "Basic abc"})
    assert r.status_code == 401


def test_anthropic_missing_key_gets_captured_401(mock: MockProcess) -> None:
    r = mock.client.post("/v1/messages", json=MSG)
    assert r.status_code == 401
    assert r.content == fixture_bytes("anthropic/error-401-authentication.response.json")
    assert (
        mock.client.post("/v1/messages", json=MSG, headers={"authorization": "Bearer tok"}).status_code == 200
    )
    assert mock.client.post("/v1/messages", json=MSG, headers={"x-api-key": "k"}).status_code == 200


def test_sdk_parses_the_401(mock: MockProcess) -> None:
    mock.script([{"response": {"status": 401}}])
    with (
        anthropic.Anthropic(base_url=mock.url, api_key="wrong", max_retries=0) as client,
        pytest.raises(anthropic.AuthenticationError) as info,
    ):
        client.messages.create(**MSG)
    assert info.value.status_code == 401
    assert info.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }


def test_no_auth_mode_accepts_anonymous() -> None:
    with MockProcess(no_auth=True) as mock:
        assert mock.client.post("/v1/chat/completions", json=CHAT).status_code == 200
        assert mock.client.post("/v1/messages", json=MSG).status_code == 200


def test_request_log_records_headers_and_body(mock: MockProcess) -> None:
    with openai.OpenAI(
        base_url=mock.url + "/v1", api_key="sk-secret-1", max_retries=0, default_headers={"X-Trace": "abc"}
    ) as client:
        client.chat.completions.create(**CHAT)
    mock.client.post("/v1/messages?beta=true", content=b"not json", headers={"x-api-key": "k2"})
    log = mock.requests()
    assert [e["path"] for e in log] == ["/v1/chat/completions", "/v1/messages"]
    first, second = log
    assert set(first) == {"ts", "method", "path", "raw_path", "query", "headers", "body"}
    assert first["raw_path"] == "/v1/chat/completions"
    assert first["method"] == "POST"
    assert first["headers"]["authorization"] == "Bearer sk-secret-1"
    assert first["headers"]["x-trace"] == "abc"
    assert first["body"] == CHAT
    assert second["body"] == "not json" and second["query"] == "beta=true"
    assert second["headers"]["x-api-key"] == "k2"
    assert mock.client.delete("/_mock/requests").json() == {"cleared": 2}
    assert mock.requests() == []


def test_bad_json_gets_provider_400(mock: MockProcess) -> None:
    r = mock.client.post("/v1/messages", content=b"{oops", headers={"x-api-key": "k"})
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"
    r = mock.client.post("/v1/chat/completions", content=b"{oops", headers={"authorization": "Bearer k"})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("We could not parse the JSON body of your request.")


def test_health_models_and_unknown_paths(mock: MockProcess) -> None:
    assert mock.client.get("/healthz").json() == {"status": "ok"}
    assert mock.client.get("/health").status_code == 200
    assert mock.client.get("/v1/models").status_code == 401
    models = mock.client.get(
        "/v1/models", headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}
    ).json()
    assert models["has_more"] is False and models["data"][0]["type"] == "model"
    r = mock.client.post("/v1/files", json={}, headers={"authorization": "Bearer k"})
    assert r.status_code == 404
    assert r.json()["error"]["message"] == "Invalid URL (POST /v1/files)"


def test_control_api_errors(mock: MockProcess) -> None:
    r = mock.client.get("/_mock/nope")
    assert r.status_code == 404
    assert r.json() == {
        "error": "unknown control path /_mock/nope",
        "allowed": ["events", "requests", "reset", "script"],
    }
    r = mock.client.put("/_mock/events")
    assert r.status_code == 405
    assert r.json() == {"error": "PUT not allowed on /_mock/events", "allowed": ["GET", "DELETE"]}
