"""Gemini ``parts`` -> IR blocks, and the small readers the request and part code share.

What lives here: one ``parts`` list -> IR blocks (``text``, ``thought`` runs, ``inlineData``,
``fileData``, ``functionCall`` + ``thoughtSignature``, ``functionResponse``), base64url ->
standard base64, OpenAPI -> JSON Schema type names, ``functionResponse.response`` -> result text.
Message-level structure is ``busbar.proto.gemini.request``.

Source: cases C037 (signatures, visible text stays text), C039 (function responses), C040
(inlineData MIME types kept).
"""

from __future__ import annotations

from typing import Any

import orjson

from busbar.ir.model import (
    DocumentBlock,
    ImageBlock,
    IrBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from busbar.proto.errors import BadRequest
from busbar.proto.gemini.ids import MINTED_PREFIX

_URL_TO_STD = str.maketrans("-_", "+/")


def g(d: dict[str, Any], camel: str, snake: str) -> Any:
    """``d[camel]``, else ``d[snake]`` (the REST API accepts both spellings)."""
    v = d.get(camel)
    return d.get(snake) if v is None else v


def std_b64(data: str) -> str:
    """Base64 in the standard alphabet with padding (base64url input converted; other input unchanged)."""
    if "-" in data or "_" in data:
        data = data.translate(_URL_TO_STD)
    pad = -len(data) % 4
    return data + "=" * pad if pad and pad != 3 else data


def json_schema(schema: Any) -> Any:
    """An OpenAPI-style Gemini schema with JSON Schema type names (``OBJECT`` -> ``object``), recursively.

    A schema whose top-level ``type`` is not upper case is JSON Schema already and returned as is.
    """
    t = schema.get("type") if isinstance(schema, dict) else None
    if not (isinstance(t, str) and t.isupper()):
        return schema
    return _lower_types(schema)


def _lower_types(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {}
        for k, v in schema.items():
            if k == "type" and isinstance(v, str):
                out[k] = v.lower()
            elif isinstance(v, (dict, list)):
                out[k] = _lower_types(v)
            else:
                out[k] = v
        return out
    if isinstance(schema, list):
        return [_lower_types(x) for x in schema]
    return schema


def result_text(response: Any) -> tuple[str, bool]:
    """``functionResponse.response`` -> ``(result text, is_error)`` (see the module docstring)."""
    if isinstance(response, dict) and len(response) == 1:
        if isinstance(response.get("output"), str):
            return response["output"], False
        if isinstance(response.get("error"), str):
            return response["error"], True
    if response is None:
        return "", False
    return orjson.dumps(response).decode(), False


def media_block(mime: str | None, data: str | None, url: str | None) -> IrBlock:
    """An ``inlineData``/``fileData`` part -> ``ImageBlock`` (``image/*``) or ``DocumentBlock``."""
    mime = mime or ""
    if mime.startswith("image/"):
        if data is not None:
            return ImageBlock("base64", media_type=mime, data=data)
        return ImageBlock("url", media_type=mime, url=url)
    if not mime:
        raise BadRequest("inlineData/fileData: mimeType is required")
    return DocumentBlock(mime, data=data, url=url)


def read_parts(parts: Any, where: str, turn: int, calls: dict[str, list[str]] | None = None) -> list[IrBlock]:
    """A ``parts`` list -> IR blocks.

    Args:
        parts: the JSON list.
        where: key path for error messages (``contents[2].parts``).
        turn: the content index (ids minted for id-less calls are ``call_gm_<turn>_<part>``).
        calls: function name -> unanswered call ids, shared across turns so that a
            ``functionResponse`` without ``id`` finds its call (updated in place).

    Raises:
        BadRequest: a part the IR cannot carry (names the key path).
    """
    if not isinstance(parts, list):
        raise BadRequest(f"{where}: must be a list of parts")
    out: list[IrBlock] = []
    thinking: ThinkingBlock | None = None
    for j, p in enumerate(parts):
        if not isinstance(p, dict):
            raise BadRequest(f"{where}[{j}]: must be a part object")
        text = p.get("text")
        if text is not None and len(p) == 1:  # the common case: a plain text part
            thinking = None
            out.append(TextBlock(text))
            continue
        sig = p.get("thoughtSignature") or p.get("thought_signature")
        if isinstance(sig, str) and sig:
            sig = std_b64(sig)
        if text is not None:
            if p.get("thought"):
                if thinking is None:
                    thinking = ThinkingBlock(text, sig)
                    out.append(thinking)
                else:
                    thinking.text += text
                    if sig:
                        thinking.signature = sig
            else:
                thinking = None
                if text or not sig:
                    out.append(TextBlock(text))
            continue
        thinking = None
        fc = p.get("functionCall") or p.get("function_call")
        if fc is not None:
            name = fc.get("name")
            if not isinstance(name, str) or not name:
                raise BadRequest(f"{where}[{j}].functionCall.name: required")
            cid = fc.get("id") or f"{MINTED_PREFIX}{turn}_{j}"
            args = fc.get("args")
            out.append(ToolUseBlock(cid, name, {} if args is None else args, thought_signature=sig))
            if calls is not None:
                calls.setdefault(name, []).append(cid)
            continue
        fr = p.get("functionResponse") or p.get("function_response")
        if fr is not None:
            name = fr.get("name")
            if not isinstance(name, str) or not name:
                raise BadRequest(f"{where}[{j}].functionResponse.name: required")
            rid = fr.get("id")
            pending = calls.get(name) if calls is not None else None
            if rid:
                if pending and rid in pending:
                    pending.remove(rid)
            elif pending:
                rid = pending.pop(0)
            else:
                rid = f"{MINTED_PREFIX}{turn}_{j}"
            text, err = result_text(fr.get("response"))
            out.append(ToolResultBlock(rid, [TextBlock(text)], err, name=name))
            continue
        inline = g(p, "inlineData", "inline_data")
        if inline is not None:
            data = inline.get("data")
            if not isinstance(data, str):
                raise BadRequest(f"{where}[{j}].inlineData.data: required (base64)")
            out.append(media_block(g(inline, "mimeType", "mime_type"), std_b64(data), None))
            continue
        fd = g(p, "fileData", "file_data")
        if fd is not None:
            uri = g(fd, "fileUri", "file_uri")
            if not isinstance(uri, str) or not uri:
                raise BadRequest(f"{where}[{j}].fileData.fileUri: required")
            mime = g(fd, "mimeType", "mime_type")
            if not mime:
                raise BadRequest(f"{where}[{j}].fileData.mimeType: required")
            out.append(media_block(mime, None, uri))
            continue
        if sig is not None and len(p) == 1:
            continue  # a bare signature part: nothing to carry
        kind = next((k for k in p if k not in ("thoughtSignature", "thought_signature", "thought")), "?")
        raise BadRequest(
            f"{where}[{j}].{kind}: not supported (text, inlineData, fileData, functionCall, functionResponse)"
        )
    return out
