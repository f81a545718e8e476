"""A transcription asked upstream in a format that reports its audio (``verbose_json`` from whisper,
``json`` for ``text`` from gpt-4o models) and written back in the client's format, on exact bytes:
the re-framed ``response_format`` part (replaced or added, the file never copied), SubRip and WebVTT
cues from segments, ``json`` keeping the answer's ``usage``, and the token usage read."""
from __future__ import annotations

import httpx
import orjson
import pytest
from busbar.proto.ops.audio import parse_form, reframe, token_usage
from busbar.proto.ops.audio_formats import render, timestamp, upstream_format
from busbar_mock_provider.audio import read_form

DOC = {"task": "transcribe", "language": "english", "duration": 3725.5, "text": " Hello there. A --> B",
       "usage": {"type": "duration", "seconds": 3726},
       "segments": [{"id": 0, "start": 0.0, "end": 2.04, "text": " Hello there."},
                    {"id": 1, "start": 3723.0, "end": 3725.5, "text": " A --> B"}]}


def _form(fields: dict[str, str]) -> tuple[bytes, str]:
    req = httpx.Request("POST", "http://x/", data=fields, files={"file": ("a.wav", b"RIFF-audio", "audio/wav")})
    return req.read(), req.headers["content-type"]


@pytest.mark.parametrize("fmt,model,asked", [
    ("json", "whisper-1", "verbose_json"), ("text", "whisper-1", "verbose_json"),
    ("srt", "whisper-1", "verbose_json"), ("vtt", "whisper-1", "verbose_json"),
    ("verbose_json", "whisper-1", None), ("text", "gpt-4o-transcribe", "json"),
    ("json", "gpt-4o-mini-transcribe", None), ("srt", "gpt-4o-transcribe", None),
])
def test_the_format_asked_upstream(fmt, model, asked):
    assert upstream_format(fmt, model) == asked


@pytest.mark.parametrize("fields", [{"model": "stt", "response_format": "srt", "language": "en"},
                                    {"model": "stt", "language": "en"}])
def test_reframe_sets_or_adds_the_response_format_part(fields):
    raw, ctype = _form(fields)
    form = parse_form(raw, ctype)
    chunks, length = reframe(form, raw, "whisper-1", "verbose_json")
    out = b"".join(bytes(c) for c in chunks)
    assert length == len(out)
    assert read_form(out, ctype) == {"model": "whisper-1", "response_format": "verbose_json", "language": "en",
                                     "file": read_form(raw, ctype)["file"]}
    file = form.parts["file"]
    assert any(isinstance(c, memoryview) and c.obj is raw and bytes(c).find(raw[file.start:file.end]) >= 0
               for c in chunks)                                  # the file is a view of the received bytes


def test_reframe_keeps_a_response_format_already_asked():
    raw, ctype = _form({"model": "whisper-1", "response_format": "verbose_json"})
    chunks, length = reframe(parse_form(raw, ctype), raw, "whisper-1", "verbose_json")
    assert b"".join(bytes(c) for c in chunks) == raw and length == len(raw) and len(chunks) == 2


def test_timestamps():
    assert (timestamp(0, True), timestamp(2.0449, False), timestamp(3725.5, True)) == \
        ("00:00:00,000", "00:00:02.045", "01:02:05,500")


def test_each_format_written_from_verbose_json():
    assert render("json", DOC) == ("application/json", orjson.dumps(
        {"text": " Hello there. A --> B", "usage": {"type": "duration", "seconds": 3726}}))
    assert render("text", DOC) == ("text/plain; charset=utf-8", b" Hello there. A --> B\n")
    assert render("srt", DOC) == ("text/plain; charset=utf-8",
                                  b"1\n00:00:00,000 --> 00:00:02,040\nHello there.\n\n"
                                  b"2\n01:02:03,000 --> 01:02:05,500\nA -> B\n\n")
    assert render("vtt", DOC) == ("text/plain; charset=utf-8",
                                  b"WEBVTT\n\n00:00:00.000 --> 00:00:02.040\nHello there.\n\n"
                                  b"01:02:03.000 --> 01:02:05.500\nA -> B\n\n")


def test_an_answer_without_segments_is_one_cue_and_json_without_usage_is_text_only():
    doc = {"text": "Hi.", "duration": 1.5}
    assert render("srt", doc)[1] == b"1\n00:00:00,000 --> 00:00:01,500\nHi.\n\n"
    assert render("json", doc)[1] == b'{"text":"Hi."}'


@pytest.mark.parametrize("doc,tokens", [
    ({"text": "x", "usage": {"type": "tokens", "input_tokens": 25, "output_tokens": 10, "total_tokens": 35}},
     (25, 10)),
    ({"text": "x", "usage": {"type": "duration", "seconds": 3}}, (0, 0)),
    ({"text": "x", "usage": {"type": "tokens", "input_tokens": True, "output_tokens": -1}}, (0, 0)),
    ({"text": "x"}, (0, 0)), (None, (0, 0)),
])
def test_token_usage(doc, tokens):
    assert token_usage(doc) == tokens
