"""Bedrock Converse response body <-> IR (non-streaming), plus the stop-reason and usage maps.

Shape: ``{"output": {"message": {"role": "assistant", "content": [blocks]}}, "stopReason",
"usage": {"inputTokens", "outputTokens", "totalTokens", "cacheReadInputTokens"?,
"cacheWriteInputTokens"?}, "metrics": {"latencyMs"}}``. Content blocks: ``text``, ``toolUse``
``{toolUseId, name, input}``, ``reasoningContent`` ``{reasoningText: {text, signature}}`` or
``{redactedContent}``. Usage is Anthropic-style already (``inputTokens`` excludes cache reads and
writes; ``totalTokens`` is the sum of all four), so it maps one to one.

Stop reasons (case C047), all nine of botocore's ``StopReason`` enum: ``end_turn``,
``tool_use``, ``max_tokens``, ``stop_sequence`` map to their IR twins; ``guardrail_intervened``
and ``content_filtered`` -> ``SAFETY`` (the canned text stays content); ``model_context_window_
exceeded`` -> ``MAX_TOKENS`` (the IR has no member of its own: an Anthropic client sees
``max_tokens``); ``malformed_model_output`` and ``malformed_tool_use`` -> ``ERROR`` (not an
answer: the proxy fails the attempt, the stream decoder emits a ``StreamError``); an unknown
future value -> ``OTHER`` (every writer maps it to its plain stop).

Source: docs/protocols/bedrock.md#response-non-stream; cases C013, C047.
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
from busbar.proto.bedrock.names import client_name
from busbar.proto.usage import read_counts

STOP_TO_IR: dict[Any, StopReason] = {
    "end_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "guardrail_intervened": StopReason.SAFETY,
    "content_filtered": StopReason.SAFETY,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "malformed_model_output": StopReason.ERROR,
    "malformed_tool_use": StopReason.ERROR,
}
"""Bedrock ``stopReason`` -> IR; anything else is ``OTHER``."""

IR_TO_STOP: dict[StopReason | None, str] = {
    StopReason.END_TURN: "end_turn",
    StopReason.STOP_SEQUENCE: "stop_sequence",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.TOOL_USE: "tool_use",
    StopReason.SAFETY: "content_filtered",
    StopReason.REFUSAL: "content_filtered",
    StopReason.PAUSE_TURN: "end_turn",
    StopReason.ERROR: "end_turn",
    StopReason.OTHER: "end_turn",
}
"""IR stop reason -> a valid Bedrock ``stopReason`` (every member mapped)."""

FAILURE_STOPS = frozenset({"malformed_model_output", "malformed_tool_use"})
"""Stop reasons that are failures, not answers (case C047)."""


def stop_to_ir(stop: Any) -> StopReason:
    """Bedrock ``stopReason`` -> IR (unknown -> ``OTHER``)."""
    return STOP_TO_IR.get(stop, StopReason.OTHER)


def usage_from_bedrock(u: dict[str, Any] | None) -> Usage:
    """Bedrock ``usage`` -> IR ``Usage`` (absent counters read as 0)."""
    return read_counts(u, "inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens")


def usage_to_bedrock(u: Usage) -> dict[str, Any]:
    """IR ``Usage`` -> Bedrock ``usage``; the cache counters only when non-zero, as Bedrock sends them."""
    out: dict[str, Any] = {
        "inputTokens": u.input_tokens,
        "outputTokens": u.output_tokens,
        "totalTokens": u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens,
    }
    if u.cache_read_tokens:
        out["cacheReadInputTokens"] = u.cache_read_tokens
    if u.cache_write_tokens:
        out["cacheWriteInputTokens"] = u.cache_write_tokens
    return out


def read_blocks(content: Any) -> list[IrBlock]:
    """Answer content blocks -> IR (text, toolUse, reasoningContent); others are skipped."""
    out: list[IrBlock] = []
    for b in content or ():
        if not isinstance(b, dict):
            continue
        if "text" in b:
            out.append(TextBlock(b.get("text") or ""))
        elif "toolUse" in b:
            tu = b["toolUse"] or {}
            out.append(
                ToolUseBlock(
                    tu.get("toolUseId") or "", client_name(tu.get("name") or ""), tu.get("input", {})
                )
            )
        elif "reasoningContent" in b:
            rc = b["reasoningContent"] or {}
            rt = rc.get("reasoningText")
            if isinstance(rt, dict):
                out.append(ThinkingBlock(rt.get("text") or "", rt.get("signature")))
            elif rc.get("redactedContent") is not None:
                out.append(ThinkingBlock(redacted=True, data=rc["redactedContent"]))
    return out


def read_response(body: dict[str, Any]) -> IrResponse:
    """Converse response body -> ``IrResponse`` (Bedrock answers carry no id or model)."""
    msg = (body.get("output") or {}).get("message") or {}
    return IrResponse(
        id=None,
        model=None,
        content=read_blocks(msg.get("content")),
        stop_reason=stop_to_ir(body.get("stopReason")),
        usage=usage_from_bedrock(body.get("usage")),
    )


def response_block(b: IrBlock) -> dict[str, Any] | None:
    """One IR answer block -> a Converse output content block (None: not an answer block)."""
    if isinstance(b, TextBlock):
        return {"text": b.text}
    if isinstance(b, ToolUseBlock):
        inp = b.input
        if inp is None:
            inp = {}
        elif not isinstance(inp, dict):
            inp = {"_raw": inp if isinstance(inp, str) else orjson.dumps(inp).decode()}
        return {"toolUse": {"toolUseId": b.id, "name": b.name, "input": inp}}
    if isinstance(b, ThinkingBlock):
        if b.redacted:
            return {"reasoningContent": {"redactedContent": b.data or ""}}
        rt: dict[str, Any] = {"text": b.text}
        if b.signature is not None:
            rt["signature"] = b.signature
        return {"reasoningContent": {"reasoningText": rt}}
    return None


def write_response(resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
    """``IrResponse`` -> Converse body for a Bedrock client.

    Args:
        resp: the translated response.
        model: the model id the client called (Converse bodies do not echo it).
        req: the client's request (unused here; part of the seam).

    Returns:
        ``{"output": {"message": {...}}, "stopReason", "usage", "metrics": {"latencyMs": 0}}``.
    """
    content = [d for b in resp.content if (d := response_block(b)) is not None]
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": IR_TO_STOP.get(resp.stop_reason, "end_turn"),
        "usage": usage_to_bedrock(resp.usage),
        "metrics": {"latencyMs": 0},
    }
