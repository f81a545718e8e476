"""OpenAI Responses response body <-> IR (non-streaming), plus the pieces the stream encoder shares.

Shape (``POST /v1/responses``, captures ``openai-responses/*.response.json``)::

    {"id": "resp_…", "object": "response", "created_at", "status": "completed" | "incomplete" |
     "failed", "error", "incomplete_details": {"reason": "max_output_tokens" | "content_filter"},
     "instructions", "max_output_tokens", "model",
     "output": [
        {"type": "reasoning", "id": "rs_…", "summary": [{"type": "summary_text", "text"}],
         "encrypted_content"?},
        {"type": "message", "id": "msg_…", "status", "role": "assistant",
         "content": [{"type": "output_text", "text", "annotations": []} | {"type": "refusal", "refusal"}]},
        {"type": "function_call", "id": "fc_…", "call_id", "name", "arguments": "<JSON string>", "status"}],
     "parallel_tool_calls", "reasoning", "temperature", "text": {"format"}, "tool_choice", "tools",
     "top_p", "usage": {"input_tokens", "input_tokens_details": {"cached_tokens"}, "output_tokens",
     "output_tokens_details": {"reasoning_tokens"}, "total_tokens"}, "user", "metadata"}

Usage: ``input_tokens`` includes cached tokens (as OpenAI's ``prompt_tokens``), so IR
``input = input_tokens - cached_tokens``; writing folds cache reads and writes back in.

Stop reasons: ``completed`` -> ``end_turn`` (``tool_use`` when a function call is present, a
refusal part -> ``refusal``); ``incomplete`` with ``max_output_tokens`` -> ``max_tokens``,
``content_filter`` -> ``safety``; ``failed`` raises ``ResponsesFailed`` (not an answer). Written
back: ``max_tokens`` -> ``incomplete``/``max_output_tokens``, ``safety`` ->
``incomplete``/``content_filter``, everything else ``completed`` (case C043's Responses column).

Reasoning items: summary text -> ``ThinkingBlock.text``. A provider's ``encrypted_content`` is not
carried (only OpenAI can read it; see ``reasoning_to_block``). Written for a client, a block's
``signature`` (or a redacted block's ``data``) becomes ``encrypted_content`` and comes back as the
signature when the client replays the item, so a signed Anthropic thinking block survives a
Responses client's round trip (case C006); an item with neither summary nor content parts but
``encrypted_content`` is redacted reasoning (docs/hooks.md#what-a-hook-receives).

Source: docs/protocols/responses.md#response-non-stream (native id minted, usage nuance); cases C043, C045.
"""

from __future__ import annotations

import os
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
from busbar.proto.openai.parts import parse_arguments
from busbar.proto.openai.request_writer import dump_arguments
from busbar.proto.openai.response import mint_id
from busbar.proto.responses.errors import ResponsesFailed, error_kind

INCOMPLETE_TO_IR = {
    "max_output_tokens": StopReason.MAX_TOKENS,
    "content_filter": StopReason.SAFETY,
}
"""``incomplete_details.reason`` -> IR; anything else is ``OTHER``."""


def new_id(prefix: str) -> str:
    """A Responses-style id: ``resp_``/``msg_``/``fc_``/``rs_`` + 50 lowercase hex digits (as the API mints)."""
    return prefix + os.urandom(25).hex()


def usage_from_responses(u: dict[str, Any] | None) -> Usage:
    """Responses ``usage`` -> IR ``Usage`` (``input = input_tokens - cached_tokens``)."""
    if not u:
        return Usage()
    itd = u.get("input_tokens_details")
    cached = (itd.get("cached_tokens") or 0) if itd else 0
    otd = u.get("output_tokens_details")
    return Usage(
        input_tokens=max((u.get("input_tokens") or 0) - cached, 0),
        output_tokens=u.get("output_tokens") or 0,
        cache_read_tokens=cached,
        reasoning_tokens=(otd.get("reasoning_tokens") or 0) if otd else 0,
    )


def usage_to_responses(u: Usage) -> dict[str, Any]:
    """IR ``Usage`` -> Responses ``usage`` (cache writes folded into ``input_tokens``)."""
    inp = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": u.cache_read_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": inp + u.output_tokens,
    }


def status_for(reason: StopReason | None) -> tuple[str, dict[str, str] | None]:
    """IR stop reason -> ``(status, incomplete_details)`` of a finished response."""
    if reason is StopReason.MAX_TOKENS:
        return "incomplete", {"reason": "max_output_tokens"}
    if reason is StopReason.SAFETY:
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


OPENAI_TOKEN_PREFIX = "gAAAAA"
"""How OpenAI's own ``encrypted_content`` begins (a Fernet token: version byte 0x80, then a timestamp)."""


def reasoning_to_block(item: dict[str, Any], carry: bool) -> ThinkingBlock | None:
    """A ``reasoning`` item -> ``ThinkingBlock`` (None when nothing can be carried).

    Args:
        item: the reasoning item.
        carry: keep ``encrypted_content`` as the block's signature / redacted data. Only a Responses
            *client's* replay carries it (it is the signature of a foreign thinking block that
            Busbar's encoder handed out); OpenAI's own ciphertext (``gAAAAA…``) is never carried,
            because no other provider can verify it (a foreign writer would turn it into a 400).
    """
    parts = item.get("summary") or item.get("content") or ()
    enc = item.get("encrypted_content") if carry else None
    if not isinstance(enc, str) or not enc or enc.startswith(OPENAI_TOKEN_PREFIX):
        enc = None
    if not parts:
        return ThinkingBlock(redacted=True, data=enc) if enc else None
    text = "\n\n".join(p.get("text") or "" for p in parts if isinstance(p, dict))
    return ThinkingBlock(text, enc)


def read_output(output: Any) -> tuple[list[IrBlock], bool, bool]:
    """``output`` items -> ``(blocks, has_function_call, has_refusal)``; unknown item types skipped."""
    content: list[IrBlock] = []
    calls = refusal = False
    for item in output or ():
        t = item.get("type")
        if t == "message":
            for p in item.get("content") or ():
                pt = p.get("type")
                if pt == "output_text":
                    content.append(TextBlock(p.get("text") or ""))
                elif pt == "refusal":
                    content.append(TextBlock(p.get("refusal") or ""))
                    refusal = True
        elif t == "function_call":
            content.append(
                ToolUseBlock(
                    item.get("call_id") or item.get("id") or mint_id("call_", 24),
                    item.get("name") or "",
                    parse_arguments(item.get("arguments")),
                )
            )
            calls = True
        elif t == "reasoning":
            tb = reasoning_to_block(item, carry=False)
            if tb is not None:
                content.append(tb)
    return content, calls, refusal


def stop_for(body: dict[str, Any], calls: bool, refusal: bool) -> StopReason:
    """The IR stop reason of a finished (completed/incomplete) response body."""
    status = body.get("status")
    if status == "incomplete":
        details = body.get("incomplete_details") or {}
        return INCOMPLETE_TO_IR.get(str(details.get("reason")), StopReason.OTHER)
    if status not in (None, "completed"):
        return StopReason.OTHER
    if calls:
        return StopReason.TOOL_USE
    return StopReason.REFUSAL if refusal else StopReason.END_TURN


def read_response(body: dict[str, Any]) -> IrResponse:
    """Responses body -> ``IrResponse``.

    Raises:
        ResponsesFailed: ``status`` is ``failed`` (the error's kind and message are kept).
    """
    if body.get("status") == "failed":
        kind, msg = error_kind(body.get("error"))
        raise ResponsesFailed(kind, msg)
    content, calls, refusal = read_output(body.get("output"))
    created = body.get("created_at")
    return IrResponse(
        id=body.get("id"),
        model=body.get("model"),
        content=content,
        stop_reason=stop_for(body, calls, refusal),
        usage=usage_from_responses(body.get("usage")),
        created=int(created) if isinstance(created, (int, float)) else None,
    )


# ---------------------------------------------------------------- writing (client side)


def text_part(text: str) -> dict[str, Any]:
    """An ``output_text`` content part (the shape of case C045)."""
    return {"type": "output_text", "text": text, "annotations": []}


def message_item(item_id: str, parts: list[dict[str, Any]], status: str = "completed") -> dict[str, Any]:
    """An assistant ``message`` output item."""
    return {"id": item_id, "type": "message", "status": status, "content": parts, "role": "assistant"}


def call_item(item_id: str, b: ToolUseBlock, arguments: str, status: str = "completed") -> dict[str, Any]:
    """A ``function_call`` output item (``arguments`` is the JSON string)."""
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": b.id,
        "name": b.name,
    }


def reasoning_item(item_id: str, b: ThinkingBlock) -> dict[str, Any]:
    """A ``reasoning`` output item: summary text, and the signature/redacted data as ``encrypted_content``."""
    if b.redacted:
        return {"id": item_id, "type": "reasoning", "summary": [], "encrypted_content": b.data}
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": b.text}],
    }
    if b.signature:
        item["encrypted_content"] = b.signature
    return item


def output_items(blocks: list[IrBlock]) -> list[dict[str, Any]]:
    """IR answer blocks -> ``output`` items; consecutive text blocks share one message item."""
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] | None = None
    for b in blocks:
        if isinstance(b, TextBlock):
            if parts is None:
                parts = []
                out.append(message_item(new_id("msg_"), parts))
            parts.append(text_part(b.text))
            continue
        parts = None
        if isinstance(b, ToolUseBlock):
            args = dump_arguments(b.input if b.input is not None else {})
            out.append(call_item(new_id("fc_"), b, args))
        elif isinstance(b, ThinkingBlock):
            out.append(reasoning_item(new_id("rs_"), b))
    return out


def format_for(response_format: dict[str, Any] | None) -> dict[str, Any]:
    """IR ``response_format`` (Chat Completions shape) -> Responses ``text.format``."""
    if not response_format:
        return {"type": "text"}
    if response_format.get("type") == "json_schema":
        js = response_format.get("json_schema") or {}
        fmt: dict[str, Any] = {"type": "json_schema"}
        for k in ("name", "description", "schema", "strict"):
            if k in js:
                fmt[k] = js[k]
        return fmt
    return {"type": response_format.get("type") or "text"}


def tool_choice_for(req: IrRequest) -> Any:
    """IR tool choice -> Responses ``tool_choice`` (``auto`` when unset)."""
    tc = req.tool_choice
    if tc is None:
        return "auto"
    if tc.mode == "tool":
        return {"type": "function", "name": tc.name}
    return tc.mode


def tools_for(req: IrRequest) -> list[dict[str, Any]]:
    """IR tools -> Responses function tools (flat shape)."""
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.input_schema,
            "strict": False,
        }
        for t in req.tools
    ]


def response_object(
    rid: str,
    created_at: int,
    model: str,
    req: IrRequest,
    status: str,
    output: list[dict[str, Any]],
    usage: Usage | None,
    incomplete: dict[str, str] | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole ``response`` object, echoing the request's settings as the API does.

    Used by ``write_response`` and by every lifecycle event of the stream encoder, so the
    ``response.completed`` payload equals the non-stream body apart from timing (case C045).
    """
    r = req.reasoning
    instructions = "\n\n".join(b.text for b in req.system if isinstance(b, TextBlock)) or None
    return {
        "id": rid,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": instructions,
        "max_output_tokens": req.max_tokens,
        "max_tool_calls": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "previous_response_id": None,
        "reasoning": {"effort": r.effort if r is not None else None, "summary": None},
        "service_tier": "default",
        "store": False,
        "temperature": req.temperature if req.temperature is not None else 1.0,
        "text": {"format": format_for(req.response_format)},
        "tool_choice": tool_choice_for(req),
        "tools": tools_for(req),
        "top_p": req.top_p if req.top_p is not None else 1.0,
        "truncation": "disabled",
        "usage": usage_to_responses(usage) if usage is not None else None,
        "user": req.user,
        "metadata": {},
    }


def write_response(resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
    """``IrResponse`` -> Responses body for the client.

    Args:
        resp: the translated response.
        model: the name the client called (echoed as ``model``).
        req: the client's request (its settings are echoed: instructions, tools, temperature …).

    Returns:
        The ``response`` object; ``id`` is kept when already ``resp_…``, else minted; ``status``
        and ``incomplete_details`` follow ``resp.stop_reason`` (``status_for``).
    """
    status, incomplete = status_for(resp.stop_reason)
    rid = resp.id if resp.id and resp.id.startswith("resp_") else new_id("resp_")
    created = resp.created or int(time.time())
    return response_object(
        rid, created, model, req, status, output_items(resp.content), resp.usage, incomplete
    )
