"""Error envelopes (error_response) and upstream error extraction (read_error) for OpenAI and Anthropic."""

from __future__ import annotations

import json
import re

import anthropic
import httpx2
import openai
import pytest
from busbar.proto.anthropic import DIALECT as ANTHROPIC
from busbar.proto.base import ErrorKind, UpstreamErrorInfo
from busbar.proto.openai import DIALECT as OPENAI
from busbar.proto.registry import DIALECTS, get_dialect
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


def openai_sdk_error(status: int, headers: dict[str, str], body: bytes) -> openai.APIStatusError:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers=headers, content=body)

    client = openai.OpenAI(
        api_key="k",
        base_url="http://busbar.test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    with pytest.raises(openai.APIStatusError) as e:
        client.chat.completions.create(model="pool", messages=[{"role": "user", "content": "x"}])
    return e.value


def anthropic_sdk_error(status: int, headers: dict[str, str], body: bytes) -> anthropic.APIStatusError:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers=headers, content=body)

    client = anthropic.Anthropic(
        api_key="k",
        base_url="http://busbar.test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    with pytest.raises(anthropic.APIStatusError) as e:
        client.messages.create(model="pool", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    return e.value


# ---------------------------------------------------------------- registry


def test_registry_holds_the_dialects() -> None:
    assert DIALECTS["openai"] is OPENAI and DIALECTS["anthropic"] is ANTHROPIC
    assert get_dialect("openai") is OPENAI and get_dialect("anthropic") is ANTHROPIC
    assert (OPENAI.name, OPENAI.requires_max_tokens) == ("openai", False)
    assert (ANTHROPIC.name, ANTHROPIC.requires_max_tokens) == ("anthropic", True)
    assert all(name == d.name for name, d in DIALECTS.items())
    with pytest.raises(KeyError, match="unknown dialect 'klingon'; known: "):
        get_dialect("klingon")


# ---------------------------------------------------------------- OpenAI envelopes


@pytest.mark.parametrize(
    "status,kind,etype,code,exc",
    [
        (400, ErrorKind.INVALID_REQUEST, "invalid_request_error", None, openai.BadRequestError),
        (
            401,
            ErrorKind.AUTHENTICATION,
            "authentication_error",
            "invalid_api_key",
            openai.AuthenticationError,
        ),
        (403, ErrorKind.PERMISSION, "permission_error", None, openai.PermissionDeniedError),
        (404, ErrorKind.NOT_FOUND, "not_found_error", None, openai.NotFoundError),
        (404, "model_not_found", "invalid_request_error", "model_not_found", openai.NotFoundError),
        (
            413,
            ErrorKind.REQUEST_TOO_LARGE,
            "invalid_request_error",
            "request_too_large",
            openai.APIStatusError,
        ),
        (429, ErrorKind.RATE_LIMIT, "rate_limit_error", "rate_limit_exceeded", openai.RateLimitError),
        (429, "insufficient_quota", "insufficient_quota", "insufficient_quota", openai.RateLimitError),
        (500, ErrorKind.API_ERROR, "server_error", None, openai.InternalServerError),
        (503, ErrorKind.OVERLOADED, "server_error", None, openai.InternalServerError),
        (504, ErrorKind.TIMEOUT, "server_error", None, openai.InternalServerError),
    ],
)
def test_openai_error_envelope_and_sdk_exception(
    status: int, kind: str, etype: str, code: str | None, exc: type
) -> None:
    st, headers, body = OPENAI.error_response(status, kind, "the message")
    assert st == status
    assert headers == {"content-type": "application/json"}
    assert json.loads(body) == {
        "error": {"message": "the message", "type": etype, "param": None, "code": code}
    }
    err = openai_sdk_error(st, headers, body)
    assert type(err) is exc and err.status_code == status
    assert err.body == {"message": "the message", "type": etype, "param": None, "code": code}


def test_openai_envelope_exact_bytes_c018() -> None:
    assert OPENAI.error_response(429, ErrorKind.RATE_LIMIT, "Too many requests")[2] == (
        b'{"error":{"message":"Too many requests","type":"rate_limit_error","param":null,'
        b'"code":"rate_limit_exceeded"}}'
    )


def test_openai_unknown_kind_falls_back_to_the_status() -> None:
    assert (
        json.loads(OPENAI.error_response(401, "mystery", "m")[2])["error"]["type"] == "authentication_error"
    )


# ---------------------------------------------------------------- Anthropic envelopes


@pytest.mark.parametrize(
    "status,kind,etype,exc",
    [
        (400, ErrorKind.INVALID_REQUEST, "invalid_request_error", anthropic.BadRequestError),
        (401, ErrorKind.AUTHENTICATION, "authentication_error", anthropic.AuthenticationError),
        (403, ErrorKind.PERMISSION, "permission_error", anthropic.PermissionDeniedError),
        (404, ErrorKind.NOT_FOUND, "not_found_error", anthropic.NotFoundError),
        (413, ErrorKind.REQUEST_TOO_LARGE, "request_too_large", anthropic.APIStatusError),
        (429, ErrorKind.RATE_LIMIT, "rate_limit_error", anthropic.RateLimitError),
        (429, "insufficient_quota", "rate_limit_error", anthropic.RateLimitError),
        (500, ErrorKind.API_ERROR, "api_error", anthropic.InternalServerError),
        (503, ErrorKind.OVERLOADED, "overloaded_error", anthropic.APIStatusError),
        (529, ErrorKind.OVERLOADED, "overloaded_error", anthropic.APIStatusError),
        (503, ErrorKind.API_ERROR, "overloaded_error", anthropic.APIStatusError),
        (504, ErrorKind.TIMEOUT, "timeout_error", anthropic.APIStatusError),
    ],
)
def test_anthropic_error_envelope_and_sdk_exception(status: int, kind: str, etype: str, exc: type) -> None:
    st, headers, body = ANTHROPIC.error_response(status, kind, "the message")
    assert st == status
    assert headers["content-type"] == "application/json"
    assert re.fullmatch(r"req_011C[A-Za-z0-9]{20}", headers["request-id"])
    assert json.loads(body) == {"type": "error", "error": {"type": etype, "message": "the message"}}
    err = anthropic_sdk_error(st, headers, body)
    assert isinstance(err, exc) and err.status_code == status


def test_anthropic_sdk_classes_for_overload_and_timeout_statuses() -> None:
    assert (
        type(anthropic_sdk_error(*ANTHROPIC.error_response(529, ErrorKind.OVERLOADED, "m"))).__name__
        == "OverloadedError"
    )
    assert (
        type(anthropic_sdk_error(*ANTHROPIC.error_response(503, ErrorKind.OVERLOADED, "m"))).__name__
        == "ServiceUnavailableError"
    )
    assert (
        type(anthropic_sdk_error(*ANTHROPIC.error_response(504, ErrorKind.TIMEOUT, "m"))).__name__
        == "GatewayTimeoutError"
    )


def test_anthropic_envelope_exact_bytes_c020() -> None:
    msg = "model does not support this operation"
    body = ANTHROPIC.error_response(400, ErrorKind.INVALID_REQUEST, msg)[2]
    assert body == (
        b'{"type":"error","error":{"type":"invalid_request_error",'
        b'"message":"model does not support this operation"}}'
    )


# ---------------------------------------------------------------- read_error


@pytest.mark.parametrize(
    "name,status,expected",
    [
        (
            "openai-chat/error-400-context-length-exceeded.response.json",
            400,
            UpstreamErrorInfo(
                "context_length_exceeded",
                "This model's maximum context length is 4097 tokens. However, you requested 4120 "
                "tokens (3120 in the messages, 1000 in the completion). Please reduce the length of the "
                "messages or completion.",
                "invalid_request_error",
            ),
        ),
        (
            "openai-chat/error-400-unsupported-value.response.json",
            400,
            UpstreamErrorInfo(
                "unsupported_value",
                "Unsupported value: 'messages[0].role' does not support 'system' with this model.",
                "invalid_request_error",
            ),
        ),
        (
            "openai-chat/error-401-invalid-api-key.response.json",
            401,
            UpstreamErrorInfo(
                "invalid_api_key",
                "Incorrect API key provided: sk-XXXXX****************************************************"
                "XXXX. You can find your API key at https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
            ),
        ),
        (
            "openai-chat/error-404-model-not-found.response.json",
            404,
            UpstreamErrorInfo(
                "model_not_found",
                "The model `this-model-does-not-exist` does not exist or you do not have access to it.",
                "invalid_request_error",
            ),
        ),
    ],
)
def test_openai_read_error_fixtures(name: str, status: int, expected: UpstreamErrorInfo) -> None:
    assert OPENAI.read_error(status, (FIXTURES / name).read_bytes()) == expected


@pytest.mark.parametrize(
    "name,status,expected",
    [
        (
            "anthropic/error-400-invalid-request.response.json",
            400,
            UpstreamErrorInfo(
                "invalid_request_error",
                "This model does not support effort level 'xhigh'. Supported levels: high, low, max, medium.",
                "invalid_request_error",
            ),
        ),
        (
            "anthropic/error-401-authentication.response.json",
            401,
            UpstreamErrorInfo("authentication_error", "invalid x-api-key", "authentication_error"),
        ),
        (
            "anthropic/error-404-model-not-found.response.json",
            404,
            UpstreamErrorInfo("not_found_error", "model: claude-sonet-4-5", "not_found_error"),
        ),
        (
            "anthropic/error-429-rate-limit.response.json",
            429,
            UpstreamErrorInfo(
                "rate_limit_error",
                "This request would exceed your account's rate limit. Please try again later.",
                "rate_limit_error",
            ),
        ),
    ],
)
def test_anthropic_read_error_fixtures(name: str, status: int, expected: UpstreamErrorInfo) -> None:
    assert ANTHROPIC.read_error(status, (FIXTURES / name).read_bytes()) == expected


@pytest.mark.parametrize(
    "body,expected",
    [
        (b"", UpstreamErrorInfo(None, "upstream returned HTTP 502")),
        (b"<html>Bad Gateway</html>", UpstreamErrorInfo(None, "<html>Bad Gateway</html>")),
        (
            b'{"type":"error","error":{"type":"overloaded_error","message":"Overl',
            UpstreamErrorInfo("overloaded_error", "Overl", "overloaded_error"),
        ),
        (
            b'{"error": {"message": "He said \\"no\\"", "type": "server_er',
            UpstreamErrorInfo(None, 'He said "no"', None),
        ),
        (
            b'{"object":"error","message":"bad stop","type":"BadRequestError","param":null,"code":400}',
            UpstreamErrorInfo("BadRequestError", "bad stop", "BadRequestError"),
        ),
        (b'{"detail":"Not Found"}', UpstreamErrorInfo(None, "Not Found", None)),
        (b'{"error":"plain string"}', UpstreamErrorInfo(None, "plain string", None)),
        (b'{"error":{"code":"x"}}', UpstreamErrorInfo("x", "upstream returned HTTP 502", None)),
        (b"[1,2]", UpstreamErrorInfo(None, "[1,2]")),
    ],
)
def test_read_error_tolerates_odd_and_truncated_bodies(body: bytes, expected: UpstreamErrorInfo) -> None:
    assert OPENAI.read_error(502, body) == expected
    assert ANTHROPIC.read_error(502, body) == expected


def test_read_error_caps_long_messages() -> None:
    info = OPENAI.read_error(500, b"x" * 10000)
    assert info.message == "x" * 4096
