"""The request-body nesting cap: JSON arrays/objects at most ``MAX_JSON_DEPTH`` (128) levels deep.

Every hop may re-serialize the body (orjson refuses past 254 levels) and the protocol readers,
writers and hooks walk it, so one cap at ingress keeps a deep body from failing half way through a
request. ``too_deep(body, raw) -> bool`` first counts the opening brackets of the wire bytes (an
upper bound of the depth, two C-speed ``bytes.count`` calls): a body with at most ``MAX_JSON_DEPTH``
of them cannot be too deep and costs nothing more, which is nearly every request. Past that it costs
one ``orjson.dumps`` of the already-parsed body (C speed, no Python walk): the body is serialized
inside a fixed chain of single-element lists whose length is chosen so that orjson's own
recursion limit trips exactly when the body nests deeper than ``MAX_JSON_DEPTH``.
``deep_field(body) -> str`` names the field that is too deep (only on the refusal path).
See docs/configuration.md#front-door-connection-limits.
"""
from __future__ import annotations

from typing import Any

import orjson

MAX_JSON_DEPTH = 128
"""Deepest nesting of JSON arrays/objects a request body may have (the top-level object is 1)."""

_ORJSON_MAX = 254                # orjson.dumps serializes at most this many nested levels
_PATH_SEGMENTS = 3               # how much of the too-deep field's path a refusal names


def _chain(levels: int) -> tuple[list[Any], list[Any]]:
    """``levels`` nested single-element lists: (outermost, innermost); innermost[0] holds the probe."""
    outer: list[Any] = [None]
    inner = outer
    for _ in range(levels - 1):
        nxt: list[Any] = [None]
        inner[0] = nxt
        inner = nxt
    return outer, inner


def _fits(value: Any, depth: int) -> bool:
    """Whether ``value`` nests at most ``depth`` levels (0 < depth < 254)."""
    outer, inner = _chain(_ORJSON_MAX - depth)
    inner[0] = value
    try:
        orjson.dumps(outer)
    except orjson.JSONEncodeError:
        return False
    return True


_OUTER, _INNER = _chain(_ORJSON_MAX - MAX_JSON_DEPTH)


def too_deep(body: Any, raw: bytes) -> bool:
    """Whether the parsed request ``body`` (``raw`` on the wire) nests deeper than ``MAX_JSON_DEPTH``.
    A body with at most ``MAX_JSON_DEPTH`` opening brackets (in strings too: an upper bound) cannot,
    and is not probed."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return False
    _INNER[0] = body
    try:
        orjson.dumps(_OUTER)
    except orjson.JSONEncodeError:
        return True
    finally:
        _INNER[0] = None
    return False


def deep_field(body: Any) -> str:
    """The path (at most three segments, e.g. ``messages[0].content``) of the first field of
    ``body`` whose value nests past ``MAX_JSON_DEPTH``; ``""`` when only the body as a whole does.
    A list index is named only when it leads to an object (``messages[0]``, never ``x[0][0]``)."""
    path = ""
    node, budget = body, MAX_JSON_DEPTH - 1
    for _ in range(_PATH_SEGMENTS):
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            wanted = dict if isinstance(key, int) else (dict, list)
            if isinstance(value, wanted) and not _fits(value, budget):
                path += f"[{key}]" if isinstance(key, int) else (f".{key}" if path else str(key))
                node, budget = value, budget - 1
                break
        else:
            break
    return path
