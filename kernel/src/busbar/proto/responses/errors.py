"""Responses error envelopes: Busbar's errors as a Responses client sees them, and upstream errors read.

Non-stream: the OpenAI envelope ``{"error": {"message", "type", "param": null, "code"}}`` with
``content-type: application/json`` (openai-python maps the HTTP status to its exception class,
exactly as for Chat Completions). Mid-stream: ``event: error`` (the nested shape of the capture
``openai-responses/error-in-stream.response.chunks.jsonl``, which makes openai-python raise
``APIError``) followed by ``event: response.failed`` carrying ``{"response": {..., "status":
"failed", "error": {"code", "message"}}}`` — the stream encoder writes those.

A ``status: "failed"`` response body (non-stream, HTTP 200) is not an answer: ``read_response``
raises :class:`ResponsesFailed`, which the proxy treats like an undecodable body (a member failure
that may fail over — the Responses counterpart of case C043).

Source: docs/reliability.md#mid-stream-failures; cases C003, C020, C043.
"""

from __future__ import annotations

from typing import Any

from busbar.proto.base import ErrorKind, UpstreamErrorInfo
from busbar.proto.openai import errors as _openai

RESPONSE_ERROR_CODE: dict[str, str] = {
    ErrorKind.RATE_LIMIT: "rate_limit_exceeded",
    "insufficient_quota": "insufficient_quota",
}
"""Canonical kind -> ``response.error.code`` of a failed response (anything else: ``server_error``)."""

_CODE_TO_KIND = {
    "rate_limit_exceeded": ErrorKind.RATE_LIMIT,
    "insufficient_quota": ErrorKind.RATE_LIMIT,
    "server_error": ErrorKind.API_ERROR,
    "invalid_prompt": ErrorKind.INVALID_REQUEST,
}


class ResponsesFailed(Exception):
    """A provider Responses body with ``status: "failed"`` (not an answer; the attempt failed).

    Attributes:
        kind: the canonical error kind (``busbar.proto.base.ErrorKind``).
        message: the provider's ``error.message``, verbatim.
    """

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def error_response(status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
    """The OpenAI-native error: ``(status, {"content-type": "application/json"}, body bytes)``."""
    return _openai.error_response(status, kind, message)


def read_error(status: int, body: bytes) -> UpstreamErrorInfo:
    """Provider error body -> ``UpstreamErrorInfo`` (the OpenAI envelope; never raises)."""
    return _openai.read_error(status, body)


def error_kind(err: Any) -> tuple[str, str]:
    """A stream ``error`` value or ``response.error`` -> ``(canonical kind, message)``.

    Accepts the nested ``{"type", "code", "message"}`` object, a flat ``type: "error"`` event (the
    SDK's ``ResponseErrorEvent``), or a string.
    """
    if isinstance(err, dict):
        code = err.get("code")
        kind = _CODE_TO_KIND.get(code) if isinstance(code, str) else None
        if kind is None:
            kind = _openai.stream_error_kind(err)[0]
        msg = err.get("message")
        return kind, msg if isinstance(msg, str) and msg else "upstream stream error"
    return ErrorKind.API_ERROR, err if isinstance(err, str) and err else "upstream stream error"


def failed_error(kind: str, message: str) -> dict[str, Any]:
    """``response.error`` of a failed response: ``{"code", "message"}`` (SDK ``ResponseError``)."""
    return {"code": RESPONSE_ERROR_CODE.get(kind, "server_error"), "message": message}


def error_object(kind: str, message: str) -> dict[str, Any]:
    """The nested ``error`` of a ``type: "error"`` stream event, as the API sends it.

    ``{"message", "type", "param": null, "code"}`` (the OpenAI envelope's inner object); openai-python
    raises ``APIError`` on an event whose data carries a truthy ``error``.
    """
    err: dict[str, Any] = _openai.error_payload(kind, message)["error"]
    return err
