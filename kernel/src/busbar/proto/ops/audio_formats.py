"""A transcription asked upstream in a format that reports its audio, answered in the client's format.

``text``, ``srt``, ``vtt`` and plain ``json`` answers from ``whisper-1`` carry no duration, so a
rate card's ``per_audio_second_utok`` would charge nothing for them. On an OpenAI lane busbar asks
the upstream for a richer format and writes the answer back in the one the client asked for
(OpenAI API reference, "Audio / Create transcription": ``verbose_json`` is the transcription object
with ``duration`` and ``segments[].{start, end, text}`` in seconds; whisper-1 serves every format,
the ``gpt-4o-*transcribe*`` models only ``json`` and ``text``, whose ``json`` carries ``usage``):

- ``upstream_format(fmt, model) -> str | None``: the format to ask for, ``None`` to relay as is.
  A ``whisper*`` model: ``json``/``text``/``srt``/``vtt`` -> ``verbose_json``; any other model:
  ``text`` -> ``json`` (its ``usage``); ``verbose_json`` is never changed.
- ``render(fmt, doc) -> (content type, body)``: the client's format from the upstream's JSON
  ``doc``: ``json`` -> ``{"text"}`` plus the answer's ``usage`` when it has one; ``text`` -> the
  text and a line break; ``srt`` -> numbered cues ``HH:MM:SS,mmm --> HH:MM:SS,mmm``; ``vtt`` ->
  ``WEBVTT`` and cues ``HH:MM:SS.mmm --> HH:MM:SS.mmm`` (one cue per segment, its text stripped).

Source: docs/beyond-chat.md#audio.
"""
from __future__ import annotations

from typing import Any

import orjson

__all__ = ["render", "timestamp", "upstream_format"]


def upstream_format(fmt: str, model: str) -> str | None:
    """The ``response_format`` to send an OpenAI lane serving ``model`` for a client's ``fmt``, or
    ``None`` when the client's own format already reports what it used (or cannot be improved)."""
    if fmt == "verbose_json":
        return None
    if model.startswith("whisper"):
        return "verbose_json"
    return "json" if fmt == "text" else None


def timestamp(seconds: float, comma: bool) -> str:
    """``HH:MM:SS,mmm`` (``comma``: SubRip) or ``HH:MM:SS.mmm`` (WebVTT) of ``seconds`` (>= 0)."""
    ms = max(0, round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{',' if comma else '.'}{ms:03d}"


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _cues(doc: dict[str, Any], comma: bool) -> list[str]:
    segments = doc.get("segments")
    if not isinstance(segments, list) or not segments:       # no segments: one cue over the whole audio
        segments = [{"start": 0.0, "end": doc.get("duration"), "text": doc.get("text", "")}]
    cues = []
    for seg in segments:
        if not isinstance(seg, dict):
            continue
        text = str(seg.get("text", "")).strip().replace("-->", "->")
        cues.append(f"{timestamp(_number(seg.get('start')), comma)} --> "
                    f"{timestamp(_number(seg.get('end')), comma)}\n{text}\n")
    return cues


def render(fmt: str, doc: dict[str, Any]) -> tuple[str, bytes]:
    """``(content type, body)`` of the answer in the client's ``fmt`` (``json`` | ``text`` |
    ``srt`` | ``vtt``) from an upstream JSON transcription ``doc`` (``text`` a string)."""
    text = str(doc.get("text", ""))
    if fmt == "json":
        out: dict[str, Any] = {"text": text}
        if isinstance(doc.get("usage"), dict):
            out["usage"] = doc["usage"]
        return "application/json", orjson.dumps(out)
    if fmt == "text":
        return "text/plain; charset=utf-8", text.encode() + b"\n"
    if fmt == "srt":
        body = "\n".join(f"{i}\n{cue}" for i, cue in enumerate(_cues(doc, True), 1)) + "\n"
        return "text/plain; charset=utf-8", body.encode()
    body = "WEBVTT\n\n" + "\n".join(_cues(doc, False)) + "\n"
    return "text/plain; charset=utf-8", body.encode()
