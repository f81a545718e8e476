"""Errors raised while reading a client request, mapped to the caller's native envelope.

Tree::

    ProtoError                      base for request-shape faults (carries status + kind)
    ├── BadRequest                  malformed / invalid body -> 400 invalid_request
    └── PayloadTooLarge             body over limits.request_body_max_bytes -> 413

Source: docs/protocols/README.md.
"""
from __future__ import annotations

from busbar.proto.base import ErrorKind


class ProtoError(Exception):
    """A request-shape fault; ``status``/``kind`` select the native error envelope."""

    status = 400
    kind = ErrorKind.INVALID_REQUEST

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BadRequest(ProtoError):
    status = 400
    kind = ErrorKind.INVALID_REQUEST


class PayloadTooLarge(ProtoError):
    status = 413
    kind = ErrorKind.REQUEST_TOO_LARGE
