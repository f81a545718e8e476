"""Anthropic Messages request body -> IR (``read_request``), and the block reader it shares.

Shapes: the ``POST /v1/messages`` body — ``system`` (string or text blocks with
``cache_control``), ``messages`` (``role`` user/assistant, ``content`` string or blocks: text,
image, document, tool_use, tool_result, thinking, redacted_thinking), ``tools``
(``input_schema``), ``tool_choice`` (auto/any/tool/none, ``disable_parallel_tool_use``),
``max_tokens``, sampling knobs, ``stop_sequences``, ``metadata.user_id``, ``thinking``.

Decisions worth knowing:

- A ``tool_result``'s ``name`` is filled from the ``tool_use`` it answers (Gemini needs it).
- ``thinking: {type: enabled, budget_tokens}`` -> ``ReasoningAsk(budget_tokens=...)``;
  ``disabled`` -> no ask; any other thinking shape is kept in ``extra`` (same-protocol only).
- A ``document`` with a plain-text source is stored base64-encoded (``DocumentBlock.data`` is
  always base64) with ``media_type`` ``text/plain``; its ``title`` becomes ``name``.
- Server tools (a ``tools[]`` entry with a ``type`` other than ``custom``) and unknown block
  types are refused with a 400 naming the key path: the IR cannot carry them.
- Unmodelled top-level fields (``service_tier``, ``container``, ``output_config`` …) and
  ``metadata`` keys other than ``user_id`` go to ``IrRequest.extra``.

Source: docs/protocols/README.md#translation-stays-byte-identical; cases C006 (signed empty thinking kept),
C010, C011.
"""

from __future__ import annotations

import base64
from typing import Any

from busbar.ir.model import (
    DocumentBlock,
    ImageBlock,
    IrBlock,
    IrMessage,
    IrRequest,
    IrTool,
    ReasoningAsk,
    TextBlock,
    ThinkingBlock,
    ToolChoice,
    ToolResultBlock,
    ToolUseBlock,
)
from busbar.proto.errors import BadRequest

_KNOWN = frozenset({
    "model", "messages", "system", "max_tokens", "temperature", "top_p", "top_k", "stop_sequences",
    "metadata", "thinking", "tools", "tool_choice", "stream"
})
_CHOICE_MODE = {"auto": "auto", "any": "required", "tool": "tool", "none": "none"}


def read_request(body: dict[str, Any]) -> IrRequest:
    """Messages request body -> ``IrRequest``.

    Args:
        body: the parsed JSON body (``messages`` required).

    Returns:
        An ``IrRequest``; ``model`` is the body's ``model`` (the proxy may override it with the
        name taken from the path).

    Raises:
        BadRequest: the body is not Messages shaped (the message names the key path).
    """
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        raise BadRequest("messages: required, must be a list of message objects")
    ir = IrRequest(model=body.get("model"))
    out = ir.messages
    names: dict[str, str] = {}
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise BadRequest(f"messages[{i}]: must be an object")
        role = m.get("role")
        if role != "user" and role != "assistant":
            raise BadRequest(f"messages.{i}.role: {role!r} is not one of user, assistant")
        blocks = read_content(m.get("content"), f"messages.{i}.content")
        out.append(IrMessage(role, blocks))
        for b in blocks:  # tool_result.name from its tool_use (Gemini's functionResponse needs it)
            if isinstance(b, ToolUseBlock):
                names[b.id] = b.name
            elif isinstance(b, ToolResultBlock):
                b.name = names.get(b.tool_use_id)
    system = body.get("system")
    if system:
        ir.system = read_content(system, "system")
    tools = body.get("tools")
    if tools:
        ir.tools = _read_tools(tools)
    tc = body.get("tool_choice")
    if tc is not None:
        if not isinstance(tc, dict) or tc.get("type") not in _CHOICE_MODE:
            raise BadRequest("tool_choice.type: must be one of auto, any, tool, none")
        ir.tool_choice = ToolChoice(_CHOICE_MODE[tc["type"]], tc.get("name"))
        if tc.get("disable_parallel_tool_use"):
            ir.parallel_tool_calls = False
    ir.max_tokens = body.get("max_tokens")
    ir.temperature = body.get("temperature")
    ir.top_p = body.get("top_p")
    ir.top_k = body.get("top_k")
    stop = body.get("stop_sequences")
    if stop:
        ir.stop = list(stop)
    extra = ir.extra
    md = body.get("metadata")
    if isinstance(md, dict) and md:
        ir.user = md.get("user_id")
        if len(md) > 1 or "user_id" not in md:
            extra["metadata"] = {k: v for k, v in md.items() if k != "user_id"}
    th = body.get("thinking")
    if isinstance(th, dict):
        if th.get("type") == "enabled" and isinstance(th.get("budget_tokens"), int):
            ir.reasoning = ReasoningAsk(budget_tokens=th["budget_tokens"])
        elif th.get("type") != "disabled":
            extra["thinking"] = th
    ir.stream = bool(body.get("stream"))
    for k, v in body.items():
        if k not in _KNOWN:
            extra[k] = v
    return ir


def read_content(content: Any, where: str) -> list[IrBlock]:
    """A Messages ``content`` (string or block list) -> IR blocks; ``where`` names the key path."""
    if isinstance(content, str):
        return [TextBlock(content)]
    if not isinstance(content, list):
        raise BadRequest(f"{where}: must be a string or a list of content blocks")
    return [read_block(b, where, j) for j, b in enumerate(content)]


def read_block(b: Any, parent: str, j: int) -> IrBlock:
    """Block ``j`` of the content at key path ``parent`` -> IR block.

    Raises:
        BadRequest: not an object, or a block type the IR cannot carry (names ``parent.j``).
    """
    t = b.get("type") if isinstance(b, dict) else None
    if t is None:
        raise BadRequest(f"{parent}.{j}: must be a content block object with a 'type'")
    cc = b.get("cache_control")
    if t == "text":
        return TextBlock(b.get("text", ""), cc, b.get("citations"))
    if t == "tool_use":
        return ToolUseBlock(b.get("id", ""), b.get("name", ""), b.get("input", {}), cc)
    if t == "tool_result":
        c = b.get("content")
        blocks = [] if c is None else read_content(c, f"{parent}.{j}.content")
        return ToolResultBlock(b.get("tool_use_id", ""), blocks, bool(b.get("is_error")), cache_control=cc)
    if t == "thinking":
        return ThinkingBlock(b.get("thinking", ""), b.get("signature"), cache_control=cc)
    if t == "redacted_thinking":
        return ThinkingBlock(redacted=True, data=b.get("data"), cache_control=cc)
    if t == "image":
        src = b.get("source") or {}
        if src.get("type") == "base64":
            return ImageBlock(
                "base64", media_type=src.get("media_type"), data=src.get("data"), cache_control=cc
            )
        if src.get("type") == "url":
            return ImageBlock("url", url=src.get("url"), cache_control=cc)
        raise BadRequest(f"{parent}.{j}.source.type: {src.get('type')!r} is not supported (base64, url)")
    if t == "document":
        return _document(b, f"{parent}.{j}", cc)
    raise BadRequest(
        f"{parent}.{j}.type: {t!r} is not supported (text, image, document, tool_use, "
        "tool_result, thinking, redacted_thinking)"
    )


def _document(b: dict[str, Any], where: str, cc: dict[str, Any] | None) -> DocumentBlock:
    src = b.get("source") or {}
    st = src.get("type")
    title = b.get("title")
    if st == "base64":
        return DocumentBlock(
            src.get("media_type") or "application/pdf", data=src.get("data"), name=title, cache_control=cc
        )
    if st == "text":
        data = base64.b64encode((src.get("data") or "").encode()).decode("ascii")
        return DocumentBlock(src.get("media_type") or "text/plain", data=data, name=title, cache_control=cc)
    if st == "url":
        return DocumentBlock("application/pdf", url=src.get("url"), name=title, cache_control=cc)
    raise BadRequest(f"{where}.source.type: {st!r} is not supported (base64, text, url)")


def _read_tools(tools: Any) -> list[IrTool]:
    if not isinstance(tools, list):
        raise BadRequest("tools: must be a list")
    out = []
    for k, t in enumerate(tools):
        if not isinstance(t, dict) or t.get("type", "custom") != "custom":
            kind = t.get("type") if isinstance(t, dict) else t
            raise BadRequest(f"tools.{k}.type: {kind!r} is not supported (client tools only)")
        name = t.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequest(f"tools.{k}.name: required")
        tool = IrTool(name, t.get("description"), cache_control=t.get("cache_control"))
        schema = t.get("input_schema")
        if schema:
            tool.input_schema = schema
        out.append(tool)
    return out
