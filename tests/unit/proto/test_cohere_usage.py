"""Cohere usage as every other client sees it (issue 11 item 22): ``tokens`` are the totals,
``cached_tokens`` the cache split, ``billed_units`` only when ``tokens`` is absent — on every
Cohere capture, JSON and stream, through the five other dialects."""
from __future__ import annotations

import orjson
import pytest
from busbar.ir.model import IrRequest, MessageDelta, Usage
from busbar.proto.cohere.response import usage_from_cohere
from busbar.proto.registry import DIALECTS
from busbar_mock_provider.fixtures import FixtureStore, default_fixtures_dir

STORE = FixtureStore(default_fixtures_dir())
COHERE = DIALECTS["cohere"]

# capture -> (tokens.input_tokens, tokens.output_tokens); billed_units are far lower in each
CAPTURES = {
    "cohere/chat-text.response.json": (69, 89),
    "cohere/thinking.response.json": (2190, 1257),
    "cohere/tool-call.response.json": (968, 83),
    "cohere/tool-result-followup.response.json": (1094, 102),
}
STREAM = ("cohere/chat-stream.response.sse.txt", (69, 110))


def client_usage(dialect: str, body: dict) -> dict:
    """The usage object of a client body of ``dialect``."""
    return body["usageMetadata"] if dialect == "gemini" else body["usage"]


def expected(dialect: str, total: int, out: int, cached: int = 0) -> dict:
    return {
        "openai": {"prompt_tokens": total, "completion_tokens": out, "total_tokens": total + out,
                   "prompt_tokens_details": {"cached_tokens": cached}},
        "responses": {"input_tokens": total, "input_tokens_details": {"cached_tokens": cached},
                      "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": total + out},
        "anthropic": {"input_tokens": total - cached, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": cached, "output_tokens": out},
        "gemini": {"promptTokenCount": total, "candidatesTokenCount": out, "totalTokenCount": total + out,
                   **({"cachedContentTokenCount": cached} if cached else {})},
        "bedrock": {"inputTokens": total - cached, "outputTokens": out, "totalTokens": total + out,
                    **({"cacheReadInputTokens": cached} if cached else {})},
    }[dialect]


OTHERS = ["openai", "responses", "anthropic", "gemini", "bedrock"]


@pytest.mark.parametrize("dialect", OTHERS)
@pytest.mark.parametrize("rel", sorted(CAPTURES))
def test_json_capture_reaches_every_other_client_with_the_tokens_totals(rel, dialect):
    resp = COHERE.read_response(orjson.loads(STORE.read(rel)))
    body = DIALECTS[dialect].write_response(resp, "m", IrRequest(model="m"))
    assert client_usage(dialect, body) == expected(dialect, *CAPTURES[rel])


@pytest.mark.parametrize("dialect", OTHERS)
def test_stream_capture_reaches_every_other_client_with_the_tokens_totals(dialect):
    rel, (total, out) = STREAM
    decoder = COHERE.stream_decoder()
    events = decoder.feed(STORE.read(rel)) + decoder.close()
    [delta] = [e for e in events if isinstance(e, MessageDelta)]
    assert delta.usage == Usage(input_tokens=total, output_tokens=out)
    encoder = DIALECTS[dialect].stream_encoder("m", IrRequest(model="m", stream=True, include_usage=True))
    wire = b"".join(encoder.encode(e) for e in events)
    if dialect == "bedrock":
        assert b'"inputTokens":69,"outputTokens":110,"totalTokens":179' in wire
    elif dialect == "openai":
        assert b'"usage":{"prompt_tokens":69,"completion_tokens":110,"total_tokens":179' in wire
    elif dialect == "anthropic":
        assert b'"input_tokens":69' in wire and b'"output_tokens":110' in wire
    elif dialect == "gemini":
        assert b'"promptTokenCount":69,"candidatesTokenCount":110,"totalTokenCount":179' in wire
    else:
        assert b'"input_tokens":69,"input_tokens_details":{"cached_tokens":0},"output_tokens":110' in wire


@pytest.mark.parametrize("dialect", OTHERS)
def test_cached_tokens_above_the_billed_input_never_make_the_input_zero(dialect):
    """A real answer shape: billed 100 in, the model read 2000, 1500 of them from the cache."""
    body = orjson.loads(STORE.read("cohere/chat-text.response.json"))
    body["usage"] = {"billed_units": {"input_tokens": 100, "output_tokens": 9},
                     "tokens": {"input_tokens": 2000, "output_tokens": 10}, "cached_tokens": 1500}
    resp = COHERE.read_response(body)
    assert resp.usage == Usage(input_tokens=500, output_tokens=10, cache_read_tokens=1500)
    out = DIALECTS[dialect].write_response(resp, "m", IrRequest(model="m"))
    assert client_usage(dialect, out) == expected(dialect, 2000, 10, cached=1500)


def test_billed_units_only_when_tokens_are_absent():
    assert usage_from_cohere({"billed_units": {"input_tokens": 7, "output_tokens": 3}}) == \
        Usage(input_tokens=7, output_tokens=3)
    assert usage_from_cohere({"billed_units": {"input_tokens": 7, "output_tokens": 3},
                              "tokens": {"input_tokens": 70, "output_tokens": 4}}) == \
        Usage(input_tokens=70, output_tokens=4)
    assert usage_from_cohere(None) == Usage()
