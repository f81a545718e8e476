"""Anthropic Messages (``POST /v1/messages``) as the real API speaks it.

Shapes follow ``fixtures/anthropic/``: the non-stream message of ``prompt-cache-write`` and the
usage block of ``thinking-stream`` (cache fields, ``cache_creation``, ``service_tier``,
``inference_geo``). Streams copy the captured framing: every event has an ``event:`` line, data lines
carry the API's trailing-space padding, ``ping`` (``{"type": "ping"}``, with its space) follows the
first ``content_block_start``, tool input arrives as ``input_json_delta`` fragments after an empty
one, and ``message_delta`` carries the stop reason and usage before ``message_stop``. Error bodies are
the captured ``error-*.response.json`` files, byte for byte; the mid-stream error is the documented
``event: error`` with ``overloaded_error``.

What must not live here: routing, fault injection, socket handling.
"""

from __future__ import annotations

from typing import Any

import orjson

from .base import Dialect, ErrorReply, Rendered, mint_id, text_of
from .reply import Prompt, Reply, ToolSpec

__all__ = ["AnthropicMessages"]

_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"
_STOP = {"end": "end_turn", "stop_sequence": "stop_sequence", "length": "max_tokens", "tool": "tool_use"}
_PING = b'event: ping\ndata: {"type": "ping"}\n\n'
# Trailing-space padding of successive data lines (deterministic; the API pads by varying amounts).
_PADS = (12, 1, 9, 4, 15, 0, 7, 3, 11, 5, 14, 2, 8, 6, 13, 10)

# status -> (capture, error type, fallback message)
_ERRORS: dict[int, tuple[str | None, str, str]] = {
    400: ("anthropic/error-400-invalid-request.response.json", "invalid_request_error", "Invalid request."),
    401: ("anthropic/error-401-authentication.response.json", "authentication_error", "invalid x-api-key"),
    403: (
        None,
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("anthropic/error-404-model-not-found.response.json", "not_found_error", "Not found."),
    413: (None, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "anthropic/error-429-rate-limit.response.json",
        "rate_limit_error",
        "This request would exceed your account's rate limit. Please try again later.",
    ),
    500: (None, "api_error", "Internal server error"),
    529: (None, "overloaded_error", "Overloaded"),
}


def error_body(kind: str, message: str, request_id: str | None = None) -> bytes:
    """An Anthropic error envelope (compact JSON), with ``request_id`` when given."""
    obj: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    if request_id:
        obj["request_id"] = request_id
    return orjson.dumps(obj)


def _tool_choice(raw: Any) -> str:
    if isinstance(raw, dict):
        kind = raw.get("type")
        if kind == "none":
            return "none"
        if kind == "any":
            return "required"
        if kind == "tool" and isinstance(raw.get("name"), str):
            return str(raw["name"])
    return "auto"


def _split_input(args_json: str) -> list[str]:
    step = max(1, -(-len(args_json) // 3))
    return [""] + [args_json[i : i + step] for i in range(0, len(args_json), step)]


class AnthropicMessages(Dialect):
    """The Anthropic Messages dialect (``match.protocol: "anthropic"``)."""

    name = "anthropic"
    request_id_header = "request-id"

    def authorized(self, headers: dict[str, str]) -> bool:
        """``x-api-key: <key>`` or ``Authorization: Bearer <token>``, non-empty."""
        if headers.get("x-api-key", "").strip():
            return True
        auth = headers.get("authorization", "")
        return auth[:7].lower() == "bearer " and bool(auth[7:].strip())

    def bad_json(self) -> ErrorReply:
        """400 ``invalid_request_error`` for a body that is not a JSON object."""
        return ErrorReply(400, error_body("invalid_request_error", "Request body is not valid JSON."))

    def error_reply(self, status: int, message: str | None = None) -> ErrorReply:
        """Captured body for 400/401/404/429; synthesized Anthropic envelope for other statuses."""
        rel, kind, fallback = _ERRORS.get(
            status, (None, "api_error" if status >= 500 else "invalid_request_error", f"Mock error {status}.")
        )
        synthesized = error_body(kind, message or fallback, mint_id("req_011C", status, 20, salt="err"))
        if rel is None or message is not None:
            return ErrorReply(status, synthesized)
        return ErrorReply(status, self.fixtures.read_or(rel, synthesized))

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        """Validate model/max_tokens/messages as the API does and read the prompt."""
        for key in ("model", "max_tokens", "messages"):
            if key not in body:
                return ErrorReply(400, error_body("invalid_request_error", f"{key}: Field required"))
        model, cap, messages = body["model"], body["max_tokens"], body["messages"]
        if not isinstance(model, str) or not model:
            return ErrorReply(
                400, error_body("invalid_request_error", "model: Input should be a valid string")
            )
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            msg = "max_tokens: Input should be greater than or equal to 1"
            return ErrorReply(400, error_body("invalid_request_error", msg))
        if not isinstance(messages, list) or not messages:
            msg = "messages: at least one message is required"
            return ErrorReply(400, error_body("invalid_request_error", msg))
        chars = len(text_of(body.get("system")))
        last_user, tool_result = "", None
        for msg in messages:
            if not isinstance(msg, dict):
                continue
            content = msg.get("content")
            chars += len(text_of(content)) + 4
            if msg.get("role") != "user":
                continue
            blocks = content if isinstance(content, list) else []
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            if results:
                tool_result = " ".join(text_of(b.get("content")) for b in results)
            else:
                last_user, tool_result = text_of(content), None
        last = messages[-1] if isinstance(messages[-1], dict) else {}
        if last.get("role") != "user":
            tool_result = None
        tools = [
            ToolSpec(t["name"], t["input_schema"])
            for t in body.get("tools") or ()
            if isinstance(t, dict)
            and isinstance(t.get("name"), str)
            and isinstance(t.get("input_schema"), dict)
        ]
        stops = tuple(s for s in body.get("stop_sequences") or () if isinstance(s, str))
        return Prompt(
            model=model,
            stream=body.get("stream") is True,
            max_tokens=cap,
            stop=stops,
            last_user_text=last_user,
            tool_result=tool_result,
            tools=tools,
            tool_choice=_tool_choice(body.get("tool_choice")),
            prompt_chars=chars,
        )

    @staticmethod
    def _usage(reply: Reply, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": reply.prompt_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": output_tokens,
            "service_tier": "standard",
            "inference_geo": "not_available",
        }

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        """``message`` JSON, or the SSE event sequence ``message_start`` ... ``message_stop``."""
        mid = mint_id("msg_01", seq, 22)
        call = reply.tool_call
        tool_id = mint_id("toolu_01", seq, 22, salt="toolu") if call else ""
        stop_reason = _STOP[reply.finish]
        if not prompt.stream:
            content: list[dict[str, Any]] = []
            if call:
                content.append(
                    {"type": "tool_use", "id": tool_id, "name": call.name, "input": call.arguments}
                )
            elif reply.pieces:
                content.append({"type": "text", "text": reply.text})
            obj = {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "model": prompt.model,
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": reply.stop_sequence,
                "usage": self._usage(reply, reply.completion_tokens),
            }
            return Rendered(_JSON, body=orjson.dumps(obj))
        frames: list[bytes] = []

        def event(obj: dict[str, Any]) -> None:
            pad = b" " * _PADS[len(frames) % len(_PADS)]
            frames.append(b"event: " + obj["type"].encode() + b"\ndata: " + orjson.dumps(obj) + pad + b"\n\n")

        start: dict[str, Any] = {"id": mid, "type": "message", "role": "assistant", "model": prompt.model}
        start |= {"content": [], "stop_reason": None, "stop_sequence": None, "usage": self._usage(reply, 1)}
        event({"type": "message_start", "message": start})
        if call:
            block: dict[str, Any] = {"type": "tool_use", "id": tool_id, "name": call.name, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": f} for f in _split_input(call.arguments_json)
            ]
        else:
            block = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in reply.pieces]
        event({"type": "content_block_start", "index": 0, "content_block": block})
        frames.append(_PING)
        for delta in deltas:
            event({"type": "content_block_delta", "index": 0, "delta": delta})
        event({"type": "content_block_stop", "index": 0})
        usage = {
            "input_tokens": reply.prompt_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": reply.completion_tokens,
        }
        delta_obj = {"stop_reason": stop_reason, "stop_sequence": reply.stop_sequence}
        event({"type": "message_delta", "delta": delta_obj, "usage": usage})
        event({"type": "message_stop"})
        return Rendered(_SSE, frames=frames)

    def stream_error_frame(self, error: Any) -> bytes:
        """``event: error``: ``overloaded_error`` (default), ``api_error`` + a message, or a given payload."""
        if isinstance(error, dict):
            payload = error
        elif isinstance(error, str):
            payload = {"type": "error", "error": {"type": "api_error", "message": error}}
        else:
            payload = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return b"event: error\ndata: " + orjson.dumps(payload) + b"\n\n"

    def sse_frame(self, item: Any) -> bytes:
        """Scripted item: a dict with a string ``type`` gets ``event: <type>``; others are data only."""
        if isinstance(item, dict) and isinstance(item.get("type"), str):
            head = b"event: " + str(item["type"]).encode() + b"\ndata: "
            return head + orjson.dumps(item) + b"\n\n"
        frame: bytes = super().sse_frame(item)
        return frame

    def request_id(self, seq: int) -> str:
        """Anthropic request ids look like ``req_011C...``."""
        return mint_id("req_011C", seq, 20, salt="req")
