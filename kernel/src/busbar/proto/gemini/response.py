"""Gemini ``GenerateContentResponse`` <-> IR (non-streaming), plus the finish-reason and usage maps.

Shape: ``{"candidates": [{"content": {"parts": [...], "role": "model"}, "finishReason",
"index"}], "usageMetadata": {"promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount"?,
"cachedContentTokenCount"?, "toolUsePromptTokenCount"?, "totalTokenCount"}, "modelVersion",
"responseId"}``. Only candidate 0 is followed.

Usage (case C038): Google bills thinking as output, so IR ``output_tokens`` =
``candidatesTokenCount + thoughtsTokenCount`` and ``reasoning_tokens`` = ``thoughtsTokenCount``;
``promptTokenCount`` includes cached tokens, so IR ``input_tokens`` = ``promptTokenCount +
toolUsePromptTokenCount - cachedContentTokenCount`` and ``cache_read_tokens`` =
``cachedContentTokenCount``. Writing reverses it (``promptTokenCount`` = all prompt-side tokens,
cache writes folded in, as for OpenAI).

Finish reasons (case C008): ``STOP`` -> ``END_TURN`` (``TOOL_USE`` when the answer holds a
function call), ``MAX_TOKENS`` -> ``MAX_TOKENS``, ``SAFETY`` / ``RECITATION`` / ``BLOCKLIST`` /
``PROHIBITED_CONTENT`` / ``SPII`` / ``IMAGE_SAFETY`` / ``IMAGE_PROHIBITED_CONTENT`` /
``IMAGE_RECITATION`` -> ``SAFETY``, ``MALFORMED_FUNCTION_CALL`` / ``UNEXPECTED_TOOL_CALL`` ->
``ERROR`` (not an answer), anything else -> ``OTHER``. A prompt blocked before generation
(``promptFeedback.blockReason``, no candidates) is ``SAFETY`` with no content. IR -> Gemini:
``MAX_TOKENS`` -> ``MAX_TOKENS``, ``SAFETY``/``REFUSAL`` -> ``SAFETY``, ``ERROR`` -> ``OTHER``,
every other member -> ``STOP`` (an unknown upstream value is a plain stop, case C047).

Function calls in an answer get an id that carries their ``thoughtSignature`` (``ids.carry``)
so that clients of any protocol send it back (case C037). Gemini clients get the id too, in
``functionCall.id``. A signature that is not canonical base64 (another protocol's opaque text)
is not written for a Gemini client: google-genai parses ``thoughtSignature`` as base64 bytes and
would reject the whole response (``is_base64``).

Source: docs/protocols/gemini.md#response-non-stream (usage nuance, stop reasons normalized); cases C008, C037,
C038, C039.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

import orjson

from busbar.ir.model import (
    IrBlock,
    IrRequest,
    IrResponse,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from busbar.proto.bedrock.names import client_name
from busbar.proto.gemini.ids import carry, mint_call_id
from busbar.proto.ids import random_chars

_SAFETY = (
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
)
FINISH_TO_IR: dict[Any, StopReason] = {
    "STOP": StopReason.END_TURN,
    "MAX_TOKENS": StopReason.MAX_TOKENS,
    "MALFORMED_FUNCTION_CALL": StopReason.ERROR,
    "UNEXPECTED_TOOL_CALL": StopReason.ERROR,
    **{name: StopReason.SAFETY for name in _SAFETY},
}
"""Gemini ``finishReason`` -> IR; anything else is ``OTHER``."""

IR_TO_FINISH: dict[StopReason | None, str] = {
    StopReason.END_TURN: "STOP",
    StopReason.STOP_SEQUENCE: "STOP",
    StopReason.MAX_TOKENS: "MAX_TOKENS",
    StopReason.TOOL_USE: "STOP",
    StopReason.SAFETY: "SAFETY",
    StopReason.REFUSAL: "SAFETY",
    StopReason.PAUSE_TURN: "STOP",
    StopReason.ERROR: "OTHER",
    StopReason.OTHER: "STOP",
}
"""IR stop reason -> a valid Gemini ``finishReason`` (every member mapped)."""

_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_B64_TEXT = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
_TO_URL = str.maketrans("+/", "-_")


def is_base64(value: str) -> bool:
    """True for canonical base64 (either alphabet, padding optional): what a ``bytes`` field accepts.

    google-genai validates ``thoughtSignature`` as base64 bytes and rejects the whole response
    otherwise, so a signature that is not (another protocol's opaque text) is not sent to a
    Gemini client.
    """
    if not _B64_TEXT.fullmatch(value):
        return False
    t = value.rstrip("=").translate(_TO_URL)
    try:
        raw = base64.urlsafe_b64decode(t + "=" * (-len(t) % 4))
    except (binascii.Error, ValueError):
        return False
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == t


def mint_response_id() -> str:
    """A ``responseId`` shaped like Gemini's (23 base64url characters)."""
    return random_chars(_ID_CHARS, 23, 18)


def finish_to_ir(finish: Any, has_call: bool) -> StopReason:
    """``finishReason`` (+ whether the answer holds a function call) -> IR stop reason."""
    reason = FINISH_TO_IR.get(finish, StopReason.OTHER)
    if reason is StopReason.END_TURN and has_call:
        return StopReason.TOOL_USE
    return reason


def usage_from_gemini(u: dict[str, Any] | None) -> Usage:
    """``usageMetadata`` -> IR ``Usage`` (see the module docstring)."""
    if not u:
        return Usage()
    prompt = (u.get("promptTokenCount") or 0) + (u.get("toolUsePromptTokenCount") or 0)
    cached = u.get("cachedContentTokenCount") or 0
    thoughts = u.get("thoughtsTokenCount") or 0
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=(u.get("candidatesTokenCount") or 0) + thoughts,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
    )


def usage_to_gemini(u: Usage) -> dict[str, Any]:
    """IR ``Usage`` -> ``usageMetadata`` (thoughts and cache counts only when non-zero)."""
    prompt = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
    thoughts = min(u.reasoning_tokens, u.output_tokens)
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": u.output_tokens - thoughts,
        "totalTokenCount": prompt + u.output_tokens,
    }
    if thoughts:
        out["thoughtsTokenCount"] = thoughts
    if u.cache_read_tokens:
        out["cachedContentTokenCount"] = u.cache_read_tokens
    return out


def call_block(fc: dict[str, Any], signature: str | None) -> ToolUseBlock:
    """An answer's ``functionCall`` (+ its part's ``thoughtSignature``) -> ``ToolUseBlock``.

    The id is Gemini's when it sent one, else minted; the signature rides inside it (``ids``).
    """
    base = fc.get("id") or mint_call_id()
    args = fc.get("args")
    return ToolUseBlock(
        carry(base, signature),
        client_name(fc.get("name") or ""),
        {} if args is None else args,
        thought_signature=signature,
    )


def read_candidate_parts(parts: Any) -> list[IrBlock]:
    """Answer parts -> IR blocks: text, thought (+ signature) and function calls; others skipped."""
    out: list[IrBlock] = []
    thinking: ThinkingBlock | None = None
    for p in parts or ():
        if not isinstance(p, dict):
            continue
        sig = p.get("thoughtSignature")
        text = p.get("text")
        if text is not None:
            if p.get("thought"):
                if thinking is None:
                    thinking = ThinkingBlock(text, sig)
                    out.append(thinking)
                else:
                    thinking.text += text
                    if sig:
                        thinking.signature = sig
            else:
                thinking = None
                if text:
                    out.append(TextBlock(text))
            continue
        thinking = None
        fc = p.get("functionCall")
        if isinstance(fc, dict):
            out.append(call_block(fc, sig))
    return out


def read_response(body: dict[str, Any]) -> IrResponse:
    """``GenerateContentResponse`` -> ``IrResponse`` (candidate 0)."""
    cands = body.get("candidates")
    cand = cands[0] if cands else None
    usage = usage_from_gemini(body.get("usageMetadata"))
    if not isinstance(cand, dict):
        blocked = (body.get("promptFeedback") or {}).get("blockReason")
        return IrResponse(
            id=body.get("responseId"),
            model=body.get("modelVersion"),
            content=[],
            stop_reason=StopReason.SAFETY if blocked else StopReason.OTHER,
            usage=usage,
        )
    content = read_candidate_parts((cand.get("content") or {}).get("parts"))
    has_call = any(isinstance(b, ToolUseBlock) for b in content)
    return IrResponse(
        id=body.get("responseId"),
        model=body.get("modelVersion"),
        content=content,
        stop_reason=finish_to_ir(cand.get("finishReason"), has_call),
        usage=usage,
    )


def args_object(value: Any) -> dict[str, Any]:
    """A tool input as Gemini ``args`` (an object): ``None`` -> ``{}``, a non-object kept under ``_raw``."""
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    return {"_raw": value if isinstance(value, str) else orjson.dumps(value).decode()}


def response_part(b: IrBlock) -> dict[str, Any] | None:
    """One IR answer block -> a Gemini response part (None: not an answer block)."""
    if isinstance(b, TextBlock):
        return {"text": b.text}
    if isinstance(b, ThinkingBlock):
        if b.redacted:
            return None
        part: dict[str, Any] = {"text": b.text, "thought": True}
        if b.signature and is_base64(b.signature):
            part["thoughtSignature"] = b.signature
        return part
    if isinstance(b, ToolUseBlock):
        part = {"functionCall": {"id": b.id, "name": b.name, "args": args_object(b.input)}}
        if b.thought_signature and is_base64(b.thought_signature):
            part["thoughtSignature"] = b.thought_signature
        return part
    return None


def write_response(resp: IrResponse, model: str, req: IrRequest) -> dict[str, Any]:
    """``IrResponse`` -> ``GenerateContentResponse`` for a Gemini client.

    Args:
        resp: the translated response.
        model: the name the client called (``modelVersion``).
        req: the client's request (unused here; part of the seam).

    Returns:
        ``{"candidates": [{"content": {"parts", "role": "model"}, "finishReason", "index": 0}],
        "usageMetadata", "modelVersion", "responseId"}`` with a freshly minted ``responseId``.
    """
    parts = [d for b in resp.content if (d := response_part(b)) is not None]
    return {
        "candidates": [
            {
                "content": {"parts": parts, "role": "model"},
                "finishReason": IR_TO_FINISH.get(resp.stop_reason, "STOP"),
                "index": 0,
            }
        ],
        "usageMetadata": usage_to_gemini(resp.usage),
        "modelVersion": model,
        "responseId": mint_response_id(),
    }
