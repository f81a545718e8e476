"""Bedrock Converse request body -> IR (``read_request``), and the media-format tables both sides share.

Shapes: the ``POST /model/{modelId}/converse`` (and ``/converse-stream``) body — the model id
and the stream flag live in the URL, the proxy sets ``ir.model`` / ``ir.stream`` from the route.
``messages`` (``role`` user/assistant, ``content`` blocks: ``text``, ``image`` ``{format,
source: {bytes}}``, ``document`` ``{format, name, source: {bytes|text}}``, ``toolUse``
``{toolUseId, name, input}``, ``toolResult`` ``{toolUseId, content: [{text}|{json}|{image}|
{document}], status}``, ``reasoningContent`` ``{reasoningText: {text, signature}}`` or
``{redactedContent}``, ``cachePoint``), ``system`` (``[{text}|{cachePoint}]``),
``inferenceConfig`` ``{maxTokens, temperature, topP, stopSequences}``, ``toolConfig``
``{tools: [{toolSpec: {name, description, inputSchema: {json}}}|{cachePoint}], toolChoice:
{auto: {}}|{any: {}}|{tool: {name}}}``, ``additionalModelRequestFields``.

Decisions worth knowing:

- A ``cachePoint`` marks the block before it (Anthropic's ``cache_control`` sits on the last
  block of the cached prefix): ``cache_control = {"type": "ephemeral"}`` on the preceding text,
  system text or tool. A leading ``cachePoint`` (nothing before it) carries nothing.
- ``additionalModelRequestFields.thinking`` ``{type: enabled, budget_tokens}`` (Claude on
  Bedrock) -> ``ReasoningAsk(budget_tokens)``; ``top_k`` -> ``top_k``; the rest of that object,
  and ``guardrailConfig``, ``performanceConfig``, ``promptVariables``, ``requestMetadata``,
  ``serviceTier`` … stay in ``extra`` (same-protocol only; dropped across protocols; docs/config-at-a-glance.md#models).
- ``toolResult.content[].json`` becomes text (compact JSON); ``status: error`` -> ``is_error``.
  A result's ``name`` is filled from the ``toolUse`` it answers (Gemini needs it).
- Blocks the IR cannot carry (``video``, ``audio``, ``guardContent``, S3 sources …) are refused
  with a 400 naming the key path.

Source: docs/config-at-a-glance.md#models
``prompt_caching``; cases C011, C040, C047.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

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

EPHEMERAL = {"type": "ephemeral"}
"""The IR ``cache_control`` a Bedrock ``cachePoint`` stands for."""

IMAGE_FORMATS = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}
"""Converse ``image.format`` -> MIME type."""

DOCUMENT_FORMATS = {
    "pdf": "application/pdf",
    "csv": "text/csv",
    "doc": "application/msword",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xls": "application/vnd.ms-excel",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "html": "text/html",
    "txt": "text/plain",
    "md": "text/markdown",
}
"""Converse ``document.format`` -> MIME type (botocore ``DocumentFormat`` enum)."""

_KNOWN = frozenset(
    {"messages", "system", "inferenceConfig", "toolConfig", "additionalModelRequestFields", "modelId"}
)
_CHOICE = {"auto": "auto", "any": "required", "tool": "tool"}


def _obj(v: Any, where: str, shape: str = "an object") -> dict[str, Any]:
    """``v`` when it is a JSON object, else a ``BadRequest`` naming ``where`` and the expected ``shape``."""
    if not isinstance(v, dict):
        raise BadRequest(f"{where}: must be {shape}, found {_json_type(v)}")
    return v


def _opt_str(v: Any, where: str) -> str | None:
    if v is not None and not isinstance(v, str):
        raise BadRequest(f"{where}: must be a string, found {_json_type(v)}")
    return v


def _opt_num(v: Any, where: str, integer: bool = False) -> Any:
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if v is not None and (isinstance(v, bool) or not ok):
        raise BadRequest(f"{where}: must be {'an integer' if integer else 'a number'}, found {_json_type(v)}")
    return v


def _base64(v: Any, where: str) -> str:
    """``v`` when it is a base64 string (the JSON form of Converse ``bytes``), else a ``BadRequest``."""
    if not isinstance(v, str):
        raise BadRequest(f"{where}: only inline bytes are supported (base64 text; no s3Location)")
    try:
        base64.b64decode(v, validate=True)
    except ValueError:
        raise BadRequest(f"{where}: not valid base64 (standard alphabet, padded)") from None
    return v


def _json_type(v: Any) -> str:
    """The JSON name of ``v``'s type (``object``, ``array``, ``string``, ``number``, ``boolean``, ``null``)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _mark(blocks: list[Any]) -> None:
    if blocks:
        blocks[-1].cache_control = dict(EPHEMERAL)


def read_request(body: dict[str, Any]) -> IrRequest:
    """Converse request body -> ``IrRequest`` (``model``/``stream`` are left for the proxy to set).

    Raises:
        BadRequest: the body is not Converse shaped (the message names the key path).
    """
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        raise BadRequest("messages: required, must be a list of message objects")
    ir = IrRequest()
    names: dict[str, str] = {}
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise BadRequest(f"messages.{i}: must be an object")
        role = m.get("role")
        if role != "user" and role != "assistant":
            raise BadRequest(f"messages.{i}.role: {role!r} is not one of user, assistant")
        blocks = read_content(m.get("content"), f"messages.{i}.content")
        for b in blocks:
            if isinstance(b, ToolUseBlock):
                names[b.id] = b.name
            elif isinstance(b, ToolResultBlock):
                b.name = names.get(b.tool_use_id)
        ir.messages.append(IrMessage(role, blocks))
    system = body.get("system")
    if system:
        ir.system = read_content(system, "system")
    extra = ir.extra
    tc = body.get("toolConfig")
    if tc is not None:
        _read_tool_config(_obj(tc, "toolConfig", "an object like {\"tools\": [{\"toolSpec\": {...}}]}"), ir)
    ic = body.get("inferenceConfig")
    if ic is not None:
        _obj(ic, "inferenceConfig", "an object like {\"maxTokens\": 512}")
        ir.max_tokens = _opt_num(ic.get("maxTokens"), "inferenceConfig.maxTokens", integer=True)
        ir.temperature = _opt_num(ic.get("temperature"), "inferenceConfig.temperature")
        ir.top_p = _opt_num(ic.get("topP"), "inferenceConfig.topP")
        stop = ic.get("stopSequences")
        if stop:
            if not isinstance(stop, list) or not all(isinstance(x, str) for x in stop):
                raise BadRequest("inferenceConfig.stopSequences: must be a list of strings")
            ir.stop = list(stop)
        rest = {k: v for k, v in ic.items() if k not in ("maxTokens", "temperature", "topP", "stopSequences")}
        if rest:
            extra["inferenceConfig"] = rest
    amrf = body.get("additionalModelRequestFields")
    if isinstance(amrf, dict) and amrf:
        rest = dict(amrf)
        th = rest.pop("thinking", None)
        if isinstance(th, dict) and th.get("type") == "enabled" and isinstance(th.get("budget_tokens"), int):
            ir.reasoning = ReasoningAsk(budget_tokens=th["budget_tokens"])
        elif th is not None:
            rest["thinking"] = th
        top_k = rest.pop("top_k", None)
        if isinstance(top_k, int):
            ir.top_k = top_k
        elif top_k is not None:
            rest["top_k"] = top_k
        if rest:
            extra["additionalModelRequestFields"] = rest
    for k, v in body.items():
        if k not in _KNOWN:
            extra[k] = v
    return ir


def _read_tool_config(tc: dict[str, Any], ir: IrRequest) -> None:
    tools = tc.get("tools")
    if not isinstance(tools, list):
        raise BadRequest("toolConfig.tools: required, must be a list")
    out: list[IrTool] = []
    for k, t in enumerate(tools):
        if isinstance(t, dict) and "cachePoint" in t:
            _mark(out)
            continue
        spec = t.get("toolSpec") if isinstance(t, dict) else None
        if not isinstance(spec, dict):
            raise BadRequest(f"toolConfig.tools.{k}: only toolSpec and cachePoint entries are supported")
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequest(f"toolConfig.tools.{k}.toolSpec.name: required")
        tool = IrTool(name, _opt_str(spec.get("description"), f"toolConfig.tools.{k}.toolSpec.description"))
        schema = _obj(spec.get("inputSchema") or {}, f"toolConfig.tools.{k}.toolSpec.inputSchema",
                      "an object like {\"json\": {<JSON schema>}}").get("json")
        if isinstance(schema, dict) and schema:
            tool.input_schema = schema
        out.append(tool)
    ir.tools = out
    choice = tc.get("toolChoice")
    if isinstance(choice, dict) and choice:
        mode = next(iter(choice))
        if mode not in _CHOICE:
            raise BadRequest("toolConfig.toolChoice: must be one of {auto: {}}, {any: {}}, {tool: {name}}")
        name = None
        if mode == "tool":
            named = _obj(choice["tool"], "toolConfig.toolChoice.tool", 'an object like {"name": "<tool>"}')
            name = named.get("name")
            if not isinstance(name, str) or not name:
                raise BadRequest("toolConfig.toolChoice.tool.name: required, the name of one of toolConfig.tools")
        ir.tool_choice = ToolChoice(_CHOICE[mode], name)


def read_content(content: Any, where: str) -> list[IrBlock]:
    """A Converse content list (message or system) -> IR blocks; ``where`` names the key path."""
    if not isinstance(content, list):
        raise BadRequest(f"{where}: must be a list of content blocks")
    out: list[IrBlock] = []
    for j, b in enumerate(content):
        if not isinstance(b, dict) or not b:
            raise BadRequest(f"{where}.{j}: must be a content block object")
        if "cachePoint" in b:
            _mark(out)
            continue
        out.append(read_block(b, f"{where}.{j}"))
    return out


def read_block(b: dict[str, Any], where: str) -> IrBlock:
    """One Converse content block -> IR block.

    Raises:
        BadRequest: a block type or source the IR cannot carry (names ``where``).
    """
    if "text" in b:
        text = b["text"]
        if not isinstance(text, str):
            raise BadRequest(f"{where}.text: must be a string")
        return TextBlock(text)
    if "toolUse" in b:
        tu = _obj(b["toolUse"], f"{where}.toolUse",
                  "an object like {\"toolUseId\": \"t1\", \"name\": \"get_weather\", \"input\": {}}")
        return ToolUseBlock(_opt_str(tu.get("toolUseId"), f"{where}.toolUse.toolUseId") or "",
                            _opt_str(tu.get("name"), f"{where}.toolUse.name") or "", tu.get("input", {}))
    if "toolResult" in b:
        tr = _obj(b["toolResult"], f"{where}.toolResult",
                  "an object like {\"toolUseId\": \"t1\", \"content\": [{\"text\": \"...\"}]}")
        content = tr.get("content") or []
        if not isinstance(content, list):
            raise BadRequest(f"{where}.toolResult.content: must be a list of blocks like [{{\"text\": \"...\"}}]")
        blocks: list[IrBlock] = []
        for k, c in enumerate(content):
            at = f"{where}.toolResult.content.{k}"
            if not isinstance(c, dict) or not c:
                raise BadRequest(f"{at}: must be one of {{\"text\": ...}}, {{\"json\": ...}}, {{\"image\": ...}}, "
                                 "{\"document\": ...}")
            if "json" in c:
                blocks.append(TextBlock(orjson.dumps(c["json"]).decode()))
            else:
                blocks.append(read_block(c, at))
        return ToolResultBlock(_opt_str(tr.get("toolUseId"), f"{where}.toolResult.toolUseId") or "", blocks,
                               tr.get("status") == "error")
    if "reasoningContent" in b:
        rc = _obj(b["reasoningContent"], f"{where}.reasoningContent",
                  "an object like {\"reasoningText\": {\"text\": \"...\"}}")
        rt = rc.get("reasoningText")
        if isinstance(rt, dict):
            return ThinkingBlock(_opt_str(rt.get("text"), f"{where}.reasoningContent.reasoningText.text") or "",
                                 _opt_str(rt.get("signature"), f"{where}.reasoningContent.reasoningText.signature"))
        if "redactedContent" in rc:
            data = _opt_str(rc["redactedContent"], f"{where}.reasoningContent.redactedContent")
            return ThinkingBlock(redacted=True, data=data)
        raise BadRequest(f"{where}.reasoningContent: needs reasoningText or redactedContent")
    if "image" in b:
        img = _obj(b["image"], f"{where}.image", "an object like {\"format\": \"png\", \"source\": {\"bytes\": ...}}")
        fmt = img.get("format")
        source = _obj(img.get("source") or {}, f"{where}.image.source", 'an object like {"bytes": "<base64>"}')
        data = source.get("bytes")
        if not isinstance(fmt, str) or fmt not in IMAGE_FORMATS:
            raise BadRequest(f"{where}.image.format: {fmt!r} is not one of png, jpeg, gif, webp")
        return ImageBlock("base64", media_type=IMAGE_FORMATS[fmt], data=_base64(data, f"{where}.image.source.bytes"))
    if "document" in b:
        doc = _obj(b["document"], f"{where}.document",
                   "an object like {\"format\": \"pdf\", \"name\": \"doc\", \"source\": {\"bytes\": ...}}")
        fmt = doc.get("format") or "txt"
        mime = DOCUMENT_FORMATS.get(fmt) if isinstance(fmt, str) else None
        if mime is None:
            raise BadRequest(f"{where}.document.format: {fmt!r} is not one of {', '.join(DOCUMENT_FORMATS)}")
        src = _obj(doc.get("source") or {}, f"{where}.document.source", "an object like {\"bytes\": \"<base64>\"}")
        if "bytes" in src:
            data = _base64(src["bytes"], f"{where}.document.source.bytes")
        elif isinstance(src.get("text"), str):
            data = base64.b64encode(src["text"].encode()).decode("ascii")
        else:
            raise BadRequest(f"{where}.document.source: only bytes or text are supported (no s3Location)")
        return DocumentBlock(mime, data=data, name=_opt_str(doc.get("name"), f"{where}.document.name"))
    kind = next(iter(b))
    raise BadRequest(
        f"{where}.{kind}: not supported (text, image, document, toolUse, toolResult, "
        "reasoningContent, cachePoint)"
    )
