"""The Bedrock Converse dialect object (``DIALECT``): both directions of ``/model/{id}/converse[-stream]``.

Composition only: ``request`` (client body -> IR), ``request_writer`` (IR -> provider body),
``response`` (non-stream bodies), ``stream_decoder`` / ``stream_encoder`` (binary eventstream),
``errors`` (envelopes), ``sigv4`` (egress signing), ``names`` (tool id/name aliases).
Implements ``busbar.proto.base.Dialect``; ``requires_max_tokens`` is False (Converse has a
default; the proxy never invents one for this dialect).

Path-model protocol: the model id and the stream flag are in the URL, the body has neither. The
proxy sets ``ir.model`` and ``ir.stream`` from the route on ingress; on egress
``egress_request`` builds the URL, with the model id percent-encoded as one path segment.

Source: ORIGINAL.md §2.2 "Seam", "Body-model vs path-model", "Egress auth per protocol".
"""

from __future__ import annotations

from typing import Any

from busbar.ir.model import IrRequest, IrResponse
from busbar.modelname import path_segment
from busbar.proto.base import UpstreamErrorInfo
from busbar.proto.bedrock import errors, request, request_writer, response, sigv4
from busbar.proto.bedrock.stream_decoder import BedrockStreamDecoder
from busbar.proto.bedrock.stream_encoder import BedrockStreamEncoder

USER_AGENT = "Boto3/1.35.0 md/Botocore#1.35.0 ua/2.0 os/linux lang/python#3.11"
"""Pinned native-SDK ``User-Agent`` (§2.24: egress looks like the provider's own SDK)."""

EVENTSTREAM = "application/vnd.amazon.eventstream"


def model_path(upstream_model: str, verb: str) -> str:
    """``/model/{modelId}/{verb}`` with the model id encoded as ONE segment (``:`` -> ``%3A``, ``/`` -> ``%2F``)."""
    return f"/model/{path_segment(upstream_model)}/{verb}"


class BedrockDialect:
    """Bedrock Converse: ``name = "bedrock"``, no ``max_tokens`` requirement."""

    name = "bedrock"
    requires_max_tokens = False

    # ---- ingress
    def read_request(self, body: dict[str, Any]) -> IrRequest:
        """Client body -> IR (see ``busbar.proto.bedrock.request.read_request``)."""
        return request.read_request(body)

    def write_response(self, resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
        """IR response -> Converse body (see ``response.write_response``)."""
        return response.write_response(resp, model, req)

    def stream_encoder(self, model: str, req: IrRequest) -> BedrockStreamEncoder:
        """An encoder of ConverseStream eventstream messages for the client."""
        return BedrockStreamEncoder(model, req)

    def error_response(self, status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
        """Bedrock error envelope (see ``errors.error_response``)."""
        return errors.error_response(status, kind, message)

    # ---- egress
    def write_request(
        self, req: IrRequest, upstream_model: str, *, prompt_caching: bool = False
    ) -> dict[str, Any]:
        """IR -> provider body (see ``request_writer.write_request``; ``prompt_caching`` = lane flag)."""
        return request_writer.write_request(req, upstream_model, prompt_caching=prompt_caching)

    def read_response(self, body: dict[str, Any]) -> IrResponse:
        """Provider Converse body -> IR (see ``response.read_response``)."""
        return response.read_response(body)

    def stream_decoder(self) -> BedrockStreamDecoder:
        """A decoder of the provider's eventstream."""
        return BedrockStreamDecoder()

    def read_error(self, status: int, body: bytes, headers: Any = None) -> UpstreamErrorInfo:
        """Provider error -> code/message; pass ``headers`` to read ``x-amzn-errortype`` (see ``errors``)."""
        return errors.read_error(status, body, headers)

    def egress_request(
        self,
        provider: Any,
        upstream_model: str,
        stream: bool,
        body: bytes,
        auth_headers: dict[str, str] | None,
    ) -> tuple[str, dict[str, str], bytes]:
        """``(absolute URL, headers, body)`` of one upstream Converse call.

        Args:
            provider: has ``base_url`` (trailing slash trimmed), ``api_key`` (``ACCESS:SECRET
                [:SESSION]`` for native auth) and optionally ``extra_headers`` (signed with the rest).
            upstream_model: the lane's model id (``eu.amazon.nova-micro-v1:0``, an ARN …).
            stream: ``/converse-stream`` (eventstream answer) instead of ``/converse``.
            body: the exact body bytes.
            auth_headers: headers from a non-native auth style (e.g. ``Authorization: Bearer``
                for a Bedrock API key); ``None`` = native SigV4, signed over exactly these bytes.

        Raises:
            busbar.proto.bedrock.sigv4.CredentialFormatError: native auth with a malformed key.
        """
        url = provider.base_url + model_path(upstream_model, "converse-stream" if stream else "converse")
        headers = {
            "content-type": "application/json",
            "accept": EVENTSTREAM if stream else "application/json",
            "accept-encoding": "identity",
        }
        extra = getattr(provider, "extra_headers", None)
        if extra:
            headers.update(extra)
        if auth_headers is not None:
            headers.update(auth_headers)
        else:
            headers = sigv4.sign(url, body, headers, provider.api_key)
        headers["user-agent"] = USER_AGENT  # not signed (SigV4 skips user-agent)
        return url, headers, body


DIALECT = BedrockDialect()
"""The module-level singleton registered under ``"bedrock"``."""
