"""The Anthropic Messages dialect object (``DIALECT``): both directions of ``/v1/messages``.

Assembled (``busbar.proto.dialect.ModularDialect``) from ``request`` (client body -> IR),
``request_writer`` (IR -> provider body), ``response`` (non-stream bodies), ``stream_decoder``
and ``stream_encoder`` (SSE events) and ``errors`` (envelopes). ``requires_max_tokens`` is True
(the proxy injects the lane's ``default_max_tokens`` on a cross-protocol hop, case C017). The
proxy builds the upstream URL and headers (``busbar.proxy.egress``, Claude-on-Vertex included).
"""

from __future__ import annotations

from busbar.proto.anthropic import errors, request, request_writer, response
from busbar.proto.anthropic.stream_decoder import AnthropicStreamDecoder
from busbar.proto.anthropic.stream_encoder import AnthropicStreamEncoder
from busbar.proto.dialect import ModularDialect

DIALECT = ModularDialect(
    "anthropic", requires_max_tokens=True, request=request, request_writer=request_writer,
    response=response, errors=errors, decoder=AnthropicStreamDecoder, encoder=AnthropicStreamEncoder,
)
"""The singleton registered under ``"anthropic"`` (``max_tokens`` required upstream)."""
