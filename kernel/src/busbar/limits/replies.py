"""A refused admission in the caller's own dialect.

``refusal_reply(dialect, refusal) -> Reply``: a rate limit (``requests``, ``tokens``,
``concurrent``) is 429 ``rate_limit`` with ``Retry-After`` to the window roll (none for ``total``
and ``concurrent``); a budget is the vendor's native quota shape (OpenAI / Responses 429
``insufficient_quota``, Bedrock 400 ``ServiceQuotaExceededException``, Gemini 429
``RESOURCE_EXHAUSTED``, Anthropic 429 ``rate_limit_error``, Cohere 429); a frozen or unconfigured
group is 403 naming it; a strict limit whose store failed is 503 ``overloaded`` naming the group.
Never 402.

Source: docs/limits.md#rejections.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from busbar.proto.base import ErrorKind
from busbar.proxy.relay import Reply, error_reply

if TYPE_CHECKING:
    from busbar.limits.engine import Refusal
    from busbar.proto.base import Dialect

__all__ = ["QUOTA", "refusal_reply"]

QUOTA = "insufficient_quota"


def refusal_reply(dialect: Dialect, refusal: Refusal) -> Reply:
    """The reply for ``refusal`` (see the module docstring)."""
    extra = {"retry-after": str(refusal.retry_after)} if refusal.retry_after is not None else None
    if refusal.status == 403:
        return error_reply(dialect, 403, ErrorKind.PERMISSION, refusal.message)
    if refusal.status == 503:
        return error_reply(dialect, 503, ErrorKind.OVERLOADED, refusal.message)
    if refusal.kind == "quota":
        return error_reply(dialect, 429, QUOTA, refusal.message, extra)
    return error_reply(dialect, 429, ErrorKind.RATE_LIMIT, refusal.message, extra)
