"""Bedrock error envelopes: Busbar's errors as a Bedrock SDK sees them, and upstream errors read.

Envelope (restJson1, as the service sends it): body ``{"message": "..."}``, the exception name
in ``x-amzn-errortype: <Name>:http://internal.amazon.com/coral/com.amazon.bedrock/`` and a
``x-amzn-requestid`` (UUID). botocore takes the error code from that header (the part before
``:``), so boto3 raises ``client.exceptions.<Name>``.

Kind -> (status, exception): invalid_request 400 ``ValidationException``; authentication 403
``AccessDeniedException`` (Bedrock answers auth failures 403; docs/protocols/bedrock.md#errors); permission 403
``AccessDeniedException``; not_found 404 ``ResourceNotFoundException``; request_too_large 413
``ValidationException``; rate_limit 429 ``ThrottlingException``; insufficient_quota (a budget)
400 ``ServiceQuotaExceededException``; model_not_found 400 ``ValidationException`` (what Bedrock
answers for an unknown model id); api_error 500 ``InternalServerException``; overloaded 503
``ServiceUnavailableException``; timeout 408 ``ModelTimeoutException``. The status is Bedrock's,
not the caller's, for the kinds whose Bedrock status differs (auth, quota, model, timeout).

In a stream the same failure is a binary exception message (``:message-type exception``,
``:exception-type`` in lower camel case: ``throttlingException`` …), see ``exception_frame``.

Source: botocore ``bedrock-runtime`` error shapes.
cases C018, C020.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from busbar.proto.base import ErrorKind, UpstreamErrorInfo
from busbar.proto.bedrock.eventstream import encode_exception
from busbar.proto.openai.errors import read_error as _read_generic

CORAL_SUFFIX = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
"""What Bedrock appends to the exception name in ``x-amzn-errortype``."""

KIND_TO_BEDROCK: dict[str, tuple[int | None, str]] = {
    ErrorKind.INVALID_REQUEST: (None, "ValidationException"),
    ErrorKind.AUTHENTICATION: (403, "AccessDeniedException"),
    ErrorKind.PERMISSION: (403, "AccessDeniedException"),
    ErrorKind.NOT_FOUND: (None, "ResourceNotFoundException"),
    ErrorKind.REQUEST_TOO_LARGE: (None, "ValidationException"),
    ErrorKind.RATE_LIMIT: (429, "ThrottlingException"),
    ErrorKind.API_ERROR: (None, "InternalServerException"),
    ErrorKind.OVERLOADED: (503, "ServiceUnavailableException"),
    ErrorKind.TIMEOUT: (408, "ModelTimeoutException"),
    "insufficient_quota": (400, "ServiceQuotaExceededException"),
    "model_not_found": (400, "ValidationException"),
}
"""Canonical kind -> (Bedrock status or None to keep the caller's, exception name)."""

EXCEPTION_TO_KIND: dict[str, str] = {
    "validationexception": ErrorKind.INVALID_REQUEST,
    "accessdeniedexception": ErrorKind.PERMISSION,
    "unrecognizedclientexception": ErrorKind.AUTHENTICATION,
    "invalidsignatureexception": ErrorKind.AUTHENTICATION,
    "missingauthenticationtokenexception": ErrorKind.AUTHENTICATION,
    "expiredtokenexception": ErrorKind.AUTHENTICATION,
    "resourcenotfoundexception": ErrorKind.NOT_FOUND,
    "throttlingexception": ErrorKind.RATE_LIMIT,
    "servicequotaexceededexception": ErrorKind.RATE_LIMIT,
    "modelnotreadyexception": ErrorKind.OVERLOADED,
    "serviceunavailableexception": ErrorKind.OVERLOADED,
    "internalserverexception": ErrorKind.API_ERROR,
    "modelstreamerrorexception": ErrorKind.API_ERROR,
    "modelerrorexception": ErrorKind.API_ERROR,
    "modeltimeoutexception": ErrorKind.TIMEOUT,
}
"""Exception name (any case: ``ThrottlingException`` / ``throttlingException``) -> canonical kind."""

_STREAM_EXCEPTION = {
    ErrorKind.INVALID_REQUEST: "validationException",
    ErrorKind.RATE_LIMIT: "throttlingException",
    ErrorKind.OVERLOADED: "serviceUnavailableException",
    ErrorKind.TIMEOUT: "modelStreamErrorException",
}


def exception_name(kind: str, status: int | None = None) -> tuple[int, str]:
    """``(status, ExceptionName)`` for a canonical kind (see the module table)."""
    spec = KIND_TO_BEDROCK.get(kind)
    if spec is None:
        spec = KIND_TO_BEDROCK[ErrorKind.from_status(status) if status else ErrorKind.API_ERROR]
    st, name = spec
    return (st if st is not None else (status or ErrorKind.STATUS.get(kind, 500))), name


def kind_of(exception: str | None, status: int | None = None) -> str:
    """Canonical kind of an exception name (namespace and ``:…`` suffix tolerated), else by status."""
    if exception:
        name = exception.split(":", 1)[0].rsplit("#", 1)[-1].strip().lower()
        kind = EXCEPTION_TO_KIND.get(name)
        if kind is not None:
            return kind
    return ErrorKind.from_status(status) if status else ErrorKind.API_ERROR


def error_response(status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
    """The Bedrock-native error: ``(status, headers, body)`` with ``x-amzn-errortype`` and a request id."""
    st, name = exception_name(kind, status)
    headers = {
        "content-type": "application/json",
        "x-amzn-errortype": name + CORAL_SUFFIX,
        "x-amzn-requestid": str(uuid.uuid4()),
    }
    return st, headers, orjson.dumps({"message": message})


def exception_frame(kind: str, message: str) -> bytes:
    """The in-stream form: one eventstream exception message (``internalServerException`` by default)."""
    name = _STREAM_EXCEPTION.get(kind, "internalServerException")
    return encode_exception(name, orjson.dumps({"message": message}))


def read_error(status: int, body: bytes, headers: Any = None) -> UpstreamErrorInfo:
    """Provider error -> ``UpstreamErrorInfo``; ``code`` = ``type`` = the exception name.

    The name comes from ``headers["x-amzn-errortype"]`` when the caller passes the response
    headers, else from the body's ``__type`` (``code`` is None when neither is present). The body
    is ``{"message"}`` (or ``{"Message"}``); non-JSON and truncated bodies are tolerated.
    """
    name: str | None = None
    if headers is not None:
        raw = headers.get("x-amzn-errortype") or headers.get("X-Amzn-ErrorType")
        if raw:
            name = str(raw).split(":", 1)[0].strip() or None
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        t = obj.get("__type")
        if name is None and isinstance(t, str) and t:
            name = t.split(":", 1)[0].rsplit("#", 1)[-1]
        msg = obj.get("message")
        if not isinstance(msg, str):
            msg = obj.get("Message")
        if isinstance(msg, str) and msg:
            return UpstreamErrorInfo(name, msg[:4096], name)
        return UpstreamErrorInfo(name, f"upstream returned HTTP {status}", name)
    info = _read_generic(status, body)
    return UpstreamErrorInfo(name or info.code, info.message, name or info.type)
