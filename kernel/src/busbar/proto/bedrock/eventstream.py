"""AWS event-stream framing (``application/vnd.amazon.eventstream``): frame encoder and a checked decoder.

Wire layout of one message (all integers big-endian)::

    [total_len u32][headers_len u32][prelude_crc u32]      prelude: CRC32 of the first 8 bytes
    [headers: name_len u8, name, type u8, value ...]       strings: type 7, value = [len u16][utf-8]
    [payload bytes]
    [message_crc u32]                                       CRC32 of everything before it

``total_len`` counts the whole message (prelude, headers, payload and both CRCs), so the smallest
message is 16 bytes. CRCs are zlib's CRC32. Header value types (AWS "Event Stream" spec): 0 true,
1 false, 2 byte, 3 short, 4 integer, 5 long, 6 byte array (u16 length), 7 string (u16 length),
8 timestamp (i64 ms), 9 UUID (16 bytes). The encoder writes string headers only (type 7), as
Bedrock does; the decoder reads every type.

What lives here: bytes <-> ``(headers, payload)`` only. The meaning of ``:event-type``,
``:message-type`` and ``:exception-type`` is the Converse stream's business
(``stream_decoder`` / ``stream_encoder``).

Source: docs/protocols/bedrock.md#streaming-binary-eventstream (frame layout, ``drain_frames_checked``,
``encode_frame``, ``encode_exception_frame``, ``MAX_FRAME_BYTES`` 16 MiB).
"""

from __future__ import annotations

import struct
import zlib

from busbar.proto.decoder import MalformedFrame

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Largest message accepted by the decoder (the original's ``eventstream::MAX_FRAME_BYTES``)."""

_U32 = struct.Struct(">I")
_PRELUDE = struct.Struct(">II")
_JSON_HEADERS = b"\x0d:content-type\x07\x00\x10application/json"
_EVENT = b"\x0d:message-type\x07\x00\x05event"

Headers = dict[str, object]
"""Decoded headers: name -> value (``str`` for strings, ``bytes``, ``int``, ``bool``)."""


class EventStreamError(Exception):
    """A malformed message: bad prelude or message CRC, an impossible length, an unknown header type."""


def header(name: str, value: str) -> bytes:
    """One string header (type 7) in wire form."""
    n = name.encode()
    v = value.encode()
    return bytes((len(n),)) + n + b"\x07" + len(v).to_bytes(2, "big") + v


def encode_message(headers: bytes, payload: bytes) -> bytes:
    """A complete message from pre-encoded ``headers`` (see :func:`header`) and ``payload``."""
    total = 16 + len(headers) + len(payload)
    prelude = _PRELUDE.pack(total, len(headers))
    head = prelude + _U32.pack(zlib.crc32(prelude)) + headers + payload
    return head + _U32.pack(zlib.crc32(head))


def encode_event(event_type: str, payload: bytes) -> bytes:
    """A ``:message-type event`` message with ``:event-type`` and ``:content-type application/json``.

    Header order follows Bedrock's captures: ``:event-type``, ``:content-type``, ``:message-type``.
    """
    return encode_message(header(":event-type", event_type) + _JSON_HEADERS + _EVENT, payload)


def encode_exception(exception_type: str, payload: bytes) -> bytes:
    """A modeled exception: ``:message-type exception`` + ``:exception-type`` (e.g. ``throttlingException``)."""
    hdrs = header(":exception-type", exception_type) + _JSON_HEADERS + header(":message-type", "exception")
    return encode_message(hdrs, payload)


def _parse_headers(raw: bytes) -> Headers:
    out: Headers = {}
    pos, end = 0, len(raw)
    while pos < end:
        n = raw[pos]
        name = raw[pos + 1 : pos + 1 + n].decode("utf-8", "replace")
        pos += 1 + n
        if pos >= end:
            raise EventStreamError(f"header {name!r} has no value type")
        t = raw[pos]
        pos += 1
        if t == 7 or t == 6:
            ln = int.from_bytes(raw[pos : pos + 2], "big")
            val = raw[pos + 2 : pos + 2 + ln]
            out[name] = val.decode("utf-8", "replace") if t == 7 else bytes(val)
            pos += 2 + ln
        elif t == 0 or t == 1:
            out[name] = t == 0
        elif t == 2:
            out[name] = int.from_bytes(raw[pos : pos + 1], "big", signed=True)
            pos += 1
        elif t == 3:
            out[name] = int.from_bytes(raw[pos : pos + 2], "big", signed=True)
            pos += 2
        elif t == 4:
            out[name] = int.from_bytes(raw[pos : pos + 4], "big", signed=True)
            pos += 4
        elif t == 5 or t == 8:
            out[name] = int.from_bytes(raw[pos : pos + 8], "big", signed=True)
            pos += 8
        elif t == 9:
            out[name] = bytes(raw[pos : pos + 16])
            pos += 16
        else:
            raise EventStreamError(f"header {name!r} has unknown value type {t}")
        if pos > end:
            raise EventStreamError(f"header {name!r} runs past the header block")
    return out


class EventStreamDecoder:
    """Incremental decoder: feed bytes split anywhere, get ``(headers, payload)`` per complete message.

    Both CRCs are verified; a bad CRC, a length outside 16..``max_frame_bytes`` or a malformed
    header block raises :class:`EventStreamError` (the stream cannot be resynchronized after it).

    Example::

        dec = EventStreamDecoder()
        for headers, payload in dec.feed(chunk):
            headers[":event-type"]   # e.g. "contentBlockDelta"
    """

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES):
        self._buf = bytearray()
        self._max = max_frame_bytes

    @property
    def pending(self) -> int:
        """Bytes held for an incomplete message (non-zero at end of body = truncated stream)."""
        return len(self._buf)

    def feed(self, chunk: bytes) -> list[tuple[Headers, bytes]]:
        """Consume ``chunk``; return the messages it completed.

        Raises:
            EventStreamError: see the class docstring.
        """
        buf = self._buf
        buf += chunk
        out: list[tuple[Headers, bytes]] = []
        pos = 0
        n = len(buf)
        with memoryview(buf) as mv:
            while n - pos >= 12:
                total, hlen = _PRELUDE.unpack_from(mv, pos)
                if zlib.crc32(mv[pos : pos + 8]) != _U32.unpack_from(mv, pos + 8)[0]:
                    raise EventStreamError("prelude CRC mismatch")
                if total < 16 or total > self._max or hlen > total - 16:
                    raise EventStreamError(f"message length {total} (headers {hlen}) is out of range")
                if n - pos < total:
                    break
                end = pos + total
                if zlib.crc32(mv[pos : end - 4]) != _U32.unpack_from(mv, end - 4)[0]:
                    raise EventStreamError("message CRC mismatch")
                hstart = pos + 12
                headers = _parse_headers(bytes(mv[hstart : hstart + hlen]))
                out.append((headers, bytes(mv[hstart + hlen : end - 4])))
                pos = end
        if pos:
            del buf[:pos]
        return out


def split_eventstream(decoder: EventStreamDecoder, chunk: bytes) -> list[tuple[Headers, bytes]]:
    """``decoder.feed(chunk)`` for a stream decoder: a malformed message is a ``MalformedFrame``.

    Raises:
        busbar.proto.decoder.MalformedFrame: ``malformed upstream eventstream: <what>``.
    """
    try:
        return decoder.feed(chunk)
    except EventStreamError as e:
        raise MalformedFrame(f"malformed upstream eventstream: {e}") from e
