"""Fuzz every stream decoder over valid-then-mutated event sequences (issue 11 item 9).

Each example replays a real capture, replaces one JSON value of one event with a value of any
type (or one event with garbage bytes), and feeds the result in random-sized chunks: the
decoder never raises, returns only IR events, and whatever it returns every client encoder can
encode without raising. Bounded (``max_examples``) so the whole module runs in a few seconds.
"""
from __future__ import annotations

import base64
import json
import os
from typing import Any

import orjson
import pytest
from busbar.ir.model import (
    BlockDelta,
    BlockStart,
    BlockStop,
    IrRequest,
    MessageDelta,
    MessageStart,
    MessageStop,
    StreamError,
)
from busbar.proto.bedrock.eventstream import EventStreamDecoder, encode_event, encode_message, header
from busbar.proto.registry import DIALECTS
from busbar_mock_provider.fixtures import FixtureStore, default_fixtures_dir, split_eventstream, split_sse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.mutate import json_values, replaced

IR_EVENTS = (MessageStart, BlockStart, BlockDelta, BlockStop, MessageDelta, MessageStop, StreamError)
STORE = FixtureStore(default_fixtures_dir())

SSE_CAPTURES = {
    "openai": ["openai-chat/text-stream-include-usage.response.sse.txt",
               "openai-chat/tool-calls-parallel-stream.response.sse.txt"],
    "anthropic": ["anthropic/tool-use-stream.response.sse.txt", "anthropic/thinking-stream.response.sse.txt"],
    "gemini": ["gemini/text-stream.response.sse.txt", "gemini/thinking-stream.response.sse.txt"],
    "cohere": ["cohere/chat-stream.response.sse.txt"],
    "responses": ["openai-responses/function-call-stream.response.sse.txt",
                  "openai-responses/text-stream.response.sse.txt"],
}
EVENTSTREAM_CAPTURES = ["bedrock/converse-stream-text.response.eventstream",
                        "bedrock/converse-stream-reasoning.response.eventstream"]

garbage = st.sampled_from([b"not an event\n\n", b"<html>502 Bad Gateway</html>\n\n", b"\x00\xff\xfe garbage\n\n",
                           b'{"choices": []}\n\n', b"data: {not json\n\n", b"data: [1, 2]\n\n"]) | st.binary(max_size=40)


def _mutate_json(data: bytes, pick: int, value: Any) -> bytes | None:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return json.dumps(replaced(obj, pick, value)).encode()


def _mutate_sse_frame(frame: bytes, pick: int, value: Any) -> bytes:
    lines = frame.split(b"\n")
    for i, line in enumerate(lines):
        if line.startswith(b"data:"):
            new = _mutate_json(line[5:].strip(), pick, value)
            if new is not None:
                lines[i] = b"data: " + new
            break
    return b"\n".join(lines)


def _mutate_eventstream_frame(frame: bytes, pick: int, value: Any) -> bytes:
    [(headers, payload)] = EventStreamDecoder().feed(frame)
    new = _mutate_json(payload, pick, value)
    if new is None:
        return frame
    return encode_message(b"".join(header(k, str(v)) for k, v in headers.items()), new)


def _run(dialect: str, frames: list[bytes], cut: int) -> None:
    decoder = DIALECTS[dialect].stream_decoder()
    body = b"".join(frames)
    events = []
    for i in range(0, len(body), cut):
        events += decoder.feed(body[i:i + cut])
    events += decoder.close()
    assert all(isinstance(e, IR_EVENTS) for e in events)
    errors = [e for e in events if isinstance(e, StreamError)]
    assert len(errors) <= 1 and (not errors or events[-1] is errors[0])
    for name, client in DIALECTS.items():
        encoder = client.stream_encoder("m", IrRequest(model="m", stream=True))
        for e in events:
            assert isinstance(encoder.encode(e), bytes), name


FUZZ = settings(max_examples=int(os.environ.get("BUSBAR_FUZZ_EXAMPLES", "25")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
SSE_CASES = [(d, rel) for d, rels in SSE_CAPTURES.items() for rel in rels]


@pytest.mark.parametrize(("dialect", "rel"), SSE_CASES)
@FUZZ
@given(data=st.data(), value=json_values, cut=st.integers(1, 400))
def test_sse_decoder_survives_a_wrong_typed_field(dialect, rel, data, value, cut):
    frames = split_sse(STORE.read(rel))
    k = data.draw(st.integers(0, len(frames) - 1))
    pick = data.draw(st.integers(0, 10_000))
    frames[k] = _mutate_sse_frame(frames[k], pick, value)
    _run(dialect, frames, cut)


@pytest.mark.parametrize(("dialect", "rel"), SSE_CASES)
@FUZZ
@given(data=st.data(), junk=garbage, cut=st.integers(1, 400))
def test_sse_decoder_survives_garbage_after_valid_events(dialect, rel, data, junk, cut):
    frames = split_sse(STORE.read(rel))
    k = data.draw(st.integers(1, len(frames)))
    _run(dialect, frames[:k] + [junk] + frames[k:], cut)


@pytest.mark.parametrize("dialect", ["bedrock", "bedrock-invoke"])
@pytest.mark.parametrize("rel", EVENTSTREAM_CAPTURES)
@FUZZ
@given(data=st.data(), value=json_values, junk=garbage, cut=st.integers(1, 400))
def test_eventstream_decoder_survives_mutations(dialect, rel, data, value, junk, cut):
    frames = split_eventstream(STORE.read(rel))
    if dialect == "bedrock-invoke":     # the same events as invoke chunks (an Anthropic stream inside)
        frames = [encode_event("chunk", b'{"bytes":"' + base64.b64encode(f) + b'"}')
                  for f in split_sse(STORE.read("anthropic/tool-use-stream.response.sse.txt"))]
    k = data.draw(st.integers(0, len(frames) - 1))
    pick = data.draw(st.integers(0, 10_000))
    frames[k] = _mutate_eventstream_frame(frames[k], pick, value)
    if data.draw(st.booleans()):
        frames.insert(data.draw(st.integers(1, len(frames))), junk)
    _run(dialect, frames, cut)
