"""OpenAI audio uploads served by Gemini lanes through ``:generateContent`` (docs/beyond-chat.md#audio):
the official ``openai`` SDK against real busbar + mock processes. The file goes as an ``inline_data``
part beside an instruction (arriving byte for byte), the transcript comes back in the format asked
for, audio seconds are read from the AUDIO tokens (32 per second) and charged per second, failover
and the breaker work across Gemini members, srt/vtt and speech skip Gemini lanes, form fields
Gemini cannot carry are named in ``x-busbar-translation-dropped``, and an upload past
``limits.request_body_max_bytes`` is a 413 before anything goes upstream."""
from __future__ import annotations

import base64

import openai
import pytest
from busbar_mock_provider.audio import TRANSCRIPT

CONFIG = """
listen: "127.0.0.1:{port}"
limits: { request_body_max_bytes: 200000 }
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  gm: { protocol: gemini, base_url: MOCK, api_key: { env: T_GEMINI_KEY } }
models:
  gem-a: { provider: gm, upstream_model: gemini-2.0-flash, operations: [audio] }
  gem-b: { provider: gm, upstream_model: gemini-2.0-flash-lite, operations: [audio] }
  gem-chat: { provider: gm, upstream_model: gemini-2.5-flash, operations: [chat] }
  whisper: { provider: oa, upstream_model: whisper-1 }
pools:
  gem: { members: [ { model: gem-chat }, { model: gem-a } ] }
  gem-fo:
    members: [ { model: gem-a, weight: 100 }, { model: gem-b, weight: 1 } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 1 }, base_cooldown_secs: 30, max_cooldown_secs: 60 }
  mixed: { members: [ { model: gem-a, weight: 100 }, { model: whisper, weight: 1 } ] }
"""

AUDIO = bytes(range(256)) * 187 + bytes(128)      # 48 000 bytes: 3 s at the mock's 16 kB per second
ERR_503 = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
INSTRUCT = ("Transcribe the speech in this audio verbatim, in the language it is spoken. Answer with the "
            "transcript text only, nothing else.")


def _sent(mock):
    return [(r["path"], r["body"]) for r in mock.requests()]


def test_a_transcription_goes_to_gemini_as_inline_audio(oa, mock):
    raw = oa.audio.transcriptions.with_raw_response.create(
        file=("call.wav", AUDIO, "audio/wav"), model="gem", language="fr", prompt="Renard", temperature=0.2)
    assert raw.headers["x-busbar-route-target"] == "gem-a"          # the chat-only Gemini member skipped
    assert raw.headers["content-type"] == "application/json"
    assert raw.http_response.json() == {"text": TRANSCRIPT}
    assert "x-busbar-translation-dropped" not in raw.headers
    (path, sent), = _sent(mock)
    assert path == "/v1beta/models/gemini-2.0-flash:generateContent"
    text, audio = sent["contents"][0]["parts"]
    assert text == {"text": INSTRUCT + " The audio is in the language 'fr'. Context from the caller (spellings, "
                            "names, the text before it): Renard"}
    assert audio["inline_data"]["mime_type"] == "audio/wav"
    assert base64.b64decode(audio["inline_data"]["data"]) == AUDIO
    assert sent["generationConfig"] == {"temperature": 0.2}


@pytest.mark.parametrize("fmt,ctype,body", [
    ("text", "text/plain; charset=utf-8", TRANSCRIPT.encode() + b"\n"),
    ("verbose_json", "application/json",
     b'{"task":"transcribe","language":"","duration":3.0,"text":"%s","segments":[]}' % TRANSCRIPT.encode()),
])
def test_the_answer_is_written_in_the_format_asked_for(oa, mock, fmt, ctype, body):
    raw = oa.audio.transcriptions.with_raw_response.create(file=("a.mp3", AUDIO, "audio/mpeg"), model="gem",
                                                           response_format=fmt)
    assert (raw.headers["content-type"], raw.http_response.content) == (ctype, body)


def test_a_translation_through_the_sdk(oa, mock):
    out = oa.audio.translations.create(file=("talk.flac", AUDIO, "application/octet-stream"), model="gem",
                                       response_format="verbose_json")
    assert (out.text, out.duration, out.task, out.language) == (TRANSCRIPT, 3.0, "translate", "english")
    (_, sent), = _sent(mock)
    text, audio = sent["contents"][0]["parts"]
    assert text["text"] == ("Translate the speech in this audio into English. Answer with the English translation "
                            "only, nothing else.")
    assert audio["inline_data"]["mime_type"] == "audio/flac"        # from the file name


def test_failover_and_the_breaker_across_gemini_members(oa, mock):
    mock.script([{"match": {"model": "gemini-2.0-flash"}, "times": 1, "response": {"status": 503, "body": ERR_503}}])
    for _ in range(2):
        raw = oa.audio.transcriptions.with_raw_response.create(file=("a.wav", AUDIO, "audio/wav"), model="gem-fo")
        assert raw.headers["x-busbar-route-target"] == "gem-b"
        assert raw.parse().text == TRANSCRIPT
    sent = _sent(mock)
    assert [p for p, _ in sent] == ["/v1beta/models/gemini-2.0-flash:generateContent",
                                    "/v1beta/models/gemini-2.0-flash-lite:generateContent",
                                    "/v1beta/models/gemini-2.0-flash-lite:generateContent"]   # gem-a open
    assert {base64.b64decode(b["contents"][0]["parts"][1]["inline_data"]["data"]) for _, b in sent} == {AUDIO}


def test_a_gemini_answer_without_text_fails_over(oa, mock):
    blocked = {"promptFeedback": {"blockReason": "OTHER"}}
    mock.script([{"match": {"model": "gemini-2.0-flash"}, "times": 1, "response": {"status": 200, "body": blocked}}])
    raw = oa.audio.transcriptions.with_raw_response.create(file=("a.wav", AUDIO, "audio/wav"), model="mixed")
    assert raw.headers["x-busbar-route-target"] == "whisper"
    assert [p for p, _ in _sent(mock)] == ["/v1beta/models/gemini-2.0-flash:generateContent",
                                           "/v1/audio/transcriptions"]


def test_srt_skips_gemini_lanes_and_a_pool_of_them_is_a_native_404(oa, mock):
    raw = oa.audio.transcriptions.with_raw_response.create(file=("a.wav", AUDIO, "audio/wav"), model="mixed",
                                                           response_format="srt")
    assert raw.headers["x-busbar-route-target"] == "whisper"
    assert [p for p, _ in _sent(mock)] == ["/v1/audio/transcriptions"]
    mock.clear()
    with pytest.raises(openai.NotFoundError) as e:
        oa.audio.transcriptions.create(file=("a.wav", AUDIO, "audio/wav"), model="gem", response_format="vtt")
    assert e.value.body["message"] == ("pool 'gem' has no member that can serve audio (declare it in the member "
                                       "models' operations, or add a model whose protocol serves audio)")
    with pytest.raises(openai.NotFoundError):
        oa.audio.speech.create(model="gem", input="hi", voice="alloy")
    with pytest.raises(openai.NotFoundError):                          # not known to be audio: no MIME type
        oa.audio.transcriptions.create(file=("blob.bin", AUDIO, "application/octet-stream"), model="gem")
    assert mock.requests() == []


def test_fields_gemini_cannot_carry_are_named(oa, mock):
    raw = oa.audio.transcriptions.with_raw_response.create(
        file=("a.wav", AUDIO, "audio/wav"), model="gem", response_format="verbose_json",
        timestamp_granularities=["word"])
    assert raw.headers["x-busbar-translation-dropped"] == "timestamp_granularities[]"
    assert raw.parse().text == TRANSCRIPT


def test_an_upload_past_the_body_limit_is_a_413_before_any_upstream_call(oa, mock):
    with pytest.raises(openai.APIStatusError) as e:
        oa.audio.transcriptions.create(file=("big.wav", AUDIO * 5, "audio/wav"), model="gem")
    assert e.value.status_code == 413
    assert e.value.body["type"] == "invalid_request_error"
    assert mock.requests() == []
