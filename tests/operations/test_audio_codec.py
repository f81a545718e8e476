"""The audio codec's pieces on exact bytes: multipart spans (the file never copied), the re-framed
``model`` part, the success checks of transcription and speech answers, and the usage read."""
from __future__ import annotations

import httpx
import pytest
from busbar.proto.errors import BadRequest
from busbar.proto.ops.audio import audio_seconds, parse_form, reframe, speech_verdict, upload_verdict


def _form(fields: dict[str, str], file: bytes = b"RIFF-audio") -> tuple[bytes, str]:
    req = httpx.Request("POST", "http://x/", data=fields, files={"file": ("a.wav", file, "audio/wav")})
    return req.read(), req.headers["content-type"]


def test_parts_are_spans_of_the_received_body():
    raw, ctype = _form({"model": "stt", "response_format": "srt", "prompt": "a fox"})
    form = parse_form(raw, ctype)
    f = form.parts["file"]
    assert (f.filename, raw[f.start:f.end]) == ("a.wav", b"RIFF-audio")
    assert form.fields == {"model": "stt", "response_format": "srt", "prompt": "a fox"}
    assert (form.response_format, form.prompt) == ("srt", "a fox")


def test_reframe_rewrites_only_the_model_value():
    raw, ctype = _form({"model": "stt", "language": "en"})
    form = parse_form(raw, ctype)
    chunks, length = reframe(form, raw, "whisper-1")
    out = b"".join(bytes(c) for c in chunks)
    assert out == raw.replace(b"\r\n\r\nstt\r\n", b"\r\n\r\nwhisper-1\r\n")
    assert length == len(out) == len(raw) + 6
    assert all(isinstance(c, memoryview) for c in (chunks[0], chunks[2]))     # views, not copies
    same, same_len = reframe(form, raw, "stt")
    assert b"".join(bytes(c) for c in same) == raw and same_len == len(raw) and len(same) == 2


@pytest.mark.parametrize("ctype,raw,message", [
    ("application/json", b"{}", "an audio upload must be multipart/form-data (fields 'file' and 'model')"),
    ("multipart/form-data", b"--x\r\n", "the multipart/form-data content-type has no boundary"),
    ("multipart/form-data; boundary=zz", b"--x\r\n", "the multipart body does not start with its boundary"),
    ("multipart/form-data; boundary=x",
     b'--x\r\nContent-Disposition: form-data; name="model"\r\n\r\nstt',
     "malformed multipart body: a part is not terminated by the boundary"),
])
def test_malformed_forms_name_the_fault(ctype, raw, message):
    with pytest.raises(BadRequest) as e:
        parse_form(raw, ctype)
    assert e.value.message == message


def test_success_checks():
    assert upload_verdict(200, {"content-type": "application/json"}, b'{"text":"hi"}') == ({"text": "hi"}, None)
    assert upload_verdict(200, {"content-type": "text/plain"}, b"WEBVTT\n") == (None, None)
    assert upload_verdict(200, {"content-type": "text/html"}, b"<html>") == (
        None, "HTTP 200 with content-type text/html, not a transcription")
    assert upload_verdict(200, {"content-type": "application/json"}, b'{"data":[]}') == (
        None, "HTTP 200 with a body that is not a transcription (no text string)")
    assert upload_verdict(200, {"content-type": "text/plain"}, b" ") == (None, "HTTP 200 with an empty body")
    assert speech_verdict(200, {"content-type": "audio/mpeg"}) is None
    assert speech_verdict(200, {"content-type": "text/event-stream"}) is None      # stream_format: sse
    assert speech_verdict(200, {"content-type": "application/json"}) == (
        "HTTP 200 with content-type application/json, not audio")


def test_audio_seconds():
    assert audio_seconds({"text": "x", "duration": 6.4}) == 6.4
    assert audio_seconds({"text": "x", "usage": {"type": "duration", "seconds": 3}}) == 3.0
    assert audio_seconds({"text": "x", "usage": {"type": "tokens", "input_tokens": 5}}) == 0.0
    assert audio_seconds(None) == 0.0
