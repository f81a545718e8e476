"""IR -> OpenAI Responses request body (``write_request``), Busbar as the client.

Output shape (``POST /v1/responses``)::

    {"model", "instructions"?, "input": [
        {"role": "user", "content": "<text>" | [input_text | input_image | input_file]},
        {"role": "assistant", "content": "<text>" | [output_text]},
        {"type": "function_call", "call_id", "name", "arguments": "<JSON string>"},
        {"type": "function_call_output", "call_id", "output": "<text>"}],
     "tools"?: [{"type": "function", "name", "description"?, "parameters", "strict": false}],
     "tool_choice"?, "parallel_tool_calls"?, "max_output_tokens"?, "temperature"?, "top_p"?,
     "reasoning"?: {"effort", "summary"?}, "text"?: {"format"}, "user"?, "stream"?}

Rules (each a case or a seed line):

- Never an empty optional collection (case C011): no ``tools: []``, no ``tool_choice`` or
  ``parallel_tool_calls`` without tools, no ``instructions: ""``.
- A tool result is a ``function_call_output`` item whose ``output`` is a STRING (the text parts
  joined with a newline), with the ``call_id`` of its call (case C014). Result images and
  ``is_error`` have no field there: dropped and named.
- Function tools are sent with ``strict: false``: the Responses API enforces strict schemas by
  default, and schemas from other protocols are rarely strict-compatible.
- ``max_tokens`` is never invented (case C017); it is written as ``max_output_tokens``, raised to
  the API minimum of 16 when smaller (a smaller value is a 400 upstream, never a client fault).
- Reasoning: an effort word is copied; a budget maps to the nearest word of the default table
  (Gemini's ``-1`` -> medium, ``0`` -> no ask); ``include_thoughts`` asks ``summary: "auto"``.
- Thinking blocks are not sent (a foreign signature is not valid ``encrypted_content``, and
  OpenAI's own ciphertext is never carried in the IR): dropped and named, like ``stop``,
  ``top_k``, ``seed``, ``frequency_penalty``, ``presence_penalty`` and cache markers, which the
  Responses API has no field for.
- ``response_format`` (Chat Completions shape) -> ``text.format`` (``json_schema`` flattened,
  ``name`` defaulted to ``response`` as the API requires one).

Source: docs/config-at-a-glance.md#models; cases C011, C014, C017, C039.
"""

from __future__ import annotations

import mimetypes
from typing import Any

from busbar.ir.model import (
    DocumentBlock,
    ImageBlock,
    IrMessage,
    IrRequest,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from busbar.proto.errors import BadRequest
from busbar.proto.openai.request_writer import dump_arguments, effort_for_budget
from busbar.proto.responses.response import format_for
from busbar.proto.writer import data_uri, drop, put_present, tool_result_text, user_turn

MIN_OUTPUT_TOKENS = 16
"""The smallest ``max_output_tokens`` the Responses API accepts."""

_SHIM = "__busbar_"


def write_request(req: IrRequest, upstream_model: str) -> dict[str, Any]:
    """``IrRequest`` -> Responses body with ``model`` = ``upstream_model``.

    Args:
        req: the request; ``req.dropped`` gains the names of fields that could not be carried.
        upstream_model: the lane's wire model name.

    Returns:
        The JSON-ready body (shares leaf values with ``req``; do not mutate it in place).

    Raises:
        BadRequest: a part the Responses API cannot take (audio).
    """
    dropped = req.dropped
    items: list[dict[str, Any]] = []
    for m in req.messages:
        if m.role == "assistant":
            _assistant(m, items, dropped)
        else:
            _user(m, items, dropped)
    body: dict[str, Any] = {"model": upstream_model}
    if req.system:
        texts = []
        for b in req.system:
            if isinstance(b, TextBlock):
                texts.append(b.text)
                if b.cache_control is not None:
                    drop(dropped, "cache_control")
            else:
                drop(dropped, "system." + b.type)
        ins = "\n\n".join(t for t in texts if t)
        if ins:
            body["instructions"] = ins
    body["input"] = items
    if req.tools:
        _tools(req, body, dropped)
    if req.max_tokens is not None:
        body["max_output_tokens"] = max(req.max_tokens, MIN_OUTPUT_TOKENS)
    put_present(body, (("temperature", req.temperature), ("top_p", req.top_p)))
    reasoning = _reasoning(req)
    if reasoning is not None:
        body["reasoning"] = reasoning
    extra = req.extra
    text = extra.get("text")
    if req.response_format is not None or isinstance(text, dict):
        out = dict(text) if isinstance(text, dict) else {}
        if req.response_format is not None:
            fmt = format_for(req.response_format)
            if fmt["type"] == "json_schema":
                fmt.setdefault("name", "response")
            out["format"] = fmt
        body["text"] = out
    if req.user is not None:
        body["user"] = req.user
    if req.stream:
        body["stream"] = True
    for name in ("top_k", "seed", "frequency_penalty", "presence_penalty"):
        if getattr(req, name) is not None:
            drop(dropped, name)
    if req.stop:
        drop(dropped, "stop")
    for k, v in extra.items():
        if k not in body and not k.startswith(_SHIM):
            body[k] = v
    return body


def _tools(req: IrRequest, body: dict[str, Any], dropped: list[str]) -> None:
    """The tool fields of a request with tools (definitions, choice, parallel calls)."""
    tools = []
    for t in req.tools:
        tool: dict[str, Any] = {"type": "function", "name": t.name}
        if t.description is not None:
            tool["description"] = t.description
        tool["parameters"] = t.input_schema
        tool["strict"] = False
        tools.append(tool)
        if t.cache_control is not None:
            drop(dropped, "cache_control")
    body["tools"] = tools
    tc = req.tool_choice
    if tc is not None:
        body["tool_choice"] = {"type": "function", "name": tc.name} if tc.mode == "tool" else tc.mode
    if req.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = req.parallel_tool_calls


def _reasoning(req: IrRequest) -> dict[str, Any] | None:
    r = req.reasoning
    if r is None:
        return None
    effort = r.effort
    if effort is None and r.budget_tokens is not None and r.budget_tokens != 0:
        effort = "medium" if r.budget_tokens < 0 else effort_for_budget(r.budget_tokens)
    if effort is None:
        if r.budget_tokens == 0:
            return None
        return {"summary": "auto"} if r.include_thoughts else None
    out: dict[str, Any] = {"effort": effort}
    if r.include_thoughts:
        out["summary"] = "auto"
    return out


def _assistant(m: IrMessage, items: list[dict[str, Any]], dropped: list[str]) -> None:
    texts: list[str] = []

    def flush() -> None:
        if not texts:
            return
        if len(texts) == 1:
            items.append({"role": "assistant", "content": texts[0]})
        else:
            items.append(
                {"role": "assistant", "content": [{"type": "output_text", "text": t} for t in texts]}
            )
        texts.clear()

    for b in m.content:
        if isinstance(b, TextBlock):
            if b.text:
                texts.append(b.text)
        elif isinstance(b, ToolUseBlock):
            flush()
            items.append(
                {
                    "type": "function_call",
                    "call_id": b.id,
                    "name": b.name,
                    "arguments": dump_arguments(b.input if b.input is not None else {}),
                }
            )
        elif isinstance(b, ThinkingBlock):
            drop(dropped, "thinking")
            continue
        else:
            drop(dropped, "assistant." + b.type)
            continue
        if b.cache_control is not None:
            drop(dropped, "cache_control")
    flush()


def _user(m: IrMessage, items: list[dict[str, Any]], dropped: list[str]) -> None:
    user_turn(m, items, dropped, text_type="input_text", image=image_part, document=_file_part,
              result=lambda b: {"type": "function_call_output", "call_id": b.tool_use_id,
                                "output": tool_result_text(b, dropped)})


def image_part(b: ImageBlock) -> dict[str, Any]:
    """``ImageBlock`` -> ``{"type": "input_image", "image_url", "detail"}`` (base64 as a data: URI)."""
    return {"type": "input_image", "image_url": data_uri(b), "detail": b.detail or "auto"}


def _file_part(b: DocumentBlock) -> dict[str, Any]:
    if b.media_type.startswith("audio/"):
        raise BadRequest(f"audio part ({b.media_type}) is not accepted by an OpenAI Responses upstream")
    if b.data is None:
        part: dict[str, Any] = {"type": "input_file", "file_url": b.url}
        if b.name:
            part["filename"] = b.name
        return part
    name = b.name or "document" + (mimetypes.guess_extension(b.media_type) or "")
    return {"type": "input_file", "filename": name, "file_data": data_uri(b)}
