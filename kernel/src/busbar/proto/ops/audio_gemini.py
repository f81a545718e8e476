"""Audio transcription and translation on a Gemini lane, through ``:generateContent``.

An OpenAI upload (``/v1/audio/transcriptions`` or ``/translations``, ``busbar.proto.ops.audio``)
served by a Gemini model: the Gemini API's audio understanding (Gemini API docs, "Audio
understanding"): one user turn with a text instruction and the audio as an ``inline_data`` part
``{"mime_type": "audio/...", "data": <base64>}``; the answer is a ``GenerateContentResponse``
whose text is the transcript, and ``usageMetadata.promptTokensDetails`` counts the audio under
``"modality": "AUDIO"`` at 32 tokens per second of audio.

- ``unable(kind, form) -> str | None``: why a Gemini lane cannot take this request (speech: Gemini
  speech is not served; ``srt``/``vtt``: a Gemini answer has no timestamps; an upload whose type is
  not known to be audio: Gemini needs its MIME type).
- ``GeminiUploadBody(form, raw, kind)``: the JSON body as a chunk list whose base64 of the file is
  encoded chunk by chunk while it is sent (``__iter__``), from views of the received bytes: the
  upload stays held once, its encoding is never held whole, and a failover re-sends it from the
  same buffer. ``len(body)`` (the byte length) goes in ``content-length``.
- ``dropped(form)``: the client's form fields a Gemini lane cannot carry
  (``x-busbar-translation-dropped``): all but ``file``, ``model``, ``response_format``,
  ``language``, ``prompt`` and ``temperature``.
- ``read_answer(doc) -> (text, audio_seconds, input_tokens, output_tokens)`` and
  ``write_answer(kind, form, text, seconds) -> (content_type, bytes)``: the OpenAI answer in the
  format the client asked for (``json`` ``{"text"}``, ``verbose_json`` ``{"task", "language",
  "duration", "text", "segments": []}``, ``text`` as plain text).

Source: docs/beyond-chat.md#audio.
"""
from __future__ import annotations

import base64
import mimetypes
from collections.abc import Iterator
from typing import Any

import orjson

from busbar.proto.ops.audio import Form

__all__ = ["AUDIO_TOKENS_PER_SECOND", "CARRIED", "CODEC", "GeminiAudio", "GeminiUploadBody", "dropped",
           "read_answer", "unable", "upload_mime", "write_answer"]

AUDIO_TOKENS_PER_SECOND = 32
"""Gemini API docs, "Audio understanding": each second of audio is 32 tokens."""

CARRIED = frozenset({"file", "model", "response_format", "language", "prompt", "temperature"})
"""Form fields a Gemini lane carries (the rest are named in ``x-busbar-translation-dropped``)."""

_STEP = 3 * 21846            # base64 is encoded 65 538 input bytes at a time (a multiple of 3)

_INSTRUCTIONS = {
    "transcriptions": "Transcribe the speech in this audio verbatim, in the language it is spoken. "
                      "Answer with the transcript text only, nothing else.",
    "translations": "Translate the speech in this audio into English. "
                    "Answer with the English translation only, nothing else.",
}


def upload_mime(form: Form) -> str | None:
    """The audio MIME type of the upload's ``file`` part: its own content type when it says
    ``audio/*``, else the type its file name suggests when that is audio; ``None`` otherwise."""
    part = form.parts["file"]
    ctype = (part.content_type or "").split(";", 1)[0].strip().lower()
    if ctype.startswith("audio/"):
        return ctype
    guess = mimetypes.guess_type(part.filename or "")[0]
    return guess if guess is not None and guess.startswith("audio/") else None


def unable(kind: str, form: Form | None) -> str | None:
    """Why a Gemini lane cannot serve this audio request, or ``None`` when it can."""
    if form is None:
        return "speech is served by OpenAI-protocol lanes only in this build"
    if form.response_format in ("srt", "vtt"):
        return f"a Gemini answer has no timestamps: response_format {form.response_format} needs an OpenAI lane"
    if upload_mime(form) is None:
        return "the upload is not known to be audio (its content type or file extension): Gemini needs its type"
    return None


def dropped(form: Form) -> list[str]:
    """The client's form fields a Gemini lane cannot carry, in the client's spelling."""
    return sorted(name for name in form.parts if name not in CARRIED)


def _instruction(kind: str, form: Form) -> str:
    text = _INSTRUCTIONS[kind]
    language = form.fields.get("language")
    if language and kind == "transcriptions":
        text += f" The audio is in the language '{language}'."
    if form.prompt:
        text += f" Context from the caller (spellings, names, the text before it): {form.prompt}"
    return text


class GeminiUploadBody(list):  # type: ignore[type-arg]  # a Body chunk list (busbar.proxy.upstream)
    """The ``generateContent`` body of one upload (see the module docstring). Iterating yields the
    JSON head, the file's base64 in chunks encoded from views of ``raw``, and the JSON tail;
    ``length`` is the byte length of the whole."""

    def __init__(self, form: Form, raw: bytes, kind: str) -> None:
        super().__init__()
        part = form.parts["file"]
        self.raw, self.start, self.end = raw, part.start, part.end
        mime = upload_mime(form) or "audio/wav"
        self.head = (b'{"contents":[{"role":"user","parts":[{"text":' + orjson.dumps(_instruction(kind, form))
                     + b'},{"inline_data":{"mime_type":' + orjson.dumps(mime) + b',"data":"')
        temperature = form.fields.get("temperature")
        config = b',"generationConfig":{"temperature":' + orjson.dumps(float(temperature)) + b'}' \
            if temperature is not None else b""
        self.tail = b'"}}]}]' + config + b"}"
        size = self.end - self.start
        self.length = len(self.head) + 4 * -(-size // 3) + len(self.tail)

    def __iter__(self) -> Iterator[bytes]:
        yield self.head
        view = memoryview(self.raw)
        for i in range(self.start, self.end, _STEP):
            yield base64.b64encode(view[i:min(i + _STEP, self.end)])
        yield self.tail

    def __bool__(self) -> bool:
        return True


def read_answer(doc: dict[str, Any]) -> tuple[str, float, int, int]:
    """``(text, audio seconds, input tokens, output tokens)`` of a ``GenerateContentResponse``.

    Raises:
        ValueError: no candidate text (a blocked prompt, an empty answer): the walk fails over.
    """
    cands = doc.get("candidates")
    parts = cands[0].get("content", {}).get("parts", []) if isinstance(cands, list) and cands else []
    text = "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
                   and not p.get("thought"))
    if not text.strip():
        raise ValueError("the Gemini answer carries no transcript text")
    usage = doc.get("usageMetadata") or {}
    audio = sum(d.get("tokenCount", 0) for d in usage.get("promptTokensDetails") or ()
                if isinstance(d, dict) and d.get("modality") == "AUDIO" and isinstance(d.get("tokenCount"), int))
    inp, out = usage.get("promptTokenCount", 0), usage.get("candidatesTokenCount", 0)
    return (text.strip(), audio / AUDIO_TOKENS_PER_SECOND, inp if isinstance(inp, int) else 0,
            out if isinstance(out, int) else 0)


def write_answer(kind: str, form: Form, text: str, seconds: float) -> tuple[str, bytes]:
    """``(content type, body)`` of the OpenAI answer in the client's ``response_format``."""
    fmt = form.response_format
    if fmt == "text":
        return "text/plain; charset=utf-8", text.encode() + b"\n"
    if fmt == "verbose_json":
        task = "transcribe" if kind == "transcriptions" else "translate"
        language = "english" if kind == "translations" else form.fields.get("language", "")
        doc: dict[str, Any] = {"task": task, "language": language, "duration": round(seconds, 3), "text": text,
                               "segments": []}
        return "application/json", orjson.dumps(doc)
    return "application/json", orjson.dumps({"text": text})


class GeminiAudio:
    """The ``("audio", "gemini")`` codec entry: a Gemini lane can serve audio uploads (the walk's
    seams are ``busbar.proxy.audio.AudioOperation``'s, which use the helpers above)."""

    operation = "audio"
    protocol = "gemini"
    passthrough = False

    def read_request(self, body: dict[str, Any], verb: str = "") -> Any:
        raise NotImplementedError("Gemini audio has no ingress route in this build")

    def write_request(self, req: Any, upstream_model: str) -> tuple[dict[str, Any], list[str]]:
        raise NotImplementedError("an upload is written by GeminiUploadBody")

    def read_response(self, doc: dict[str, Any]) -> Any:
        return read_answer(doc)

    def write_response(self, resp: Any, req: Any, model: str) -> dict[str, Any]:
        raise NotImplementedError("the OpenAI answer is written by write_answer")

    def serves(self, req: Any, upstream_model: str) -> str | None:
        return None

    def usage_of(self, doc: dict[str, Any]) -> int | None:
        return None


CODEC = GeminiAudio()
