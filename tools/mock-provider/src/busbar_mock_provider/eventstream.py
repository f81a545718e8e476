"""AWS event-stream message encoding for the Bedrock mock (``application/vnd.amazon.eventstream``).

Independent of the gateway's own codec (``busbar.proto.bedrock.eventstream``) on purpose: the
mock is the reference the gateway is tested against, so it does not share its code.

Layout (big-endian): ``total_len u32``, ``headers_len u32``, ``prelude CRC32`` (of the first 8
bytes), headers (``name_len u8, name, type u8 = 7 (string), value_len u16, value``), payload,
``message CRC32`` (of everything before it). Header order follows the captures in
``fixtures/bedrock/*.eventstream``: ``:event-type``, ``:content-type``, ``:message-type``.

What must not live here: Converse shapes (``bedrock.py``).
"""

from __future__ import annotations

import binascii
import struct

__all__ = ["event_message", "exception_message", "message"]


def _string_header(name: str, value: str) -> bytes:
    n, v = name.encode(), value.encode()
    return struct.pack(">B", len(n)) + n + b"\x07" + struct.pack(">H", len(v)) + v


def message(headers: list[tuple[str, str]], payload: bytes) -> bytes:
    """One complete message with string headers and valid CRCs."""
    hdr = b"".join(_string_header(k, v) for k, v in headers)
    prelude = struct.pack(">II", 16 + len(hdr) + len(payload), len(hdr))
    head = prelude + struct.pack(">I", binascii.crc32(prelude)) + hdr + payload
    return head + struct.pack(">I", binascii.crc32(head))


def event_message(event_type: str, payload: bytes) -> bytes:
    """A ``:message-type event`` message (e.g. ``contentBlockDelta``)."""
    return message(
        [(":event-type", event_type), (":content-type", "application/json"), (":message-type", "event")],
        payload,
    )


def exception_message(exception_type: str, payload: bytes) -> bytes:
    """A modeled exception message (``:message-type exception``, e.g. ``throttlingException``)."""
    return message(
        [
            (":exception-type", exception_type),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        payload,
    )
