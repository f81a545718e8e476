"""Egress plumbing: the upstream URL and auth headers of one attempt, and the shared HTTP client.

Auth (seeds 001 "Credential format by protocol"):
- anthropic: ``x-api-key`` for ``sk-ant-api…`` keys, ``Authorization: Bearer`` for ``sk-ant-oat…``
  OAuth tokens, both when the prefix is unrecognized; ``anthropic-version: 2023-06-01`` always.
- openai / responses / cohere: ``Authorization: Bearer``; ``auth: api-key`` sends ``api-key:`` (Azure).

Upstream paths: ``base_url`` (trailing slash trimmed) + ``path`` when set, else the protocol's
standard path. The client is one pooled keep-alive ``httpx.AsyncClient`` for the process: no
redirects, ``accept-encoding: identity`` (no transparent decompression of relayed bodies), the
SSRF guard applied at connect time.

Source: seeds 001 "providers.yaml", "providers", "limits"; ORIGINAL §2.6 (upstream client).
"""
from __future__ import annotations

import httpx

from busbar.config.schema import LimitsConfig
from busbar.proxy.runtime import Provider

ANTHROPIC_VERSION = "2023-06-01"

_DEFAULT_PATHS = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "responses": "/v1/responses",
    "cohere": "/v2/chat",
}

# Client headers forwarded upstream on a same-protocol hop (never credentials, never framing).
FORWARDED_SAME_PROTOCOL = {
    "anthropic": ("anthropic-beta",),
    "openai": ("openai-beta",),
}


def auth_headers(provider: Provider) -> dict[str, str]:
    """The provider's credential headers (precomputed once per provider at boot)."""
    key = provider.api_key
    proto = provider.protocol
    h: dict[str, str] = {}
    if provider.auth == "api-key":
        h["api-key"] = key
    elif proto == "anthropic" and provider.auth is None:
        if key.startswith("sk-ant-oat"):
            h["authorization"] = f"Bearer {key}"
        elif key.startswith("sk-ant-api"):
            h["x-api-key"] = key
        else:
            h["x-api-key"] = key
            h["authorization"] = f"Bearer {key}"
    else:
        h["authorization"] = f"Bearer {key}"
    if proto == "anthropic":
        h["anthropic-version"] = ANTHROPIC_VERSION
    h["content-type"] = "application/json"
    h["accept-encoding"] = "identity"
    return h


def upstream_url(provider: Provider, upstream_model: str, stream: bool) -> str:
    """Absolute URL of one attempt (body-model protocols ignore ``upstream_model`` here)."""
    if provider.path:
        return provider.base_url + provider.path
    try:
        return provider.base_url + _DEFAULT_PATHS[provider.protocol]
    except KeyError:
        raise NotImplementedError(f"egress to protocol '{provider.protocol}' is not available yet") from None


def make_client(limits: LimitsConfig, transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """The process-wide upstream client (keep-alive pool sized by ``limits``)."""
    pool = httpx.Limits(max_connections=None,
                        max_keepalive_connections=limits.pool_max_idle_per_host,
                        keepalive_expiry=limits.pool_idle_timeout_secs)
    timeout = httpx.Timeout(limits.upstream_request_timeout_secs, connect=10.0)
    return httpx.AsyncClient(limits=pool, timeout=timeout, follow_redirects=False,
                             transport=transport, trust_env=False)
