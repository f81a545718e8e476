"""``auth.upstream_credentials: passthrough``: the caller's own credential goes upstream (docs/auth.md#passthrough).

Busbar then holds no usable provider key: every attempt carries the token the caller presented
(:func:`busbar.auth.extract.presented_token`) in the provider's native scheme instead of the lane's
configured credential:

| provider | header |
|---|---|
| anthropic | ``x-api-key`` (``Authorization: Bearer`` for an ``sk-ant-oat`` OAuth token) |
| gemini | ``x-goog-api-key`` |
| openai with ``auth: api-key`` (Azure) | ``api-key`` |
| everything else (openai, responses, cohere, bedrock API keys) | ``Authorization: Bearer`` |

Every credential header the lane would have sent (including a SigV4 signature) is removed first. A
caller that presented no token is sent upstream with none. A 401 or 403 from the provider is then the
caller's fault: it is relayed to the caller as a client error and never penalizes the lane
(:func:`caller_fault`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from busbar.auth.extract import presented_token

if TYPE_CHECKING:
    from busbar.proxy.runtime import Provider

__all__ = ["CREDENTIAL_HEADERS", "caller_fault", "caller_headers"]

CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key", "x-amz-date",
                                "x-amz-security-token", "x-amz-content-sha256"})
"""Headers that carry (or belong to) the lane's own credential; never sent under passthrough."""


def caller_headers(provider: Provider, lane_headers: Mapping[str, str], client: Mapping[str, str]) -> dict[str, str]:
    """``lane_headers`` with the lane's credential replaced by the caller's (lower-cased ``client``)."""
    out = {k: v for k, v in lane_headers.items() if k.lower() not in CREDENTIAL_HEADERS}
    token = presented_token(client)
    if token is None:
        return out
    if provider.protocol == "anthropic" and not token.startswith("sk-ant-oat"):
        out["x-api-key"] = token
    elif provider.protocol == "gemini":
        out["x-goog-api-key"] = token
    elif provider.auth == "api-key":
        out["api-key"] = token
    else:
        out["authorization"] = f"Bearer {token}"
    return out


def caller_fault(status: int) -> bool:
    """Whether an upstream ``status`` is the caller's own credential failing (401, 403)."""
    return status in (401, 403)
