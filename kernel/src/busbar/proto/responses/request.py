"""OpenAI Responses request body -> IR (``read_request``).

The writer (IR -> body) is ``busbar.proto.responses.request_writer``. Shapes are the
``POST /v1/responses`` body::

    {"model", "input": "<text>" | [item, …], "instructions", "tools": [{"type": "function", "name",
     "description", "parameters", "strict"}], "tool_choice", "parallel_tool_calls",
     "max_output_tokens", "temperature", "top_p", "reasoning": {"effort", "summary"},
     "text": {"format": {"type": "text" | "json_object" | "json_schema", …}, "verbosity"?},
     "stream", "user", … unmodelled: "previous_response_id", "store", "truncation", "include",
     "metadata", "service_tier", "prompt_cache_key", "top_logprobs", …}

    item = {"role": "user" | "assistant" | "system" | "developer", "content": "<text>" | [part]}
         | {"type": "message", …same…}
         | {"type": "function_call", "call_id", "name", "arguments": "<JSON string>"}
         | {"type": "function_call_output", "call_id", "output": "<text>" | [part]}
         | {"type": "reasoning", "id", "summary": [{"type": "summary_text", "text"}],
            "encrypted_content"?}
    part = input_text | input_image {image_url | file_id, detail} | input_file {file_data,
           filename | file_url | file_id} | output_text | refusal

Decisions worth knowing:

- ``instructions`` and ``system``/``developer`` items land in ``IrRequest.system`` (in order).
- Contiguous assistant-side items (assistant messages, ``function_call``, ``reasoning``) form ONE
  assistant turn; contiguous ``function_call_output`` items form ONE user turn of
  ``ToolResultBlock``s (each result's ``name`` taken from the call it answers).
- ``arguments`` is parsed losslessly (``busbar.proto.openai.parts.parse_arguments``, case C039).
- Images and files given by ``file_id`` and ``item_reference`` items are refused (400): they need
  OpenAI server-side state no other protocol can resolve. Non-function tools (web_search,
  file_search, …) are refused likewise.
- ``reasoning.effort`` -> ``ReasoningAsk.effort``; ``reasoning.summary`` set -> ``include_thoughts``.
- ``text.format``: ``json_schema`` -> ``response_format`` in Chat Completions shape
  (``{"type": "json_schema", "json_schema": {name, schema, strict, description}}``),
  ``json_object`` -> ``{"type": "json_object"}``, ``text`` -> none; other ``text`` keys go to extra.
- Unmodelled top-level fields go to ``IrRequest.extra`` by reference (no copies).

Source: docs/config-at-a-glance.md#models; cases C014, C039.
"""

from __future__ import annotations

import mimetypes
from typing import Any

from busbar.ir.model import (
    DocumentBlock,
    ImageBlock,
    IrBlock,
    IrMessage,
    IrRequest,
    ReasoningAsk,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from busbar.proto.errors import BadRequest
from busbar.proto.openai.parts import parse_arguments, split_data_uri
from busbar.proto.openai.request import read_tool_choice, read_tools
from busbar.proto.responses.response import reasoning_to_block

_KNOWN = frozenset({
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
    "max_output_tokens", "temperature", "top_p", "reasoning", "text", "stream", "user"
})
_ROLES = ("user", "assistant", "system", "developer")


def read_request(body: dict[str, Any]) -> IrRequest:
    """Responses request body -> ``IrRequest``.

    Args:
        body: the parsed JSON body (``input`` a string or a list of items).

    Returns:
        An ``IrRequest``; ``model`` is the name the client called (pool or model).

    Raises:
        BadRequest: the body is not Responses shaped (the message names the key path).
    """
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    ir = IrRequest(model=body.get("model"))
    ins = body.get("instructions")
    if isinstance(ins, str):
        if ins:
            ir.system.append(TextBlock(ins))
    elif ins is not None:
        raise BadRequest("instructions: must be a string")
    inp = body.get("input")
    if isinstance(inp, str):
        ir.messages.append(IrMessage("user", [TextBlock(inp)]))
    elif isinstance(inp, list):
        _read_items(inp, ir)
    elif inp is not None:
        raise BadRequest("input: must be a string or a list of input items")
    tools = body.get("tools")
    if tools:
        ir.tools = read_tools(tools, nested=False)
    tc = body.get("tool_choice")
    if tc is not None:
        ir.tool_choice = read_tool_choice(tc, nested=False)
    ir.parallel_tool_calls = body.get("parallel_tool_calls")
    ir.max_tokens = body.get("max_output_tokens")
    ir.temperature = body.get("temperature")
    ir.top_p = body.get("top_p")
    ir.user = body.get("user")
    extra = ir.extra
    r = body.get("reasoning")
    if isinstance(r, dict) and (r.get("effort") is not None or r.get("summary") is not None):
        ir.reasoning = ReasoningAsk(
            effort=r.get("effort"), include_thoughts=True if r.get("summary") is not None else None
        )
    text = body.get("text")
    if isinstance(text, dict):
        ir.response_format = _read_format(text.get("format"))
        if len(text) > 1 or "format" not in text:
            extra["text"] = {k: v for k, v in text.items() if k != "format"}
    ir.stream = bool(body.get("stream"))
    for k, v in body.items():
        if k not in _KNOWN:
            extra[k] = v
    return ir


def _read_items(items: list[Any], ir: IrRequest) -> None:
    out = ir.messages
    cur: IrMessage | None = None  # the open assistant turn or tool-result turn
    names: dict[str, str] = {}  # call_id -> function name (ToolResultBlock.name, for Gemini)
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise BadRequest(f"input[{i}]: must be an object")
        t = it.get("type")
        if t is None or t == "message":
            role = it.get("role")
            if role not in _ROLES:
                raise BadRequest(f"input[{i}].role: {role!r} is not one of {', '.join(_ROLES)}")
            blocks = _content(it.get("content"), f"input[{i}].content")
            if role == "assistant":
                if cur is None or cur.role != "assistant":
                    cur = IrMessage("assistant", [])
                    out.append(cur)
                cur.content.extend(blocks)
            elif role == "user":
                cur = None
                out.append(IrMessage("user", blocks))
            else:
                ir.system.extend(blocks)
        elif t == "function_call" or t == "reasoning":
            if cur is None or cur.role != "assistant":
                cur = IrMessage("assistant", [])
                out.append(cur)
            if t == "reasoning":
                tb = reasoning_to_block(it, carry=True)
                if tb is not None:
                    cur.content.append(tb)
                continue
            call_id, name = it.get("call_id"), it.get("name")
            if not isinstance(call_id, str) or not call_id:
                raise BadRequest(f"input[{i}].call_id: required for a function_call item")
            if not isinstance(name, str) or not name:
                raise BadRequest(f"input[{i}].name: required for a function_call item")
            names[call_id] = name
            cur.content.append(ToolUseBlock(call_id, name, parse_arguments(it.get("arguments"))))
        elif t == "function_call_output":
            call_id = it.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise BadRequest(f"input[{i}].call_id: required for a function_call_output item")
            o = it.get("output")
            blocks = [TextBlock(o)] if isinstance(o, str) else _content(o, f"input[{i}].output")
            if cur is None or cur.role != "user":
                cur = IrMessage("user", [])
                out.append(cur)
            cur.content.append(ToolResultBlock(call_id, blocks, name=names.get(call_id)))
        elif t == "item_reference":
            raise BadRequest(
                f"input[{i}]: item_reference needs OpenAI server-side state that this gateway "
                "cannot resolve; send the full item instead"
            )
        else:
            raise BadRequest(
                f"input[{i}].type: {t!r} is not supported (message, function_call, "
                "function_call_output, reasoning)"
            )


def _content(c: Any, where: str) -> list[IrBlock]:
    if isinstance(c, str):
        return [TextBlock(c)]
    if not isinstance(c, list):
        raise BadRequest(f"{where}: must be a string or a list of content parts")
    return [_part(p, where, j) for j, p in enumerate(c)]


def _part(p: Any, where: str, j: int) -> IrBlock:
    t = p.get("type") if isinstance(p, dict) else None
    if t == "input_text" or t == "output_text" or t == "text":
        text = p.get("text")
        if not isinstance(text, str):
            raise BadRequest(f"{where}[{j}].text: must be a string")
        return TextBlock(text)
    if t == "refusal":
        return TextBlock(p.get("refusal") or "")
    if t == "input_image":
        url = p.get("image_url")
        if not isinstance(url, str) or not url:
            if p.get("file_id"):
                raise BadRequest(
                    f"{where}[{j}].file_id: file references are not supported by this gateway; "
                    "send the image as image_url (a URL or a data: URI)"
                )
            raise BadRequest(f"{where}[{j}].image_url: required")
        detail = p.get("detail")
        split = split_data_uri(url)
        if split is not None:
            return ImageBlock("base64", media_type=split[0], data=split[1], detail=detail)
        return ImageBlock("url", url=url, detail=detail)
    if t == "input_file":
        return _file(p, f"{where}[{j}]")
    raise BadRequest(
        f"{where}[{j}].type: {t!r} is not supported (input_text, input_image, input_file, output_text)"
    )


def _file(p: dict[str, Any], where: str) -> DocumentBlock:
    name = p.get("filename")
    fd = p.get("file_data")
    guessed = mimetypes.guess_type(name)[0] if isinstance(name, str) else None
    if isinstance(fd, str) and fd:
        split = split_data_uri(fd)
        if split is not None:
            return DocumentBlock(split[0], data=split[1], name=name)
        if guessed is None:
            raise BadRequest(
                f"{where}: media type unknown; send file_data as a data: URI "
                "(data:<mime>;base64,...) or a filename with an extension"
            )
        return DocumentBlock(guessed, data=fd, name=name)
    url = p.get("file_url")
    if isinstance(url, str) and url:
        mime = guessed or mimetypes.guess_type(url)[0] or "application/pdf"
        return DocumentBlock(mime, url=url, name=name)
    if p.get("file_id"):
        raise BadRequest(
            f"{where}.file_id: file references are not supported by this gateway; "
            "send the file inline as file_data"
        )
    raise BadRequest(f"{where}.file_data: required")


def _read_format(fmt: Any) -> dict[str, Any] | None:
    if not isinstance(fmt, dict):
        return None
    t = fmt.get("type")
    if t == "json_schema":
        js = {k: fmt[k] for k in ("name", "description", "schema", "strict") if k in fmt}
        return {"type": "json_schema", "json_schema": js}
    if t == "json_object":
        return {"type": "json_object"}
    if t == "text" or t is None:
        return None
    raise BadRequest(f"text.format.type: {t!r} is not supported (text, json_object, json_schema)")
