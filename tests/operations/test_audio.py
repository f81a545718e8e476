"""Audio through real busbar + mock processes with the official ``openai`` SDK: transcriptions and
translations (multipart uploads: a whisper lane asked for ``verbose_json`` and the answer written
back in the client's ``response_format``, the ``model`` part re-framed for the lane, the file arriving byte for byte), speech (the audio streamed back with its
content type), failover before the first byte, the breaker, members that cannot serve audio skipped,
a pool with none a native 404, an oversized upload a 413 in OpenAI's shape, bad forms 400s."""
from __future__ import annotations

import hashlib
import time

import httpx
import openai
import pytest
from busbar_mock_provider.audio import TRANSCRIPT

CONFIG = """
listen: "127.0.0.1:{port}"
limits: { request_body_max_bytes: 2000000 }
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  slow: { protocol: openai, base_url: MOCK/c4/i400, api_key: { env: T_OPENAI_KEY } }
  an: { protocol: anthropic, base_url: MOCK, api_key: { env: T_ANTHROPIC_KEY } }
models:
  whisper-1: { provider: oa }
  whisper: { provider: oa, upstream_model: whisper-1 }
  an-chat: { provider: an, upstream_model: claude-3-5-haiku-latest }
  oa-chat-only: { provider: oa, upstream_model: gpt-4o-mini, operations: [chat] }
  fo-a: { provider: oa }
  fo-b: { provider: oa }
  br-a: { provider: oa }
  tts: { provider: oa, upstream_model: tts-1 }
  tts-slow: { provider: slow, upstream_model: tts-1 }
pools:
  stt: { members: [ { model: an-chat, weight: 50 }, { model: oa-chat-only, weight: 50 }, { model: whisper } ] }
  chat-only: { members: [ { model: an-chat }, { model: oa-chat-only } ] }
  failover:
    members: [ { model: fo-a, weight: 100 }, { model: fo-b, weight: 1 } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 50 } }
  breaker:
    members: [ { model: br-a, weight: 100 }, { model: fo-b, weight: 1 } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 1 }, base_cooldown_secs: 30, max_cooldown_secs: 60 }
  voice: { members: [ { model: an-chat, weight: 50 }, { model: tts } ] }
  voice-slow: { members: [ { model: tts-slow } ] }
"""

AUDIO = bytes(range(256)) * 400           # 102 400 bytes: 6.4 s at the mock's 16 kB per second
DIGEST = hashlib.sha256(AUDIO).hexdigest()
ERR_503 = {"error": {"message": "The server is overloaded", "type": "server_error", "param": None, "code": None}}


def _sent(mock):
    return [(r["path"], r["body"]) for r in mock.requests()]


@pytest.mark.parametrize("fmt,ctype,body", [
    ("json", "application/json", b'{"text":"%s"}' % TRANSCRIPT.encode()),
    ("text", "text/plain; charset=utf-8", TRANSCRIPT.encode() + b"\n"),
    ("srt", "text/plain; charset=utf-8", b"1\n00:00:00,000 --> 00:00:06,400\n%s\n\n" % TRANSCRIPT.encode()),
    ("vtt", "text/plain; charset=utf-8", b"WEBVTT\n\n00:00:00.000 --> 00:00:06.400\n%s\n\n" % TRANSCRIPT.encode()),
])
def test_transcription_formats_asked_as_verbose_json_and_written_back(oa, mock, fmt, ctype, body):
    raw = oa.audio.transcriptions.with_raw_response.create(
        file=("speech.wav", AUDIO, "audio/wav"), model="stt", response_format=fmt, language="en",
        prompt="a fox", temperature=0.2)
    assert raw.http_response.content == body
    assert raw.headers["content-type"] == ctype
    assert raw.headers["x-busbar-route-target"] == "whisper"       # anthropic and chat-only members skipped
    (path, sent), = _sent(mock)
    assert path == "/v1/audio/transcriptions"
    assert sent == {"file": {"filename": "speech.wav", "bytes": len(AUDIO), "sha256": DIGEST},
                    "model": "whisper-1", "response_format": "verbose_json", "language": "en", "prompt": "a fox",
                    "temperature": "0.2"}


def test_verbose_json_translation_through_the_sdk(oa, mock):
    out = oa.audio.translations.create(file=("speech.mp3", AUDIO, "audio/mpeg"), model="stt",
                                       response_format="verbose_json")
    assert (out.text, out.duration, out.task) == (TRANSCRIPT, 6.4, "translate")
    (path, sent), = _sent(mock)
    assert path == "/v1/audio/translations"
    assert sent["file"] == {"filename": "speech.mp3", "bytes": len(AUDIO), "sha256": DIGEST}
    assert sent["model"] == "whisper-1"


def test_a_model_called_by_its_wire_name_is_forwarded_untouched(oa, mock):
    out = oa.audio.transcriptions.create(file=("a.wav", AUDIO, "audio/wav"), model="whisper-1")
    assert out.text == TRANSCRIPT
    (_, sent), = _sent(mock)
    assert (sent["model"], sent["file"]["sha256"]) == ("whisper-1", DIGEST)


def test_failover_before_the_first_byte(oa, mock):
    mock.script([{"match": {"model": "fo-a"}, "times": 1, "response": {"status": 503, "body": ERR_503}}])
    raw = oa.audio.transcriptions.with_raw_response.create(file=("a.wav", AUDIO, "audio/wav"), model="failover")
    assert raw.headers["x-busbar-route-target"] == "fo-b"
    assert raw.parse().text == TRANSCRIPT
    sent = _sent(mock)
    assert [b["model"] for _, b in sent] == ["fo-a", "fo-b"]
    assert [b["file"]["sha256"] for _, b in sent] == [DIGEST, DIGEST]     # the same upload sent twice


def test_a_2xx_that_is_not_a_transcription_fails_over(oa, mock):
    mock.script([{"match": {"model": "fo-a"}, "times": 1,
                  "response": {"status": 200, "body": "<html>portal</html>", "headers": {"content-type": "text/html"}}}])
    raw = oa.audio.transcriptions.with_raw_response.create(file=("a.wav", AUDIO, "audio/wav"), model="failover")
    assert raw.headers["x-busbar-route-target"] == "fo-b"
    assert [b["model"] for _, b in _sent(mock)] == ["fo-a", "fo-b"]


def test_breaker_trips_on_audio(oa, mock):
    mock.script([{"match": {"model": "br-a"}, "times": 1, "response": {"status": 503, "body": ERR_503}}])
    for _ in range(2):
        raw = oa.audio.transcriptions.with_raw_response.create(file=("a.wav", AUDIO, "audio/wav"), model="breaker")
        assert raw.headers["x-busbar-route-target"] == "fo-b"
    assert [b["model"] for _, b in _sent(mock)] == ["br-a", "fo-b", "fo-b"]    # br-a open: not tried again


@pytest.mark.parametrize("pool", ["chat-only", "voice-none"])
def test_a_pool_with_no_member_able_is_a_native_404(oa, mock, pool):
    with pytest.raises(openai.NotFoundError) as e:
        if pool == "chat-only":
            oa.audio.transcriptions.create(file=("a.wav", AUDIO, "audio/wav"), model=pool)
        else:
            oa.audio.speech.create(model="chat-only", input="hi", voice="alloy")
    assert e.value.body == {"message": "pool 'chat-only' has no member that can serve audio (declare it in the "
                                       "member models' operations, or add a model whose protocol serves audio)",
                            "type": "not_found_error", "param": None, "code": None}
    assert mock.requests() == []


def test_an_oversized_upload_is_a_413_in_openai_shape(oa, mock):
    with pytest.raises(openai.APIStatusError) as e:
        oa.audio.transcriptions.create(file=("big.wav", b"\0" * 2_100_000, "audio/wav"), model="stt")
    assert e.value.status_code == 413
    assert e.value.body["type"] == "invalid_request_error"
    assert e.value.body["message"].endswith("exceeds the 2000000-byte limit (limits.request_body_max_bytes)")
    assert mock.requests() == []


@pytest.mark.parametrize("kwargs,message", [
    ({"data": {"model": "stt"}, "files": {"other": ("a.wav", b"x")}},
     "'file' is required: the audio file to transcribe (a file part)"),
    ({"files": {"file": ("a.wav", b"x")}}, "'model' is required: name a pool or a model"),
    ({"data": {"model": "stt", "response_format": "mp3"}, "files": {"file": ("a.wav", b"x")}},
     "'response_format' must be one of json, text, srt, verbose_json, vtt"),
    ({"data": {"model": "stt", "temperature": "2"}, "files": {"file": ("a.wav", b"x")}},
     "'temperature' must be a number between 0 and 1"),
    ({"json": {"model": "stt", "file": "a.wav"}},
     "an audio upload must be multipart/form-data (fields 'file' and 'model')"),
])
def test_bad_uploads_are_400s_in_openai_shape(gw, mock, kwargs, message):
    r = httpx.post(gw.url + "/v1/audio/transcriptions", timeout=20, **kwargs)
    assert r.status_code == 400
    assert r.json()["error"]["message"] == message
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert mock.requests() == []


def _speech(size: int) -> bytes:
    return (bytes(range(256)) * (size // 256 + 1))[:size]


def test_speech_streams_the_audio_with_its_content_type(oa, mock):
    with oa.audio.speech.with_streaming_response.create(model="voice", input="hello there", voice="alloy",
                                                        response_format="wav") as resp:
        assert resp.headers["content-type"] == "audio/wav"
        assert resp.headers["x-busbar-route-target"] == "tts"
        assert resp.read() == _speech(1100)
    (path, sent), = _sent(mock)
    assert path == "/v1/audio/speech"
    assert sent == {"model": "tts-1", "input": "hello there", "voice": "alloy", "response_format": "wav"}


def test_speech_is_relayed_as_it_arrives_not_buffered(oa):
    arrivals = []
    with oa.audio.speech.with_streaming_response.create(model="voice-slow", input="one two three four",
                                                        voice="alloy") as resp:
        assert resp.headers["content-type"] == "audio/mpeg"
        t0 = time.monotonic()
        got = b""
        for chunk in resp.iter_bytes():
            got += chunk
            arrivals.append(time.monotonic() - t0)
    assert got == _speech(1800)
    assert arrivals[-1] - arrivals[0] >= 0.8        # 4 frames 400 ms apart reached the client one by one


def test_speech_failover_and_bad_bodies(oa, mock):
    mock.script([{"match": {"model": "fo-a"}, "times": 1, "response": {"status": 503, "body": ERR_503}}])
    out = oa.audio.speech.with_raw_response.create(model="failover", input="hi", voice="alloy")
    assert out.headers["x-busbar-route-target"] == "fo-b"
    assert out.content == _speech(200)
    with pytest.raises(openai.BadRequestError) as e:
        oa.audio.speech.create(model="voice", input="x" * 4097, voice="alloy")
    assert e.value.body["message"] == "'input' is 4097 characters; the limit is 4096"
    with pytest.raises(openai.BadRequestError) as e2:
        oa.audio.speech.create(model="voice", input="hi", voice="alloy", speed=9)
    assert e2.value.body["message"] == "'speed' must be a number between 0.25 and 4.0"
    assert [b["model"] for _, b in _sent(mock)] == ["fo-a", "fo-b"]


def test_a_speech_answer_that_is_not_audio_fails_over(oa, mock):
    mock.script([{"match": {"model": "fo-a"}, "times": 1,
                  "response": {"status": 200, "body": {"text": "not audio"}}}])
    out = oa.audio.speech.with_raw_response.create(model="failover", input="hi", voice="alloy")
    assert out.headers["x-busbar-route-target"] == "fo-b"
    assert out.headers["content-type"] == "audio/mpeg"


def test_speech_that_breaks_mid_body_cuts_the_connection(oa, mock, gw):
    mock.script([{"match": {"model": "tts-1"}, "times": 1, "response": {"drop_after": 2}}])
    got = b""
    with pytest.raises(Exception) as e, oa.audio.speech.with_streaming_response.create(
            model="voice-slow", input="one two three four", voice="alloy") as resp:
        for chunk in resp.iter_bytes():
            got += chunk
    # an incomplete body, never a short one that looks whole (the SDK's httpx raises RemoteProtocolError)
    assert (type(e.value).__name__, str(e.value)) == (
        "RemoteProtocolError", "peer closed connection without sending complete message body (incomplete chunked read)")
    assert got == _speech(1800)[:900]
    assert "speech audio from the upstream broke mid-body" in gw.logs()
