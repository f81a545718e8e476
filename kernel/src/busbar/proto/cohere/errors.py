"""Cohere error envelopes: Busbar's errors as a Cohere client sees them, and upstream errors read.

Envelope: ``{"message": <m>}`` with ``content-type: application/json``; the status passed in is
kept, because cohere-python picks its exception class from the status alone
(``cohere.v2.raw_client``: 400 BadRequestError, 401 UnauthorizedError, 403 ForbiddenError,
404 NotFoundError, 422 UnprocessableEntityError, 429 TooManyRequestsError, 498 InvalidTokenError,
499 ClientClosedRequestError, 500 InternalServerError, 501 NotImplementedError,
503 ServiceUnavailableError, 504 GatewayTimeoutError, any other status ``ApiError``).
Mid-stream, a failure is a ``message-end`` event whose ``finish_reason`` is ``ERROR`` and whose
``error`` carries the message (written by the stream encoder).

Upstream bodies: ``{"id", "message"}`` (capture ``cohere/error-404-model-not-found.response.json``);
``read_error`` keeps the message verbatim (case C020). Cohere sends no error code.

Source: docs/reliability.md#mid-stream-failures; cases C020, C043.
"""

from __future__ import annotations

import orjson

from busbar.proto.base import UpstreamErrorInfo
from busbar.proto.openai.errors import read_error as _read_generic

_HEADERS = {"content-type": "application/json"}


class CohereAnswerError(Exception):
    """A Cohere body whose ``finish_reason`` is ``ERROR…`` or ``TIMEOUT``: not an answer.

    Attributes:
        kind: the canonical error kind (``api_error`` for ``ERROR…``, ``timeout`` for ``TIMEOUT``).
        message: what the provider said, or ``upstream finished with <reason>``.
    """

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def error_payload(message: str) -> dict[str, str]:
    """``{"message": message}``."""
    return {"message": message}


def error_response(status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
    """The Cohere-native error: ``(status, {"content-type": "application/json"}, body bytes)``.

    ``kind`` does not appear in the body (Cohere's envelope has no type); the status carries it.
    """
    return status, dict(_HEADERS), orjson.dumps(error_payload(message))


def read_error(status: int, body: bytes) -> UpstreamErrorInfo:
    """Provider error body -> ``UpstreamErrorInfo`` (``code`` None: Cohere sends none).

    Tolerates non-JSON and truncated bodies (never raises).
    """
    return _read_generic(status, body)
