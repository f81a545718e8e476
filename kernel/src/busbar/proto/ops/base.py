"""The op-codec seam and the small helpers every embeddings codec shares.

``OpCodec`` (one per (operation, protocol); ``busbar.proto.ops.CODECS``):

- ``read_request(body, verb) -> IR`` (client body; ``verb`` the path verb of a path-model route,
  e.g. Gemini ``embedContent``); raises ``BadRequest`` with the field at fault.
- ``write_request(req, upstream_model) -> (body dict, dropped field names)``.
- ``read_response(doc) -> IR answer``; ``write_response(resp, req, model) -> dict``.
- ``usage_of(doc) -> int | None``: the billed units a provider answer reports (a same-protocol relay
  reads only this).
- ``serves(req, upstream_model) -> str | None``: why this lane cannot take this request (``None``:
  it can), e.g. a Titan model takes one input per call.
- ``egress_verb``: how the proxy lays out the upstream URL (``busbar.proxy.operation``).
- ``envelope``: the top-level key (and its JSON type) a success answer of this protocol carries
  (``busbar.proxy.success.ENVELOPE_KEYS`` under ``"<protocol>:<operation>"``).
"""
from __future__ import annotations

import base64
import struct
import sys
from array import array
from typing import Any, Protocol

from busbar.proto.errors import BadRequest

_BIG_ENDIAN = sys.byteorder == "big"


class OpCodec(Protocol):
    """One operation on one wire protocol, both directions (see the module docstring)."""

    operation: str
    protocol: str
    passthrough: bool            # same protocol: forward the client's bytes (model rewritten)

    def read_request(self, body: dict[str, Any], verb: str = "") -> Any:
        """Client body -> the operation's IR. Raises ``BadRequest``."""

    def write_request(self, req: Any, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        """IR -> provider body and the client fields it could not carry."""

    def read_response(self, doc: dict[str, Any]) -> Any:
        """Provider answer -> IR answer. Raises ``KeyError``/``TypeError``/``ValueError`` when malformed."""

    def write_response(self, resp: Any, req: Any, model: str) -> dict[str, Any]:
        """IR answer -> the client's answer (``model``: the name the client called)."""

    def serves(self, req: Any, upstream_model: str) -> str | None:
        """Why a lane of this protocol cannot serve ``req`` (``None``: it can)."""

    def usage_of(self, doc: dict[str, Any]) -> int | None:
        """The billed units of a provider answer in the operation's unit (embeddings: input tokens;
        rerank: search units); ``None``: not reported."""


def text_list(value: Any, field: str, *, allow_single: bool = True) -> tuple[list[str], bool]:
    """``(texts, single)`` of a string or a non-empty list of strings at ``field``.

    Raises:
        BadRequest: anything else (names ``field``).
    """
    if isinstance(value, str) and allow_single:
        return [value], True
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value), False
    kind = "a string or " if allow_single else ""
    raise BadRequest(f"'{field}' must be {kind}a non-empty list of strings")


def opt_int(body: dict[str, Any], field: str) -> int | None:
    """A positive integer field, or ``None`` when absent. Raises ``BadRequest``."""
    v = body.get(field)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise BadRequest(f"'{field}' must be a positive integer")
    return v


def floats_b64(vector: list[float]) -> str:
    """A vector as OpenAI's ``encoding_format: base64`` string (little-endian float32, base64).
    Raises ``TypeError`` for a non-number."""
    packed = array("f", vector)
    if _BIG_ENDIAN:
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def b64_floats(text: str) -> list[float]:
    """The inverse of :func:`floats_b64` (raises ``ValueError`` for a malformed string)."""
    raw = base64.b64decode(text, validate=True)
    if len(raw) % 4:
        raise ValueError("base64 embedding is not a whole number of float32 values")
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def vectors_of(value: Any) -> list[list[float]]:
    """Check a decoded list of float vectors (each a list starting with a number: checking every
    value would cost more than the rest of the hop; a later non-number fails the writer). Raises
    ``TypeError``."""
    if not isinstance(value, list) or not all(
            type(v) is list and (not v or isinstance(v[0], (int, float))) for v in value):
        raise TypeError("embeddings are not lists of numbers")
    return value
