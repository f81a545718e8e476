"""``ModularDialect``: one ``busbar.proto.base.Dialect`` assembled from a protocol's modules.

Every wire protocol keeps its work in modules of one job each — ``request`` (client body -> IR),
``request_writer`` (IR -> provider body), ``response`` (non-stream bodies both ways), ``errors``
(envelopes), a stream decoder and a stream encoder class — and its ``dialect.py`` builds its
``DIALECT`` singleton from them with this class. The optional capabilities (``egress_request``,
``normalize_request``, the ``prompt_caching`` writer option, error headers) are plain
constructor arguments with defaults, so every dialect answers every member of the Protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from busbar.ir.model import IrRequest, IrResponse
from busbar.proto.base import StreamDecoder, StreamEncoder, UpstreamErrorInfo

EgressRequest = Callable[[Any, str, bool, bytes, "dict[str, str] | None"], "tuple[str, dict[str, str], bytes]"]
"""``(provider, upstream_model, stream, body, auth_headers) -> (url, headers, body)``."""


class RequestReader(Protocol):
    """A module with ``read_request(body) -> IrRequest`` (raises ``BadRequest``)."""

    def read_request(self, body: dict[str, Any]) -> IrRequest: ...


class RequestWriter(Protocol):
    """A module with ``write_request(req, upstream_model) -> dict``."""

    def write_request(self, req: IrRequest, upstream_model: str) -> dict[str, Any]: ...


class ResponseCodec(Protocol):
    """A module with ``read_response(body) -> IrResponse`` and ``write_response(resp, model, req) -> dict``."""

    def read_response(self, body: dict[str, Any]) -> IrResponse: ...

    def write_response(self, resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]: ...


class ErrorCodec(Protocol):
    """A module with ``error_response(status, kind, message)`` and ``read_error(status, body)``."""

    def error_response(self, status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]: ...

    def read_error(self, status: int, body: bytes) -> UpstreamErrorInfo: ...


class ModularDialect:
    """A ``Dialect`` whose every method forwards to the protocol's modules.

    Args:
        name: the protocol name (``"openai"`` …), the registry key.
        requires_max_tokens: the provider refuses a body without ``max_tokens`` (the proxy then
            injects the lane's ``default_max_tokens`` on a cross-protocol hop).
        request, request_writer, response, errors: the protocol's modules (see the Protocols above).
        decoder, encoder: the stream decoder class (no arguments) and encoder class
            (``(model, req)``).
        egress: ``EgressRequest`` for protocols that build their own URL and headers (model in
            the URL, SigV4, Bearer dialects); ``None`` = the proxy's standard layout.
        normalize: ``(body, method) -> body`` applied to a client body before anything reads or
            forwards it (Gemini's snake_case spellings, ``countTokens`` form); ``None`` = unchanged.
        caching_gate: the writer takes ``prompt_caching=`` (Bedrock ``cachePoint`` markers are
            model-gated by the lane's ``prompt_caching``).
        error_headers: the error reader takes the response headers (Bedrock's
            ``x-amzn-errortype``).
    """

    __slots__ = ("name", "requires_max_tokens", "_request", "_writer", "_response", "_errors",
                 "_decoder", "_encoder", "_egress", "_normalize", "_caching_gate", "_error_headers")

    def __init__(self, name: str, *, requires_max_tokens: bool, request: RequestReader,
                 request_writer: RequestWriter, response: ResponseCodec, errors: ErrorCodec,
                 decoder: Callable[[], StreamDecoder], encoder: Callable[[str, IrRequest], StreamEncoder],
                 egress: EgressRequest | None = None,
                 normalize: Callable[[dict[str, Any], str], dict[str, Any]] | None = None,
                 caching_gate: bool = False, error_headers: bool = False) -> None:
        self.name = name
        self.requires_max_tokens = requires_max_tokens
        self._request = request
        self._writer = request_writer
        self._response = response
        self._errors = errors
        self._decoder = decoder
        self._encoder = encoder
        self._egress = egress
        self._normalize = normalize
        self._caching_gate = caching_gate
        self._error_headers = error_headers

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"

    # ---- ingress (Busbar is the server)
    def normalize_request(self, body: dict[str, Any], method: str = "") -> dict[str, Any]:
        """The client body in the protocol's canonical spelling and form (the same object when
        nothing changes); ``method`` is the path verb the client called (Gemini ``countTokens``).

        Raises:
            busbar.proto.errors.BadRequest: the body spells one field two ways, or does not fit ``method``.
        """
        return body if self._normalize is None else self._normalize(body, method)

    def read_request(self, body: dict[str, Any]) -> IrRequest:
        """Client body -> IR. Raises ``busbar.proto.errors.BadRequest`` for a malformed body."""
        return self._request.read_request(body)

    def write_response(self, resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
        """IR response -> client body (``model`` is the name the client called)."""
        return self._response.write_response(resp, model, req)

    def stream_encoder(self, model: str, req: IrRequest) -> StreamEncoder:
        """An encoder for the client's stream."""
        return self._encoder(model, req)

    def error_response(self, status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
        """The protocol's native error envelope: ``(status, headers, body bytes)``."""
        return self._errors.error_response(status, kind, message)

    # ---- egress (Busbar is the client)
    def write_request(self, req: IrRequest, upstream_model: str, *, prompt_caching: bool = False) -> dict[str, Any]:
        """IR -> provider body; ``prompt_caching`` (the lane's flag) matters to model-gated markers only."""
        if self._caching_gate:
            return self._writer.write_request(req, upstream_model, prompt_caching=prompt_caching)  # type: ignore[call-arg]
        return self._writer.write_request(req, upstream_model)

    def read_response(self, body: dict[str, Any]) -> IrResponse:
        """Provider body -> IR."""
        return self._response.read_response(body)

    def stream_decoder(self) -> StreamDecoder:
        """A decoder for the provider's stream."""
        return self._decoder()

    def read_error(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> UpstreamErrorInfo:
        """Code/message of a provider error body (tolerates non-JSON); ``headers`` where the protocol
        carries the error's identity in one."""
        if self._error_headers:
            return self._errors.read_error(status, body, headers)  # type: ignore[call-arg]
        return self._errors.read_error(status, body)

    def egress_request(self, provider: Any, upstream_model: str, stream: bool, body: bytes,
                       auth_headers: dict[str, str] | None) -> tuple[str, dict[str, str], bytes] | None:
        """``(URL, headers, body)`` of one upstream call, or ``None`` when the proxy's standard
        layout applies (``base_url`` + path, the precomputed credential headers)."""
        if self._egress is None:
            return None
        return self._egress(provider, upstream_model, stream, body, auth_headers)
