"""The OpenAI Responses dialect object (``DIALECT``): both directions of ``/v1/responses``.

Composition only: the work lives in ``request`` (client body -> IR), ``request_writer``
(IR -> provider body), ``response`` (non-stream bodies and the ``response`` object builder),
``stream_decoder`` and ``stream_encoder`` (typed SSE events) and ``errors`` (envelopes).
Implements ``busbar.proto.base.Dialect`` plus ``egress_request`` (URL + headers of one upstream
call).

Source: ORIGINAL.md §2.2 "Seam", "Egress auth per protocol"; seeds 001 "Credential format by
protocol" (responses: ``Authorization: Bearer <key>``).
"""

from __future__ import annotations

from typing import Any

from busbar.ir.model import IrRequest, IrResponse
from busbar.proto.base import UpstreamErrorInfo
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


class ResponsesDialect:
    """OpenAI Responses: ``name = "responses"``, no ``max_tokens`` requirement."""

    name = "responses"
    requires_max_tokens = False

    def read_request(self, body: dict[str, Any]) -> IrRequest:
        """Client body -> IR (see ``busbar.proto.responses.request.read_request``)."""
        return request.read_request(body)

    def write_response(self, resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
        """IR response -> ``response`` object (see ``response.write_response``)."""
        return response.write_response(resp, model, req)

    def stream_encoder(self, model: str, req: IrRequest) -> ResponsesStreamEncoder:
        """An encoder of typed Responses stream events for the client."""
        return ResponsesStreamEncoder(model, req)

    def error_response(self, status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
        """OpenAI error envelope (see ``errors.error_response``)."""
        return errors.error_response(status, kind, message)

    def write_request(self, req: IrRequest, upstream_model: str) -> dict[str, Any]:
        """IR -> provider body (see ``request_writer.write_request``)."""
        return request_writer.write_request(req, upstream_model)

    def read_response(self, body: dict[str, Any]) -> IrResponse:
        """Provider ``response`` body -> IR (see ``response.read_response``; raises ``ResponsesFailed``)."""
        return response.read_response(body)

    def stream_decoder(self) -> ResponsesStreamDecoder:
        """A decoder of the provider's typed event stream."""
        return ResponsesStreamDecoder()

    def read_error(self, status: int, body: bytes) -> UpstreamErrorInfo:
        """Provider error body -> code/message (see ``errors.read_error``)."""
        return errors.read_error(status, body)

    def egress_request(
        self,
        provider: Any,
        upstream_model: str,
        stream: bool,
        body: bytes,
        auth_headers: dict[str, str] | None,
    ) -> tuple[str, dict[str, str], bytes]:
        """The upstream call: ``(absolute URL, headers, body)``.

        Args:
            provider: the runtime provider (``base_url`` with its trailing slash trimmed, ``path``
                overriding the default path when set, ``api_key``, ``auth`` — None is native).
            upstream_model: the lane's wire model (already in the body; not in the URL).
            stream: whether the call streams (the body's ``stream`` already says so).
            body: the request body bytes, returned unchanged.
            auth_headers: the kernel's computed credential headers, or None for native auth.

        Returns:
            ``base_url + (path or "/v1/responses")``, the headers of ``egress_headers``, ``body``.
        """
        url = provider.base_url + (provider.path or DEFAULT_PATH)
        return url, egress_headers(provider, auth_headers), body


DIALECT = ResponsesDialect()
"""The module-level singleton registered under ``"responses"``."""
