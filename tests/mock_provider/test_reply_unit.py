"""Pure units: schema-derived tool arguments, reply planning, path knobs, fixture framing."""

from __future__ import annotations

import pytest
from busbar_mock_provider.fixtures import FixtureStore, split_eventstream, split_sse
from busbar_mock_provider.reply import Prompt, example_from_schema, plan_reply
from busbar_mock_provider.routing import route

from .conftest import FIXTURES


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "test"),
        ({"type": "integer"}, 1),
        ({"type": "number"}, 1),
        ({"type": "boolean"}, True),
        ({"type": ["null", "integer"]}, 1),
        ({"enum": ["b", "a"]}, "b"),
        ({"const": 3}, 3),
        ({"anyOf": [{"type": "number"}, {"type": "string"}]}, 1),
        ({"type": "array", "items": {"type": "string"}}, []),
        ({"type": "array", "items": {"type": "string"}, "minItems": 2}, ["test", "test"]),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                "required": ["a"],
            },
            {"a": "test"},
        ),
        (
            {
                "type": "object",
                "properties": {"p": {"$ref": "#/$defs/P"}},
                "required": ["p"],
                "$defs": {
                    "P": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
                },
            },
            {"p": {"x": 1}},
        ),
        ({}, "test"),
    ],
    ids=[
        "string",
        "integer",
        "number",
        "boolean",
        "nullable",
        "enum",
        "const",
        "anyOf",
        "array",
        "minItems",
        "object-required-only",
        "ref",
        "empty",
    ],
)
def test_example_from_schema(schema: dict[str, object], expected: object) -> None:
    assert example_from_schema(schema) == expected


def test_plan_reply_chunks_stop_and_length() -> None:
    p = Prompt(model="m", last_user_text="a b")
    assert plan_reply(p, seq=1).pieces == ["Hello", " from", " m.", " You", " said:", " a", " b"]
    assert len(plan_reply(p, seq=1, chunks=16).pieces) == 16
    merged = plan_reply(p, seq=1, chunks=2)
    assert merged.pieces == ["Hello from m. You", " said: a b"]
    p.stop = ("said",)
    r = plan_reply(p, seq=1)
    assert (r.text, r.finish, r.stop_sequence) == ("Hello from m. You ", "stop_sequence", "said")
    p.stop, p.max_tokens = (), 1
    r = plan_reply(p, seq=1)
    assert (r.text, r.finish, r.completion_tokens) == ("Hello", "length", 1)


def test_routing_knobs() -> None:
    rt = route("/p/d50/c16/i5/v1/chat/completions")
    assert (rt.prefix, rt.endpoint, rt.delay_ms, rt.chunks, rt.chunk_delay_ms) == (
        "/p/d50/c16/i5",
        "/v1/chat/completions",
        50.0,
        16,
        5.0,
    )
    assert route("/v1/messages").prefix == ""
    assert route("/dx/c0/v1/messages").chunks == 1
    assert route("/healthz").endpoint == ""


def test_fixture_framing() -> None:
    assert split_sse(b"data: a\n\ndata: b\r\n\r\ntail") == [b"data: a\n\n", b"data: b\r\n\r\n", b"tail"]
    store = FixtureStore(FIXTURES)
    frames = store.frames("bedrock/converse-stream-text.response.eventstream")
    assert b"".join(frames) == (FIXTURES / "bedrock/converse-stream-text.response.eventstream").read_bytes()
    assert len(frames) > 3 and all(int.from_bytes(f[:4], "big") == len(f) for f in frames)
    with pytest.raises(ValueError, match="announces"):
        split_eventstream(b"\x00\x00\x01\x00" + b"\x00" * 20)
    jsonl = store.frames("openai-responses/error-in-stream.response.chunks.jsonl")
    assert all(f.startswith(b"data: {") and f.endswith(b"}\n\n") for f in jsonl)
