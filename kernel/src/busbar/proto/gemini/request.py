"""Gemini ``generateContent`` request body -> IR (``read_request``); parts are read by ``parts``.

Shapes: the ``POST /v1beta/models/{model}:generateContent`` (and ``:streamGenerateContent``) body
— the model and the stream flag live in the URL, the proxy sets ``ir.model``/``ir.stream``.
``contents`` (``role`` user/model, ``parts``: ``text`` (``thought: true`` for thought
summaries), ``inlineData {mimeType, data}``, ``fileData {mimeType, fileUri}``, ``functionCall
{name, args, id?}`` + ``thoughtSignature``, ``functionResponse {name, response, id?}``),
``systemInstruction {parts}``, ``tools [{functionDeclarations: [{name, description,
parameters|parametersJsonSchema}]}]``, ``toolConfig.functionCallingConfig {mode,
allowedFunctionNames}``, ``generationConfig {maxOutputTokens, temperature, topP, topK,
stopSequences, seed, presencePenalty, frequencyPenalty, responseMimeType, responseSchema|
responseJsonSchema, thinkingConfig {thinkingBudget, includeThoughts, thinkingLevel}}``.
Both spellings the REST API accepts are read (``inlineData`` / ``inline_data`` …).

Decisions worth knowing:

- ``inlineData`` with an ``image/*`` type is an ``ImageBlock``, anything else (PDF, audio,
  video, text) a ``DocumentBlock`` with its MIME type (case C040). Base64url payloads (the
  google-genai SDK sends them) are converted to the standard alphabet the IR uses.
- A ``functionCall`` without ``id`` gets ``call_gm_<turn>_<part>`` (deterministic, never sent
  back to Gemini); its ``thoughtSignature`` goes to ``ToolUseBlock.thought_signature``. A
  ``functionResponse`` without ``id`` answers the earliest unanswered call of that name.
- ``functionResponse.response`` becomes the result text: ``{"output": "<s>"}`` -> ``<s>``,
  ``{"error": "<s>"}`` -> ``<s>`` with ``is_error``, any other object -> its compact JSON (the
  Gemini writer turns text that parses to an object back into that object — case C039).
- ``thoughtSignature`` is normalized to standard base64 with padding (the google-genai SDK
  re-encodes signatures base64url; the bytes are the same, and another protocol's signature —
  an Anthropic thinking signature replayed by a Gemini client — must come back in the alphabet
  it was issued in, which is the standard one).
- Consecutive ``thought`` parts merge into one ``ThinkingBlock`` (a stream splits one thought
  over many parts; the signature may ride on any of them). A ``thoughtSignature`` on a visible
  text part is not turned into thinking (case C037); Gemini does not require it back.
- OpenAPI-style schemas (``"type": "OBJECT"``) are lower-cased to JSON Schema types so other
  dialects can send them.
- ``thinkingConfig``: ``thinkingBudget`` -> ``ReasoningAsk.budget_tokens`` (``-1`` dynamic kept),
  ``thinkingLevel`` -> ``effort``, ``includeThoughts`` -> ``include_thoughts``.
- ``safetySettings``, ``cachedContent``, ``labels``, ``candidateCount`` and the other
  ``generationConfig`` fields go to ``extra`` (same-protocol only; the lossy-by-design list).
- Non-function tools (``googleSearch``, ``codeExecution`` …) are refused with a 400.

Source: docs/config-at-a-glance.md#models; cases C037, C039, C040.
"""

from __future__ import annotations

from typing import Any

from busbar.ir.model import (
    IrMessage,
    IrRequest,
    IrTool,
    ReasoningAsk,
    TextBlock,
    ToolChoice,
)
from busbar.proto.errors import BadRequest
from busbar.proto.gemini.casing import COUNT_TOKENS_KEY
from busbar.proto.gemini.parts import g, json_schema, read_parts

_GEN_KNOWN = {
    "maxOutputTokens": "max_tokens",
    "temperature": "temperature",
    "topP": "top_p",
    "topK": "top_k",
    "seed": "seed",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
}
_GEN_SNAKE = {
    "max_output_tokens": "maxOutputTokens",
    "top_p": "topP",
    "top_k": "topK",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
    "stop_sequences": "stopSequences",
    "response_mime_type": "responseMimeType",
    "response_schema": "responseSchema",
    "response_json_schema": "responseJsonSchema",
    "thinking_config": "thinkingConfig",
    "candidate_count": "candidateCount",
}
_TOP_KNOWN = frozenset({
    "contents", "systemInstruction", "system_instruction", "tools", "toolConfig", "tool_config",
    "generationConfig", "generation_config", "model"
})
_MODE = {"AUTO": "auto", "ANY": "required", "NONE": "none", "VALIDATED": "auto"}


def read_request(body: dict[str, Any]) -> IrRequest:
    """``generateContent`` request body -> ``IrRequest`` (``model``/``stream`` are set by the proxy).

    Raises:
        BadRequest: the body is not GenerateContentRequest shaped (the message names the key path).
    """
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    if COUNT_TOKENS_KEY in body:
        raise BadRequest("countTokens is answered by Gemini lanes only; this pool or model has a "
                         "lane of another protocol")
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise BadRequest("contents: required, must be a list of Content objects")
    ir = IrRequest()
    calls: dict[str, list[str]] = {}
    for i, c in enumerate(contents):
        if not isinstance(c, dict):
            raise BadRequest(f"contents[{i}]: must be an object")
        role = c.get("role") or "user"
        if role == "model":
            role = "assistant"
        elif role == "user" or role == "function":
            role = "user"
        else:
            raise BadRequest(f"contents[{i}].role: {role!r} is not one of user, model")
        ir.messages.append(IrMessage(role, read_parts(c.get("parts"), f"contents[{i}].parts", i, calls)))
    si = g(body, "systemInstruction", "system_instruction")
    if isinstance(si, dict):
        blocks = read_parts(si.get("parts"), "systemInstruction.parts", -1)
        ir.system = [b for b in blocks if isinstance(b, TextBlock)]
    elif isinstance(si, str):
        ir.system = [TextBlock(si)]
    tools = body.get("tools")
    if tools:
        ir.tools = _read_tools(tools)
    tc = g(body, "toolConfig", "tool_config")
    if isinstance(tc, dict):
        _read_tool_config(tc, ir)
    gc = g(body, "generationConfig", "generation_config")
    if isinstance(gc, dict) and gc:
        _read_generation(gc, ir)
    extra = ir.extra
    for k, v in body.items():
        if k not in _TOP_KNOWN:
            extra[k] = v
    return ir


def _read_tools(tools: Any) -> list[IrTool]:
    if not isinstance(tools, list):
        raise BadRequest("tools: must be a list")
    out: list[IrTool] = []
    for k, t in enumerate(tools):
        decls = g(t, "functionDeclarations", "function_declarations") if isinstance(t, dict) else None
        if not isinstance(decls, list):
            kind = next(iter(t), "?") if isinstance(t, dict) and t else t
            raise BadRequest(f"tools[{k}].{kind}: not supported (functionDeclarations only)")
        for n, d in enumerate(decls):
            name = d.get("name") if isinstance(d, dict) else None
            if not isinstance(name, str) or not name:
                raise BadRequest(f"tools[{k}].functionDeclarations[{n}].name: required")
            tool = IrTool(name, d.get("description") or None)
            schema = (
                g(d, "parametersJsonSchema", "parameters_json_schema")
                or d.get("parameters")
                or d.get("parametersJsonSchema")
            )
            if isinstance(schema, dict) and schema:
                tool.input_schema = json_schema(schema)
            out.append(tool)
    return out


def _read_tool_config(tc: dict[str, Any], ir: IrRequest) -> None:
    fcc = g(tc, "functionCallingConfig", "function_calling_config")
    if not isinstance(fcc, dict):
        return
    mode = str(fcc.get("mode") or "AUTO").upper()
    allowed = g(fcc, "allowedFunctionNames", "allowed_function_names")
    if mode not in _MODE:
        raise BadRequest(
            f"toolConfig.functionCallingConfig.mode: {mode!r} is not one of AUTO, ANY, NONE, VALIDATED"
        )
    if mode == "ANY" and isinstance(allowed, list) and len(allowed) == 1:
        ir.tool_choice = ToolChoice("tool", allowed[0])
        return
    ir.tool_choice = ToolChoice(_MODE[mode])
    if allowed:
        ir.extra["toolConfig"] = tc


def _read_generation(gc: dict[str, Any], ir: IrRequest) -> None:
    rest: dict[str, Any] = {}
    mime = schema = None
    for k, v in gc.items():
        k = _GEN_SNAKE.get(k, k)
        attr = _GEN_KNOWN.get(k)
        if attr is not None:
            setattr(ir, attr, v)
        elif k == "stopSequences":
            if v:
                ir.stop = list(v)
        elif k == "responseMimeType":
            mime = v
        elif k == "responseSchema" or k == "responseJsonSchema" or k == "_responseJsonSchema":
            schema = v
        elif k == "thinkingConfig" and isinstance(v, dict):
            ir.reasoning = _reasoning(v)
        elif k == "candidateCount" and v == 1:
            continue
        else:
            rest[k] = v
    if mime == "application/json":
        if isinstance(schema, dict):
            ir.response_format = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": json_schema(schema)},
            }
        else:
            ir.response_format = {"type": "json_object"}
    elif mime is not None and mime != "text/plain":
        rest["responseMimeType"] = mime
        if schema is not None:
            rest["responseSchema"] = schema
    if rest:
        ir.extra["generationConfig"] = rest


def _reasoning(tc: dict[str, Any]) -> ReasoningAsk | None:
    budget = g(tc, "thinkingBudget", "thinking_budget")
    level = g(tc, "thinkingLevel", "thinking_level")
    include = g(tc, "includeThoughts", "include_thoughts")
    if budget is None and level is None and include is None:
        return None
    effort = str(level).lower() if isinstance(level, str) and level else None
    return ReasoningAsk(
        effort=effort,
        budget_tokens=budget if isinstance(budget, int) else None,
        include_thoughts=include if isinstance(include, bool) else None,
    )
