"""Hooks see a non-chat request: an out-of-process gate (``busbar-webrequest-hook`` relaying to an
in-process sidecar) receives ``request.operation`` (``"embeddings"``: each input counted as a user
message; ``"audio"``: the upload's ``prompt`` or the speech ``input`` as one user message) and only
the members able to serve the operation as candidates, and its order is walked."""
from __future__ import annotations

from typing import Any

import pytest
from busbar_mock_provider.audio import TRANSCRIPT
from busbar_mock_provider.embeddings import vector
from busbar_sdk import HookPlugin, Order
from busbar_sdk.sidecar import start

from tests.e2e.test_hooks_e2e import HEAD
from tests.e2e.test_hooks_sidecar import webrequest  # noqa: F401 - the signed forwarder plugin fixture

SEEN: list[Any] = []


class Reverse(HookPlugin):
    """Ranks the candidates in reverse config order and keeps every message it gets."""

    def decide(self, message):
        SEEN.append(message)
        return Order(order=[c.idx for c in reversed(message.candidates)])


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, webrequest):  # noqa: F811
    _, trust = webrequest
    sidecar = start(Reverse, host="127.0.0.1", port=0)
    cfg = (HEAD + trust + "pools:\n  ranked:\n    hooks: [ { module: busbar-webrequest-hook, timeout_ms: 2000, "
           f"on_error: reject, prompt: ro, settings: {{ url: \"{sidecar.url}/rank\", timeout_ms: 2000 }} }} ]\n"
           "    members: [ { model: oa-a }, { model: oa-b }, { model: an-a } ]\n")
    yield gateway_factory(cfg, mock.url, env={"BUSBAR_STATE_FILE": ""})
    sidecar.close()


@pytest.fixture(autouse=True)
def _clear_seen():
    SEEN.clear()


def test_a_gate_sees_the_operation_and_its_order_is_walked(oa, mock):
    raw = oa.embeddings.with_raw_response.create(model="ranked", input=["alpha", "beta gamma"])
    assert raw.headers["x-busbar-route-target"] == "oa-b"       # the reversed order of the two able members
    assert [d.embedding for d in raw.parse().data] == [vector("alpha"), vector("beta gamma")]
    (message,) = SEEN
    req = message.request
    assert [c.model for c in message.candidates] == ["oa-a", "oa-b"]    # an-a cannot embed: no candidate
    assert req.operation == "embeddings"
    assert req.ingress_protocol == "openai"
    assert (req.message_count, req.has_tools, req.total_chars, req.stream) == (2, False, 15, False)
    assert [(m.role, m.text) for m in req.messages] == [("user", "alpha"), ("user", "beta gamma")]
    assert [r["path"] for r in mock.requests()] == ["/v1/embeddings"]


def test_a_gate_sees_an_upload_and_its_order_is_walked(oa, mock):
    raw = oa.audio.transcriptions.with_raw_response.create(
        file=("a.wav", b"RIFF" * 100, "audio/wav"), model="ranked", prompt="names: Ada, Grace")
    assert raw.headers["x-busbar-route-target"] == "oa-b"       # the reversed order of the two able members
    assert raw.parse().text == TRANSCRIPT
    (message,) = SEEN
    req = message.request
    assert [c.model for c in message.candidates] == ["oa-a", "oa-b"]    # an-a cannot serve audio: no candidate
    assert (req.operation, req.ingress_protocol, req.stream) == ("audio", "openai", False)
    assert [(m.role, m.text) for m in req.messages] == [("user", "names: Ada, Grace")]
    assert [r["path"] for r in mock.requests()] == ["/v1/audio/transcriptions"]


def test_a_gate_sees_speech_input(oa, mock):
    raw = oa.audio.speech.with_raw_response.create(model="ranked", input="read this aloud", voice="alloy")
    assert raw.headers["x-busbar-route-target"] == "oa-b"
    (message,) = SEEN
    req = message.request
    assert (req.operation, req.stream) == ("audio", True)          # the answer is streamed audio
    assert [(m.role, m.text) for m in req.messages] == [("user", "read this aloud")]
