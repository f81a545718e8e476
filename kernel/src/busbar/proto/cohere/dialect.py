"""The Cohere v2 Chat dialect object (``DIALECT``): both directions of ``/v2/chat``.

Composition only: the work lives in ``request`` (client body -> IR), ``request_writer``
(IR -> provider body), ``response`` (non-stream bodies), ``stream_decoder`` and
``stream_encoder`` (SSE events) and ``errors`` (envelopes). Implements
``busbar.proto.base.Dialect`` plus ``egress_request`` (URL + headers of one upstream call).

Source: ORIGINAL.md §2.2 "Seam", "Egress auth per protocol"; seeds 001 "Credential format by
protocol" (cohere: ``Authorization: Bearer <key>``).
"""

from __future__ import annotations

from typing import Any

from busbar.ir.model import IrRequest, IrResponse
from busbar.proto.base import UpstreamErrorInfo
from busbar.proto.cohere import errors, request, request_writer, response
from busbar.proto.cohere.stream_decoder import CohereStreamDecoder
from busbar.proto.cohere.stream_encoder import CohereStreamEncoder
from busbar.proto.responses.dialect import egress_headers

DEFAULT_PATH = "/v2/chat"
"""The standard upstream path, appended to the provider's ``base_url`` unless ``path`` is set."""


class CohereDialect:
    """Cohere v2 Chat: ``name = "cohere"``, no ``max_tokens`` requirement."""

    name = "cohere"
    requires_max_tokens = False

    def read_request(self, body: dict[str, Any]) -> IrRequest:
        """Client body -> IR (see ``busbar.proto.cohere.request.read_request``)."""
        return request.read_request(body)

    def write_response(self, resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
        """IR response -> Cohere v2 chat body (see ``response.write_response``)."""
        return response.write_response(resp, model, req)

    def stream_encoder(self, model: str, req: IrRequest) -> CohereStreamEncoder:
        """An encoder of Cohere v2 stream events for the client."""
        return CohereStreamEncoder(model, req)

    def error_response(self, status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
        """Cohere error envelope ``{"message"}`` (see ``errors.error_response``)."""
        return errors.error_response(status, kind, message)

    def write_request(self, req: IrRequest, upstream_model: str) -> dict[str, Any]:
        """IR -> provider body (see ``request_writer.write_request``)."""
        return request_writer.write_request(req, upstream_model)

    def read_response(self, body: dict[str, Any]) -> IrResponse:
        """Provider body -> IR (see ``response.read_response``; raises ``CohereAnswerError``)."""
        return response.read_response(body)

    def stream_decoder(self) -> CohereStreamDecoder:
        """A decoder of the provider's event stream."""
        return CohereStreamDecoder()

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
            ``base_url + (path or "/v2/chat")``; headers: native ``authorization: Bearer <key>``
            (or ``auth_headers``), ``content-type: application/json``, ``accept-encoding:
            identity`` (see ``busbar.proto.responses.dialect.egress_headers``); ``body``.
        """
        url = provider.base_url + (provider.path or DEFAULT_PATH)
        return url, egress_headers(provider, auth_headers), body


DIALECT = CohereDialect()
"""The module-level singleton registered under ``"cohere"``."""
