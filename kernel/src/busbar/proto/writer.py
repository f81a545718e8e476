"""Helpers every request writer shares (IR -> provider body).

``drop`` records a request field a writer could not carry (reported in
``x-busbar-translation-dropped``); ``tool_result_text`` flattens a tool result to the one string
the flat-result protocols (OpenAI Chat, Responses, Cohere) carry; ``data_uri`` spells an inline
payload as a ``data:`` URL; ``user_turn`` writes one IR user message for the protocols whose user
turn is a list of typed parts with tool results as separate items.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from busbar.ir.model import DocumentBlock, ImageBlock, IrMessage, TextBlock, ToolResultBlock


def drop(dropped: list[str], name: str) -> None:
    """Add ``name`` to ``dropped`` once (order of first appearance kept)."""
    if name not in dropped:
        dropped.append(name)


def tool_result_text(b: ToolResultBlock, dropped: list[str]) -> str:
    """The text of a tool result (its text blocks joined by newlines); other content and
    ``is_error`` are recorded in ``dropped`` (``tool_result.<type>``, ``tool_result.is_error``)."""
    texts = []
    for c in b.content:
        if isinstance(c, TextBlock):
            texts.append(c.text)
        else:
            drop(dropped, "tool_result." + c.type)
    if b.is_error:
        drop(dropped, "tool_result.is_error")
    return texts[0] if len(texts) == 1 else "\n".join(texts)


def data_uri(b: ImageBlock | DocumentBlock) -> str:
    """``b.url`` for a URL source, else ``data:<media_type>;base64,<data>``."""
    if isinstance(b, ImageBlock) and b.source == "url":
        return b.url or ""
    return f"data:{b.media_type};base64,{b.data}"


def user_turn(m: IrMessage, out: list[dict[str, Any]], dropped: list[str], *, text_type: str,
              result: Callable[[ToolResultBlock], dict[str, Any]],
              image: Callable[[ImageBlock], dict[str, Any]],
              document: Callable[[DocumentBlock], dict[str, Any]]) -> None:
    """Append one IR user message to ``out``: each tool result as its own item (``result``), then
    one ``{"role": "user", "content": …}`` of the other blocks — a plain string when it is one text
    part. Text parts are ``{"type": text_type, "text"}``; ``image``/``document`` build the others
    (they raise ``BadRequest`` for what the protocol cannot take). Thinking and tool-use blocks in
    a user turn and every ``cache_control`` are recorded in ``dropped``."""
    parts: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, ToolResultBlock):
            out.append(result(b))
        elif isinstance(b, TextBlock):
            parts.append({"type": text_type, "text": b.text})
        elif isinstance(b, ImageBlock):
            parts.append(image(b))
        elif isinstance(b, DocumentBlock):
            parts.append(document(b))
        else:
            drop(dropped, "user." + b.type)
            continue
        if b.cache_control is not None:
            drop(dropped, "cache_control")
    if not parts:
        return
    if len(parts) == 1 and parts[0]["type"] == text_type:
        out.append({"role": "user", "content": parts[0]["text"]})
    else:
        out.append({"role": "user", "content": parts})


def put_present(body: dict[str, Any], fields: tuple[tuple[str, Any], ...]) -> None:
    """Set ``body[key] = value`` for each ``(key, value)`` whose value is not None, in order
    (a writer never emits a null optional field, case C011)."""
    for key, value in fields:
        if value is not None:
            body[key] = value
