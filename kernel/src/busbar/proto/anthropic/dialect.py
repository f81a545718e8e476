"""The Anthropic Messages dialect object (``DIALECT``): both directions of ``/v1/messages``.

Composition only: the work lives in ``request`` (client body -> IR), ``request_writer``
(IR -> provider body), ``response`` (non-stream bodies), ``stream_decoder`` and
``stream_encoder`` (SSE events) and ``errors`` (envelopes). Implements
``busbar.proto.base.Dialect``; ``requires_max_tokens`` is True (the proxy injects the lane's
``default_max_tokens`` on a cross-protocol hop, case C017).

Source: ORIGINAL.md §2.2 "Seam", "Request translation".
"""

from __future__ import annotations

from typing import Any

from busbar.ir.model import IrRequest, IrResponse
from busbar.proto.anthropic import errors, request, request_writer, response
from busbar.proto.anthropic.stream_decoder import AnthropicStreamDecoder
from busbar.proto.anthropic.stream_encoder import AnthropicStreamEncoder
from busbar.proto.base import UpstreamErrorInfo


class AnthropicDialect:
    """Anthropic Messages: ``name = "anthropic"``, ``max_tokens`` required upstream."""

    name = "anthropic"
    requires_max_tokens = True

    def read_request(self, body: dict[str, Any]) -> IrRequest:
        """Client body -> IR (see ``busbar.proto.anthropic.request.read_request``)."""
        return request.read_request(body)

    def write_response(self, resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
        """IR response -> ``type: message`` body (see ``response.write_response``)."""
        return response.write_response(resp, model, req)

    def stream_encoder(self, model: str, req: IrRequest) -> AnthropicStreamEncoder:
        """An encoder of Messages stream events for the client."""
        return AnthropicStreamEncoder(model, req)

    def error_response(self, status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
        """Anthropic error envelope (see ``errors.error_response``)."""
        return errors.error_response(status, kind, message)

    def write_request(self, req: IrRequest, upstream_model: str) -> dict[str, Any]:
        """IR -> provider body (see ``request_writer.write_request``)."""
        return request_writer.write_request(req, upstream_model)

    def read_response(self, body: dict[str, Any]) -> IrResponse:
        """Provider ``type: message`` body -> IR (see ``response.read_response``)."""
        return response.read_response(body)

    def stream_decoder(self) -> AnthropicStreamDecoder:
        """A decoder of the provider's event stream."""
        return AnthropicStreamDecoder()

    def read_error(self, status: int, body: bytes) -> UpstreamErrorInfo:
        """Provider error body -> code/message (see ``errors.read_error``)."""
        return errors.read_error(status, body)


DIALECT = AnthropicDialect()
"""The module-level singleton registered under ``"anthropic"``."""
