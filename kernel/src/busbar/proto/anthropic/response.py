"""Anthropic Messages response body <-> IR (non-streaming), plus the shared maps.

Shape: ``{"id": "msg_…", "type": "message", "role": "assistant", "model", "content": [blocks],
"stop_reason", "stop_sequence", "usage": {"input_tokens", "cache_creation_input_tokens",
"cache_read_input_tokens", "output_tokens"}}``. IR usage is Anthropic-style already
(``input_tokens`` excludes cache reads and writes), so usage maps one to one.

Source: docs/protocols/README.md (native id minted, stop reasons normalized to a valid member
of the target enum); cases C010, C013.
"""

from __future__ import annotations

from typing import Any

import orjson

from busbar.ir.model import (
    IrBlock,
    IrRequest,
    IrResponse,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from busbar.proto.ids import B62, random_chars
from busbar.proto.usage import read_counts

STOP_TO_IR = {
    "end_turn": StopReason.END_TURN,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "max_tokens": StopReason.MAX_TOKENS,
    "tool_use": StopReason.TOOL_USE,
    "pause_turn": StopReason.PAUSE_TURN,
    "refusal": StopReason.REFUSAL,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
}
"""Anthropic ``stop_reason`` -> IR; anything else is ``OTHER``."""

IR_TO_STOP: dict[StopReason | None, str] = {
    StopReason.END_TURN: "end_turn",
    StopReason.STOP_SEQUENCE: "stop_sequence",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.TOOL_USE: "tool_use",
    StopReason.SAFETY: "refusal",
    StopReason.REFUSAL: "refusal",
    StopReason.PAUSE_TURN: "pause_turn",
    StopReason.ERROR: "end_turn",
    StopReason.OTHER: "end_turn",
}
"""IR stop reason -> a valid Anthropic ``stop_reason`` (every member mapped)."""


def mint_id(prefix: str = "msg_01", length: int = 22) -> str:
    """A fresh native id: ``prefix`` + ``length`` random base62 characters (``msg_01…``)."""
    return prefix + random_chars(B62, length, 20)


def stop_to_ir(stop: str | None) -> StopReason | None:
    """Anthropic ``stop_reason`` (may be null mid-stream) -> IR."""
    if stop is None:
        return None
    return STOP_TO_IR.get(stop, StopReason.OTHER)


def usage_from_anthropic(u: dict[str, Any] | None) -> Usage:
    """Anthropic ``usage`` -> IR ``Usage`` (null fields read as 0)."""
    return read_counts(u, "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def usage_to_anthropic(u: Usage) -> dict[str, Any]:
    """IR ``Usage`` -> Anthropic ``usage`` with all four counters."""
    return {
        "input_tokens": u.input_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
        "output_tokens": u.output_tokens,
    }


def read_response(body: dict[str, Any]) -> IrResponse:
    """Messages response body -> ``IrResponse``.

    Server-side blocks (``server_tool_use``, ``web_search_tool_result`` …) have no IR home and
    are skipped; client blocks (text, thinking, redacted_thinking, tool_use) are kept.
    """
    content: list[IrBlock] = []
    for b in body.get("content") or ():
        t = b.get("type")
        if t == "text":
            content.append(TextBlock(b.get("text") or "", citations=b.get("citations")))
        elif t == "tool_use":
            content.append(ToolUseBlock(b.get("id") or "", b.get("name") or "", b.get("input", {})))
        elif t == "thinking":
            content.append(ThinkingBlock(b.get("thinking") or "", b.get("signature")))
        elif t == "redacted_thinking":
            content.append(ThinkingBlock(redacted=True, data=b.get("data")))
    return IrResponse(
        id=body.get("id"),
        model=body.get("model"),
        content=content,
        stop_reason=stop_to_ir(body.get("stop_reason")) or StopReason.END_TURN,
        stop_sequence=body.get("stop_sequence"),
        usage=usage_from_anthropic(body.get("usage")),
    )


def response_block(b: IrBlock) -> dict[str, Any] | None:
    """One IR answer block -> a Messages response content block (None: not an answer block)."""
    if isinstance(b, TextBlock):
        d: dict[str, Any] = {"type": "text", "text": b.text}
        if b.citations is not None:
            d["citations"] = b.citations
        return d
    if isinstance(b, ToolUseBlock):
        inp = b.input
        if inp is None:
            inp = {}
        elif not isinstance(inp, dict):  # the model's own malformed/non-object arguments, kept as text
            inp = {"_raw": inp if isinstance(inp, str) else orjson.dumps(inp).decode()}
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": inp}
    if isinstance(b, ThinkingBlock):
        if b.redacted:
            return {"type": "redacted_thinking", "data": b.data}
        return {"type": "thinking", "thinking": b.text, "signature": b.signature or ""}
    return None


def write_response(resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
    """``IrResponse`` -> Messages body for the client.

    Args:
        resp: the translated response.
        model: the name the client called (echoed as ``model``).
        req: the client's request (unused here; part of the seam).

    Returns:
        The ``type: message`` body; ``id`` is kept when already ``msg_…``, else minted;
        ``stop_sequence`` is set only with ``stop_reason: stop_sequence``.
    """
    content = [d for b in resp.content if (d := response_block(b)) is not None]
    reason = IR_TO_STOP.get(resp.stop_reason, "end_turn") if resp.stop_reason is not None else "end_turn"
    rid = resp.id if resp.id and resp.id.startswith("msg_") else mint_id()
    return {
        "id": rid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": resp.stop_sequence if reason == "stop_sequence" else None,
        "usage": usage_to_anthropic(resp.usage),
    }
