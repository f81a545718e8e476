"""The Gemini dialect object (``DIALECT``): both directions of ``models/{model}:generateContent``.

Composition only: ``request`` (client body -> IR) and ``parts`` (content parts), ``request_writer``
(IR -> provider body),
``response`` (non-stream bodies), ``stream_decoder`` / ``stream_encoder`` (SSE or JSON-array
chunks), ``errors`` (envelopes), ``ids`` (thought signatures inside tool-call ids). Implements
``busbar.proto.base.Dialect``; ``requires_max_tokens`` is False.

Path-model protocol: the model and the stream flag are in the URL (``:generateContent`` /
``:streamGenerateContent``), the body has neither; the proxy sets ``ir.model``/``ir.stream``
from the route on ingress, and ``req.extra["__busbar_gemini_json_array"]`` when a streaming
client did not ask for ``alt=sse``. Egress always streams with ``?alt=sse``.

Source: ORIGINAL.md §2.2 "Seam", "Body-model vs path-model", "Egress auth per protocol";
seeds 001 "providers.yaml" ``path_base`` (Gemini-on-Vertex), "Credential format by protocol".
"""

from __future__ import annotations

from typing import Any

from busbar.ir.model import IrRequest, IrResponse
from busbar.modelname import path_segment
from busbar.proto.base import UpstreamErrorInfo
from busbar.proto.gemini import errors, request, request_writer, response
from busbar.proto.gemini.stream_decoder import GeminiStreamDecoder
from busbar.proto.gemini.stream_encoder import GeminiStreamEncoder

DEFAULT_PATH_BASE = "/v1beta/models"
"""The Gemini API's model collection; ``path_base`` replaces it (Vertex AI's
``/v1/projects/{p}/locations/{l}/publishers/google/models``)."""

USER_AGENT = "google-genai-sdk/0.8.0 gl-python/3.11"
"""Pinned native-SDK ``User-Agent`` (§2.24)."""


class GeminiDialect:
    """Gemini ``generateContent``: ``name = "gemini"``, no ``max_tokens`` requirement."""

    name = "gemini"
    requires_max_tokens = False

    # ---- ingress
    def read_request(self, body: dict[str, Any]) -> IrRequest:
        """Client body -> IR (see ``busbar.proto.gemini.request.read_request``)."""
        return request.read_request(body)

    def write_response(self, resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
        """IR response -> ``GenerateContentResponse`` (see ``response.write_response``)."""
        return response.write_response(resp, model, req)

    def stream_encoder(self, model: str, req: IrRequest) -> GeminiStreamEncoder:
        """An encoder of stream chunks: SSE, or a JSON array when ``req.extra`` carries the shim key."""
        return GeminiStreamEncoder(model, req)

    def error_response(self, status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
        """Gemini error envelope (see ``errors.error_response``)."""
        return errors.error_response(status, kind, message)

    # ---- egress
    def write_request(
        self, req: IrRequest, upstream_model: str, *, thought_signature_placeholder: bool = False
    ) -> dict[str, Any]:
        """IR -> provider body (see ``request_writer.write_request``)."""
        return request_writer.write_request(
            req, upstream_model, thought_signature_placeholder=thought_signature_placeholder
        )

    def read_response(self, body: dict[str, Any]) -> IrResponse:
        """Provider ``GenerateContentResponse`` -> IR (see ``response.read_response``)."""
        return response.read_response(body)

    def stream_decoder(self) -> GeminiStreamDecoder:
        """A decoder of the provider's ``alt=sse`` chunk stream."""
        return GeminiStreamDecoder()

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
        """``(absolute URL, headers, body)`` of one upstream call.

        URL: ``base_url + (path_base or "/v1beta/models") + "/{model}:generateContent"`` or
        ``":streamGenerateContent?alt=sse"`` (the model percent-encoded as one path segment, ``@``
        kept: ``busbar.modelname.path_segment``).

        Args:
            provider: has ``base_url`` (trailing slash trimmed), ``path_base``, ``api_key`` and
                optionally ``extra_headers`` (added as is).
            upstream_model: the lane's model name.
            stream: streaming call.
            body: the exact body bytes (returned unchanged).
            auth_headers: headers from a non-native auth style (jwt-bearer / oauth / bearer, e.g.
                Vertex AI); ``None`` = native ``x-goog-api-key``.
        """
        base = provider.base_url + (provider.path_base or DEFAULT_PATH_BASE)
        verb = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
        url = f"{base}/{path_segment(upstream_model, keep='@')}{verb}"
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
            "accept-encoding": "identity",
            "user-agent": USER_AGENT,
        }
        extra = getattr(provider, "extra_headers", None)
        if extra:
            headers.update(extra)
        if auth_headers is not None:
            headers.update(auth_headers)
        else:
            headers["x-goog-api-key"] = provider.api_key
        return url, headers, body


DIALECT = GeminiDialect()
"""The module-level singleton registered under ``"gemini"``."""
