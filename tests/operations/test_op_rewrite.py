"""A gate's rewrite arm on a non-chat request (docs/beyond-chat.md#how-a-pool-serves-an-operation):
an out-of-process ``prompt: rw`` gate (``busbar-webrequest-hook`` relaying to an in-process sidecar)
redacts the texts it was shown; the upstream gets the rewritten texts (same-protocol included) and
the client its answer in its own shape. A rewrite that does not fit the request (another number of
messages; an audio upload) is not applied: the gate's ``on_error`` decides, as for a malformed
reply (``nothing``: the request proceeds unmodified; ``reject``: a 503)."""
from __future__ import annotations

import openai
import pytest
from busbar_mock_provider.audio import TRANSCRIPT
from busbar_mock_provider.embeddings import vector
from busbar_sdk import HookPlugin, Rewrite
from busbar_sdk.models import BodyMessage
from busbar_sdk.sidecar import start

from tests.e2e.test_hooks_e2e import HEAD
from tests.e2e.test_hooks_sidecar import webrequest  # noqa: F401 - the signed forwarder plugin fixture


class Redact(HookPlugin):
    """Masks card numbers; a first text starting with ``collapse`` is answered with one message."""

    def transform(self, message):
        texts = [m.text for m in message.request.messages]
        if texts and texts[0].startswith("collapse"):
            return Rewrite(messages=(BodyMessage(role="user", content="collapsed"),))
        return Rewrite(messages=tuple(BodyMessage(role="user", content=t.replace("4111", "####")) for t in texts))


def _hook(url: str, on_error: str) -> str:
    return (f"[ {{ module: busbar-webrequest-hook, timeout_ms: 2000, on_error: {on_error}, prompt: rw, "
            f"settings: {{ url: \"{url}/rw\", timeout_ms: 2000 }} }} ]")


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, webrequest):  # noqa: F811
    _, trust = webrequest
    sidecar = start(Redact, host="127.0.0.1", port=0)
    cfg = (HEAD + "  whisper: { provider: up-openai, upstream_model: whisper-1 }\n" + trust + "pools:\n"
           f"  redact: {{ hooks: {_hook(sidecar.url, 'nothing')}, members: [ {{ model: oa-a }} ] }}\n"
           f"  redact-strict: {{ hooks: {_hook(sidecar.url, 'reject')}, members: [ {{ model: oa-a }} ] }}\n"
           f"  stt: {{ hooks: {_hook(sidecar.url, 'nothing')}, members: [ {{ model: whisper }} ] }}\n")
    yield gateway_factory(cfg, mock.url, env={"BUSBAR_STATE_FILE": ""})
    sidecar.close()


def test_a_rewrite_of_embeddings_inputs_reaches_the_upstream(oa, mock):
    out = oa.embeddings.create(model="redact", input=["card 4111 1111", "no card"], encoding_format="float")
    assert [d.embedding for d in out.data] == [vector("card #### 1111"), vector("no card")]
    (sent,) = mock.requests()
    assert (sent["path"], sent["body"]["input"], sent["body"]["model"]) == (
        "/v1/embeddings", ["card #### 1111", "no card"], "oa-a")


def test_a_rewrite_of_a_moderation_input(oa, mock):
    out = oa.moderations.create(model="redact", input="pay with 4111")
    assert len(out.results) == 1
    (sent,) = mock.requests()
    assert sent["body"]["input"] == "pay with ####"


def test_a_rewrite_that_changes_the_number_of_texts_is_not_applied(oa, mock):
    out = oa.embeddings.create(model="redact", input=["collapse 4111", "b"], encoding_format="float")
    assert [d.embedding for d in out.data] == [vector("collapse 4111"), vector("b")]     # unmodified
    assert mock.requests()[0]["body"]["input"] == ["collapse 4111", "b"]
    mock.clear()
    with pytest.raises(openai.InternalServerError) as e:                # on_error: reject
        oa.embeddings.create(model="redact-strict", input=["collapse 4111", "b"])
    assert e.value.status_code == 503
    assert e.value.body["message"] == ("hook 'busbar-webrequest-hook' returned a malformed reply and its on_error "
                                       "is reject; the request was not routed")
    assert mock.requests() == []


def test_an_audio_upload_is_never_rewritten(oa, mock):
    out = oa.audio.transcriptions.create(file=("a.wav", b"RIFF" * 100, "audio/wav"), model="stt",
                                         prompt="card 4111")
    assert out.text == TRANSCRIPT
    assert mock.requests()[0]["body"]["prompt"] == "card 4111"
