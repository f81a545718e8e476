"""Server-sent events: an incremental, spec-conformant frame parser and a frame encoder.

What lives here: the byte-level ``text/event-stream`` grammar only (WHATWG HTML "Server-sent
events", §9.2.6 "Interpreting an event stream"): line splitting on CRLF, LF or a lone CR (also
when a CRLF pair is split across two chunks), ``:`` comment lines, ``field: value`` with one
optional leading space removed, multi-line ``data`` joined with ``\\n``, dispatch on a blank
line, and events without data not dispatched. What does not live here: any protocol meaning of
the frames (that is each dialect's ``stream.py``).

Provider quirks it must survive (captures in ``tools/mock-provider/src/busbar_mock_provider/fixtures``): Anthropic's
trailing-space padding inside ``data:`` lines, Gemini's ``\\r\\n\\r\\n`` separators, OpenAI's ``data: [DONE]``.

The reassembly buffer (an unfinished line plus the data lines of an unfinished event) is capped
at 16 MiB by default (the original's ``MAX_BUF``); beyond it ``SseBufferOverflow`` is raised and
the caller abandons the stream with a native error.

Source: docs/protocols/README.md (reassembly, CRLF-awareness, 16 MiB cap); case C005.
"""

from __future__ import annotations

DEFAULT_MAX_BUFFER_BYTES = 16 * 1024 * 1024
"""Reassembly cap in bytes (``eventstream::MAX_FRAME_BYTES`` in the original)."""

SseFrame = tuple["str | None", str]
"""One dispatched event: ``(event_name or None, data)``; ``data`` is the joined data lines."""


class SseBufferOverflow(Exception):
    """The pending (undispatched) part of the stream grew beyond the reassembly cap.

    Attributes:
        limit_bytes: the cap that was exceeded, in bytes.
    """

    def __init__(self, limit_bytes: int):
        super().__init__(
            f"SSE reassembly buffer exceeded {limit_bytes} bytes without completing an event; "
            "the upstream stream was abandoned"
        )
        self.limit_bytes = limit_bytes


class SseGarbage(ValueError):
    """A line that is not server-sent events: a field name other than ``data``, ``event``, ``id``
    or ``retry`` (e.g. a bare JSON line, HTML, binary). Providers never send other fields, so
    such a line means the body is not the stream it claims to be.

    Attributes:
        line: the first 80 characters of the offending line.
        frames: the frames completed before it in the same ``feed``/``close`` call.
    """

    def __init__(self, line: str, frames: list[SseFrame]):
        super().__init__("upstream sent bytes that are not server-sent events")
        self.line = line[:80]
        self.frames = frames


class SseParser:
    """Incremental SSE parser: feed raw bytes, get completed ``(event, data)`` frames.

    Bytes may be split anywhere (inside a line, inside a UTF-8 sequence, between CR and LF).
    ``id:`` and ``retry:`` fields are accepted and ignored (no dialect needs them).

    Args:
        max_buffer_bytes: reassembly cap in bytes (default 16 MiB).

    Example::

        p = SseParser()
        p.feed(b"event: ping\\ndata: {}\\n")   # -> []
        p.feed(b"\\n")                          # -> [("ping", "{}")]
    """

    __slots__ = ("_buf", "_skip_lf", "_event", "_data", "_data_bytes", "_max")

    def __init__(self, max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES):
        self._buf = b""
        self._skip_lf = False
        self._event: str | None = None
        self._data: list[str] = []
        self._data_bytes = 0
        self._max = max_buffer_bytes

    def feed(self, chunk: bytes) -> list[SseFrame]:
        """Consume ``chunk``; return the frames it completed (possibly none).

        Raises:
            SseBufferOverflow: the unfinished tail exceeds the reassembly cap.
            SseGarbage: a completed line is not an SSE field or comment.
        """
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._buf + chunk if self._buf else chunk
        end = buf.rfind(b"\n")
        cr = buf.rfind(b"\r")
        if cr > end:
            end = cr
        if end < 0:
            self._buf = buf
            self._check(len(buf) + self._data_bytes)
            return []
        head = buf[:end]
        self._buf = buf[end + 1 :]
        if buf[end] == 10:
            if head[-1:] == b"\r":  # the CR of the final CRLF terminator
                head = head[:-1]
        elif not self._buf:  # a final lone CR: its LF may open the next chunk
            self._skip_lf = True
        text = head.decode("utf-8", "replace")
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        frames = self._lines(text.split("\n"))
        self._check(len(self._buf) + self._data_bytes)
        return frames

    def close(self) -> list[SseFrame]:
        """End of body: dispatch a final event that lacked its blank line (lenient), then reset.

        The spec discards such an event; providers that end on ``data: [DONE]`` without the
        trailing blank line are common enough that the data is delivered and the dialect decides.
        """
        lines = [self._buf.decode("utf-8", "replace")] if self._buf else []
        lines.append("")
        self._buf = b""
        self._skip_lf = False
        return self._lines(lines)

    def _check(self, pending: int) -> None:
        if pending > self._max:
            raise SseBufferOverflow(self._max)

    def _lines(self, lines: list[str]) -> list[SseFrame]:
        frames: list[SseFrame] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    frames.append((self._event, "\n".join(data) if len(data) > 1 else data[0]))
                    data = self._data = []
                    self._data_bytes = 0
                self._event = None
                continue
            if line[0] == ":":
                continue
            name, sep, value = line.partition(":")
            if sep and value[:1] == " ":
                value = value[1:]
            if name == "data":
                data.append(value)
                self._data_bytes += len(value)
            elif name == "event":
                self._event = value or None
            elif name != "id" and name != "retry":
                raise SseGarbage(line, frames)
        return frames


def encode_frame(data: bytes, event: str | None = None) -> bytes:
    """One SSE frame: optional ``event:`` line, ``data:`` line(s), blank line.

    Args:
        data: the payload (normally compact JSON, which has no raw newlines); a payload with
            newlines is split into several ``data:`` lines so it round-trips through any parser.
        event: the event name, or ``None`` for a bare ``data:`` frame (OpenAI style).
    """
    if b"\n" in data or b"\r" in data:
        parts = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        body = b"".join(b"data: " + p + b"\n" for p in parts)
    else:
        body = b"data: " + data + b"\n"
    if event is None:
        return body + b"\n"
    return b"event: " + event.encode() + b"\n" + body + b"\n"


def encode_comment(text: str = "") -> bytes:
    """A comment frame (``: text``) — ignored by every conformant parser; used for keep-alives."""
    return b": " + text.encode() + b"\n\n" if text else b":\n\n"
