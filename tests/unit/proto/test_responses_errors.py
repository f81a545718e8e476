"""Responses error envelopes (error_response, read_error), registry entry and egress_request."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import httpx2
import openai
import pytest
from busbar.proto.base import ErrorKind, UpstreamErrorInfo
from busbar.proto.registry import get_dialect
from busbar.proto.responses import DIALECT
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES


@dataclass
class FakeProvider:
    base_url: str = "https://api.openai.com"
    path: str | None = None
    api_key: str = "sk-test"
    auth: str | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)


def sdk_error(status: int, headers: dict[str, str], body: bytes) -> openai.APIStatusError:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers=headers, content=body)

    client = openai.OpenAI(
        api_key="k",
        base_url="http://busbar.test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    with pytest.raises(openai.APIStatusError) as e:
        client.responses.create(model="pool", input="x")
    return e.value


def test_registered_under_responses() -> None:
    assert get_dialect("responses") is DIALECT
    assert (DIALECT.name, DIALECT.requires_max_tokens) == ("responses", False)


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
        (404, "model_not_found", "invalid_request_error", "model_not_found", openai.NotFoundError),
        (429, ErrorKind.RATE_LIMIT, "rate_limit_error", "rate_limit_exceeded", openai.RateLimitError),
        (429, "insufficient_quota", "insufficient_quota", "insufficient_quota", openai.RateLimitError),
        (500, ErrorKind.API_ERROR, "server_error", None, openai.InternalServerError),
        (503, ErrorKind.OVERLOADED, "server_error", None, openai.InternalServerError),
    ],
)
def test_openai_envelope_and_sdk_exception(
    status: int, kind: str, etype: str, code: str | None, exc: type
) -> None:
    st, headers, body = DIALECT.error_response(status, kind, "the message")
    assert st == status and headers == {"content-type": "application/json"}
    assert json.loads(body) == {
        "error": {"message": "the message", "type": etype, "param": None, "code": code}
    }
    err = sdk_error(st, headers, body)
    assert type(err) is exc and err.status_code == status and err.message.endswith("the message")


@pytest.mark.parametrize(
    "name,status,info",
    [
        (
            "error-400-invalid-parameter.response.json",
            400,
            UpstreamErrorInfo(
                "decimal_below_min_value",
                "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -1 instead.",
                "invalid_request_error",
            ),
        ),
        (
            "error-429-insufficient-quota.response.json",
            429,
            UpstreamErrorInfo(
                "insufficient_quota",
                "You exceeded your current quota, please check your plan and billing details. For more "
                "information on this error, read the docs: "
                "https://platform.openai.com/docs/guides/error-codes/api-errors.",
                "insufficient_quota",
            ),
        ),
    ],
)
def test_read_error_fixtures(name: str, status: int, info: UpstreamErrorInfo) -> None:
    assert DIALECT.read_error(status, (FIXTURES / "openai-responses" / name).read_bytes()) == info


def test_read_error_tolerates_text_and_truncation() -> None:
    assert DIALECT.read_error(502, b"Bad Gateway") == UpstreamErrorInfo(None, "Bad Gateway")
    assert DIALECT.read_error(500, b"") == UpstreamErrorInfo(None, "upstream returned HTTP 500")
    cut = b'{"error": {"message": "The server had an err'
    assert DIALECT.read_error(500, cut).message == "The server had an err"


def test_egress_request_native_bearer() -> None:
    url, headers, body = DIALECT.egress_request(FakeProvider(), "gpt-4o", True, b"{}", None)
    assert url == "https://api.openai.com/v1/responses"
    assert headers == {
        "authorization": "Bearer sk-test",
        "content-type": "application/json",
        "accept-encoding": "identity",
    }
    assert body == b"{}"


def test_egress_request_path_override_and_kernel_auth() -> None:
    p = FakeProvider(
        base_url="https://gw.test/openai", path="/custom/responses", extra_headers={"x-team": "a"}
    )
    url, headers, _ = DIALECT.egress_request(p, "m", False, b"{}", {"api-key": "azure-key"})
    assert url == "https://gw.test/openai/custom/responses"
    assert headers == {
        "api-key": "azure-key",
        "x-team": "a",
        "content-type": "application/json",
        "accept-encoding": "identity",
    }
    _, headers, _ = DIALECT.egress_request(FakeProvider(auth="api-key"), "m", False, b"", None)
    assert headers["api-key"] == "sk-test" and "authorization" not in headers
