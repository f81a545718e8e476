"""The admin API's one error shape: ``{"error": {"code": <code>, "message": <text>}}``.

Codes (frozen, docs/admin.md#errors): ``not_found`` 404, ``unauthorized`` 401, ``method_not_allowed``
405, ``forbidden`` 403, ``invalid_request`` 400 (422 never leaves the app: a body FastAPI cannot parse
is a 400), ``version_conflict`` 409 (retryable: re-read and retry with the new ETag), ``conflict`` 409
(terminal), ``payload_too_large`` 413 (a body over ``busbar.admin.guard.MAX_BODY_BYTES``),
``rate_limited`` 429 (with ``Retry-After``), ``internal`` 500 (the message never carries
an exception text, a path or an address).
"""
from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

__all__ = ["CODES", "AdminError", "error_body", "error_response"]

#: code -> HTTP status.
CODES: dict[str, int] = {
    "invalid_request": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404,
    "method_not_allowed": 405, "version_conflict": 409, "conflict": 409, "payload_too_large": 413, "rate_limited": 429,
    "internal": 500,
}


class AdminError(Exception):
    """Raise from a handler to answer ``{"error": {code, message}}`` with the code's status.

    Args:
        code: one of :data:`CODES`.
        message: the human text (names the field or resource and the fix; never a secret).
        headers: extra response headers (``Retry-After``, ``WWW-Authenticate``).
    """

    def __init__(self, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        if code not in CODES:
            raise ValueError(f"unknown admin error code {code!r}")
        self.code = code
        self.status = CODES[code]
        self.message = message
        self.headers = headers or {}


def error_body(code: str, message: str) -> dict[str, Any]:
    """``{"error": {"code": code, "message": message}}``."""
    return {"error": {"code": code, "message": message}}


def error_response(exc: AdminError) -> JSONResponse:
    """The JSON response for ``exc`` (status from its code, its headers)."""
    return JSONResponse(error_body(exc.code, exc.message), status_code=exc.status, headers=exc.headers)
