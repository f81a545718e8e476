"""The OpenAI Chat Completions dialect object (``DIALECT``): both directions of ``/v1/chat/completions``.

Assembled (``busbar.proto.dialect.ModularDialect``) from ``request`` (client body -> IR),
``parts`` (content parts), ``request_writer`` (IR -> provider body), ``response`` (non-stream
bodies), ``stream_decoder`` and ``stream_encoder`` (SSE chunks) and ``errors`` (envelopes). The
proxy builds the upstream URL and headers (``busbar.proxy.egress``).
"""

from __future__ import annotations

from busbar.proto.dialect import ModularDialect
from busbar.proto.openai import errors, request, request_writer, response
from busbar.proto.openai.stream_decoder import OpenAIStreamDecoder
from busbar.proto.openai.stream_encoder import OpenAIStreamEncoder

DIALECT = ModularDialect(
    "openai", requires_max_tokens=False, request=request, request_writer=request_writer,
    response=response, errors=errors, decoder=OpenAIStreamDecoder, encoder=OpenAIStreamEncoder,
)
"""The singleton registered under ``"openai"`` (no ``max_tokens`` requirement)."""
