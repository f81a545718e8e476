"""OpenAI error envelopes: Busbar's errors as an OpenAI client sees them, and upstream errors read.

Envelope: ``{"error": {"message", "type", "param": null, "code"}}`` with ``content-type:
application/json``. The HTTP status picks the SDK exception (openai-python
``_make_status_error``: 400 BadRequestError, 401 AuthenticationError, 403 PermissionDeniedError,
404 NotFoundError, 429 RateLimitError, >=500 InternalServerError), so the status passed in is
kept as is; ``kind`` picks ``type``/``code``.

Kinds beyond ``ErrorKind`` understood here: ``insufficient_quota`` (budget exhausted, 429) and
``model_not_found`` (404 for an unknown pool/model, code ``model_not_found`` as OpenAI sends it).

Source: cases C018, C020.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from busbar.proto.base import ErrorKind, UpstreamErrorInfo

KIND_TO_OPENAI: dict[str, tuple[str, str | None]] = {
    ErrorKind.INVALID_REQUEST: ("invalid_request_error", None),
    ErrorKind.AUTHENTICATION: ("authentication_error", "invalid_api_key"),
    ErrorKind.PERMISSION: ("permission_error", None),
    ErrorKind.NOT_FOUND: ("not_found_error", None),
    ErrorKind.REQUEST_TOO_LARGE: ("invalid_request_error", "request_too_large"),
    ErrorKind.RATE_LIMIT: ("rate_limit_error", "rate_limit_exceeded"),
    ErrorKind.API_ERROR: ("server_error", None),
    ErrorKind.OVERLOADED: ("server_error", None),
    ErrorKind.TIMEOUT: ("server_error", None),
    "insufficient_quota": ("insufficient_quota", "insufficient_quota"),
    "model_not_found": ("invalid_request_error", "model_not_found"),
}
"""Canonical kind -> OpenAI ``(error.type, error.code)``."""

OPENAI_TYPE_TO_KIND = {
    "invalid_request_error": ErrorKind.INVALID_REQUEST,
    "authentication_error": ErrorKind.AUTHENTICATION,
    "permission_error": ErrorKind.PERMISSION,
    "not_found_error": ErrorKind.NOT_FOUND,
    "rate_limit_error": ErrorKind.RATE_LIMIT,
    "insufficient_quota": ErrorKind.RATE_LIMIT,
    "server_error": ErrorKind.API_ERROR,
    "api_error": ErrorKind.API_ERROR,
    "overloaded_error": ErrorKind.OVERLOADED,
    "timeout_error": ErrorKind.TIMEOUT,
}
"""OpenAI ``error.type`` (or ``code``) -> canonical kind, for in-stream error chunks."""

_HEADERS = {"content-type": "application/json"}
_MAX_MESSAGE_CHARS = 4096
_FIELD_RE = {  # for truncated JSON: type/code must be complete, a message may be cut short
    "message": re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)'),
    "type": re.compile(r'"type"\s*:\s*"((?:[^"\\]|\\.)*)"'),
    "code": re.compile(r'"code"\s*:\s*"((?:[^"\\]|\\.)*)"'),
}
_ERROR_OBJ_RE = re.compile(r'"error"\s*:\s*\{')


def _unescape(s: str) -> str:
    try:
        v = orjson.loads(f'"{s}"')
    except orjson.JSONDecodeError:
        return s
    return v if isinstance(v, str) else s


def error_payload(kind: str, message: str, status: int | None = None) -> dict[str, Any]:
    """``{"error": {"message", "type", "param": None, "code"}}`` for a canonical kind."""
    mapped = KIND_TO_OPENAI.get(kind)
    if mapped is None:
        mapped = KIND_TO_OPENAI[ErrorKind.from_status(status) if status else ErrorKind.API_ERROR]
    return {"error": {"message": message, "type": mapped[0], "param": None, "code": mapped[1]}}


def error_response(status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
    """The OpenAI-native error: ``(status, {"content-type": "application/json"}, body bytes)``."""
    return status, dict(_HEADERS), orjson.dumps(error_payload(kind, message, status))


def stream_error_kind(err: object) -> tuple[str, str]:
    """An in-stream ``{"error": {...}}`` value -> ``(canonical kind, message)`` (case C003)."""
    if isinstance(err, dict):
        msg = err.get("message")
        code, typ = err.get("code"), err.get("type")
        kind = (OPENAI_TYPE_TO_KIND.get(typ) if isinstance(typ, str) else None) or (
            ErrorKind.RATE_LIMIT if code == "rate_limit_exceeded" else ErrorKind.API_ERROR
        )
        return kind, msg if isinstance(msg, str) and msg else "upstream stream error"
    return ErrorKind.API_ERROR, err if isinstance(err, str) and err else "upstream stream error"


def read_error(status: int, body: bytes) -> UpstreamErrorInfo:
    """Provider error body -> ``UpstreamErrorInfo`` (``code`` = ``error.code`` else ``error.type``).

    Accepts OpenAI's nested envelope, vLLM's flat ``{"object": "error", "message", "type", "code"}``,
    FastAPI's ``{"detail"}``, plain text and truncated JSON (fields recovered by pattern); never
    raises. Messages are kept verbatim (case C020), capped at 4096 characters.
    """
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        err = obj.get("error")
        src = err if isinstance(err, dict) else obj
        msg = src.get("message")
        if isinstance(err, str) and err:
            msg = err
        elif msg is None and obj.get("detail") is not None:
            d = obj["detail"]
            msg = d if isinstance(d, str) else orjson.dumps(d).decode()
        typ = src.get("type") if isinstance(src.get("type"), str) else None
        code = src.get("code")
        code = code if isinstance(code, str) and code else typ
        if isinstance(msg, str) and msg:
            return UpstreamErrorInfo(code, msg[:_MAX_MESSAGE_CHARS], typ)
        return UpstreamErrorInfo(code, f"upstream returned HTTP {status}", typ)
    text = body.decode("utf-8", "replace").strip() if body else ""
    if text.startswith("{"):
        m = _ERROR_OBJ_RE.search(text)
        scope = text[m.end() :] if m else text
        found = {k: (_unescape(f.group(1)) if (f := r.search(scope)) else None) for k, r in _FIELD_RE.items()}
        if found["message"] is not None:
            return UpstreamErrorInfo(found["code"] or found["type"], found["message"], found["type"])
    return UpstreamErrorInfo(None, text[:_MAX_MESSAGE_CHARS] or f"upstream returned HTTP {status}")
