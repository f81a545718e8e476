"""Reading a sidecar reply safely: a size cap before allocation, a nesting-depth guard before parse.

A hostile or broken sidecar can neither exhaust memory (the body is read in chunks and abandoned at
``max_reply_bytes``; a ``Content-Length`` above it is refused before any byte is read) nor blow the
parser's stack (nesting is counted with a linear scan before ``json.loads`` runs). ``NaN`` and
``Infinity`` are refused (the wire is JSON, and a kernel in another language would read them
differently), and so is anything but a JSON object.
"""
from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["ReplyError", "json_depth", "parse_reply"]

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


class ReplyError(Exception):
    """The sidecar's reply is unusable; ``reason`` is a metric label, the message one line."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


def json_depth(data: bytes) -> int:
    """The deepest nesting of ``[``/``{`` in a JSON text (brackets inside strings ignored).

    Linear time, no recursion; for malformed input the answer is an upper bound of what a parser
    would reach, which is all the guard needs.
    """
    depth = deepest = 0
    for m in _BRACKET.finditer(_STRING.sub(b'""', data)):
        if m.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: ``json.loads(text, parse_constant=_no_constants)`` without building a decoder per reply.
_DECODER = json.JSONDecoder(parse_constant=_no_constants)


def parse_reply(body: bytes, *, max_depth: int) -> dict[str, Any]:
    """Parse a reply body into a JSON object.

    Raises:
        ReplyError: ``empty`` (an empty body is a transport error, never an abstain), ``too_deep``,
            ``invalid_json`` (including non-UTF-8, ``NaN``, ``Infinity``), ``not_object``.
    """
    if not body.strip():
        raise ReplyError("empty", "the sidecar answered an empty body (an error, not an abstain: reply {})")
    if body.count(b"[") + body.count(b"{") > max_depth:     # else no nesting can pass the limit
        depth = json_depth(body)
        if depth > max_depth:
            raise ReplyError("too_deep", f"the sidecar's reply nests {depth} levels deep; the limit is {max_depth} "
                                         f"(settings.max_reply_depth)")
    try:
        value = _DECODER.decode(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ReplyError("invalid_json", f"the sidecar's reply is not JSON: {str(e)[:200]}") from None
    if not isinstance(value, dict):
        kind = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")
        raise ReplyError("not_object", f"the sidecar's reply is a JSON {kind}, not an object")
    return value
