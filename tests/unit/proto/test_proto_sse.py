"""The SSE frame parser and encoder (busbar.proto.sse): spec conformance, chunking, the 16 MiB cap."""

from __future__ import annotations

from pathlib import Path

import pytest
from busbar.proto.sse import SseBufferOverflow, SseParser, encode_comment, encode_frame
from busbar_mock_provider.fixtures import PACKAGED_FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

FIXTURES = PACKAGED_FIXTURES
SSE_FIXTURES = sorted(FIXTURES.glob("*/*.sse.txt"))


def parse_all(raw: bytes, step: int | None = None) -> list[tuple[str | None, str]]:
    p = SseParser()
    frames = []
    if step is None:
        frames += p.feed(raw)
    else:
        for i in range(0, len(raw), step):
            frames += p.feed(raw[i : i + step])
    return frames + p.close()


def sdk_parse(raw: bytes) -> list[tuple[str | None, str]]:
    return [(e.event, e.data) for e in SSEDecoder().iter_bytes(iter([raw]))]


def test_basic_event_and_data() -> None:
    assert parse_all(b"event: ping\ndata: {}\n\n") == [("ping", "{}")]


def test_crlf_cr_and_lf_line_endings_are_equivalent() -> None:
    lf = b"event: a\ndata: 1\n\ndata: 2\n\n"
    assert parse_all(lf) == [("a", "1"), (None, "2")]
    assert parse_all(lf.replace(b"\n", b"\r\n")) == [("a", "1"), (None, "2")]
    assert parse_all(lf.replace(b"\n", b"\r")) == [("a", "1"), (None, "2")]


def test_crlf_split_between_chunks_is_one_line_end() -> None:
    p = SseParser()
    assert p.feed(b"data: x\r") == []
    assert p.feed(b"\n") == []
    assert p.feed(b"\r") == [(None, "x")]
    assert p.feed(b"\ndata: y\r\n\r\n") == [(None, "y")]


def test_comments_are_ignored_and_do_not_dispatch() -> None:
    assert parse_all(b": keep-alive\n\n:\n\ndata: 1\n\n") == [(None, "1")]


def test_multiline_data_joined_with_newline_and_one_space_stripped() -> None:
    assert parse_all(b"data:a\ndata:  b\ndata\n\n") == [(None, "a\n b\n")]


def test_event_without_data_is_not_dispatched() -> None:
    assert parse_all(b"event: ping\n\nid: 3\nretry: 10\n\ndata: z\n\n") == [(None, "z")]


def test_event_name_resets_after_dispatch() -> None:
    assert parse_all(b"event: a\ndata: 1\n\ndata: 2\n\n") == [("a", "1"), (None, "2")]


def test_anthropic_trailing_spaces_inside_data_are_kept() -> None:
    raw = b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0       }\n\n'
    assert parse_all(raw) == [("content_block_stop", '{"type":"content_block_stop","index":0       }')]


def test_utf8_sequence_split_across_chunks() -> None:
    raw = "data: héllo ✓\n\n".encode()
    assert parse_all(raw, step=1) == [(None, "héllo ✓")]


def test_close_dispatches_an_unterminated_final_event() -> None:
    p = SseParser()
    assert p.feed(b"data: [DONE]") == []
    assert p.close() == [(None, "[DONE]")]
    assert p.close() == []


def test_buffer_cap_raises_a_clear_error() -> None:
    p = SseParser(max_buffer_bytes=64)
    p.feed(b"data: " + b"x" * 40 + b"\n")
    with pytest.raises(SseBufferOverflow, match="exceeded 64 bytes"):
        p.feed(b"data: " + b"y" * 40)
    assert SseParser().feed(b"data: " + b"z" * 1000 + b"\n\n") == [(None, "z" * 1000)]


def test_default_cap_is_16_mib() -> None:
    p = SseParser()
    with pytest.raises(SseBufferOverflow) as e:
        p.feed(b"x" * (16 * 1024 * 1024 + 1))
    assert e.value.limit_bytes == 16 * 1024 * 1024


@pytest.mark.parametrize("path", SSE_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_streams_parse_like_the_openai_sdk_at_any_chunking(path: Path) -> None:
    raw = path.read_bytes()
    expected = sdk_parse(raw)
    assert expected, "fixture has events"
    assert parse_all(raw) == expected
    assert parse_all(raw, step=1) == expected
    assert parse_all(raw, step=7) == expected


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from([None, "message_start", "ping"]),
            st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=20),
        ),
        min_size=1,
        max_size=6,
    ),
    eol=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_split_of_an_encoded_stream_gives_the_same_frames(
    events: list[tuple[str | None, str]], eol: bytes, cuts: list[int]
) -> None:
    raw = b"".join(encode_frame(d.encode(), e) for e, d in events).replace(b"\n", eol)
    p = SseParser()
    frames = []
    prev = 0
    for c in sorted(set(min(c, len(raw)) for c in cuts)) + [len(raw)]:
        frames += p.feed(raw[prev:c])
        prev = c
    frames += p.close()
    assert frames == [(e, d) for e, d in events]


def test_encode_frame_shapes() -> None:
    assert encode_frame(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert encode_frame(b"{}", "ping") == b"event: ping\ndata: {}\n\n"
    assert encode_frame(b"a\nb") == b"data: a\ndata: b\n\n"
    assert parse_all(encode_frame(b"a\r\nb", "x")) == [("x", "a\nb")]
    assert encode_comment("keep-alive") == b": keep-alive\n\n"
    assert encode_comment() == b":\n\n"
    assert parse_all(encode_comment("x") + encode_comment()) == []
