"""AWS eventstream framing: our encoder read by botocore's decoder, our decoder on the captures, CRC checks."""

from __future__ import annotations

import struct
import zlib

import pytest
from botocore.eventstream import EventStreamBuffer  # type: ignore[import-untyped]
from busbar.proto.bedrock.eventstream import (
    EventStreamDecoder,
    EventStreamError,
    encode_event,
    encode_exception,
    encode_message,
    header,
)
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES

FIXTURES = PACKAGED_FIXTURES
CAPTURES = ["converse-stream-text", "converse-stream-reasoning"]


def botocore_messages(raw: bytes) -> list[tuple[dict, bytes]]:
    buf = EventStreamBuffer()
    buf.add_data(raw)
    return [(dict(m.headers), m.payload) for m in buf]


def ours(raw: bytes, step: int | None = None) -> list[tuple[dict, bytes]]:
    dec = EventStreamDecoder()
    n = step or len(raw)
    out = []
    for i in range(0, len(raw), n):
        out += dec.feed(raw[i : i + n])
    assert dec.pending == 0
    return out


@pytest.mark.parametrize("name", CAPTURES)
@pytest.mark.parametrize("step", [None, 1, 7, 64, 1000])
def test_our_decoder_reads_every_capture_like_botocore(name: str, step: int | None) -> None:
    raw = (FIXTURES / "bedrock" / f"{name}.response.eventstream").read_bytes()
    assert ours(raw, step) == botocore_messages(raw)


def test_capture_headers_and_first_last_payloads() -> None:
    raw = (FIXTURES / "bedrock" / "converse-stream-text.response.eventstream").read_bytes()
    msgs = ours(raw)
    assert len(msgs) == 33
    assert msgs[0] == (
        {":event-type": "messageStart", ":content-type": "application/json", ":message-type": "event"},
        b'{"p":"abcdefghijklmnopqr","role":"assistant"}',
    )
    assert [h[":event-type"] for h, _ in msgs[-3:]] == ["contentBlockStop", "messageStop", "metadata"]
    assert msgs[-1][1].endswith(
        b'"usage":{"inputTokens":13,"outputTokens":82,"serverToolUsage":{},"totalTokens":95}}'
    )


def test_encoded_event_is_byte_exact_to_the_capture_frame() -> None:
    raw = (FIXTURES / "bedrock" / "converse-stream-text.response.eventstream").read_bytes()
    first_len = struct.unpack(">I", raw[:4])[0]
    assert encode_event("messageStart", b'{"p":"abcdefghijklmnopqr","role":"assistant"}') == raw[:first_len]


def test_encoder_output_parses_with_botocore_and_crcs_hold() -> None:
    frame = encode_event("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"text":"hi"}}')
    total, _hlen = struct.unpack(">II", frame[:8])
    assert total == len(frame)
    assert struct.unpack(">I", frame[8:12])[0] == zlib.crc32(frame[:8])
    assert struct.unpack(">I", frame[-4:])[0] == zlib.crc32(frame[:-4])
    assert botocore_messages(frame) == [
        (
            {
                ":event-type": "contentBlockDelta",
                ":content-type": "application/json",
                ":message-type": "event",
            },
            b'{"contentBlockIndex":0,"delta":{"text":"hi"}}',
        )
    ]
    exc = encode_exception("throttlingException", b'{"message":"slow down"}')
    assert botocore_messages(exc) == [
        (
            {
                ":exception-type": "throttlingException",
                ":content-type": "application/json",
                ":message-type": "exception",
            },
            b'{"message":"slow down"}',
        )
    ]


def test_decoder_rejects_a_bad_message_crc() -> None:
    frame = bytearray(encode_event("messageStart", b'{"role":"assistant"}'))
    frame[-6] ^= 0xFF
    with pytest.raises(EventStreamError, match="message CRC mismatch"):
        EventStreamDecoder().feed(bytes(frame))


def test_decoder_rejects_a_bad_prelude_crc_before_the_body_arrives() -> None:
    frame = bytearray(encode_event("messageStart", b'{"role":"assistant"}'))
    frame[9] ^= 0x01
    with pytest.raises(EventStreamError, match="prelude CRC mismatch"):
        EventStreamDecoder().feed(bytes(frame[:12]))


def test_decoder_rejects_an_oversized_length() -> None:
    prelude = struct.pack(">II", 32 * 1024 * 1024, 0)
    with pytest.raises(EventStreamError, match="out of range"):
        EventStreamDecoder().feed(prelude + struct.pack(">I", zlib.crc32(prelude)))


def test_decoder_reads_every_header_value_type() -> None:
    hdrs = (
        bytes([2])
        + b"bt"
        + b"\x00"
        + bytes([2])
        + b"bf"
        + b"\x01"
        + bytes([1])
        + b"b"
        + b"\x02"
        + b"\xff"
        + bytes([1])
        + b"s"
        + b"\x03"
        + (300).to_bytes(2, "big")
        + bytes([1])
        + b"i"
        + b"\x04"
        + (70000).to_bytes(4, "big")
        + bytes([1])
        + b"l"
        + b"\x05"
        + (1 << 40).to_bytes(8, "big")
        + bytes([1])
        + b"y"
        + b"\x06"
        + (3).to_bytes(2, "big")
        + b"\x00\x01\x02"
        + header("str", "v")
        + bytes([1])
        + b"t"
        + b"\x08"
        + (1700000000000).to_bytes(8, "big")
        + bytes([1])
        + b"u"
        + b"\x09"
        + bytes(range(16))
    )
    msg = encode_message(hdrs, b"{}")
    [(h, payload)] = EventStreamDecoder().feed(msg)
    assert h == {
        "bt": True,
        "bf": False,
        "b": -1,
        "s": 300,
        "i": 70000,
        "l": 1 << 40,
        "y": b"\x00\x01\x02",
        "str": "v",
        "t": 1700000000000,
        "u": bytes(range(16)),
    }
    assert payload == b"{}"
    assert botocore_messages(msg)[0][1] == b"{}"
