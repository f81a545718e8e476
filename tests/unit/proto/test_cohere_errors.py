"""Cohere error envelopes (error_response, read_error) with cohere-python's typed errors; registry; egress_request."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import cohere
import httpx
import pytest
from busbar.proto.base import ErrorKind, UpstreamErrorInfo
from busbar.proto.cohere import DIALECT
from busbar.proto.registry import get_dialect
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES
from cohere.core.api_error import ApiError

FIXTURES = PACKAGED_FIXTURES


@dataclass
class FakeProvider:
    base_url: str = "https://api.cohere.com"
    path: str | None = None
    api_key: str = "co-key"
    auth: str | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)


def sdk_error(status: int, headers: dict[str, str], body: bytes, stream: bool = False) -> ApiError:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, content=body)

    client: Any = cohere.ClientV2(
        api_key="k",
        base_url="http://busbar.test",
        max_retries=0,
        httpx_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    with pytest.raises(ApiError) as e:
        if stream:
            list(client.chat_stream(model="pool", messages=[{"role": "user", "content": "x"}]))
        else:
            client.chat(model="pool", messages=[{"role": "user", "content": "x"}])
    return e.value


def test_registered_under_cohere() -> None:
    assert get_dialect("cohere") is DIALECT
    assert (DIALECT.name, DIALECT.requires_max_tokens) == ("cohere", False)


@pytest.mark.parametrize(
    "status,kind,exc",
    [
        (400, ErrorKind.INVALID_REQUEST, cohere.BadRequestError),
        (401, ErrorKind.AUTHENTICATION, cohere.UnauthorizedError),
        (403, ErrorKind.PERMISSION, cohere.ForbiddenError),
        (404, ErrorKind.NOT_FOUND, cohere.NotFoundError),
        (413, ErrorKind.REQUEST_TOO_LARGE, ApiError),
        (429, ErrorKind.RATE_LIMIT, cohere.TooManyRequestsError),
        (500, ErrorKind.API_ERROR, cohere.InternalServerError),
        (503, ErrorKind.OVERLOADED, cohere.ServiceUnavailableError),
        (504, ErrorKind.TIMEOUT, cohere.GatewayTimeoutError),
    ],
)
@pytest.mark.parametrize("stream", [False, True], ids=["chat", "chat_stream"])
def test_cohere_envelope_and_sdk_exception(status: int, kind: str, exc: type, stream: bool) -> None:
    st, headers, body = DIALECT.error_response(status, kind, "the message")
    assert st == status and headers == {"content-type": "application/json"}
    assert json.loads(body) == {"message": "the message"}
    err = sdk_error(st, headers, body, stream)
    assert type(err) is exc and err.status_code == status
    assert err.body == {"message": "the message"}


def test_auth_failure_reads_as_cohere_does() -> None:
    _st, _headers, body = DIALECT.error_response(401, ErrorKind.AUTHENTICATION, "invalid api token")
    assert body == b'{"message":"invalid api token"}'


def test_read_error_fixture_404() -> None:
    body = (FIXTURES / "cohere" / "error-404-model-not-found.response.json").read_bytes()
    assert DIALECT.read_error(404, body) == UpstreamErrorInfo(
        None,
        "model 'nonexistent' not found, make sure the correct model ID was used and that you have access to the model.",
    )


def test_read_error_tolerates_text_and_truncation() -> None:
    assert DIALECT.read_error(502, b"<html>bad gateway</html>") == UpstreamErrorInfo(
        None, "<html>bad gateway</html>"
    )
    assert DIALECT.read_error(429, b"") == UpstreamErrorInfo(None, "upstream returned HTTP 429")
    assert DIALECT.read_error(500, b'{"id": "x", "message": "internal serv').message == "internal serv"


def test_egress_request_native_bearer_and_overrides() -> None:
    url, headers, body = DIALECT.egress_request(FakeProvider(), "command-r", False, b'{"a":1}', None)
    assert url == "https://api.cohere.com/v2/chat"
    assert headers == {
        "authorization": "Bearer co-key",
        "content-type": "application/json",
        "accept-encoding": "identity",
    }
    assert body == b'{"a":1}'
    p = FakeProvider(base_url="https://proxy.test/co", path="/v2/chat/custom")
    url, headers, _ = DIALECT.egress_request(p, "m", True, b"", {"authorization": "Bearer minted-jwt"})
    assert url == "https://proxy.test/co/v2/chat/custom"
    assert headers["authorization"] == "Bearer minted-jwt"
