"""IR -> Anthropic Messages request body (``write_request``), Busbar as the client.

Rules (each a case or a seed line):

- ``max_tokens`` is required by the API; the proxy sets ``req.max_tokens`` from the lane's
  ``default_max_tokens`` before calling (case C017); if it is still unset, 4096
  (``limits.default_max_tokens``) is written.
- Never an empty optional collection (case C011): no ``tools: []``, no ``tool_choice`` without
  tools, no empty ``stop_sequences``; ``disable_parallel_tool_use`` carries
  ``parallel_tool_calls: false`` (inverted).
- Reasoning (the proxy gates it per lane; this module translates what it is given): a budget is
  copied (Gemini's dynamic ``-1`` -> medium, ``0`` -> no thinking), an effort word converts via
  the default table (minimal 1024, low 4096, medium 8192, high 16384; ``none`` -> no thinking;
  an unknown word -> high). The budget is raised to the API minimum 1024 and clamped to leave
  >= 1024 answer tokens under ``max_tokens``; if nothing fits, or the tool choice forces a tool
  (the API refuses thinking then), the ask is dropped. With thinking, ``temperature`` and
  ``top_k`` are omitted and ``top_p`` below 0.95 is omitted. All drops are named in ``dropped``.
- Thinking blocks keep their signature byte for byte, even with empty text (case C006);
  redacted ones go back as ``redacted_thinking``; unsigned thinking (from another protocol)
  cannot be replayed and is dropped. Empty text blocks (rejected by the API) are skipped.
- Images: base64 -> ``source.type: base64``, URL -> ``source.type: url`` (case C015). Documents:
  PDF base64/URL, ``text/*`` as a text source; audio and other media types are refused with a
  400 naming the part (case C040).
- Non-object tool inputs: ``null`` -> ``{}``; anything else (including unparsable OpenAI
  arguments) is a 400 naming the tool call (case C039).

docs/config-at-a-glance.md#models, ``default_max_tokens``; cases C006, C011, C015, C017.
"""

from __future__ import annotations

import base64
from typing import Any

from busbar.ir.model import (
    DocumentBlock,
    ImageBlock,
    IrBlock,
    IrRequest,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from busbar.proto.errors import BadRequest
from busbar.proto.writer import drop, put_present

DEFAULT_MAX_TOKENS = 4096
"""``limits.default_max_tokens``: written only when the caller left ``max_tokens`` unset."""

EFFORT_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 8192, "high": 16384}
"""The default effort table (docs/configuration.md ``limits.reasoning_effort_budgets``)."""

MIN_THINKING_BUDGET = 1024
"""The API minimum ``budget_tokens``; also the answer tokens always left under ``max_tokens``."""

_CHOICE = {"auto": "auto", "required": "any", "tool": "tool", "none": "none"}


def sampling_with_thinking(req: IrRequest, budget: int | None, dropped: list[str]) -> tuple[Any, Any]:
    """``(temperature, top_p)`` to send: with thinking on (``budget`` not None) Claude refuses a
    temperature and a ``top_p`` below 0.95, so those are None and recorded in ``dropped``."""
    if budget is None:
        return req.temperature, req.top_p
    if req.temperature is not None:
        drop(dropped, "temperature")
    top_p = req.top_p
    if top_p is not None and top_p < 0.95:
        drop(dropped, "top_p")
        top_p = None
    return None, top_p


def thinking_budget(req: IrRequest, max_tokens: int) -> int | None:
    """The ``budget_tokens`` to send for ``req.reasoning`` under ``max_tokens``, or None (no thinking)."""
    r = req.reasoning
    if r is None:
        return None
    budget = r.budget_tokens
    if budget is None:
        if r.effort is None or r.effort == "none":
            return None
        budget = EFFORT_BUDGETS.get(r.effort, EFFORT_BUDGETS["high"])
    elif budget < 0:
        budget = EFFORT_BUDGETS["medium"]
    elif budget == 0:
        return None
    budget = min(max(budget, MIN_THINKING_BUDGET), max_tokens - MIN_THINKING_BUDGET)
    return budget if budget >= MIN_THINKING_BUDGET else None


def write_request(req: IrRequest, upstream_model: str) -> dict[str, Any]:
    """``IrRequest`` -> Messages body with ``model`` = ``upstream_model``.

    Args:
        req: the request; ``req.dropped`` gains the names of fields that could not be carried.
        upstream_model: the lane's wire model name.

    Returns:
        The JSON-ready body (shares leaf values with ``req``; do not mutate it in place).

    Raises:
        BadRequest: a part the Messages API cannot take (audio, an unsupported document type,
            a tool call whose arguments are not a JSON object).
    """
    dropped = req.dropped
    max_tokens = req.max_tokens if req.max_tokens is not None else DEFAULT_MAX_TOKENS
    msgs = []
    for m in req.messages:
        content = _blocks(m.content, dropped)
        if content:
            msgs.append({"role": m.role, "content": content})
    body: dict[str, Any] = {"model": upstream_model, "max_tokens": max_tokens, "messages": msgs}
    if req.system:
        system = _blocks(req.system, dropped)
        if system:
            body["system"] = system
    tc = req.tool_choice
    if req.tools:
        _tools(req, body, dropped)
    budget = thinking_budget(req, max_tokens)
    if budget is not None and tc is not None and req.tools and tc.mode in ("required", "tool"):
        budget = None
    if req.reasoning is not None and budget is None:
        drop(dropped, "reasoning")
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    put_present(body, tuple(zip(("temperature", "top_p"), sampling_with_thinking(req, budget, dropped))))
    if req.top_k is not None:
        if budget is None:
            body["top_k"] = req.top_k
        else:
            drop(dropped, "top_k")
    if req.stop:
        body["stop_sequences"] = req.stop
    extra = req.extra
    if req.user is not None:
        md = extra.get("metadata")
        body["metadata"] = {**md, "user_id": req.user} if isinstance(md, dict) else {"user_id": req.user}
    if req.stream:
        body["stream"] = True
    for name in ("frequency_penalty", "presence_penalty", "seed", "response_format"):
        if getattr(req, name) is not None:
            drop(dropped, name)
    for k, v in extra.items():
        if k not in body:
            body[k] = v
    return body


def _tools(req: IrRequest, body: dict[str, Any], dropped: list[str]) -> None:
    """The tool fields of a request with tools (definitions, choice, parallel calls)."""
    tools = []
    for t in req.tools:
        tool: dict[str, Any] = {"name": t.name}
        if t.description is not None:
            tool["description"] = t.description
        tool["input_schema"] = t.input_schema
        if t.cache_control is not None:
            tool["cache_control"] = t.cache_control
        tools.append(tool)
    body["tools"] = tools
    tc = req.tool_choice
    choice: dict[str, Any] | None = {"type": _CHOICE[tc.mode]} if tc is not None else None
    if choice is not None and tc is not None and tc.mode == "tool":
        choice["name"] = tc.name
    if req.parallel_tool_calls is False and (choice is None or choice["type"] != "none"):
        choice = choice or {"type": "auto"}
        choice["disable_parallel_tool_use"] = True
    if choice is not None:
        body["tool_choice"] = choice


def _blocks(blocks: list[IrBlock], dropped: list[str]) -> list[dict[str, Any]] | str:
    if len(blocks) == 1:
        b = blocks[0]
        if isinstance(b, TextBlock) and b.cache_control is None and b.citations is None and b.text:
            return b.text
    out = []
    for b in blocks:
        w = write_block(b, dropped)
        if w is not None:
            out.append(w)
    return out


def write_block(b: IrBlock, dropped: list[str]) -> dict[str, Any] | None:
    """One IR block -> a Messages request block, or None when it is not sendable (and dropped).

    Raises:
        BadRequest: see ``write_request``.
    """
    if isinstance(b, TextBlock):
        if not b.text and b.cache_control is None:
            return None
        d: dict[str, Any] = {"type": "text", "text": b.text}
        if b.citations is not None:
            d["citations"] = b.citations
    elif isinstance(b, ToolUseBlock):
        inp = b.input
        if not isinstance(inp, dict):
            if inp is not None:
                raise BadRequest(
                    f"tool call {b.id!r} ({b.name}): arguments must be a JSON object for "
                    "an Anthropic upstream"
                )
            inp = {}
        d = {"type": "tool_use", "id": b.id, "name": b.name, "input": inp}
    elif isinstance(b, ToolResultBlock):
        d = {"type": "tool_result", "tool_use_id": b.tool_use_id}
        if b.content:
            c = b.content
            if len(c) == 1 and isinstance(c[0], TextBlock) and c[0].cache_control is None:
                d["content"] = c[0].text
            else:
                d["content"] = [w for x in c if (w := write_block(x, dropped)) is not None]
        if b.is_error:
            d["is_error"] = True
    elif isinstance(b, ThinkingBlock):
        if b.redacted:
            d = {"type": "redacted_thinking", "data": b.data}
        elif b.signature is not None:
            d = {"type": "thinking", "thinking": b.text, "signature": b.signature}
        else:
            drop(dropped, "thinking (unsigned)")
            return None
    elif isinstance(b, ImageBlock):
        src = (
            {"type": "base64", "media_type": b.media_type, "data": b.data}
            if b.source == "base64"
            else {"type": "url", "url": b.url}
        )
        d = {"type": "image", "source": src}
    elif isinstance(b, DocumentBlock):
        d = {"type": "document", "source": _document_source(b)}
    else:
        drop(dropped, getattr(b, "type", "block"))
        return None
    if b.cache_control is not None:
        d["cache_control"] = b.cache_control
    return d


def _document_source(b: DocumentBlock) -> dict[str, Any]:
    mt = b.media_type
    if b.data is None:
        if mt == "application/pdf" and b.url:
            return {"type": "url", "url": b.url}
        raise BadRequest(f"document part ({mt}) given by URL cannot be sent to an Anthropic upstream")
    if mt == "application/pdf":
        return {"type": "base64", "media_type": mt, "data": b.data}
    if mt.startswith("text/"):
        text = base64.b64decode(b.data).decode("utf-8", "replace")
        return {"type": "text", "media_type": "text/plain", "data": text}
    raise BadRequest(
        f"{mt} part cannot be sent to an Anthropic upstream (it takes PDF and plain-text documents only)"
    )
