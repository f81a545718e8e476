"""Gemini error envelopes: Busbar's errors as a Gemini client sees them, and upstream errors read.

Envelope (google.rpc.Status as JSON): ``{"error": {"code": <http status>, "message", "status":
<google.rpc code name>}}`` with ``content-type: application/json; charset=UTF-8``. Names by
status: 400 INVALID_ARGUMENT, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 409
ABORTED, 429 RESOURCE_EXHAUSTED, 499 CANCELLED, 500 INTERNAL, 501 UNIMPLEMENTED, 503 UNAVAILABLE,
504 DEADLINE_EXCEEDED. An authentication failure looks like Google's own: HTTP 400
INVALID_ARGUMENT "API key not valid. Please pass a valid API key." with an ``ErrorInfo`` detail
``reason: API_KEY_INVALID`` (docs/protocols/gemini.md#errors). google-genai raises ``errors.ClientError`` (4xx) or
``errors.ServerError`` (5xx) with ``.code``/``.status``/``.message`` from this body; in a stream
the same object is one ``data:`` chunk (the SDK raises on a chunk that starts with ``{"error":``).

Source: captures ``gemini/error-400-api-key-invalid``,
``gemini/error-429-resource-exhausted``; cases C018, C020.
"""

from __future__ import annotations

from typing import Any

import orjson

from busbar.proto.base import ErrorKind, UpstreamErrorInfo
from busbar.proto.openai.errors import read_error as _read_generic

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
"""HTTP status -> google.rpc code name."""

KIND_STATUS = {
    "insufficient_quota": 429,
    "model_not_found": 404,
}

NAME_TO_KIND = {
    "INVALID_ARGUMENT": ErrorKind.INVALID_REQUEST,
    "FAILED_PRECONDITION": ErrorKind.INVALID_REQUEST,
    "OUT_OF_RANGE": ErrorKind.INVALID_REQUEST,
    "UNAUTHENTICATED": ErrorKind.AUTHENTICATION,
    "PERMISSION_DENIED": ErrorKind.PERMISSION,
    "NOT_FOUND": ErrorKind.NOT_FOUND,
    "RESOURCE_EXHAUSTED": ErrorKind.RATE_LIMIT,
    "ABORTED": ErrorKind.OVERLOADED,
    "UNAVAILABLE": ErrorKind.OVERLOADED,
    "INTERNAL": ErrorKind.API_ERROR,
    "UNKNOWN": ErrorKind.API_ERROR,
    "DATA_LOSS": ErrorKind.API_ERROR,
    "CANCELLED": ErrorKind.API_ERROR,
    "UNIMPLEMENTED": ErrorKind.API_ERROR,
    "DEADLINE_EXCEEDED": ErrorKind.TIMEOUT,
}
"""google.rpc code name -> canonical kind (in-stream error chunks)."""

API_KEY_INVALID = "API key not valid. Please pass a valid API key."
_HEADERS = {"content-type": "application/json; charset=UTF-8"}


def status_name(status: int) -> str:
    """The google.rpc name for an HTTP status (other 4xx: FAILED_PRECONDITION, other 5xx: INTERNAL)."""
    name = STATUS_NAMES.get(status)
    if name is None:
        name = "INTERNAL" if status >= 500 else "FAILED_PRECONDITION"
    return name


def error_payload(status: int, kind: str, message: str) -> tuple[int, dict[str, Any]]:
    """``(status, {"error": {code, message, status}})`` for a canonical kind (auth -> 400 API_KEY_INVALID)."""
    if kind == ErrorKind.AUTHENTICATION:
        err: dict[str, Any] = {
            "code": 400,
            "message": message or API_KEY_INVALID,
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                }
            ],
        }
        return 400, {"error": err}
    status = KIND_STATUS.get(kind, status)
    return status, {"error": {"code": status, "message": message, "status": status_name(status)}}


def error_response(status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
    """The Gemini-native error: ``(status, headers, body bytes)``."""
    st, obj = error_payload(status, kind, message)
    return st, dict(_HEADERS), orjson.dumps(obj)


def stream_error_kind(err: Any) -> tuple[str, str]:
    """An in-stream ``{"error": {...}}`` value -> ``(canonical kind, message)``."""
    if not isinstance(err, dict):
        return ErrorKind.API_ERROR, "upstream stream error"
    name = err.get("status")
    kind = NAME_TO_KIND.get(name) if isinstance(name, str) else None
    if kind is None:
        code = err.get("code")
        kind = ErrorKind.from_status(code) if isinstance(code, int) and code >= 400 else ErrorKind.API_ERROR
    msg = err.get("message")
    return kind, msg if isinstance(msg, str) and msg else "upstream stream error"


def read_error(status: int, body: bytes) -> UpstreamErrorInfo:
    """Provider error body -> ``UpstreamErrorInfo``.

    ``type`` is ``error.status`` (``RESOURCE_EXHAUSTED`` …); ``code`` is the ``ErrorInfo.reason``
    of ``error.details`` when present (``API_KEY_INVALID`` — an error_map can classify it as
    auth although the HTTP status is 400), else ``error.status``. The message is kept verbatim
    (case C020). A JSON array holding one error (Gemini's streaming form without ``alt=sse``),
    non-JSON and truncated bodies are tolerated.
    """
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        obj = obj[0]
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, dict):
        name = err.get("status") if isinstance(err.get("status"), str) else None
        reason = None
        for d in err.get("details") or ():
            if isinstance(d, dict) and isinstance(d.get("reason"), str):
                reason = d["reason"]
                break
        msg = err.get("message")
        msg = msg[:4096] if isinstance(msg, str) and msg else f"upstream returned HTTP {status}"
        return UpstreamErrorInfo(reason or name, msg, name)
    return _read_generic(status, body)
