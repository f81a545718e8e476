"""OpenAI audio endpoints, built from the documented wire shapes (provenance: ``fixtures/README.md``).

- ``POST /v1/audio/transcriptions`` and ``/v1/audio/translations``: ``multipart/form-data`` with
  ``file``, ``model``, ``response_format`` (``json`` | ``text`` | ``srt`` | ``verbose_json`` |
  ``vtt``), ``language``, ``prompt``, ``temperature``. :func:`read_form` turns the upload into the
  dict the journal records: the text fields plus ``file`` = ``{"filename", "bytes", "sha256"}`` (so
  a test can check the upload arrived whole). Answers: ``json`` ``{"text"}`` (a model not named
  ``whisper*``, i.e. the gpt-4o transcription models: ``{"text", "usage": {"type": "tokens",
  "input_tokens", "input_token_details": {"text_tokens", "audio_tokens"}, "output_tokens",
  "total_tokens"}}`` with 10 audio tokens per second and 10 output tokens; such a model answers 400
  to any format but ``json`` / ``text``); ``verbose_json``
  ``{"task", "language", "duration", "text", "segments": [...]}`` (``duration``: file bytes / 16000,
  i.e. 16 kB per second); ``text`` / ``srt`` / ``vtt`` as ``text/plain``.
- ``POST /v1/audio/speech``: JSON ``{"model", "input", "voice", "response_format"?, "speed"?}``
  -> the audio bytes (``audio/mpeg`` for mp3, ``audio/wav``, ...): ``len(input) * 100`` bytes of a
  repeating pattern, sent as ``chunks`` frames (the ``/c<n>`` knob; ``/i<ms>`` pauses between them).
"""

from __future__ import annotations

import email.message
import hashlib
from typing import Any

import orjson

from .base import ErrorReply, Rendered
from .openai_chat import OpenAIChat
from .openai_chat import error_body as openai_error
from .reply import Prompt, Reply

__all__ = ["AUDIO_UPLOADS", "OpenAISpeech", "OpenAITranscribe", "read_form"]

AUDIO_UPLOADS = ("/v1/audio/transcriptions", "/v1/audio/translations")
TRANSCRIPT = "The quick brown fox jumps over the lazy dog."
_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
_SPEECH_TYPES = {"mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac", "flac": "audio/flac",
                 "wav": "audio/wav", "pcm": "audio/pcm"}


def read_form(raw: bytes, content_type: str) -> dict[str, Any] | str:
    """The fields of a multipart upload (``file`` summarised), or a one-line fault."""
    msg = email.message.Message()
    msg["content-type"] = content_type
    boundary = msg.get_param("boundary")
    if msg.get_content_type() != "multipart/form-data" or not isinstance(boundary, str):
        return "Expected multipart/form-data with a boundary"
    out: dict[str, Any] = {}
    for chunk in raw.split(b"--" + boundary.encode("latin-1"))[1:]:
        if chunk.startswith(b"--"):
            break
        head, sep, value = chunk[2:].partition(b"\r\n\r\n")
        if not sep or not value.endswith(b"\r\n"):
            return "Malformed multipart body"
        value = value[:-2]
        part = email.message.Message()
        for line in head.decode("utf-8", "replace").split("\r\n"):
            key, colon, val = line.partition(":")
            if colon:
                part[key.strip()] = val.strip()
        name = part.get_param("name", header="content-disposition")
        filename = part.get_param("filename", header="content-disposition")
        if not isinstance(name, str):
            return "A multipart part has no name"
        if isinstance(filename, str):
            out[name] = {"filename": filename, "bytes": len(value), "sha256": hashlib.sha256(value).hexdigest()}
        else:
            out[name] = value.decode("utf-8", "replace")
    return out


def _stamp(seconds: float, sep: str) -> str:
    """``HH:MM:SS<sep>mmm`` (SubRip ``,``, WebVTT ``.``)."""
    ms = round(seconds * 1000)
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"


class OpenAITranscribe(OpenAIChat):
    """``/v1/audio/transcriptions`` and ``/translations`` (``match.protocol: "openai"``)."""

    def __init__(self, fixtures: Any, task: str) -> None:
        super().__init__(fixtures)
        self.task = task

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        file = body.get("file")
        if not isinstance(file, dict):
            return ErrorReply(400, openai_error("'file' is a required property", "invalid_request_error", "file"))
        if not body.get("model"):
            return ErrorReply(400, openai_error("'model' is a required property", "invalid_request_error", "model"))
        fmt = body.get("response_format", "json")
        if fmt not in _FORMATS:
            return ErrorReply(400, openai_error(f"Invalid 'response_format': {fmt}", "invalid_request_error",
                                                "response_format"))
        model = str(body["model"])
        if not model.startswith("whisper") and fmt not in ("json", "text"):
            return ErrorReply(400, openai_error(
                f"response_format '{fmt}' is not compatible with model '{model}'. Use 'json' or 'text' instead.",
                "invalid_request_error", "response_format"))
        return Prompt(model=model, state={"format": fmt, "bytes": file["bytes"],
                                                       "language": body.get("language") or "english"})

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        st = prompt.state or {}
        fmt, seconds = st["format"], round(st["bytes"] / 16000, 2)
        if fmt == "json" and not prompt.model.startswith("whisper"):      # a gpt-4o transcription model
            audio = round(seconds * 10)
            usage = {"type": "tokens", "input_tokens": audio,
                     "input_token_details": {"text_tokens": 0, "audio_tokens": audio},
                     "output_tokens": 10, "total_tokens": audio + 10}
            return Rendered("application/json", body=orjson.dumps({"text": TRANSCRIPT, "usage": usage}))
        if fmt == "json":
            return Rendered("application/json", body=orjson.dumps({"text": TRANSCRIPT}))
        if fmt == "verbose_json":
            doc = {"task": self.task, "language": st["language"], "duration": seconds, "text": TRANSCRIPT,
                   "segments": [{"id": 0, "seek": 0, "start": 0.0, "end": seconds, "text": TRANSCRIPT,
                                 "tokens": [50364, 440, 1702], "temperature": 0.0, "avg_logprob": -0.25,
                                 "compression_ratio": 1.1, "no_speech_prob": 0.01}]}
            return Rendered("application/json", body=orjson.dumps(doc))
        if fmt == "srt":
            text = f"1\n00:00:00,000 --> {_stamp(seconds, ',')}\n{TRANSCRIPT}\n\n"
        elif fmt == "vtt":
            text = f"WEBVTT\n\n00:00:00.000 --> {_stamp(seconds, '.')}\n{TRANSCRIPT}\n\n"
        else:
            text = TRANSCRIPT + "\n"
        return Rendered("text/plain; charset=utf-8", body=text.encode())


class OpenAISpeech(OpenAIChat):
    """``/v1/audio/speech`` (``match.protocol: "openai"``)."""

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        text = body.get("input")
        if not isinstance(text, str) or not text:
            return ErrorReply(400, openai_error("'input' is a required property", "invalid_request_error", "input"))
        if not body.get("voice"):
            return ErrorReply(400, openai_error("'voice' is a required property", "invalid_request_error", "voice"))
        fmt = body.get("response_format", "mp3")
        if fmt not in _SPEECH_TYPES:
            return ErrorReply(400, openai_error(f"Invalid 'response_format': {fmt}", "invalid_request_error",
                                                "response_format"))
        return Prompt(model=str(body.get("model", "")), state={"size": len(text) * 100, "format": fmt})

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        st = prompt.state or {}
        audio = (bytes(range(256)) * (st["size"] // 256 + 1))[: st["size"]]
        n = max(1, len(reply.pieces))
        step = -(-len(audio) // n)
        frames = [audio[i:i + step] for i in range(0, len(audio), step)]
        return Rendered(_SPEECH_TYPES[st["format"]], frames=frames)
