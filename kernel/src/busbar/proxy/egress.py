"""Egress plumbing: the URL, headers and body of one upstream attempt, and the shared HTTP client.

``prepare(gw, provider, upstream_model, stream, body) -> (url, headers, body)`` (async):

- Auth: ``provider.auth`` unset = the protocol's native scheme (docs/protocols/README.md): anthropic ``x-api-key`` for
``sk-ant-api…`` keys, ``Authorization: Bearer`` for
  ``sk-ant-oat…`` OAuth tokens, both when the prefix is unrecognized (``anthropic-version:
  2023-06-01`` always); openai / responses / cohere ``Authorization: Bearer``; gemini
  ``x-goog-api-key``; bedrock AWS SigV4 (signed by the dialect). A set ``auth`` style (bearer,
  api-key, jwt-bearer, oauth-client-credentials) is computed by ``Credentials``.
- URL: a dialect that knows its own layout (model in the URL, SigV4, Bearer) returns it from
  ``egress_request``; for openai and anthropic (``None``) it is ``base_url`` + ``path`` or the
  standard path. Anthropic with ``path_base`` is Claude-on-Vertex: ``{base}{path_base}/{model}:rawPredict``
  (the model percent-encoded as one path segment, ``@`` kept; ``:streamRawPredict`` when
  streaming) with ``anthropic_version: vertex-2023-10-16`` in the body
  in place of ``model``.

The client is ``gw.upstream`` (``busbar.proxy.upstream``): one pooled keep-alive client per
process, no redirects, ``accept-encoding: identity`` on openai/anthropic egress, the SSRF guard
applied at request and connect time. ``make_client`` builds the ``httpx`` client that
``Gateway.build(transport=...)`` wraps for injected transports (tests, benchmarks).

Source: docs/config-at-a-glance.md#providersyaml, docs/config-at-a-glance.md#providers,
docs/config-at-a-glance.md#limits
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx
import orjson

from busbar.config.schema import LimitsConfig
from busbar.modelname import path_segment
from busbar.proto.base import UpstreamErrorInfo
from busbar.proxy.runtime import Provider

if TYPE_CHECKING:
    from busbar.proto.base import Dialect
    from busbar.proxy.gateway import Gateway

ANTHROPIC_VERSION = "2023-06-01"
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"

_DEFAULT_PATHS = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
}

# Client headers forwarded upstream on a same-protocol hop (never credentials, never framing).
FORWARDED_SAME_PROTOCOL = {
    "anthropic": ("anthropic-beta",),
    "openai": ("openai-beta",),
}


def auth_headers(provider: Provider) -> dict[str, str]:
    """Native credential + content headers for openai/anthropic providers (precomputed at boot)."""
    key = provider.api_key
    h: dict[str, str] = {}
    if provider.protocol == "anthropic":
        if key.startswith("sk-ant-oat"):
            h["authorization"] = f"Bearer {key}"
        elif key.startswith("sk-ant-api"):
            h["x-api-key"] = key
        else:
            h["x-api-key"] = key
            h["authorization"] = f"Bearer {key}"
        h["anthropic-version"] = ANTHROPIC_VERSION
    else:
        h["authorization"] = f"Bearer {key}"
    h["content-type"] = "application/json"
    h["accept-encoding"] = "identity"
    return h


def _styled_headers(provider: Provider, auth: dict[str, str]) -> dict[str, str]:
    h = {"content-type": "application/json", "accept-encoding": "identity", **auth}
    if provider.protocol == "anthropic":
        h["anthropic-version"] = ANTHROPIC_VERSION
    return h


def upstream_url(provider: Provider, upstream_model: str, stream: bool) -> str:
    """Absolute URL of an openai/anthropic attempt."""
    if provider.path:
        return provider.base_url + provider.path
    if provider.protocol == "anthropic" and provider.path_base:
        verb = "streamRawPredict" if stream else "rawPredict"
        # one path segment whatever the text (the ad-hoc route's model is the client's): never a way
        # out of path_base, around the verb or into the query; '@' (Vertex model versions) kept
        return f"{provider.base_url}{provider.path_base}/{path_segment(upstream_model, keep='@')}:{verb}"
    return provider.base_url + _DEFAULT_PATHS[provider.protocol]


async def prepare(gw: Gateway, provider: Provider, upstream_model: str, stream: bool,
                  body: bytes) -> tuple[str, dict[str, str], bytes]:
    """(url, headers, body) of one attempt; raises ``CredentialError`` when a token can't be minted."""
    auth = await gw.credentials.headers(provider) if provider.auth is not None else None
    own = provider.dialect.egress_request(provider, upstream_model, stream, body, auth)
    if own is not None:
        return own
    headers = gw.auth[provider.name] if auth is None else _styled_headers(provider, auth)
    if provider.protocol == "anthropic" and provider.path_base and not provider.path:
        doc = orjson.loads(body)
        doc.pop("model", None)
        doc["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
        body = orjson.dumps(doc)
    return upstream_url(provider, upstream_model, stream), headers, body


def read_upstream_error(dialect: Dialect, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamErrorInfo:
    """``dialect.read_error`` with the response headers (Bedrock names its error in
    ``x-amzn-errortype``; the other dialects ignore them); one call site for attempts and probes."""
    return dialect.read_error(status, body, headers)


def make_client(limits: LimitsConfig, transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` over ``transport`` with the pool and timeouts of ``limits`` (wrapped by
    ``busbar.proxy.upstream.HttpxUpstream`` when a test or benchmark injects a transport)."""
    pool = httpx.Limits(max_connections=None,
                        max_keepalive_connections=limits.pool_max_idle_per_host,
                        keepalive_expiry=limits.pool_idle_timeout_secs)
    timeout = httpx.Timeout(limits.upstream_request_timeout_secs, connect=10.0)
    return httpx.AsyncClient(limits=pool, timeout=timeout, follow_redirects=False,
                             transport=transport, trust_env=False)
