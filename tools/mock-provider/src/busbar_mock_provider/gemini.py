"""Gemini (``POST [prefix]/v1beta/models/{model}:generateContent`` / ``:streamGenerateContent``) as Google serves it.

Shapes follow ``fixtures/gemini/``: a non-stream answer is a ``GenerateContentResponse``
(``candidates[0].content.parts``, ``finishReason``, ``index``; ``usageMetadata`` with
``promptTokensDetails``; ``modelVersion``; ``responseId``), pretty-printed as Google's REST
frontend does by default. ``:streamGenerateContent?alt=sse`` writes ``data: <json>`` events
separated by ``\\r\\n\\r\\n`` with Google's spacing (``"key": value``, items joined by ``,``),
each a full response holding the new part and the running ``usageMetadata``; the last one adds
``finishReason`` and ``candidatesTokenCount``; there is no terminator. Without ``alt=sse`` the
same chunks form one JSON array written as it goes: ``[`` + first, ``,\\r\\n`` + next, ``]``.

Audio understanding (Gemini API reference "Audio understanding": the audio as an ``inline_data``
part ``{"mime_type": "audio/...", "data": base64}`` beside a text instruction; "Gemini represents
each second of audio as 32 tokens"; ``usageMetadata.promptTokensDetails`` lists them under
``"modality": "AUDIO"``): a non-stream request carrying an audio part is answered with the mock's
transcript (``audio.TRANSCRIPT``) and ``round(bytes / 16000 * 32)`` AUDIO prompt tokens (the mock's
16 kB-per-second audio clock, as its OpenAI transcriptions use).

The model comes from the URL (``match.model`` compares with it), the stream flag from the verb.
Auth: ``x-goog-api-key`` (or ``Authorization: Bearer`` as Vertex AI uses); a request with
neither gets Google's 403 PERMISSION_DENIED "unregistered callers" answer. Errors are the
captured bodies (400 ``API_KEY_INVALID``, 429 ``RESOURCE_EXHAUSTED``) or the google.rpc
envelope ``{"error": {"code", "message", "status"}}``; mid-stream, one ``{"error": ...}`` chunk.

Gemini 3 behaviour (models whose name starts with ``gemini-3``): the first ``functionCall``
part of a reply carries a ``thoughtSignature``, and a request whose current turn replays a model
function call without one is refused with Google's 400 INVALID_ARGUMENT "Function call is
missing a thought_signature …" (case C037).

What must not live here: routing, fault injection, socket handling.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson

from .audio import TRANSCRIPT
from .base import Dialect, ErrorReply, Rendered, mint_id
from .reply import Prompt, Reply, ToolSpec

__all__ = ["GeminiGenerate", "error_body"]

_JSON = "application/json; charset=UTF-8"
_SSE = "text/event-stream"
_FINISH = {"end": "STOP", "stop_sequence": "STOP", "length": "MAX_TOKENS", "tool": "STOP"}
_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_MESSAGES = {
    403: "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API.",
    404: "models/unknown is not found for API version v1beta, or is not supported for generateContent.",
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
    504: "Deadline expired before operation could complete.",
}
_CAPTURES = {
    400: "gemini/error-400-api-key-invalid.response.json",
    429: "gemini/error-429-resource-exhausted.response.json",
}
_MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools "
    "to work correctly, and missing thought_signature may lead to degraded model performance. "
    "Additional data, function call `default_api:{name}` , position {pos}. Please refer to "
    "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
_PLACEHOLDERS = ("skip_thought_signature_validator", "context_engineering_is_the_way_to_go")


def error_body(status: int, message: str) -> bytes:
    """Google's error envelope, 2-space indented with a trailing newline."""
    obj = {"error": {"code": status, "message": message, "status": _NAMES.get(status, "UNKNOWN")}}
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"


def _chunk_json(obj: Any) -> bytes:
    """Google's streaming JSON spacing: ``"key": value``, items joined by a bare comma."""
    return json.dumps(obj, separators=(",", ": "), ensure_ascii=False).encode()


def _lower_types(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            k: (v.lower() if k == "type" and isinstance(v, str) else _lower_types(v))
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [_lower_types(x) for x in schema]
    return schema


def _get(d: dict[str, Any], camel: str, snake: str) -> Any:
    v = d.get(camel)
    return d.get(snake) if v is None else v


def _text_of_parts(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return " ".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"]
    )


def _signature(seq: int) -> str:
    return base64.b64encode(f"mock-thought-signature:{seq}".encode()).decode()


class GeminiGenerate(Dialect):
    """The Gemini dialect (``match.protocol: "gemini"``); ``sse`` picks the stream framing."""

    name = "gemini"
    request_id_header = "server-timing"

    def __init__(self, fixtures: Any, sse: bool = True) -> None:
        super().__init__(fixtures)
        self.sse = sse

    def authorized(self, headers: dict[str, str]) -> bool:
        """``x-goog-api-key: <key>`` or ``Authorization: Bearer <token>``, non-empty."""
        if headers.get("x-goog-api-key", "").strip():
            return True
        auth = headers.get("authorization", "")
        return auth[:7].lower() == "bearer " and bool(auth[7:].strip())

    def auth_error(self) -> ErrorReply:
        """Google's 403 PERMISSION_DENIED for a call without any credential."""
        return ErrorReply(403, error_body(403, _MESSAGES[403]))

    def bad_json(self) -> ErrorReply:
        """400 INVALID_ARGUMENT "Invalid JSON payload received"."""
        return ErrorReply(400, error_body(400, "Invalid JSON payload received. Unexpected token."))

    def error_reply(self, status: int, message: str | None = None) -> ErrorReply:
        """Captured body for 400 (API_KEY_INVALID) and 429 (RESOURCE_EXHAUSTED); the envelope otherwise."""
        if message is None and status in _CAPTURES:
            return ErrorReply(status, self.fixtures.read_or(_CAPTURES[status], error_body(status, "error")))
        text = (
            message or _MESSAGES.get(status) or ("Internal error." if status >= 500 else "Invalid request.")
        )
        return ErrorReply(status, error_body(status, text))

    def request_id(self, seq: int) -> str:
        """Google sends no request id; its ``server-timing`` header is what every answer carries."""
        return f"gfet4t7; dur={100 + seq % 900}"

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        """Validate ``contents`` as Google does and read the prompt (model/stream injected from the URL)."""
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            return ErrorReply(
                400, error_body(400, "* GenerateContentRequest.contents: contents is not specified\n")
            )
        model = str(body.get("model") or "")
        if model.startswith("gemini-3"):
            err = self._check_signatures(contents)
            if err is not None:
                return err
        si = _get(body, "systemInstruction", "system_instruction")
        chars = len(_text_of_parts(si.get("parts")) if isinstance(si, dict) else "")
        last_user, tool_result = "", None
        for c in contents:
            if not isinstance(c, dict):
                continue
            raw_parts = c.get("parts")
            parts: list[Any] = raw_parts if isinstance(raw_parts, list) else []
            chars += len(_text_of_parts(parts)) + 4
            if c.get("role", "user") != "user":
                continue
            results = [_get(p, "functionResponse", "function_response") for p in parts if isinstance(p, dict)]
            results = [r for r in results if isinstance(r, dict)]
            if results:
                tool_result = " ".join(orjson.dumps(r.get("response")).decode() for r in results)
            else:
                last_user, tool_result = _text_of_parts(parts), None
        last = contents[-1] if isinstance(contents[-1], dict) else {}
        if last.get("role", "user") != "user":
            tool_result = None
        tools: list[ToolSpec] = []
        for t in body.get("tools") or ():
            decls = _get(t, "functionDeclarations", "function_declarations") if isinstance(t, dict) else None
            for d in decls or ():
                if isinstance(d, dict) and isinstance(d.get("name"), str):
                    schema = (
                        _get(d, "parametersJsonSchema", "parameters_json_schema")
                        or d.get("parameters")
                        or {"type": "object"}
                    )
                    tools.append(ToolSpec(d["name"], _lower_types(schema)))
        gc = _get(body, "generationConfig", "generation_config") or {}
        cap = _get(gc, "maxOutputTokens", "max_output_tokens") if isinstance(gc, dict) else None
        stops = _get(gc, "stopSequences", "stop_sequences") if isinstance(gc, dict) else None
        return Prompt(
            model=model,
            stream=body.get("stream") is True,
            max_tokens=cap if isinstance(cap, int) and not isinstance(cap, bool) else None,
            stop=tuple(s for s in stops or () if isinstance(s, str)),
            last_user_text=last_user,
            tool_result=tool_result,
            tools=tools,
            tool_choice=self._tool_choice(body),
            prompt_chars=chars,
            state=_audio_state(contents),
        )

    @staticmethod
    def _tool_choice(body: dict[str, Any]) -> str:
        tc = _get(body, "toolConfig", "tool_config")
        fcc = _get(tc, "functionCallingConfig", "function_calling_config") if isinstance(tc, dict) else None
        if not isinstance(fcc, dict):
            return "auto"
        mode = str(fcc.get("mode") or "AUTO").upper()
        allowed = _get(fcc, "allowedFunctionNames", "allowed_function_names")
        if mode == "NONE":
            return "none"
        if mode == "ANY":
            return str(allowed[0]) if isinstance(allowed, list) and len(allowed) == 1 else "required"
        return "auto"

    @staticmethod
    def _check_signatures(contents: list[Any]) -> ErrorReply | None:
        start = 0
        for i, c in enumerate(contents):
            if isinstance(c, dict) and c.get("role", "user") == "user":
                raw_parts = c.get("parts")
                parts: list[Any] = raw_parts if isinstance(raw_parts, list) else []
                if any(isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts):
                    start = i + 1
        for c in contents[start:]:
            if not isinstance(c, dict) or c.get("role") != "model":
                continue
            for pos, p in enumerate(c.get("parts") or ()):
                fc = _get(p, "functionCall", "function_call") if isinstance(p, dict) else None
                if not isinstance(fc, dict):
                    continue
                sig = _get(p, "thoughtSignature", "thought_signature")
                if not isinstance(sig, str) or not sig:
                    msg = _MISSING_SIGNATURE.format(name=fc.get("name"), pos=pos + 1)
                    return ErrorReply(400, error_body(400, msg))
                break  # only the first call of a turn is signed
        return None

    def _usage(self, reply: Reply, completion: int | None, audio_tokens: int = 0) -> dict[str, Any]:
        u: dict[str, Any] = {"promptTokenCount": reply.prompt_tokens + audio_tokens}
        if completion is not None:
            u["candidatesTokenCount"] = completion
        u["totalTokenCount"] = reply.prompt_tokens + audio_tokens + (completion or 0)
        u["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": reply.prompt_tokens}]
        if audio_tokens:
            u["promptTokensDetails"].append({"modality": "AUDIO", "tokenCount": audio_tokens})
        return u

    def _response(
        self, parts: list[dict[str, Any]], finish: str | None, usage: dict[str, Any], model: str, rid: str
    ) -> dict[str, Any]:
        cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if finish is not None:
            cand["finishReason"] = finish
        cand["index"] = 0
        return {"candidates": [cand], "usageMetadata": usage, "modelVersion": model, "responseId": rid}

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        """``GenerateContentResponse`` JSON, or the chunk stream (SSE or JSON array)."""
        rid = mint_id("", seq, 23, salt="gemini-rid")
        finish = _FINISH[reply.finish]
        call = reply.tool_call
        audio = (prompt.state or {}).get("audio_bytes")
        if audio is not None and not call:        # audio understanding: the transcript, audio tokens billed
            return Rendered(_JSON, body=orjson.dumps(self._response(
                [{"text": TRANSCRIPT}], "STOP", self._usage(reply, 10, round(audio / AUDIO_BYTES_PER_SECOND * 32)),
                prompt.model, rid), option=orjson.OPT_INDENT_2) + b"\n")
        if call:
            part: dict[str, Any] = {"functionCall": {"name": call.name, "args": call.arguments}}
            if prompt.model.startswith("gemini-3"):
                part["thoughtSignature"] = _signature(seq)
            chunks: list[tuple[list[dict[str, Any]], str | None, dict[str, Any]]] = [
                ([part], finish, self._usage(reply, reply.completion_tokens))
            ]
        elif not prompt.stream:
            chunks = [([{"text": reply.text}], finish, self._usage(reply, reply.completion_tokens))]
        else:
            pieces = reply.pieces or [""]
            chunks = []
            for i, piece in enumerate(pieces):
                last = i == len(pieces) - 1
                usage = self._usage(reply, reply.completion_tokens if last else None)
                chunks.append(([{"text": piece}], finish if last else None, usage))
        objs = [self._response(p, f, u, prompt.model, rid) for p, f, u in chunks]
        if not prompt.stream:
            return Rendered(_JSON, body=orjson.dumps(objs[0], option=orjson.OPT_INDENT_2) + b"\n")
        if self.sse:
            return Rendered(_SSE, frames=[b"data: " + _chunk_json(o) + b"\r\n\r\n" for o in objs])
        frames = [
            (b"[" if i == 0 else b",\r\n") + orjson.dumps(o, option=orjson.OPT_INDENT_2)
            for i, o in enumerate(objs)
        ]
        frames.append(b"\r\n]")
        return Rendered(_JSON, frames=frames)

    def stream_error_frame(self, error: Any) -> bytes:
        """``{"error": {...}}`` as one chunk: 500 INTERNAL by default, a message, or a given payload."""
        if isinstance(error, dict):
            payload = error
        else:
            msg = error if isinstance(error, str) else _MESSAGES[500]
            payload = {"error": {"code": 500, "message": msg, "status": "INTERNAL"}}
        if self.sse:
            return b"data: " + _chunk_json(payload) + b"\r\n\r\n"
        return b",\r\n" + orjson.dumps(payload, option=orjson.OPT_INDENT_2) + b"\r\n]"

    def sse_frame(self, item: Any) -> bytes:
        """Scripted item as Google frames it: ``data: <payload>\\r\\n\\r\\n`` (strings verbatim)."""
        payload = item.encode() if isinstance(item, str) else _chunk_json(item)
        return b"data: " + payload + b"\r\n\r\n"


AUDIO_BYTES_PER_SECOND = 16000
"""The mock's audio clock (the same as its OpenAI transcription ``duration``: 16 kB per second)."""


def _audio_state(contents: list[Any]) -> dict[str, Any] | None:
    """``{"audio_bytes": n}`` when the contents carry an ``inline_data`` / ``inlineData`` part whose
    ``mime_type`` is ``audio/*`` (the Gemini API's audio-understanding request shape), else ``None``."""
    total = None
    for c in contents:
        for p in (c.get("parts") or ()) if isinstance(c, dict) else ():
            blob = _get(p, "inlineData", "inline_data") if isinstance(p, dict) else None
            mime = _get(blob, "mimeType", "mime_type") if isinstance(blob, dict) else None
            if isinstance(mime, str) and mime.startswith("audio/") and isinstance(blob.get("data"), str):
                total = (total or 0) + len(base64.b64decode(blob["data"]))
    return None if total is None else {"audio_bytes": total}
