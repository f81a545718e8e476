"""OpenAI Chat Completions response body <-> IR (non-streaming), plus the shared maps.

Shapes: ``{"id", "object": "chat.completion", "created", "model", "choices": [{"index",
"message": {"role", "content", "tool_calls"?}, "finish_reason"}], "usage": {"prompt_tokens",
"completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}}``.

Usage accounting (IR docstring): IR ``input_tokens`` excludes cache reads and writes, so
``prompt_tokens = input + cache_read + cache_write`` and ``cached_tokens = cache_read``; reading
goes the other way (``input = prompt_tokens - cached_tokens``).

Source: docs/protocols/README.md (native id minted, model/created preserved, usage nuance).
cases C010 (vLLM ``stop_reason``), C013 (tool calls in a non-stream response).
"""

from __future__ import annotations

import time
from typing import Any

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
from busbar.proto.openai.parts import parse_arguments
from busbar.proto.openai.request_writer import dump_arguments

FINISH_TO_IR = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "content_filter": StopReason.SAFETY,
}
"""OpenAI ``finish_reason`` -> IR; anything else is ``OTHER``."""

IR_TO_FINISH: dict[StopReason | None, str] = {
    StopReason.END_TURN: "stop",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.TOOL_USE: "tool_calls",
    StopReason.SAFETY: "content_filter",
    StopReason.REFUSAL: "content_filter",
    StopReason.PAUSE_TURN: "stop",
    StopReason.ERROR: "stop",
    StopReason.OTHER: "stop",
}
"""IR stop reason -> a valid OpenAI ``finish_reason`` (every member mapped)."""


def mint_id(prefix: str = "chatcmpl-", length: int = 29) -> str:
    """A fresh native id: ``prefix`` + ``length`` random base62 characters."""
    return prefix + random_chars(B62, length, 24)


def finish_to_ir(
    finish: str | None, stop_reason: object, has_tool_calls: bool
) -> tuple[StopReason, str | None]:
    """Map ``finish_reason`` (+ vLLM's ``choice.stop_reason``) to ``(StopReason, stop_sequence)``.

    ``stop`` with a string ``stop_reason`` is a matched stop sequence (case C010); ``stop`` with
    tool calls present is reported by some servers and means ``tool_use``.
    """
    if finish is None:
        return (StopReason.TOOL_USE if has_tool_calls else StopReason.END_TURN), None
    reason = FINISH_TO_IR.get(finish, StopReason.OTHER)
    if reason is StopReason.END_TURN:
        if isinstance(stop_reason, str):
            return StopReason.STOP_SEQUENCE, stop_reason
        if has_tool_calls:
            return StopReason.TOOL_USE, None
    return reason, None


def usage_from_openai(u: dict[str, Any] | None) -> Usage:
    """OpenAI ``usage`` -> IR ``Usage`` (``input = prompt_tokens - cached_tokens``)."""
    if not u:
        return Usage()
    prompt = u.get("prompt_tokens") or 0
    ptd = u.get("prompt_tokens_details")
    cached = (ptd.get("cached_tokens") or 0) if ptd else 0
    ctd = u.get("completion_tokens_details")
    reasoning = (ctd.get("reasoning_tokens") or 0) if ctd else 0
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=u.get("completion_tokens") or 0,
        cache_read_tokens=cached,
        reasoning_tokens=reasoning,
    )


def usage_to_openai(u: Usage) -> dict[str, Any]:
    """IR ``Usage`` -> OpenAI ``usage`` (cache writes folded into ``prompt_tokens``)."""
    prompt = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
    out = {
        "prompt_tokens": prompt,
        "completion_tokens": u.output_tokens,
        "total_tokens": prompt + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
    }
    if u.reasoning_tokens:
        out["completion_tokens_details"] = {"reasoning_tokens": u.reasoning_tokens}
    return out


def read_response(body: dict[str, Any]) -> IrResponse:
    """Chat Completions response body -> ``IrResponse`` (first choice only).

    ``message.reasoning_content`` (vLLM/DeepSeek extension) becomes a ``ThinkingBlock``;
    ``message.refusal`` becomes text with stop reason ``REFUSAL``.
    """
    choices = body.get("choices")
    ch = choices[0] if choices else {}
    msg = ch.get("message") or {}
    content: list[IrBlock] = []
    rc = msg.get("reasoning_content")
    if isinstance(rc, str) and rc:
        content.append(ThinkingBlock(text=rc))
    c = msg.get("content")
    if isinstance(c, str):
        if c:
            content.append(TextBlock(c))
    elif isinstance(c, list):
        content.extend(TextBlock(p.get("text") or "") for p in c if p.get("type") == "text")
    refusal = msg.get("refusal")
    if isinstance(refusal, str) and refusal:
        content.append(TextBlock(refusal))
    tcs = msg.get("tool_calls") or ()
    for tc in tcs:
        fn = tc.get("function") or {}
        content.append(
            ToolUseBlock(
                tc.get("id") or mint_id("call_", 24),
                fn.get("name") or "",
                parse_arguments(fn.get("arguments")),
            )
        )
    reason, seq = finish_to_ir(ch.get("finish_reason"), ch.get("stop_reason"), bool(tcs))
    if isinstance(refusal, str) and refusal:
        reason = StopReason.REFUSAL
    return IrResponse(
        id=body.get("id"),
        model=body.get("model"),
        content=content,
        stop_reason=reason,
        stop_sequence=seq,
        usage=usage_from_openai(body.get("usage")),
        created=body.get("created"),
    )


def write_response(resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
    """``IrResponse`` -> Chat Completions body for the client.

    Args:
        resp: the translated response.
        model: the name the client called (echoed as ``model``).
        req: the client's request (unused here; part of the seam).

    Returns:
        ``{"id": "chatcmpl-…", "object": "chat.completion", "created", "model", "choices": [...],
        "usage": {...}}``; ``message.content`` is the joined text, or ``null`` when the answer
        is only tool calls; thinking is not carried (Chat Completions has no field for it).
    """
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for b in resp.content:
        if isinstance(b, TextBlock):
            texts.append(b.text)
        elif isinstance(b, ToolUseBlock):
            calls.append(
                {
                    "id": b.id,
                    "type": "function",
                    "function": {"name": b.name, "arguments": dump_arguments(b.input)},
                }
            )
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else (None if calls else ""),
    }
    if calls:
        msg["tool_calls"] = calls
    rid = resp.id if resp.id and resp.id.startswith("chatcmpl-") else mint_id()
    return {
        "id": rid,
        "object": "chat.completion",
        "created": resp.created or int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": msg,
                "logprobs": None,
                "finish_reason": IR_TO_FINISH.get(resp.stop_reason, "stop"),
            }
        ],
        "usage": usage_to_openai(resp.usage),
    }
