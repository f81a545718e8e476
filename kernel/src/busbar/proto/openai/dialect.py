"""The OpenAI Chat Completions dialect object (``DIALECT``): both directions of ``/v1/chat/completions``.

Composition only: the work lives in ``request`` (client body -> IR), ``parts`` (content
parts), ``request_writer`` (IR -> provider body), ``response`` (non-stream bodies),
``stream_decoder`` and ``stream_encoder`` (SSE chunks) and ``errors`` (envelopes).
Implements ``busbar.proto.base.Dialect``.

Source: ORIGINAL.md §2.2 "Seam" (``ProtocolReader``/``ProtocolWriter``).
"""

from __future__ import annotations

from typing import Any

from busbar.ir.model import IrRequest, IrResponse
from busbar.proto.base import UpstreamErrorInfo
from busbar.proto.openai import errors, request, request_writer, response
from busbar.proto.openai.stream_decoder import OpenAIStreamDecoder
from busbar.proto.openai.stream_encoder import OpenAIStreamEncoder


class OpenAIDialect:
    """OpenAI Chat Completions: ``name = "openai"``, no ``max_tokens`` requirement."""

    name = "openai"
    requires_max_tokens = False

    def read_request(self, body: dict[str, Any]) -> IrRequest:
        """Client body -> IR (see ``busbar.proto.openai.request.read_request``)."""
        return request.read_request(body)

    def write_response(self, resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
        """IR response -> ``chat.completion`` body (see ``response.write_response``)."""
        return response.write_response(resp, model, req)

    def stream_encoder(self, model: str, req: IrRequest) -> OpenAIStreamEncoder:
        """An encoder of ``chat.completion.chunk`` frames for the client."""
        return OpenAIStreamEncoder(model, req)

    def error_response(self, status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
        """OpenAI error envelope (see ``errors.error_response``)."""
        return errors.error_response(status, kind, message)

    def write_request(self, req: IrRequest, upstream_model: str) -> dict[str, Any]:
        """IR -> provider body (see ``request_writer.write_request``)."""
        return request_writer.write_request(req, upstream_model)

    def read_response(self, body: dict[str, Any]) -> IrResponse:
        """Provider ``chat.completion`` body -> IR (see ``response.read_response``)."""
        return response.read_response(body)

    def stream_decoder(self) -> OpenAIStreamDecoder:
        """A decoder of the provider's chunk stream."""
        return OpenAIStreamDecoder()

    def read_error(self, status: int, body: bytes) -> UpstreamErrorInfo:
        """Provider error body -> code/message (see ``errors.read_error``)."""
        return errors.read_error(status, body)


DIALECT = OpenAIDialect()
"""The module-level singleton registered under ``"openai"``."""
