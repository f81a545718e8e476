"""busbar.proxy.responses_state: the issuer map, the blob strip, the refusal codes (C046;
docs/protocols/responses.md#state-routing). End to end: tests/e2e/test_responses_state.py."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import orjson
from busbar.proto.base import UpstreamErrorInfo
from busbar.proto.registry import get_dialect
from busbar.proxy.attempt import AttemptFailure
from busbar.proxy.responses_state import Issuers, foreign_blob, foreign_response, issuers, recording, strip
from busbar.proxy.translate import Call


def test_the_issuer_map_is_bounded_and_forgets_the_oldest_first():
    m = Issuers(capacity=3)
    m.record(["resp_1", "rs_1"], "ra")
    m.record(["resp_2"], "rb")
    m.record(["resp_3"], "ra")                   # resp_1 is evicted
    assert len(m) == 3
    assert m.lookup(["resp_1"]) is None
    assert m.lookup([None, "resp_1", "rs_1"]) == "ra"
    assert m.lookup(["resp_2", "resp_3"]) == "rb"


def _call(body):
    return Call(get_dialect("responses"), body, orjson.dumps(body), False, {}, "reason")


def test_strip_keeps_summaries_and_drops_items_left_with_nothing():
    body = {"model": "reason", "include": ["reasoning.encrypted_content"], "input": [
        {"role": "user", "content": "hi"},
        {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Thinking."}],
         "encrypted_content": "gAAAAAB1"},
        {"id": "rs_2", "type": "reasoning", "summary": [], "encrypted_content": "gAAAAAB2"},
        {"role": "user", "content": "more"}]}
    call = _call(body)
    assert len(call.ir.messages) == 3
    assert strip(call) is True
    want = [{"role": "user", "content": "hi"},
            {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Thinking."}]},
            {"role": "user", "content": "more"}]
    assert call.body["input"] == want
    assert orjson.loads(call.raw)["input"] == want
    assert [m.role for m in call.ir.messages] == ["user", "assistant", "user"]      # parsed again
    thought = call.ir.messages[1].content[0]
    assert (thought.text, thought.signature) == ("Thinking.", None)
    assert strip(call) is False                  # nothing left to strip


def _failure(status, code):
    return AttemptFailure("client_error", status, UpstreamErrorInfo(code, "x"), None)


def test_the_refusals_are_recognised_by_status_and_code():
    assert foreign_blob(_failure(400, "invalid_encrypted_content"))
    assert not foreign_blob(_failure(400, "invalid_request_error"))
    assert foreign_response(_failure(404, "previous_response_not_found"))
    assert foreign_response(_failure(400, "previous_response_not_found"))
    assert not foreign_response(_failure(404, None))


def test_a_stream_is_relayed_unchanged_and_its_completed_event_recorded():
    frames = [b"event: response.created\ndata: {\"type\":\"response.created\"}\n\n",
              b"event: response.compl",
              b"eted\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_9\",\"output\":["
              b"{\"id\":\"rs_9\",\"type\":\"reasoning\",\"summary\":[],\"encrypted_content\":\"gA\"},"
              b"{\"id\":\"rs_8\",\"type\":\"reasoning\",\"summary\":[]}]}}\n\n"]
    closed = []

    class Upstream:
        def __init__(self):
            self.it = iter(frames)

        def __aiter__(self):
            return self

        async def __anext__(self):
            try:
                return next(self.it)
            except StopIteration:
                raise StopAsyncIteration from None

        async def aclose(self):
            closed.append(True)

    gw = SimpleNamespace()
    lane = SimpleNamespace(name="ra")

    async def relay():
        return [c async for c in recording(gw, lane, Upstream())]
    assert asyncio.run(relay()) == frames
    assert closed == [True]
    assert issuers(gw).lookup(["resp_9"]) == "ra" and issuers(gw).lookup(["rs_9"]) == "ra"
    assert issuers(gw).lookup(["rs_8"]) is None   # no blob: not state
