"""Store errors: one class per outcome a caller can act on, each with its wire ``kind``.

``StoreError(message)`` is the base (``kind = "error"``); the message never carries a secret (a
backend scrubs passwords from URLs before raising). Subclasses:

- :class:`StoreUnavailable` (``unavailable``): the backend cannot be reached now; retry later.
- :class:`StoreConflict` (``conflict``): the write contradicts stored state (a live credential
  slot, a different audit record at the same ``seq``, a write over a tombstone).
- :class:`StoreNotFound` (``not_found``): the operation names a row that does not exist.
- :class:`StoreInvalid` (``invalid``): the arguments are malformed (the caller's bug).
- :class:`StoreUnsupported` (``unsupported``): this backend does not serve the operation.
- :class:`StoreSchemaError` (``schema``): the stored schema is newer than this build reads.
"""
from __future__ import annotations

__all__ = [
    "StoreConflict",
    "StoreError",
    "StoreInvalid",
    "StoreNotFound",
    "StoreSchemaError",
    "StoreUnavailable",
    "StoreUnsupported",
    "error_for_kind",
]


class StoreError(Exception):
    """A store operation failed; ``kind`` names the outcome on the wire."""

    kind = "error"


class StoreUnavailable(StoreError):
    """The backend is unreachable or timed out; the operation may succeed if retried."""

    kind = "unavailable"


class StoreConflict(StoreError):
    """The write contradicts what is stored; retrying the same write fails the same way."""

    kind = "conflict"


class StoreNotFound(StoreError):
    """The named row does not exist."""

    kind = "not_found"


class StoreInvalid(StoreError):
    """Malformed arguments (a caller bug, never a backend fault)."""

    kind = "invalid"


class StoreUnsupported(StoreError):
    """This backend does not implement the operation."""

    kind = "unsupported"


class StoreSchemaError(StoreError):
    """The store holds a schema version newer than this build understands."""

    kind = "schema"


_BY_KIND: dict[str, type[StoreError]] = {
    cls.kind: cls for cls in (StoreError, StoreUnavailable, StoreConflict, StoreNotFound, StoreInvalid,
                              StoreUnsupported, StoreSchemaError)
}


def error_for_kind(kind: str, message: str) -> StoreError:
    """The exception for a wire ``{"error": {"kind", "message"}}`` (unknown kinds -> :class:`StoreError`)."""
    return _BY_KIND.get(kind, StoreError)(message)
