"""The OpenAI Responses dialect object (``DIALECT``): both directions of ``/v1/responses``.

Assembled (``busbar.proto.dialect.ModularDialect``) from ``request`` (client body -> IR),
``request_writer`` (IR -> provider body), ``response`` (non-stream bodies and the ``response``
object builder), ``stream_decoder`` and ``stream_encoder`` (typed SSE events) and ``errors``
(envelopes), plus ``egress_request`` (URL + headers of one upstream call).

Source: docs/protocols/README.md#one-protocol--modules-of-one-job-each, docs/protocols/responses.md#egress (responses:
``Authorization: Bearer <key>``).
"""

from __future__ import annotations

from typing import Any

from busbar.proto.dialect import EgressRequest, ModularDialect
from busbar.proto.responses import errors, request, request_writer, response
from busbar.proto.responses.stream_decoder import ResponsesStreamDecoder
from busbar.proto.responses.stream_encoder import ResponsesStreamEncoder

DEFAULT_PATH = "/v1/responses"
"""The standard upstream path, appended to the provider's ``base_url`` unless ``path`` is set."""


def egress_headers(provider: Any, auth_headers: dict[str, str] | None) -> dict[str, str]:
    """Request headers of one upstream call (shared by the body-model Bearer dialects).

    Native auth is ``authorization: Bearer <api_key>`` (``auth: api-key`` sends ``api-key:``);
    ``auth_headers`` (already computed by the kernel for bearer/api-key/oauth/jwt styles) replace
    it. Always ``content-type: application/json`` and ``accept-encoding: identity`` (a relayed
    body is never transparently decompressed — case C052); provider ``extra_headers`` are added.
    """
    if auth_headers is not None:
        headers = dict(auth_headers)
    elif getattr(provider, "auth", None) == "api-key":
        headers = {"api-key": provider.api_key}
    else:
        headers = {"authorization": f"Bearer {provider.api_key}"}
    extra = getattr(provider, "extra_headers", None)
    if extra:
        headers.update(extra)
    headers["content-type"] = "application/json"
    headers["accept-encoding"] = "identity"
    return headers


def bearer_egress(default_path: str) -> EgressRequest:
    """The ``egress_request`` of a body-model Bearer dialect whose standard path is ``default_path``.

    The returned function maps ``(provider, upstream_model, stream, body, auth_headers)`` to
    ``(provider.base_url + (provider.path or default_path), egress_headers(provider,
    auth_headers), body)``: the model is in the body (not the URL), the body is returned unchanged.
    """

    def egress_request(provider: Any, upstream_model: str, stream: bool, body: bytes,
                       auth_headers: dict[str, str] | None) -> tuple[str, dict[str, str], bytes]:
        return provider.base_url + (provider.path or default_path), egress_headers(provider, auth_headers), body

    return egress_request


DIALECT = ModularDialect(
    "responses", requires_max_tokens=False, request=request, request_writer=request_writer,
    response=response, errors=errors, decoder=ResponsesStreamDecoder, encoder=ResponsesStreamEncoder,
    egress=bearer_egress(DEFAULT_PATH),
)
"""The singleton registered under ``"responses"`` (no ``max_tokens`` requirement)."""
