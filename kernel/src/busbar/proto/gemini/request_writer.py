"""IR -> Gemini ``generateContent`` request body (``write_request``), Busbar as the client.

The model goes in the URL (``egress_request``), so the body has none; nor does it carry a stream
flag. Rules:

- Never an empty collection (case C011): no ``tools: []``, no ``toolConfig`` without tools, no
  ``generationConfig: {}``, no empty ``stopSequences``, no content without parts. ``maxOutputTokens``
  is written only when the request has one (case C008: ``max_tokens: 2`` -> ``maxOutputTokens: 2``).
- Roles: user -> ``user``, assistant -> ``model``; system blocks -> ``systemInstruction.parts``.
- Tool calls (case C039): ``functionCall.args`` is the input object; ``None`` (OpenAI ``""``,
  ``"null"``) -> ``{}``; arguments that are not a JSON object (including unparsable OpenAI text)
  are a 400 naming the call. Tool results: ``functionResponse.response`` is the result text
  parsed when it is a JSON object, else ``{"output": <text unchanged>}``; an error result is
  ``{"error": <text>}``. The function name comes from the result (the readers fill it from the
  call it answers) or from the call with that id earlier in the request.
- Thought signatures (case C037): the ``thoughtSignature`` of a call is
  ``ToolUseBlock.thought_signature`` or, failing that, the one carried inside its id
  (``ids.split``); the carrier is removed from ids, and ids Busbar minted are not sent
  (``functionCall.id`` / ``functionResponse.id`` only for ids that came from elsewhere). A call
  that no Gemini model signed gets nothing, unless the lane opts in
  (``thought_signature_placeholder=True``): then the first unsigned call of each model turn gets
  Google's placeholder ``skip_thought_signature_validator``.
- Thinking blocks are not sent (Gemini does not take thought text back, and another protocol's
  signature is not a Gemini signature); named in ``dropped``.
- Images and documents: base64 -> ``inlineData {mimeType, data}`` (PDF, audio, any MIME type —
  case C040); URLs -> ``fileData {mimeType?, fileUri}``.
- Tool names that break Gemini's naming rules get deterministic aliases (``bedrock.names``).
- Tool schemas go as ``parametersJsonSchema`` (full JSON Schema), except OpenAPI-style ones with
  upper-case types, which go as ``parameters``.
- ``tool_choice``: auto ``AUTO``, required ``ANY``, none ``NONE``, a named tool ``ANY`` +
  ``allowedFunctionNames``. ``parallel_tool_calls: false`` has no Gemini field (dropped).
- ``response_format``: ``json_object`` -> ``responseMimeType: application/json``; ``json_schema``
  -> that plus ``responseJsonSchema``.
- Reasoning: a budget is copied (``-1`` dynamic verbatim), an effort word converts through the
  default table (minimal 1024, low 4096, medium 8192, high 16384; ``none`` -> 0), into
  ``thinkingConfig.thinkingBudget``; ``includeThoughts`` is the ask's, else true when thinking.
- ``user`` has no Gemini field (dropped).

Source: docs/config-at-a-glance.md#models; cases C008, C011, C037, C039,
C040, C048.
"""

from __future__ import annotations

from typing import Any

import orjson

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
from busbar.proto.bedrock.names import wire_name
from busbar.proto.errors import BadRequest
from busbar.proto.gemini.ids import SKIP_VALIDATOR, split, upstream_id
from busbar.proto.writer import drop

EFFORT_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 8192, "high": 16384, "none": 0}
"""The default effort table (docs/configuration.md ``limits.reasoning_effort_budgets``) plus ``none``."""

_CHOICE = {"auto": "AUTO", "required": "ANY", "none": "NONE", "tool": "ANY"}


def _is_openapi(schema: Any) -> bool:
    t = schema.get("type") if isinstance(schema, dict) else None
    return isinstance(t, str) and t.isupper()


def function_response(b: ToolResultBlock, dropped: list[str]) -> dict[str, Any]:
    """A tool result's ``functionResponse.response`` object (case C039)."""
    texts = []
    for c in b.content:
        if isinstance(c, TextBlock):
            texts.append(c.text)
        else:
            drop(dropped, "tool_result." + c.type)
    text = texts[0] if len(texts) == 1 else "\n".join(texts)
    if b.is_error:
        return {"error": text}
    if text[:1] == "{":
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            return obj
    return {"output": text}


def _tools(req: IrRequest, body: dict[str, Any], dropped: list[str]) -> None:
    """``tools`` (one ``functionDeclarations`` entry) and ``toolConfig`` of a request with tools;
    a Gemini client's own ``toolConfig`` (in ``extra``, same-protocol) wins."""
    decls = []
    for t in req.tools:
        d: dict[str, Any] = {"name": wire_name(t.name, gemini=True)}
        if t.description:
            d["description"] = t.description
        d["parameters" if _is_openapi(t.input_schema) else "parametersJsonSchema"] = t.input_schema
        decls.append(d)
        if t.cache_control is not None:
            drop(dropped, "cache_control")
    body["tools"] = [{"functionDeclarations": decls}]
    tc = req.tool_choice
    if tc is not None:
        fcc: dict[str, Any] = {"mode": _CHOICE.get(tc.mode, "AUTO")}
        if tc.mode == "tool" and tc.name:
            fcc["allowedFunctionNames"] = [wire_name(tc.name, gemini=True)]
        body["toolConfig"] = {"functionCallingConfig": fcc}
    if isinstance(req.extra.get("toolConfig"), dict):  # a Gemini client's own config (allowed names)
        body["toolConfig"] = req.extra["toolConfig"]
    if req.parallel_tool_calls is False:
        drop(dropped, "parallel_tool_calls")


class _Ctx:
    __slots__ = ("dropped", "names", "placeholder")

    def __init__(self, dropped: list[str], placeholder: bool):
        self.dropped = dropped
        self.names: dict[str, str] = {}  # call base id -> function name
        self.placeholder = placeholder


def write_request(
    req: IrRequest, upstream_model: str, *, thought_signature_placeholder: bool = False
) -> dict[str, Any]:
    """``IrRequest`` -> ``GenerateContentRequest`` body (no model: it goes in the URL).

    Args:
        req: the request; ``req.dropped`` gains the names of fields that could not be carried.
        upstream_model: the lane's model (unused in the body; part of the seam).
        thought_signature_placeholder: the lane opts in to Google's placeholder signature for
            function calls that no Gemini model signed (case C037).

    Returns:
        The JSON-ready body (shares leaf values with ``req``; do not mutate it in place).

    Raises:
        BadRequest: a tool call whose arguments are not a JSON object, or a tool result whose
            function name cannot be found.
    """
    ctx = _Ctx(req.dropped, thought_signature_placeholder)
    contents: list[dict[str, Any]] = []
    for m in req.messages:
        model = m.role == "assistant"
        parts = _parts(m.content, ctx, model)
        if parts:
            contents.append({"role": "model" if model else "user", "parts": parts})
    body: dict[str, Any] = {"contents": contents}
    if req.system:
        sys_parts = []
        for b in req.system:
            if isinstance(b, TextBlock):
                if b.text:
                    sys_parts.append({"text": b.text})
            else:
                drop(ctx.dropped, "system." + b.type)
        if sys_parts:
            body["systemInstruction"] = {"parts": sys_parts}
    extra = req.extra
    if req.tools:
        _tools(req, body, ctx.dropped)
    gc = _generation(req, ctx)
    more = extra.get("generationConfig")
    if isinstance(more, dict):
        gc = {**more, **gc}
    if gc:
        body["generationConfig"] = gc
    if req.user is not None:
        drop(ctx.dropped, "user")
    for k, v in extra.items():
        if k not in body and k != "generationConfig" and not k.startswith("__busbar_"):
            body[k] = v
    return body


def _generation(req: IrRequest, ctx: _Ctx) -> dict[str, Any]:
    gc: dict[str, Any] = {}
    if req.max_tokens is not None:
        gc["maxOutputTokens"] = req.max_tokens
    if req.temperature is not None:
        gc["temperature"] = req.temperature
    if req.top_p is not None:
        gc["topP"] = req.top_p
    if req.top_k is not None:
        gc["topK"] = req.top_k
    if req.stop:
        gc["stopSequences"] = req.stop
    if req.seed is not None:
        gc["seed"] = req.seed
    if req.presence_penalty is not None:
        gc["presencePenalty"] = req.presence_penalty
    if req.frequency_penalty is not None:
        gc["frequencyPenalty"] = req.frequency_penalty
    rf = req.response_format
    if isinstance(rf, dict):
        kind = rf.get("type")
        if kind == "json_object":
            gc["responseMimeType"] = "application/json"
        elif kind == "json_schema":
            gc["responseMimeType"] = "application/json"
            schema = (rf.get("json_schema") or {}).get("schema")
            if isinstance(schema, dict):
                gc["responseSchema" if _is_openapi(schema) else "responseJsonSchema"] = schema
        elif kind != "text":
            drop(ctx.dropped, "response_format")
    r = req.reasoning
    if r is not None:
        budget = r.budget_tokens
        if budget is None and r.effort is not None:
            budget = EFFORT_BUDGETS.get(r.effort, EFFORT_BUDGETS["high"])
        tcfg: dict[str, Any] = {}
        if budget is not None:
            tcfg["thinkingBudget"] = budget
        include = r.include_thoughts
        if include is None and budget is not None and budget != 0:
            include = True
        if include is not None:
            tcfg["includeThoughts"] = include
        if tcfg:
            gc["thinkingConfig"] = tcfg
    return gc


def _parts(blocks: list[IrBlock], ctx: _Ctx, model: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    first_call = True
    for b in blocks:
        if isinstance(b, TextBlock):
            if b.text:
                parts.append({"text": b.text})
        elif isinstance(b, ToolUseBlock):
            parts.append(_call(b, ctx, first_call))
            first_call = False
        elif isinstance(b, ToolResultBlock):
            base, _sig = split(b.tool_use_id)
            name = b.name or ctx.names.get(base)
            if not name:
                raise BadRequest(
                    f"tool result {b.tool_use_id!r}: the function name is unknown (no earlier tool call "
                    "with this id); a Gemini upstream needs it"
                )
            fr: dict[str, Any] = {"name": wire_name(name, gemini=True)}
            rid = upstream_id(base)
            if rid is not None:
                fr["id"] = rid
            fr["response"] = function_response(b, ctx.dropped)
            parts.append({"functionResponse": fr})
        elif isinstance(b, ImageBlock):
            if b.source == "base64":
                parts.append({"inlineData": {"mimeType": b.media_type or "image/png", "data": b.data}})
            else:
                fd: dict[str, Any] = {"fileUri": b.url}
                if b.media_type:
                    fd = {"mimeType": b.media_type, "fileUri": b.url}
                parts.append({"fileData": fd})
        elif isinstance(b, DocumentBlock):
            if b.data is not None:
                parts.append({"inlineData": {"mimeType": b.media_type, "data": b.data}})
            else:
                parts.append({"fileData": {"mimeType": b.media_type, "fileUri": b.url}})
        elif isinstance(b, ThinkingBlock):
            drop(ctx.dropped, "thinking")
            continue
        else:
            drop(ctx.dropped, getattr(b, "type", "block"))
            continue
        if b.cache_control is not None:
            drop(ctx.dropped, "cache_control")
    return parts


def _call(b: ToolUseBlock, ctx: _Ctx, first: bool) -> dict[str, Any]:
    inp = b.input
    if not isinstance(inp, dict):
        if inp is not None:
            raise BadRequest(
                f"tool call {b.id!r} ({b.name}): arguments must be a JSON object for a Gemini upstream"
            )
        inp = {}
    base, carried = split(b.id)
    ctx.names[base] = b.name
    fc: dict[str, Any] = {"name": wire_name(b.name, gemini=True), "args": inp}
    cid = upstream_id(base)
    if cid is not None:
        fc["id"] = cid
    part: dict[str, Any] = {"functionCall": fc}
    sig = b.thought_signature or carried
    if sig:
        part["thoughtSignature"] = sig
    elif first and ctx.placeholder:
        part["thoughtSignature"] = SKIP_VALIDATOR
    return part
