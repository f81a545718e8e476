"""Cohere v2 Chat request body -> IR (``read_request``).

The writer (IR -> body) is ``busbar.proto.cohere.request_writer``. Shapes are the
``POST /v2/chat`` body::

    {"model", "messages": [
        {"role": "system", "content": "<text>" | [{"type": "text", "text"}]},
        {"role": "user", "content": "<text>" | [{"type": "text", "text"} |
                                                {"type": "image_url", "image_url": {"url", "detail"?}}]},
        {"role": "assistant", "content"?: "<text>" | [text | {"type": "thinking", "thinking"}],
         "tool_plan"?, "tool_calls"?: [{"id", "type": "function",
                                        "function": {"name", "arguments": "<JSON string>"}}]},
        {"role": "tool", "tool_call_id", "content": "<text>" | [{"type": "text", "text"} |
                                                                {"type": "document", "document": {"data", "id"?}}]}],
     "tools"?: [{"type": "function", "function": {"name", "description", "parameters"}}],
     "tool_choice"?: "REQUIRED" | "NONE", "max_tokens", "temperature", "p", "k", "stop_sequences",
     "seed", "frequency_penalty", "presence_penalty", "stream",
     "thinking"?: {"type": "enabled" | "disabled", "token_budget"?},
     "response_format"?: {"type": "text" | "json_object", "json_schema"?},
     … unmodelled: "documents", "citation_options", "safety_mode", "logprobs", "priority", …}

Decisions worth knowing:

- ``system`` messages land in ``IrRequest.system`` (in order).
- Consecutive ``role: tool`` messages merge into ONE user message of ``ToolResultBlock``s; each
  result's ``name`` comes from the assistant tool call it answers (Gemini needs it). A tool
  ``document`` content part becomes text: its ``data`` object as compact JSON.
- An assistant's ``tool_plan`` becomes a ``TextBlock`` ahead of its tool calls.
- ``p`` -> ``top_p``, ``k`` -> ``top_k``; ``tool_choice`` ``REQUIRED`` -> required, ``NONE`` -> none.
- ``thinking: {type: enabled, token_budget}`` -> ``ReasoningAsk(budget_tokens=…)``; ``enabled``
  without a budget and any other shape stay in ``extra`` (same protocol only); ``disabled`` -> no ask.
- ``response_format`` ``json_object`` with ``json_schema`` -> Chat Completions'
  ``{"type": "json_schema", "json_schema": {"name": "response", "schema": …}}``; without a schema
  -> ``{"type": "json_object"}``; ``text`` -> none.
- Unmodelled top-level fields go to ``IrRequest.extra`` by reference (no copies).

Source: docs/config-at-a-glance.md#models; cases
C011, C039.
"""

from __future__ import annotations

from typing import Any

import orjson

from busbar.ir.model import (
    ImageBlock,
    IrBlock,
    IrRequest,
    ReasoningAsk,
    TextBlock,
    ToolChoice,
)
from busbar.proto.cohere.response import read_message
from busbar.proto.errors import BadRequest
from busbar.proto.openai.parts import split_data_uri
from busbar.proto.openai.request import begin_chat, read_chat_messages, read_tools

_KNOWN = frozenset({
    "model", "messages", "tools", "tool_choice", "max_tokens", "temperature", "p", "k",
    "stop_sequences", "seed", "frequency_penalty", "presence_penalty", "thinking",
    "response_format", "stream"
})
_CHOICE = {"REQUIRED": "required", "NONE": "none"}


def read_request(body: dict[str, Any]) -> IrRequest:
    """Cohere v2 chat request body -> ``IrRequest``.

    Args:
        body: the parsed JSON body (``messages`` required).

    Returns:
        An ``IrRequest``; ``model`` is the name the client called (pool or model).

    Raises:
        BadRequest: the body is not Cohere v2 shaped (the message names the key path).
    """
    ir, msgs = begin_chat(body)
    _read_messages(msgs, ir)
    tools = body.get("tools")
    if tools:
        ir.tools = read_tools(tools)
    tc = body.get("tool_choice")
    if tc is not None:
        if tc not in _CHOICE:
            raise BadRequest("tool_choice: must be 'REQUIRED' or 'NONE'")
        ir.tool_choice = ToolChoice(_CHOICE[tc])
    ir.max_tokens = body.get("max_tokens")
    ir.temperature = body.get("temperature")
    ir.top_p = body.get("p")
    ir.top_k = body.get("k")
    ir.seed = body.get("seed")
    ir.frequency_penalty = body.get("frequency_penalty")
    ir.presence_penalty = body.get("presence_penalty")
    stop = body.get("stop_sequences")
    if stop:
        ir.stop = list(stop)
    extra = ir.extra
    th = body.get("thinking")
    if isinstance(th, dict):
        budget = th.get("token_budget")
        if th.get("type") == "enabled" and isinstance(budget, int) and not isinstance(budget, bool):
            ir.reasoning = ReasoningAsk(budget_tokens=budget)
        elif th.get("type") != "disabled":
            extra["thinking"] = th
    ir.response_format = _read_format(body.get("response_format"))
    ir.stream = bool(body.get("stream"))
    for k, v in body.items():
        if k not in _KNOWN:
            extra[k] = v
    return ir


def _read_messages(msgs: list[Any], ir: IrRequest) -> None:
    read_chat_messages(msgs, ir, content=_user_content, assistant=_assistant, system_roles=("system",),
                       tool_content=_tool_content, system_content=_system_content)


def _system_content(c: Any, i: int) -> list[IrBlock]:
    return [] if c is None else _user_content(c, i)


def _assistant(m: dict[str, Any], i: int) -> list[IrBlock]:
    for k, tc in enumerate(m.get("tool_calls") or ()):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise BadRequest(f"messages[{i}].tool_calls[{k}].function.name: required")
    return read_message(m)


def _user_content(c: Any, i: int) -> list[IrBlock]:
    if isinstance(c, str):
        return [TextBlock(c)]
    if not isinstance(c, list):
        raise BadRequest(f"messages[{i}].content: must be a string or a list of content parts")
    out: list[IrBlock] = []
    for j, p in enumerate(c):
        t = p.get("type") if isinstance(p, dict) else None
        if t == "text":
            text = p.get("text")
            if not isinstance(text, str):
                raise BadRequest(f"messages[{i}].content[{j}].text: must be a string")
            out.append(TextBlock(text))
        elif t == "image_url":
            iu = p.get("image_url")
            url = iu if isinstance(iu, str) else iu.get("url") if isinstance(iu, dict) else None
            if not isinstance(url, str) or not url:
                raise BadRequest(f"messages[{i}].content[{j}].image_url.url: required")
            detail = iu.get("detail") if isinstance(iu, dict) else None
            split = split_data_uri(url)
            if split is not None:
                out.append(ImageBlock("base64", media_type=split[0], data=split[1], detail=detail))
            else:
                out.append(ImageBlock("url", url=url, detail=detail))
        else:
            raise BadRequest(f"messages[{i}].content[{j}].type: {t!r} is not supported (text, image_url)")
    return out


def _tool_content(c: Any, i: int) -> list[IrBlock]:
    if c is None:
        return []
    if isinstance(c, str):
        return [TextBlock(c)]
    if not isinstance(c, list):
        raise BadRequest(f"messages[{i}].content: must be a string or a list of text/document parts")
    out: list[IrBlock] = []
    for j, p in enumerate(c):
        t = p.get("type") if isinstance(p, dict) else None
        if t == "text":
            out.append(TextBlock(p.get("text") or ""))
        elif t == "document":
            doc = p.get("document") or {}
            data = doc.get("data")
            out.append(TextBlock(data if isinstance(data, str) else orjson.dumps(data).decode()))
        else:
            raise BadRequest(f"messages[{i}].content[{j}].type: {t!r} is not supported (text, document)")
    return out


def _read_format(rf: Any) -> dict[str, Any] | None:
    if not isinstance(rf, dict):
        return None
    t = rf.get("type")
    if t == "json_object":
        schema = rf.get("json_schema")
        if isinstance(schema, dict):
            return {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}
        return {"type": "json_object"}
    if t == "text" or t is None:
        return None
    raise BadRequest(f"response_format.type: {t!r} is not supported (text, json_object)")
