"""Usage on every Chat Completions stream, whatever the client asked: the ask and the strip.

An OpenAI stream reports usage only when the request sets ``stream_options.include_usage``; without
it the gateway could not charge the stream (docs/limits.md#settlement). So a same-protocol hop
always asks (:func:`asking_usage`), and when the client did not ask, :class:`UsageStripper` takes
out of the relayed bytes what the ask added: the ``"usage":null`` field of every chunk and the final
usage-only chunk (``"choices":[]``). The client then receives the stream it asked for, while the
gateway's decoder (fed the upstream bytes before the strip) still reads the usage.

``asked_usage(body) -> bool``; ``asking_usage(body) -> dict`` (a shallow copy);
``UsageStripper().feed(chunk) -> bytes`` / ``.close() -> bytes``.

Source: docs/limits.md#settlement.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["UsageStripper", "asked_usage", "asking_usage"]

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_NULL_FIELD = b',"usage":null'


def asked_usage(body: Mapping[str, Any]) -> bool:
    """Whether a Chat Completions body asks ``stream_options.include_usage: true``."""
    so = body.get("stream_options")
    return isinstance(so, dict) and so.get("include_usage") is True


def asking_usage(body: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of ``body`` with ``stream_options.include_usage: true`` (other stream options kept)."""
    so = body.get("stream_options")
    out = dict(body)
    out["stream_options"] = {**(so if isinstance(so, dict) else {}), "include_usage": True}
    return out


class UsageStripper:
    """Removes the usage the gateway asked for from a relayed Chat Completions SSE stream.

    ``feed(chunk)`` returns the complete events of what was fed so far (an event cut across chunks is
    held until its blank line), with usage taken out; ``close()`` returns whatever was held. Events
    without ``"usage"`` pass through byte for byte.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        """The complete events held so far, stripped (``b""`` while an event is still open)."""
        data = self._held + chunk if self._held else chunk
        last = 0
        out: list[bytes] = []
        for m in _EVENT_END.finditer(data):
            out.append(_strip(data[last:m.end()]))
            last = m.end()
        self._held = data[last:]
        return b"".join(out)

    def close(self) -> bytes:
        """The event held at the end of the stream (unterminated), stripped."""
        rest, self._held = self._held, b""
        return _strip(rest) if rest else b""


def _strip(event: bytes) -> bytes:
    if b'"usage"' not in event:
        return event
    event = event.replace(_NULL_FIELD, b"")
    if b'"usage"' not in event:
        return event
    lines = event.splitlines(keepends=True)
    out: list[bytes] = []
    for line in lines:
        if not line.startswith(b"data:") or b'"usage"' not in line:
            out.append(line)
            continue
        body = line[5:].strip()
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            out.append(line)
            continue
        if not isinstance(doc, dict) or "usage" not in doc:
            out.append(line)
            continue
        if doc.get("choices") == []:
            return b""                      # the usage-only chunk: the client did not ask for it
        del doc["usage"]
        out.append(b"data: " + orjson.dumps(doc) + line[len(line.rstrip(b"\r\n")):])
    return b"".join(out)
