"""The Gemini dialect object (``DIALECT``): both directions of ``models/{model}:generateContent``.

Assembled (``busbar.proto.dialect.ModularDialect``) from ``request`` (client body -> IR) and
``parts`` (content parts), ``request_writer`` (IR -> provider body), ``response`` (non-stream
bodies), ``stream_decoder`` / ``stream_encoder`` (SSE or JSON-array chunks), ``errors``
(envelopes), ``ids`` (thought signatures inside tool-call ids), plus ``egress_request`` below.

Path-model protocol: the model and the stream flag are in the URL (``:generateContent`` /
``:streamGenerateContent``), the body has neither; the proxy sets ``ir.model``/``ir.stream``
from the route on ingress, and ``req.extra["__busbar_gemini_json_array"]`` when a streaming
client did not ask for ``alt=sse``. Egress always streams with ``?alt=sse``.

Source: docs/protocols/README.md#one-protocol--modules-of-one-job-each, docs/protocols/gemini.md#egress.
docs/config-at-a-glance.md#providersyaml ``path_base`` (Gemini-on-Vertex), docs/protocols/README.md.
"""

from __future__ import annotations

from typing import Any

import orjson

from busbar.modelname import path_segment
from busbar.proto.dialect import ModularDialect
from busbar.proto.gemini import casing, errors, request, request_writer, response
from busbar.proto.gemini.casing import COUNT_TOKENS_KEY
from busbar.proto.gemini.stream_decoder import GeminiStreamDecoder
from busbar.proto.gemini.stream_encoder import GeminiStreamEncoder

DEFAULT_PATH_BASE = "/v1beta/models"
"""The Gemini API's model collection; ``path_base`` replaces it (Vertex AI's
``/v1/projects/{p}/locations/{l}/publishers/google/models``)."""

USER_AGENT = "google-genai-sdk/0.8.0 gl-python/3.11"
"""Pinned native-SDK ``User-Agent`` (docs/protocols/gemini.md#egress)."""

COUNT_TOKENS_PREFIX = b'{"' + COUNT_TOKENS_KEY.encode() + b'":'


def egress_request(
    provider: Any,
    upstream_model: str,
    stream: bool,
    body: bytes,
    auth_headers: dict[str, str] | None,
) -> tuple[str, dict[str, str], bytes]:
    """``(absolute URL, headers, body)`` of one upstream call.

    URL: ``base_url + (path_base or "/v1beta/models") + "/{model}:generateContent"`` or
    ``":streamGenerateContent?alt=sse"`` (the model percent-encoded as one path segment, ``@``
    kept: ``busbar.modelname.path_segment``); a ``{"generateContentRequest": …}`` body goes to
    ``":countTokens"`` with ``generateContentRequest.model = "models/{model}"``.

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
    if body.startswith(COUNT_TOKENS_PREFIX):    # a countTokens body (see casing.count_tokens_request)
        doc = orjson.loads(body)
        doc[COUNT_TOKENS_KEY]["model"] = f"models/{upstream_model}"
        body, verb = orjson.dumps(doc), ":countTokens"
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


DIALECT = ModularDialect(
    "gemini", requires_max_tokens=False, request=request, request_writer=request_writer,
    response=response, errors=errors, decoder=GeminiStreamDecoder, encoder=GeminiStreamEncoder,
    egress=egress_request, normalize=casing.normalize_request,
)
"""The singleton registered under ``"gemini"`` (no ``max_tokens`` requirement)."""
