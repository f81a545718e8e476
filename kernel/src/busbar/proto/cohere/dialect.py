"""The Cohere v2 Chat dialect object (``DIALECT``): both directions of ``/v2/chat``.

Assembled (``busbar.proto.dialect.ModularDialect``) from ``request`` (client body -> IR),
``request_writer`` (IR -> provider body), ``response`` (non-stream bodies), ``stream_decoder``
and ``stream_encoder`` (SSE events) and ``errors`` (envelopes). Egress: ``base_url + (path or
"/v2/chat")`` with native ``authorization: Bearer <key>`` (or the kernel's ``auth_headers``),
``content-type: application/json``, ``accept-encoding: identity`` (see
``busbar.proto.responses.dialect.bearer_egress``).
"""

from __future__ import annotations

from busbar.proto.cohere import errors, request, request_writer, response
from busbar.proto.cohere.stream_decoder import CohereStreamDecoder
from busbar.proto.cohere.stream_encoder import CohereStreamEncoder
from busbar.proto.dialect import ModularDialect
from busbar.proto.responses.dialect import bearer_egress

DEFAULT_PATH = "/v2/chat"
"""The standard upstream path, appended to the provider's ``base_url`` unless ``path`` is set."""

DIALECT = ModularDialect(
    "cohere", requires_max_tokens=False, request=request, request_writer=request_writer,
    response=response, errors=errors, decoder=CohereStreamDecoder, encoder=CohereStreamEncoder,
    egress=bearer_egress(DEFAULT_PATH),
)
"""The singleton registered under ``"cohere"`` (no ``max_tokens`` requirement)."""
