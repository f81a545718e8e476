"""OpenAI Chat Completions content parts and tool-call arguments -> IR pieces.

What lives here: one content part (``text``, ``image_url``, ``input_audio``, ``file``,
``refusal``) -> one IR block, ``data:`` URI splitting, and lossless parsing of
``function.arguments`` (``RawArguments`` for text that is not JSON). Message-level structure is
``busbar.proto.openai.request``.

Source: cases C015 (data-URI image -> base64), C039 (arguments that are not JSON objects),
C040 (file and audio parts kept, MIME type from the data URI or the declared format).
"""

from __future__ import annotations

import base64
import mimetypes
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson

from busbar.ir.model import DocumentBlock, ImageBlock, IrBlock, TextBlock
from busbar.proto.errors import BadRequest

AUDIO_MIME = {
    "wav": "audio/wav",
    "mp3": "audio/mp3",
    "flac": "audio/flac",
    "ogg": "audio/ogg",
    "aac": "audio/aac",
    "m4a": "audio/mp4",
    "webm": "audio/webm",
    "pcm16": "audio/pcm",
}
"""``input_audio.format`` -> MIME type (Gemini's documented audio types)."""


class RawArguments(str):
    """Tool-call ``arguments`` that were not valid JSON, kept verbatim (see module docstring)."""

    __slots__ = ()


def parse_arguments(raw: Any) -> Any:
    """Parse an OpenAI ``function.arguments`` string losslessly (``""``/``None`` -> ``{}``)."""
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str):
        return raw
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return RawArguments(raw)


def split_data_uri(uri: str) -> tuple[str, str] | None:
    """``data:<mime>[;params][;base64],<payload>`` -> ``(mime, base64 payload)``; None if not a data URI."""
    if not uri.startswith("data:"):
        return None
    header, sep, payload = uri[5:].partition(",")
    if not sep:
        return None
    params = header.split(";")
    mime = params[0] or "text/plain"
    if "base64" in params[1:]:
        return mime, payload
    return mime, base64.b64encode(unquote_to_bytes(payload)).decode("ascii")


def read_part(p: Any, i: int, j: int) -> IrBlock:
    """Content part ``j`` of ``messages[i]`` -> IR block (text, image_url, input_audio, file, refusal).

    Raises:
        BadRequest: an unsupported or malformed part (the message names the key path).
    """
    t = p.get("type") if isinstance(p, dict) else None
    if t == "text":
        text = p.get("text")
        if not isinstance(text, str):
            raise BadRequest(f"messages[{i}].content[{j}].text: must be a string")
        return TextBlock(text)
    if t == "image_url":
        iu = p.get("image_url")
        url = iu if isinstance(iu, str) else iu.get("url") if isinstance(iu, dict) else None
        if not isinstance(url, str) or not url:
            raise BadRequest(f"messages[{i}].content[{j}].image_url.url: required")
        detail = iu.get("detail") if isinstance(iu, dict) else None
        split = split_data_uri(url)
        if split is not None:
            return ImageBlock("base64", media_type=split[0], data=split[1], detail=detail)
        return ImageBlock("url", url=url, detail=detail)
    if t == "input_audio":
        ia = p.get("input_audio") or {}
        fmt, data = ia.get("format"), ia.get("data")
        if not isinstance(fmt, str) or not isinstance(data, str):
            raise BadRequest(f"messages[{i}].content[{j}].input_audio: needs 'data' and 'format'")
        return DocumentBlock(AUDIO_MIME.get(fmt, "audio/" + fmt), data=data)
    if t == "file":
        return _file_part(p.get("file") or {}, i, j)
    if t == "refusal":
        return TextBlock(p.get("refusal") or "")
    raise BadRequest(
        f"messages[{i}].content[{j}].type: {t!r} is not supported (text, image_url, input_audio, file)"
    )


def _file_part(f: dict[str, Any], i: int, j: int) -> DocumentBlock:
    name = f.get("filename")
    fd = f.get("file_data")
    if not isinstance(fd, str) or not fd:
        if f.get("file_id"):
            raise BadRequest(
                f"messages[{i}].content[{j}].file.file_id: file references are not "
                "supported by this gateway; send the file inline as file_data"
            )
        raise BadRequest(f"messages[{i}].content[{j}].file.file_data: required")
    split = split_data_uri(fd)
    if split is not None:
        return DocumentBlock(split[0], data=split[1], name=name)
    mime = mimetypes.guess_type(name)[0] if isinstance(name, str) else None
    if mime is None:
        raise BadRequest(
            f"messages[{i}].content[{j}].file: media type unknown; send file_data as a "
            "data: URI (data:<mime>;base64,...) or a filename with an extension"
        )
    return DocumentBlock(mime, data=fd, name=name)
