"""The dialect seam: what every wire protocol implements, on both sides of the gateway.

A *dialect* is one wire protocol (``anthropic``, ``openai``, ``responses``, ``gemini``,
``bedrock``, ``cohere``). The same object serves ingress (Busbar as the server: read the
client's request, write the client's response/stream/error) and egress (Busbar as the
client: write the provider request, read the provider response/stream/error).

Canonical error kinds (``ErrorKind``) are the vocabulary between dialects; each dialect
maps them to its own envelope and status.

Source: docs/config-at-a-glance.md#providers.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from busbar.ir.model import IrRequest, IrResponse, StreamEvent


class ErrorKind:
    """Canonical error kinds and their default HTTP status."""

    INVALID_REQUEST = "invalid_request"        # 400
    AUTHENTICATION = "authentication"          # 401
    PERMISSION = "permission"                  # 403
    NOT_FOUND = "not_found"                    # 404
    REQUEST_TOO_LARGE = "request_too_large"    # 413
    RATE_LIMIT = "rate_limit"                  # 429
    API_ERROR = "api_error"                    # 500
    OVERLOADED = "overloaded"                  # 503 / 529
    TIMEOUT = "timeout"                        # 504

    STATUS: ClassVar[dict[str, int]] = {
        "invalid_request": 400, "authentication": 401, "permission": 403, "not_found": 404,
        "request_too_large": 413, "rate_limit": 429, "api_error": 500, "overloaded": 503,
        "timeout": 504,
    }

    @staticmethod
    def from_status(status: int) -> str:
        """Map an HTTP status to the canonical kind (401 auth, 403 permission, 429 rate limit, …)."""
        if status == 401:
            return ErrorKind.AUTHENTICATION
        if status == 403:
            return ErrorKind.PERMISSION
        if status == 404:
            return ErrorKind.NOT_FOUND
        if status == 413:
            return ErrorKind.REQUEST_TOO_LARGE
        if status == 429:
            return ErrorKind.RATE_LIMIT
        if status in (503, 529):
            return ErrorKind.OVERLOADED
        if status == 504:
            return ErrorKind.TIMEOUT
        if status >= 500:
            return ErrorKind.API_ERROR
        return ErrorKind.INVALID_REQUEST


class Disposition:
    """The disposition classes of an upstream failure (what decides breaker and failover), in one
    place: the config's ``error_map`` values, ``busbar.proxy.disposition`` (class -> effect) and
    the mid-stream mapping below all use these names (``docs/reliability.md#dispositions``)."""

    RATE_LIMIT = "rate_limit"
    OVERLOADED = "overloaded"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    NETWORK = "network"
    AUTH = "auth"
    BILLING = "billing"
    CLIENT_ERROR = "client_error"
    CONTEXT_LENGTH = "context_length"

    CLASSES = (RATE_LIMIT, OVERLOADED, SERVER_ERROR, TIMEOUT, NETWORK, AUTH, BILLING, CLIENT_ERROR,
               CONTEXT_LENGTH)
    """Every class, in the order the docs list them."""

    _OF_KIND: ClassVar[dict[str, str]] = {ErrorKind.RATE_LIMIT: RATE_LIMIT, ErrorKind.OVERLOADED: OVERLOADED,
                ErrorKind.TIMEOUT: TIMEOUT, ErrorKind.AUTHENTICATION: AUTH, ErrorKind.PERMISSION: AUTH}

    @staticmethod
    def of_kind(kind: str) -> str:
        """The class of an in-band stream error of canonical ``kind`` (``rate_limit`` ->
        ``rate_limit``, ``authentication``/``permission`` -> ``auth`` …; anything else ``server_error``)."""
        return Disposition._OF_KIND.get(kind, Disposition.SERVER_ERROR)


@dataclass(slots=True)
class UpstreamErrorInfo:
    """What a dialect extracts from a provider's non-2xx body (stage 1a of disposition).

    ``code``: the provider-specific code string (JSON ``error.code`` / ``error.type`` /
    ``__type`` …) looked up in ``error_map``; ``message``: the provider's message text, kept
    verbatim when re-enveloped for the client (case C020).
    """

    code: str | None
    message: str
    type: str | None = None


class StreamDecoder(Protocol):
    """Provider stream bytes -> IR events. Reassembles frames split across chunks."""

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        """Consume raw bytes; return the IR events completed so far (may be empty)."""

    def close(self) -> list[StreamEvent]:
        """End of upstream body: flush pending state (e.g. a held ``MessageDelta``).

        A stream that ended without its protocol terminator yields a ``StreamError``
        (a truncated stream must not look like a clean finish — case C003).
        """


class StreamEncoder(Protocol):
    """IR events -> client stream bytes in the ingress dialect."""

    content_type: str

    def encode(self, event: StreamEvent) -> bytes:
        """Bytes for one IR event (may be ``b""`` when the dialect has no frame for it)."""

    def keepalive(self) -> bytes:
        """A keep-alive frame that no SDK parser dispatches as data (case C005)."""


class Dialect(Protocol):
    """One wire protocol, both directions. Implementations live in ``busbar.proto.<name>``, each
    a ``busbar.proto.dialect.ModularDialect`` built from the protocol's modules.

    Every member exists on every dialect; the optional capabilities have neutral defaults:
    ``normalize_request`` returns the body as is, ``write_request`` ignores ``prompt_caching``,
    ``read_error`` ignores ``headers`` and ``egress_request`` returns ``None`` (the proxy's
    standard URL and headers) unless the protocol needs them.
    """

    name: str
    requires_max_tokens: bool

    # ---- ingress (Busbar is the server)
    def normalize_request(self, body: dict, method: str = "") -> dict:
        """The client body in the protocol's canonical spelling (Gemini snake_case -> camelCase)
        and form (``method``: the path verb, Gemini ``countTokens``); the same object when nothing
        changes. Raises ``BadRequest`` for a field spelled both ways."""

    def read_request(self, body: dict) -> IrRequest:
        """Client body -> IR. Raises ``busbar.proto.errors.BadRequest`` for a malformed body."""

    def write_response(self, resp: IrResponse, model: str, req: IrRequest) -> dict:
        """IR response -> client body (``model`` is the name the client called)."""

    def stream_encoder(self, model: str, req: IrRequest) -> StreamEncoder:
        """An encoder for the client's stream (``req.include_usage`` etc. shape the tail)."""

    def error_response(self, status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
        """The dialect's native error envelope: (status, headers, body bytes)."""

    # ---- egress (Busbar is the client)
    def write_request(self, req: IrRequest, upstream_model: str, *, prompt_caching: bool = False) -> dict:
        """IR -> provider body. Never emits empty optional collections (case C011).
        ``prompt_caching``: the lane's flag, for model-gated cache markers (Bedrock ``cachePoint``)."""

    def read_response(self, body: dict) -> IrResponse:
        """Provider body -> IR."""

    def stream_decoder(self) -> StreamDecoder:
        """A decoder for the provider's stream."""

    def read_error(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> UpstreamErrorInfo:
        """Extract code/message from a provider error (tolerates non-JSON); ``headers`` are read
        where the protocol names the error in one (Bedrock's ``x-amzn-errortype``)."""

    def egress_request(self, provider: Any, upstream_model: str, stream: bool, body: bytes,
                       auth_headers: dict[str, str] | None) -> tuple[str, dict[str, str], bytes] | None:
        """``(URL, headers, body)`` of one upstream call for protocols that lay it out themselves
        (model in the URL, SigV4, Bearer dialects); ``None``: the proxy's standard layout."""
