"""The Bedrock Converse dialect object (``DIALECT``): both directions of ``/model/{id}/converse[-stream]``.

Assembled (``busbar.proto.dialect.ModularDialect``) from ``request`` (client body -> IR),
``request_writer`` (IR -> provider body), ``response`` (non-stream bodies), ``stream_decoder`` /
``stream_encoder`` (binary eventstream), ``errors`` (envelopes), ``sigv4`` (egress signing),
``names`` (tool id/name aliases). ``requires_max_tokens`` is False (Converse has a default; the
proxy never invents one for this dialect).

Path-model protocol: the model id and the stream flag are in the URL, the body has neither. The
proxy sets ``ir.model`` and ``ir.stream`` from the route on ingress; on egress
``egress_request`` builds the URL, with the model id percent-encoded as one path segment.

Source: docs/protocols/README.md#one-protocol--modules-of-one-job-each, docs/protocols/bedrock.md#egress-and-sigv4-c033.
"""

from __future__ import annotations

from typing import Any

from busbar.modelname import path_segment
from busbar.proto.bedrock import errors, request, request_writer, response, sigv4
from busbar.proto.bedrock.stream_decoder import BedrockStreamDecoder
from busbar.proto.bedrock.stream_encoder import BedrockStreamEncoder
from busbar.proto.dialect import ModularDialect

USER_AGENT = "Boto3/1.35.0 md/Botocore#1.35.0 ua/2.0 os/linux lang/python#3.11"
"""Pinned native-SDK ``User-Agent`` (egress looks like the provider's own SDK;
docs/protocols/bedrock.md#egress-and-sigv4-c033)."""

EVENTSTREAM = "application/vnd.amazon.eventstream"


def model_path(upstream_model: str, verb: str) -> str:
    """``/model/{modelId}/{verb}`` with the model id encoded as ONE segment (``:`` -> ``%3A``, ``/`` -> ``%2F``)."""
    return f"/model/{path_segment(upstream_model)}/{verb}"


def signed_egress(provider: Any, url: str, stream: bool, body: bytes,
                  auth_headers: dict[str, str] | None) -> tuple[str, dict[str, str], bytes]:
    """``(url, headers, body)`` of one Bedrock runtime call (Converse and invoke alike).

    Headers: ``content-type: application/json``, ``accept`` (eventstream when ``stream``),
    ``accept-encoding: identity``, the provider's ``extra_headers``, then ``auth_headers`` (a
    non-native auth style, e.g. ``Authorization: Bearer`` for a Bedrock API key) or — ``None`` =
    native — an AWS SigV4 signature over exactly ``body`` from ``provider.api_key``
    (``ACCESS:SECRET[:SESSION]``); ``user-agent`` last (SigV4 does not sign it).

    Raises:
        busbar.proto.bedrock.sigv4.CredentialFormatError: native auth with a malformed key.
    """
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


def egress_request(provider: Any, upstream_model: str, stream: bool, body: bytes,
                   auth_headers: dict[str, str] | None) -> tuple[str, dict[str, str], bytes]:
    """``(absolute URL, headers, body)`` of one upstream Converse call.

    Args:
        provider: has ``base_url`` (trailing slash trimmed), ``api_key`` (``ACCESS:SECRET
            [:SESSION]`` for native auth) and optionally ``extra_headers`` (signed with the rest).
        upstream_model: the lane's model id (``eu.amazon.nova-micro-v1:0``, an ARN …).
        stream: ``/converse-stream`` (eventstream answer) instead of ``/converse``.
        body: the exact body bytes.
        auth_headers: headers from a non-native auth style; ``None`` = native SigV4 (see ``signed_egress``).

    Raises:
        busbar.proto.bedrock.sigv4.CredentialFormatError: native auth with a malformed key.
    """
    url = provider.base_url + model_path(upstream_model, "converse-stream" if stream else "converse")
    return signed_egress(provider, url, stream, body, auth_headers)


DIALECT = ModularDialect(
    "bedrock", requires_max_tokens=False, request=request, request_writer=request_writer,
    response=response, errors=errors, decoder=BedrockStreamDecoder, encoder=BedrockStreamEncoder,
    egress=egress_request, caching_gate=True, error_headers=True,
)
"""The singleton registered under ``"bedrock"`` (no ``max_tokens`` requirement; ``prompt_caching``
gates ``cachePoint`` markers; ``x-amzn-errortype`` names the error)."""
