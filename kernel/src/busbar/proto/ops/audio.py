"""Audio on the OpenAI wire: transcription/translation uploads (multipart) and speech (JSON in, audio out).

Requests (OpenAI API reference, "Audio"):

- ``POST /v1/audio/transcriptions`` and ``/v1/audio/translations``: ``multipart/form-data`` with
  ``file`` (the audio, required), ``model`` (busbar: the pool or model), ``response_format``
  (``json`` | ``text`` | ``srt`` | ``verbose_json`` | ``vtt``, default ``json``), ``language``,
  ``prompt``, ``temperature`` (0..1) and any other field (relayed untouched).
  ``parse_form(raw, content_type) -> Form`` locates each part as a byte span of the received body:
  the file is never copied. ``reframe(form, raw, model) -> (chunks, length)`` writes the body for a
  lane: the received bytes before and after the ``model`` part's value as ``memoryview`` slices
  around the lane's wire model (one part re-framed, the file not copied).
- ``POST /v1/audio/speech``: JSON ``{"model", "input" (<= 4096 characters), "voice",
  "response_format" (mp3 | opus | aac | flac | wav | pcm), "speed" (0.25..4.0), ...}``; the answer
  is the audio bytes with their content type (``speech_verdict``: an answer that says JSON, HTML or
  text is not audio).

Answers: a transcription's ``json`` / ``verbose_json`` is an object with ``text`` (string);
``text`` / ``srt`` / ``vtt`` are plain text (``upload_verdict``). ``audio_seconds(doc)`` reads
``verbose_json``'s ``duration`` (or ``usage.seconds`` of a duration-billed ``json`` answer);
``token_usage(doc)`` a ``usage`` of type ``tokens``. ``reframe`` can also set ``response_format``
(``busbar.proto.ops.audio_formats``: the lane is asked for a format that reports its audio).

The multipart scan is ``bytes.find`` over the received buffer: a streaming parser such as
python-multipart hands part data through its own look-behind buffer, so it cannot name spans of
the caller's bytes, and spans are what keep the upload from being held twice.

Source: docs/beyond-chat.md#audio.
"""
from __future__ import annotations

import email.message
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from busbar.proto.errors import BadRequest

UPLOAD_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
SPEECH_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
SPEECH_INPUT_MAX = 4096
"""OpenAI's cap on ``input`` characters of one speech request."""


@dataclass(slots=True)
class Part:
    """One form part: its ``name``, ``filename`` (file parts), the span ``[start, end)`` of its
    value in the received body, and its own ``content_type`` (``None`` when it has none)."""

    name: str
    filename: str | None
    start: int
    end: int
    content_type: str | None = None


@dataclass(slots=True)
class Form:
    """A parsed upload: its parts by name and the small text fields decoded (``fields``)."""

    parts: dict[str, Part]
    fields: dict[str, str] = field(default_factory=dict)
    response_format: str = "json"
    prompt: str = ""


def _boundary(content_type: str) -> bytes:
    msg = email.message.Message()
    msg["content-type"] = content_type
    if msg.get_content_type() != "multipart/form-data":
        raise BadRequest("an audio upload must be multipart/form-data (fields 'file' and 'model')")
    boundary = msg.get_param("boundary")
    if not isinstance(boundary, str) or not boundary:
        raise BadRequest("the multipart/form-data content-type has no boundary")
    return boundary.encode("latin-1")


def _disposition(head: bytes) -> tuple[str, str | None, str | None]:
    msg = email.message.Message()
    for line in head.decode("utf-8", "replace").split("\r\n"):
        key, sep, value = line.partition(":")
        if sep:
            msg[key.strip()] = value.strip()
    name = msg.get_param("name", header="content-disposition")
    filename = msg.get_param("filename", header="content-disposition")
    if not isinstance(name, str) or not name:
        raise BadRequest("a multipart part has no content-disposition name")
    return name, filename if isinstance(filename, str) else None, msg.get("content-type")


def parse_form(raw: bytes, content_type: str) -> Form:
    """The parts of a ``multipart/form-data`` body as spans of ``raw`` (see the module docstring).

    Raises:
        BadRequest: not multipart, malformed framing, a missing ``file`` or ``model``, or a bad
            ``response_format`` / ``temperature`` (the message names the field).
    """
    delim = b"--" + _boundary(content_type)
    if not raw.startswith(delim):
        raise BadRequest("the multipart body does not start with its boundary")
    sep = b"\r\n" + delim
    parts: dict[str, Part] = {}
    pos = len(delim)
    while not raw.startswith(b"--", pos):
        if not raw.startswith(b"\r\n", pos):
            raise BadRequest("malformed multipart body: a boundary is not followed by a line break")
        head_end = raw.find(b"\r\n\r\n", pos + 2)
        if head_end < 0:
            raise BadRequest("malformed multipart body: a part has no end of headers")
        start = head_end + 4
        end = raw.find(sep, start)
        if end < 0:
            raise BadRequest("malformed multipart body: a part is not terminated by the boundary")
        name, filename, ctype = _disposition(raw[pos + 2:head_end])
        parts[name] = Part(name, filename, start, end, ctype)
        pos = end + len(sep)
    form = Form(parts)
    if "file" not in parts or parts["file"].filename is None:
        raise BadRequest("'file' is required: the audio file to transcribe (a file part)")
    for name, part in parts.items():
        if part.filename is None and part.end - part.start <= 65536:
            form.fields[name] = raw[part.start:part.end].decode("utf-8", "replace")
    if not form.fields.get("model"):
        raise BadRequest("'model' is required: name a pool or a model")
    form.response_format = form.fields.get("response_format", "json")
    if form.response_format not in UPLOAD_FORMATS:
        raise BadRequest(f"'response_format' must be one of {', '.join(UPLOAD_FORMATS)}")
    temperature = form.fields.get("temperature")
    if temperature is not None:
        try:
            value = float(temperature)
        except ValueError:
            value = -1.0
        if not 0.0 <= value <= 1.0:
            raise BadRequest("'temperature' must be a number between 0 and 1")
    form.prompt = form.fields.get("prompt", "")
    return form


def reframe(form: Form, raw: bytes, model: str,
            response_format: str | None = None) -> tuple[list[bytes | memoryview], int]:
    """The upload with the ``model`` part's value set to ``model`` (and, when ``response_format`` is
    given, the ``response_format`` part's value set to it, or such a part added after ``model``):
    ``(chunks, total length)``; the chunks are views of ``raw`` around the new values (nothing of
    the file is copied).

    An unchanged model is still sent as two views split at its value: the HTTP client coalesces the
    request head with the first body chunk in one write (a copy of that chunk), so the first chunk
    must be the small head of the form, never the whole upload (bench/bench_audio.py)."""
    part = form.parts["model"]
    edits: list[tuple[int, int, bytes]] = [(part.start, part.end, model.encode("utf-8"))]
    if response_format is not None:
        fmt = form.parts.get("response_format")
        value = response_format.encode("utf-8")
        if fmt is not None:
            edits.append((fmt.start, fmt.end, value))
        else:                                   # a new part right after the model's value
            boundary = raw[:raw.index(b"\r\n")]
            edits[0] = (part.start, part.end, edits[0][2] + b"\r\n" + boundary
                        + b'\r\nContent-Disposition: form-data; name="response_format"\r\n\r\n' + value)
    edits = sorted(e for e in edits if e[2] != raw[e[0]:e[1]])
    view = memoryview(raw)
    if not edits:
        return [view[:part.start], view[part.start:]], len(raw)
    chunks: list[bytes | memoryview] = []
    pos, length = 0, len(raw)
    for start, end, value in edits:
        chunks += [view[pos:start], value]
        length += len(value) - (end - start)
        pos = end
    chunks.append(view[pos:])
    return chunks, length


def read_speech(body: dict[str, Any]) -> dict[str, Any]:
    """Check a speech body (``input``, ``voice``, ``response_format``, ``speed``); returns it.

    Raises:
        BadRequest: naming the field at fault.
    """
    text = body.get("input")
    if not isinstance(text, str) or not text:
        raise BadRequest("'input' is required: the text to speak (a non-empty string)")
    if len(text) > SPEECH_INPUT_MAX:
        raise BadRequest(f"'input' is {len(text)} characters; the limit is {SPEECH_INPUT_MAX}")
    voice = body.get("voice")
    if not (isinstance(voice, str) and voice) and not isinstance(voice, dict):
        raise BadRequest("'voice' is required: a voice name")
    fmt = body.get("response_format", "mp3")
    if fmt not in SPEECH_FORMATS:
        raise BadRequest(f"'response_format' must be one of {', '.join(SPEECH_FORMATS)}")
    speed = body.get("speed")
    if speed is not None and (isinstance(speed, bool) or not isinstance(speed, (int, float))
                              or not 0.25 <= speed <= 4.0):
        raise BadRequest("'speed' must be a number between 0.25 and 4.0")
    return body


def _mime(headers: Mapping[str, str]) -> str:
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def upload_verdict(status: int, headers: Mapping[str, str],
                   body: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """``(doc or None, None)`` when a transcription answer looks like one (JSON with ``text``, or
    non-empty text for text/srt/vtt), else ``(None, reason)``."""
    mime = _mime(headers)
    if not body.strip():
        return None, f"HTTP {status} with an empty body"
    if mime == "text/html":
        return None, f"HTTP {status} with content-type {mime}, not a transcription"
    if "json" not in mime:
        return None, None                          # text / srt / vtt: relayed as-is
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, f"HTTP {status} with a body that is not valid JSON"
    if not isinstance(doc, dict) or doc.get("error") is not None or not isinstance(doc.get("text"), str):
        return None, f"HTTP {status} with a body that is not a transcription (no text string)"
    return doc, None


def speech_verdict(status: int, headers: Mapping[str, str]) -> str | None:
    """A reason when a 2xx speech answer is plainly not audio (JSON, HTML or plain text; an event
    stream is what ``stream_format: sse`` asks for), else ``None``."""
    mime = _mime(headers)
    if mime in ("text/html", "text/plain") or "json" in mime:
        return f"HTTP {status} with content-type {mime}, not audio"
    return None


def audio_seconds(doc: dict[str, Any] | None) -> float:
    """Seconds of audio a transcription answer reports (``verbose_json`` ``duration``, or a
    ``usage`` of type ``duration``); 0.0 when it reports none."""
    if doc is None:
        return 0.0
    duration = doc.get("duration")
    if isinstance(duration, (int, float)) and not isinstance(duration, bool):
        return float(duration)
    usage = doc.get("usage")
    if isinstance(usage, dict) and usage.get("type") == "duration":
        seconds = usage.get("seconds")
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
            return float(seconds)
    return 0.0


def token_usage(doc: dict[str, Any] | None) -> tuple[int, int]:
    """``(input tokens, output tokens)`` of a transcription answer's ``usage`` of type ``tokens``
    (the gpt-4o transcription models' ``json``); ``(0, 0)`` when it reports none."""
    usage = doc.get("usage") if doc is not None else None
    if not isinstance(usage, dict) or usage.get("type") != "tokens":
        return 0, 0
    inp, out = usage.get("input_tokens"), usage.get("output_tokens")
    return (inp if isinstance(inp, int) and not isinstance(inp, bool) and inp > 0 else 0,
            out if isinstance(out, int) and not isinstance(out, bool) and out > 0 else 0)


class OpenAIAudio:
    """The ``("audio", "openai")`` codec: a pass-through (only an OpenAI lane serves audio). The
    walk's audio seams live in ``busbar.proxy.audio.AudioOperation``; this codec checks a speech
    body and writes it for a lane (``model`` rewritten)."""

    operation = "audio"
    protocol = "openai"
    passthrough = True

    def read_request(self, body: dict[str, Any], verb: str = "") -> dict[str, Any]:
        """Raises ``BadRequest`` (``read_speech``)."""
        return read_speech(body)

    def write_request(self, req: Any, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        return {**req, "model": upstream_model}, []

    def read_response(self, doc: dict[str, Any]) -> Any:
        return doc

    def write_response(self, resp: Any, req: Any, model: str) -> dict[str, Any]:
        return dict(resp)

    def serves(self, req: Any, upstream_model: str) -> str | None:
        return None

    def usage_of(self, doc: dict[str, Any]) -> int | None:
        return None


CODEC = OpenAIAudio()
