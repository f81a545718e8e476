"""IR -> OpenAI Chat Completions request body (``write_request``), Busbar as the client.

Rules (each a case or a seed line):

- Never emit an empty optional collection: no ``tools: []``, no ``tool_choice`` or
  ``parallel_tool_calls`` without tools, no empty ``stop`` (case C011).
- ``max_tokens`` is never invented (case C017); it is written as ``max_completion_tokens`` when
  the OpenAI client spelled it so (``extra``) or a reasoning ask is present (reasoning models
  reject ``max_tokens``), else as ``max_tokens`` (what every OpenAI-compatible server knows).
- A streamed request always asks ``stream_options.include_usage`` so usage (with cache reads)
  reaches billing and non-OpenAI clients (case C002).
- Thinking blocks, cache markers, ``top_k``, tool-result ``is_error`` and tool-result images have
  no Chat Completions field: they are left out and named in ``IrRequest.dropped``.
- A reasoning ask given only as a budget maps to the nearest effort word of the default table
  (minimal 1024, low 4096, medium 8192, high 16384; Gemini's dynamic ``-1`` -> medium, ``0``
  -> no ask). The proxy may pre-convert with the operator's table by setting ``effort``.
- Tool results become ``role: tool`` messages (text parts joined with a newline) placed before
  the rest of their user turn.

Source: docs/config-at-a-glance.md#models; cases C002, C011, C013, C015, C017.
"""

from __future__ import annotations

import mimetypes
from typing import Any

import orjson

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
from busbar.proto.openai.parts import RawArguments
from busbar.proto.writer import data_uri, drop, put_present, tool_result_text, user_turn

EFFORT_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 8192, "high": 16384}
"""The default effort table (docs/configuration.md ``limits.reasoning_effort_budgets``)."""

_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mp3": "mp3",
    "audio/mpeg": "mp3",
}


def dump_arguments(value: object) -> str:
    """Tool input -> the compact JSON string OpenAI carries in ``function.arguments``."""
    if isinstance(value, RawArguments):
        return str(value)
    return orjson.dumps(value).decode()


def effort_for_budget(budget: int) -> str:
    """Nearest effort word of the default table for a token budget (ties go to the lower word)."""
    return min(EFFORT_BUDGETS, key=lambda w: abs(EFFORT_BUDGETS[w] - budget))


def write_request(req: IrRequest, upstream_model: str) -> dict[str, Any]:
    """``IrRequest`` -> Chat Completions body with ``model`` = ``upstream_model``.

    Args:
        req: the request; ``req.dropped`` gains the names of fields that could not be carried.
        upstream_model: the lane's wire model name.

    Returns:
        The JSON-ready body (shares leaf values with ``req``; do not mutate it in place).

    Raises:
        BadRequest: a part Chat Completions cannot take (a document given only by URL).
    """
    dropped = req.dropped
    msgs: list[dict[str, Any]] = []
    if req.system:
        msgs.append({"role": "system", "content": _text_content(req.system, dropped)})
    for m in req.messages:
        if m.role == "assistant":
            msgs.append(_assistant(m, dropped))
        else:
            _user(m, msgs, dropped)
    body: dict[str, Any] = {"model": upstream_model, "messages": msgs}
    if req.tools:
        _tools(req, body, dropped)
    extra = req.extra
    if req.max_tokens is not None:
        key = (
            "max_completion_tokens"
            if "max_completion_tokens" in extra or req.reasoning is not None
            else "max_tokens"
        )
        body[key] = req.max_tokens
    put_present(body, (("temperature", req.temperature), ("top_p", req.top_p),
                       ("frequency_penalty", req.frequency_penalty), ("presence_penalty", req.presence_penalty),
                       ("seed", req.seed), ("stop", req.stop or None), ("response_format", req.response_format),
                       ("user", req.user)))
    if req.top_k is not None:
        drop(dropped, "top_k")
    r = req.reasoning
    if r is not None:
        effort = r.effort
        if effort is None and r.budget_tokens is not None and r.budget_tokens != 0:
            effort = "medium" if r.budget_tokens < 0 else effort_for_budget(r.budget_tokens)
        if effort is not None:
            body["reasoning_effort"] = effort
    if req.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    for k, v in extra.items():
        if k not in body and k != "max_completion_tokens":
            body[k] = v
    return body


def _tools(req: IrRequest, body: dict[str, Any], dropped: list[str]) -> None:
    """``tools`` (function tools), ``tool_choice`` and ``parallel_tool_calls`` of a request with tools."""
    tools = []
    for t in req.tools:
        fn: dict[str, Any] = {"name": t.name}
        if t.description is not None:
            fn["description"] = t.description
        fn["parameters"] = t.input_schema
        tools.append({"type": "function", "function": fn})
        if t.cache_control is not None:
            drop(dropped, "cache_control")
    body["tools"] = tools
    tc = req.tool_choice
    if tc is not None:
        body["tool_choice"] = {"type": "function", "function": {"name": tc.name}} if tc.mode == "tool" else tc.mode
    if req.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = req.parallel_tool_calls


def _text_content(blocks: list[Any], dropped: list[str]) -> str | list[dict[str, Any]]:
    texts = []
    for b in blocks:
        if isinstance(b, TextBlock):
            texts.append(b.text)
            if b.cache_control is not None:
                drop(dropped, "cache_control")
        else:
            drop(dropped, "system." + b.type)
    if len(texts) == 1:
        return texts[0]
    return [{"type": "text", "text": t} for t in texts]


def _assistant(m: IrMessage, dropped: list[str]) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for b in m.content:
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
        elif isinstance(b, ThinkingBlock):
            drop(dropped, "thinking")
            continue
        else:
            drop(dropped, "assistant." + b.type)
            continue
        if b.cache_control is not None:
            drop(dropped, "cache_control")
    content: str | list[dict[str, Any]] | None
    if len(texts) == 1:
        content = texts[0]
    elif texts:
        content = [{"type": "text", "text": t} for t in texts]
    else:
        content = None if calls else ""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = calls
    return msg


def _user(m: IrMessage, msgs: list[dict[str, Any]], dropped: list[str]) -> None:
    user_turn(m, msgs, dropped, text_type="text", image=image_part, document=_document_part,
              result=lambda b: {"role": "tool", "tool_call_id": b.tool_use_id,
                                "content": tool_result_text(b, dropped)})


def image_part(b: ImageBlock) -> dict[str, Any]:
    """``ImageBlock`` -> ``{"type": "image_url", "image_url": {"url", "detail"?}}``; base64 as a data: URI."""
    iu: dict[str, Any] = {"url": data_uri(b)}
    if b.detail is not None:
        iu["detail"] = b.detail
    return {"type": "image_url", "image_url": iu}


def _document_part(b: DocumentBlock) -> dict[str, Any]:
    if b.data is None:
        raise BadRequest(
            f"document part ({b.media_type}) given by URL cannot be sent to an OpenAI "
            "Chat Completions upstream; send it inline as base64"
        )
    if b.media_type.startswith("audio/"):
        fmt = _AUDIO_FORMATS.get(b.media_type)
        if fmt is None:
            raise BadRequest(
                f"audio part ({b.media_type}) is not accepted by OpenAI Chat Completions (wav or mp3 only)"
            )
        return {"type": "input_audio", "input_audio": {"data": b.data, "format": fmt}}
    name = b.name or "document" + (mimetypes.guess_extension(b.media_type) or "")
    return {"type": "file", "file": {"filename": name, "file_data": data_uri(b)}}
