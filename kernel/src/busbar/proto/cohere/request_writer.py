"""IR -> Cohere v2 Chat request body (``write_request``), Busbar as the client.

Output shape: see ``busbar.proto.cohere.request`` (the same ``POST /v2/chat`` body).

Rules (each a case or a seed line):

- Never an empty optional collection (case C011): no ``tools: []``, no ``tool_choice`` without
  tools, no empty ``stop_sequences``, no assistant ``content: []`` or ``tool_calls: []``.
- ``max_tokens`` is never invented (case C017); ``stream`` is always written (``true``/``false``,
  as cohere-python sends it).
- Tool results become ``role: tool`` messages (``content`` the text joined with a newline) placed
  before the rest of their user turn; result images and ``is_error`` are dropped and named.
- An assistant turn with tool calls carries its text as ``tool_plan`` (Cohere's own shape),
  thinking as ``{"type": "thinking"}`` content parts; signatures and redacted thinking have no
  Cohere field (dropped and named).
- Tool choice: ``required`` -> ``REQUIRED``, ``none`` -> ``NONE``, a named tool -> ``REQUIRED``
  with only that tool in ``tools`` (Cohere cannot name one); ``auto`` is the default (omitted).
- Reasoning (docs/config-at-a-glance.md#models): a budget is copied as
  ``thinking: {type: enabled, token_budget}`` (Gemini's dynamic ``-1`` -> enabled without a
  budget, ``0`` -> disabled); an effort word converts through the default table (minimal 1024,
  low 4096, medium 8192, high 16384; ``none`` -> disabled).
- ``response_format`` (Chat Completions shape) -> ``{"type": "json_object", "json_schema"?}``.
- No Cohere field: ``user``, ``parallel_tool_calls: false``, cache markers — dropped and named.
- Images: base64 as a ``data:`` URI or the URL; documents: ``text/*`` inline as text, anything
  else is refused with a 400 naming the part (Cohere v2 chat takes no files).

Source: docs/config-at-a-glance.md#models; cases C011, C014, C017.
"""

from __future__ import annotations

import base64
from typing import Any

from busbar.ir.model import (
    DocumentBlock,
    IrMessage,
    IrRequest,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from busbar.proto.errors import BadRequest
from busbar.proto.openai.request_writer import EFFORT_BUDGETS, dump_arguments, image_part
from busbar.proto.writer import drop, put_present, tool_result_text, user_turn

_SHIM = "__busbar_"


def write_request(req: IrRequest, upstream_model: str) -> dict[str, Any]:
    """``IrRequest`` -> Cohere v2 chat body with ``model`` = ``upstream_model``.

    Args:
        req: the request; ``req.dropped`` gains the names of fields that could not be carried.
        upstream_model: the lane's wire model name.

    Returns:
        The JSON-ready body (shares leaf values with ``req``; do not mutate it in place).

    Raises:
        BadRequest: a part Cohere v2 chat cannot take (a non-text document, audio).
    """
    dropped = req.dropped
    msgs: list[dict[str, Any]] = []
    if req.system:
        texts = []
        for b in req.system:
            if isinstance(b, TextBlock):
                texts.append(b.text)
                if b.cache_control is not None:
                    drop(dropped, "cache_control")
            else:
                drop(dropped, "system." + b.type)
        if texts:
            msgs.append({"role": "system", "content": "\n\n".join(texts)})
    for m in req.messages:
        if m.role == "assistant":
            msg = _assistant(m, dropped)
            if msg is not None:
                msgs.append(msg)
        else:
            _user(m, msgs, dropped)
    body: dict[str, Any] = {"model": upstream_model, "messages": msgs}
    if req.tools:
        _tools(req, body, dropped)
    put_present(body, (("max_tokens", req.max_tokens), ("temperature", req.temperature), ("p", req.top_p),
                       ("k", req.top_k), ("stop_sequences", req.stop or None), ("seed", req.seed),
                       ("frequency_penalty", req.frequency_penalty), ("presence_penalty", req.presence_penalty)))
    thinking = _thinking(req)
    if thinking is not None:
        body["thinking"] = thinking
    rf = _format(req.response_format)
    if rf is not None:
        body["response_format"] = rf
    if req.user is not None:
        drop(dropped, "user")
    body["stream"] = bool(req.stream)
    for k, v in req.extra.items():
        if k not in body and not k.startswith(_SHIM):
            body[k] = v
    return body


def _tools(req: IrRequest, body: dict[str, Any], dropped: list[str]) -> None:
    """The tool fields of a request with tools (definitions, choice, parallel calls)."""
    tc = req.tool_choice
    only = tc.name if tc is not None and tc.mode == "tool" else None
    tools = []
    for t in req.tools:
        if only is not None and t.name != only:
            continue
        fn: dict[str, Any] = {"name": t.name}
        if t.description is not None:
            fn["description"] = t.description
        fn["parameters"] = t.input_schema
        tools.append({"type": "function", "function": fn})
        if t.cache_control is not None:
            drop(dropped, "cache_control")
    if tools:
        body["tools"] = tools
        if tc is not None and tc.mode != "auto":
            body["tool_choice"] = "NONE" if tc.mode == "none" else "REQUIRED"
    if req.parallel_tool_calls is False:
        drop(dropped, "parallel_tool_calls")


def _thinking(req: IrRequest) -> dict[str, Any] | None:
    r = req.reasoning
    if r is None:
        return None
    budget = r.budget_tokens
    if budget is None:
        if r.effort is None:
            return None
        if r.effort == "none":
            return {"type": "disabled"}
        budget = EFFORT_BUDGETS.get(r.effort, EFFORT_BUDGETS["high"])
    if budget < 0:
        return {"type": "enabled"}
    if budget == 0:
        return {"type": "disabled"}
    return {"type": "enabled", "token_budget": budget}


def _format(rf: dict[str, Any] | None) -> dict[str, Any] | None:
    if not rf:
        return None
    t = rf.get("type")
    if t == "json_schema":
        schema = (rf.get("json_schema") or {}).get("schema")
        return {"type": "json_object", "json_schema": schema} if schema else {"type": "json_object"}
    if t == "json_object":
        return {"type": "json_object"}
    return None


def _assistant(m: IrMessage, dropped: list[str]) -> dict[str, Any] | None:
    texts: list[str] = []
    content: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextBlock):
            if b.text:
                texts.append(b.text)
        elif isinstance(b, ToolUseBlock):
            args = dump_arguments(b.input if b.input is not None else {})
            calls.append({"id": b.id, "type": "function", "function": {"name": b.name, "arguments": args}})
        elif isinstance(b, ThinkingBlock):
            if b.redacted:
                drop(dropped, "thinking (redacted)")
                continue
            content.append({"type": "thinking", "thinking": b.text})
        else:
            drop(dropped, "assistant." + b.type)
            continue
        if b.cache_control is not None:
            drop(dropped, "cache_control")
    msg: dict[str, Any] = {"role": "assistant"}
    if calls:
        if texts:
            msg["tool_plan"] = "\n".join(texts)
    elif texts:
        if not content:
            msg["content"] = texts[0] if len(texts) == 1 else "\n".join(texts)
            return msg
        content.extend({"type": "text", "text": t} for t in texts)
    if content:
        msg["content"] = content
    if calls:
        msg["tool_calls"] = calls
    return msg if len(msg) > 1 else None


def _user(m: IrMessage, msgs: list[dict[str, Any]], dropped: list[str]) -> None:
    user_turn(m, msgs, dropped, text_type="text", image=image_part,
              document=lambda b: {"type": "text", "text": _document_text(b)},
              result=lambda b: {"role": "tool", "tool_call_id": b.tool_use_id,
                                "content": tool_result_text(b, dropped)})


def _document_text(b: DocumentBlock) -> str:
    if b.data is not None and b.media_type.startswith("text/"):
        return base64.b64decode(b.data).decode("utf-8", "replace")
    raise BadRequest(
        f"{b.media_type} part cannot be sent to a Cohere upstream (v2 chat takes text and images only)"
    )
