"""The front door's refusals, each in the caller's own protocol (docs/auth.md#refusals).

An unidentified caller gets one native answer whatever the cause (no key, a malformed, forged,
unknown, expired or revoked key), so a refusal tells a prober nothing:

| protocol | status | shape |
|---|---|---|
| openai, responses | 401 | ``authentication_error``, code ``invalid_api_key`` |
| anthropic | 401 | ``authentication_error`` |
| gemini | 400 | ``INVALID_ARGUMENT`` "API key not valid. Please pass a valid API key." |
| bedrock | 403 | ``AccessDeniedException`` |
| cohere | 401 | ``{"message": "invalid api token"}`` |

A caller whose grant does not cover the target pool gets 403 in its envelope naming the pool.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from busbar.proto.base import ErrorKind
from busbar.proxy.relay import Reply, error_reply

if TYPE_CHECKING:
    from busbar.proto.base import Dialect

__all__ = ["forbidden_pool", "unauthenticated"]

_MESSAGES = {
    "openai": "Incorrect API key provided. Present a valid Busbar virtual key.",
    "responses": "Incorrect API key provided. Present a valid Busbar virtual key.",
    "anthropic": "invalid x-api-key",
    "gemini": "API key not valid. Please pass a valid API key.",
    "bedrock": "The security token included in the request is invalid.",
    "cohere": "invalid api token",
}


def unauthenticated(dialect: Dialect) -> Reply:
    """The one native refusal of an unidentified caller (status per the module table)."""
    family = dialect.name.split("-", 1)[0]        # bedrock-invoke answers like bedrock
    return error_reply(dialect, 401, ErrorKind.AUTHENTICATION, _MESSAGES.get(family, "invalid API key"))


def forbidden_pool(dialect: Dialect, pool: str) -> Reply:
    """403 in the caller's envelope: this caller's grant does not include ``pool``."""
    return error_reply(dialect, 403, ErrorKind.PERMISSION,
                       f"this key may not use pool '{pool}': it is not in the key's allowed_pools")
