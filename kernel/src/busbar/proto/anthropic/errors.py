"""Anthropic error envelopes: Busbar's errors as an Anthropic client sees them, and upstream errors read.

Envelope: ``{"type": "error", "error": {"type", "message"}}`` with ``content-type:
application/json`` and a ``request-id`` header (``req_…``). Types: ``invalid_request_error``,
``authentication_error``, ``permission_error``, ``not_found_error``, ``request_too_large``,
``rate_limit_error``, ``api_error``, ``overloaded_error`` (503 and 529, by status),
``timeout_error``. The status passed in is kept: the anthropic SDK picks its exception class
from the status (``_error_classes.ERROR_CLASSES``: 400 BadRequestError, 401 AuthenticationError,
403 PermissionDeniedError, 404 NotFoundError, 413 ContentTooLargeError, 429 RateLimitError,
503 ServiceUnavailableError, 504 GatewayTimeoutError, 529 OverloadedError, other 5xx
InternalServerError).

Source: cases C003, C018, C020.
"""

from __future__ import annotations

from typing import Any

import orjson

from busbar.proto.anthropic.response import mint_id
from busbar.proto.base import ErrorKind, UpstreamErrorInfo
from busbar.proto.openai.errors import read_error as _read_generic

KIND_TO_ANTHROPIC = {
    ErrorKind.INVALID_REQUEST: "invalid_request_error",
    ErrorKind.AUTHENTICATION: "authentication_error",
    ErrorKind.PERMISSION: "permission_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.REQUEST_TOO_LARGE: "request_too_large",
    ErrorKind.RATE_LIMIT: "rate_limit_error",
    ErrorKind.API_ERROR: "api_error",
    ErrorKind.OVERLOADED: "overloaded_error",
    ErrorKind.TIMEOUT: "timeout_error",
    "insufficient_quota": "rate_limit_error",
    "model_not_found": "not_found_error",
}
"""Canonical kind -> Anthropic ``error.type``."""

ANTHROPIC_TO_KIND: dict[Any, str] = {v: k for k, v in KIND_TO_ANTHROPIC.items() if k in ErrorKind.STATUS}
ANTHROPIC_TO_KIND["billing_error"] = ErrorKind.PERMISSION
"""Anthropic ``error.type`` -> canonical kind (in-stream ``event: error``)."""


def error_type(kind: str, status: int | None = None) -> str:
    """The Anthropic ``error.type`` for a kind; 503/529 are always ``overloaded_error``."""
    if status == 503 or status == 529:
        return "overloaded_error"
    t = KIND_TO_ANTHROPIC.get(kind)
    if t is None:
        t = KIND_TO_ANTHROPIC[ErrorKind.from_status(status) if status else ErrorKind.API_ERROR]
    return t


def error_payload(kind: str, message: str, status: int | None = None) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}}`` for a canonical kind."""
    return {"type": "error", "error": {"type": error_type(kind, status), "message": message}}


def error_response(status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
    """The Anthropic-native error: ``(status, headers, body bytes)``."""
    headers = {"content-type": "application/json", "request-id": mint_id("req_011C", 20)}
    return status, headers, orjson.dumps(error_payload(kind, message, status))


def read_error(status: int, body: bytes) -> UpstreamErrorInfo:
    """Provider error body -> ``UpstreamErrorInfo`` (``code`` = ``type`` = ``error.type``).

    Tolerates non-JSON and truncated bodies (never raises); the message is kept verbatim.
    """
    return _read_generic(status, body)
