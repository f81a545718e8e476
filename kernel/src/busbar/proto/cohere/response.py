"""Cohere v2 Chat response body <-> IR (non-streaming), plus the shared maps.

Shape (``POST /v2/chat``, captures ``cohere/*.response.json``)::

    {"id": "<uuid>", "message": {"role": "assistant",
        "content": [{"type": "text", "text"} | {"type": "thinking", "thinking"}],
        "tool_plan"?: "<text>",
        "tool_calls"?: [{"id", "type": "function", "function": {"name", "arguments": "<JSON string>"}}],
        "citations"?: [...]},
     "finish_reason": "COMPLETE" | "STOP_SEQUENCE" | "MAX_TOKENS" | "TOOL_CALL" | "ERROR" | "TIMEOUT",
     "usage": {"billed_units": {"input_tokens", "output_tokens"},
               "tokens": {"input_tokens", "output_tokens"}, "cached_tokens"?}}

Decisions worth knowing:

- ``tool_plan`` (the model's plan before its tool calls) is a ``TextBlock`` ahead of the calls;
  written back, the text of an answer that has tool calls becomes ``tool_plan`` again.
- Usage: ``tokens`` (what the model read and wrote) are the totals, ``billed_units`` (billed
  after discounts) only when ``tokens`` is absent; ``cached_tokens`` counts as cache reads and is
  taken out of the input total. Written back, both ``billed_units`` and ``tokens`` carry the IR
  figures.
- Finish reasons (case C043): ``COMPLETE`` -> ``end_turn``, ``STOP_SEQUENCE`` -> ``stop_sequence``
  (Cohere does not say which one matched: ``stop_sequence`` stays None), ``MAX_TOKENS`` ->
  ``max_tokens``, ``TOOL_CALL`` -> ``tool_use``. ``ERROR…`` and ``TIMEOUT`` are not answers:
  ``read_response`` raises ``CohereAnswerError`` (the proxy fails the attempt over, and the client
  gets its own 502 when nothing else answers). No upper-case Cohere value leaves this module.

Source: docs/protocols/cohere.md#response-non-stream (native id minted, stop reasons normalized); case C043.
"""

from __future__ import annotations

import uuid
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
from busbar.proto.base import ErrorKind
from busbar.proto.cohere.errors import CohereAnswerError
from busbar.proto.openai.parts import parse_arguments
from busbar.proto.openai.request_writer import dump_arguments
from busbar.proto.openai.response import mint_id

FINISH_TO_IR = {
    "COMPLETE": StopReason.END_TURN,
    "STOP_SEQUENCE": StopReason.STOP_SEQUENCE,
    "MAX_TOKENS": StopReason.MAX_TOKENS,
    "TOOL_CALL": StopReason.TOOL_USE,
}
"""Cohere ``finish_reason`` -> IR for answers; ``ERROR…``/``TIMEOUT`` are failures, others ``OTHER``."""

IR_TO_FINISH: dict[StopReason | None, str] = {
    StopReason.END_TURN: "COMPLETE",
    StopReason.STOP_SEQUENCE: "STOP_SEQUENCE",
    StopReason.MAX_TOKENS: "MAX_TOKENS",
    StopReason.TOOL_USE: "TOOL_CALL",
    StopReason.SAFETY: "COMPLETE",
    StopReason.REFUSAL: "COMPLETE",
    StopReason.PAUSE_TURN: "COMPLETE",
    StopReason.ERROR: "ERROR",
    StopReason.OTHER: "COMPLETE",
}
"""IR stop reason -> a valid Cohere ``finish_reason`` (every member mapped)."""


def new_id() -> str:
    """A Cohere-style response id (a UUID4 string)."""
    return str(uuid.uuid4())


def failure(finish: Any, message: Any = None) -> tuple[str, str] | None:
    """``(kind, message)`` when ``finish`` reports a failure (``ERROR…``, ``TIMEOUT``), else None."""
    if not isinstance(finish, str):
        return None
    if finish == "TIMEOUT":
        kind = ErrorKind.TIMEOUT
    elif finish.startswith("ERROR"):
        kind = ErrorKind.API_ERROR
    else:
        return None
    text = message if isinstance(message, str) and message else f"upstream finished with {finish}"
    return kind, text


def finish_to_ir(finish: Any, has_calls: bool) -> StopReason:
    """Map an answer's ``finish_reason`` to IR (``COMPLETE`` with tool calls means ``tool_use``)."""
    reason = FINISH_TO_IR.get(finish, StopReason.OTHER) if finish is not None else StopReason.END_TURN
    if reason is StopReason.END_TURN and has_calls:
        return StopReason.TOOL_USE
    return reason


def usage_from_cohere(u: dict[str, Any] | None) -> Usage:
    """Cohere ``usage`` -> IR ``Usage``.

    ``tokens`` (what the model read and wrote) are the totals; ``billed_units`` (what is billed
    after discounts, often far less) only stand in when ``tokens`` is absent. ``cached_tokens``
    is the cache-read part of the input: IR ``input_tokens = tokens.input_tokens - cached_tokens``,
    so the prompt total every client sees is ``tokens.input_tokens``. Counts that are not
    integers raise ``TypeError``/``ValueError``.
    """
    if not u:
        return Usage()
    src = u.get("tokens") or u.get("billed_units") or {}
    total = int(src.get("input_tokens") or 0)
    cached = int(u.get("cached_tokens") or 0)
    return Usage(
        input_tokens=max(total - cached, 0),
        output_tokens=int(src.get("output_tokens") or 0),
        cache_read_tokens=cached,
    )


def usage_to_cohere(u: Usage) -> dict[str, Any]:
    """IR ``Usage`` -> Cohere ``usage`` (cache reads and writes folded into ``input_tokens``)."""
    counts = {"input_tokens": u.prompt_total, "output_tokens": u.output_tokens}
    out: dict[str, Any] = {"billed_units": counts, "tokens": dict(counts)}
    if u.cache_read_tokens:
        out["cached_tokens"] = u.cache_read_tokens
    return out


def read_message(msg: dict[str, Any]) -> list[IrBlock]:
    """An assistant ``message`` (response or request history) -> IR blocks.

    Order: thinking and text content, then ``tool_plan`` as text, then the tool calls.
    """
    blocks: list[IrBlock] = []
    content = msg.get("content")
    if isinstance(content, str):
        if content:
            blocks.append(TextBlock(content))
    else:
        for p in content or ():
            t = p.get("type")
            if t == "text":
                blocks.append(TextBlock(p.get("text") or ""))
            elif t == "thinking":
                blocks.append(ThinkingBlock(p.get("thinking") or ""))
    plan = msg.get("tool_plan")
    if isinstance(plan, str) and plan:
        blocks.append(TextBlock(plan))
    for tc in msg.get("tool_calls") or ():
        fn = tc.get("function") or {}
        blocks.append(
            ToolUseBlock(
                tc.get("id") or mint_id("call_", 24),
                fn.get("name") or "",
                parse_arguments(fn.get("arguments")),
            )
        )
    return blocks


def read_response(body: dict[str, Any]) -> IrResponse:
    """Cohere v2 chat body -> ``IrResponse``.

    Raises:
        CohereAnswerError: ``finish_reason`` is ``ERROR…`` or ``TIMEOUT`` (not an answer, case C043).
    """
    finish = body.get("finish_reason")
    failed = failure(finish)
    if failed is not None:
        raise CohereAnswerError(failed[0], failed[1])
    content = read_message(body.get("message") or {})
    has_calls = any(isinstance(b, ToolUseBlock) for b in content)
    return IrResponse(
        id=body.get("id"),
        content=content,
        stop_reason=finish_to_ir(finish, has_calls),
        usage=usage_from_cohere(body.get("usage")),
    )


def write_message(blocks: list[IrBlock]) -> dict[str, Any]:
    """IR answer blocks -> a Cohere assistant ``message`` (``role``, ``content``?, ``tool_plan``?, ``tool_calls``?).

    With tool calls the text goes to ``tool_plan`` (as Cohere sends it); thinking stays in
    ``content``. Empty ``content``/``tool_calls`` are left out.
    """
    texts: list[str] = []
    content: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, TextBlock):
            texts.append(b.text)
        elif isinstance(b, ThinkingBlock):
            if not b.redacted:
                content.append({"type": "thinking", "thinking": b.text})
        elif isinstance(b, ToolUseBlock):
            args = dump_arguments(b.input if b.input is not None else {})
            calls.append({"id": b.id, "type": "function", "function": {"name": b.name, "arguments": args}})
    msg: dict[str, Any] = {"role": "assistant"}
    if calls:
        if texts:
            msg["tool_plan"] = "".join(texts)
    elif texts:
        content.append({"type": "text", "text": "".join(texts)})
    if content:
        msg["content"] = content
    if calls:
        msg["tool_calls"] = calls
    return msg


def write_response(resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
    """``IrResponse`` -> Cohere v2 chat body for the client.

    Args:
        resp: the translated response.
        model: the name the client called (Cohere bodies do not echo it).
        req: the client's request (unused here; part of the seam).

    Returns:
        ``{"id", "message", "finish_reason", "usage"}`` in the capture's key order; ``id`` is a
        fresh UUID unless the source already is one.
    """
    rid = resp.id if resp.id and _is_uuid(resp.id) else new_id()
    return {
        "id": rid,
        "message": write_message(resp.content),
        "finish_reason": IR_TO_FINISH.get(resp.stop_reason, "COMPLETE"),
        "usage": usage_to_cohere(resp.usage),
    }


def _is_uuid(s: str) -> bool:
    try:
        uuid.UUID(s)
    except ValueError:
        return False
    return len(s) == 36
