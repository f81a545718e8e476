"""Cohere v2 Chat (``POST /v2/chat``) as the real API speaks it.

Shapes follow ``fixtures/cohere/``: the compact non-stream body of ``chat-text.response.json``
(``id`` a UUID, ``message.content`` text parts, ``finish_reason``, ``usage`` with ``billed_units``
and ``tokens``), ``tool-call.response.json`` (``tool_plan`` + ``tool_calls`` with ids like
``get_weather_dp3men9jrvhf`` and ``finish_reason: TOOL_CALL``), and the stream of
``chat-stream.response.sse.txt``: ``event: <type>`` + ``data:`` frames ``message-start``,
``content-start``, ``content-delta`` …, ``content-end``, ``message-end`` (finish reason and usage),
then ``data: [DONE]``. A tool call streams as ``tool-plan-delta`` …, ``tool-call-start``,
``tool-call-delta`` …, ``tool-call-end``. Errors are ``{"id", "message"}`` (the 404 is the capture;
401 is ``invalid api token``); the mid-stream error is a ``message-end`` with ``finish_reason:
"ERROR"`` and the message in ``delta.error``.

What must not live here: routing, fault injection, socket handling.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import orjson

from .base import Dialect, ErrorReply, Rendered, text_of
from .reply import Prompt, Reply, ToolSpec

__all__ = ["CohereChat"]

_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"
_FINISH = {"end": "COMPLETE", "stop_sequence": "STOP_SEQUENCE", "length": "MAX_TOKENS", "tool": "TOOL_CALL"}
_DONE = b"data: [DONE]\n\n"
_LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"

# status -> (capture, fallback message)
_ERRORS: dict[int, tuple[str | None, str]] = {
    400: (None, "invalid request: message must not be empty."),
    401: (None, "invalid api token"),
    404: ("cohere/error-404-model-not-found.response.json", "model not found"),
    429: (
        None,
        (
            "You are using a Trial key, which is limited to 20 API calls / minute. You can continue to use "
            "the Trial key for free or upgrade to a Production key with higher rate limits at "
            "'https://dashboard.cohere.com/api-keys'."
        ),
    ),
    500: (None, "internal server error, this has been reported to our developers"),
    503: (None, "service unavailable"),
}


def _uuid(seq: int, salt: str) -> str:
    return str(uuid.UUID(bytes=hashlib.blake2b(f"{salt}:{seq}".encode(), digest_size=16).digest(), version=4))


def error_body(message: str, seq: int = 0) -> bytes:
    """A Cohere error envelope ``{"id", "message"}`` (compact JSON)."""
    return orjson.dumps({"id": _uuid(seq, "err"), "message": message})


def _call_id(name: str, seq: int) -> str:
    digest = hashlib.blake2b(f"call:{seq}".encode(), digest_size=12).digest()
    return f"{name}_" + "".join(_LOWER[b % 36] for b in digest)


def _tool_text(content: Any) -> str:
    """Text of a ``role: tool`` message: a string, ``text`` parts, and ``document`` parts' ``data``."""
    if not isinstance(content, list):
        return text_of(content)
    parts: list[str] = []
    for p in content:
        doc = p.get("document") if isinstance(p, dict) else None
        if isinstance(doc, dict):
            data = doc.get("data")
            parts.append(data if isinstance(data, str) else orjson.dumps(data).decode())
        else:
            parts.append(text_of([p]))
    return " ".join(t for t in parts if t)


def _frame(obj: dict[str, Any]) -> bytes:
    etype: str = obj["type"]
    return b"event: " + etype.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


def _split_args(args_json: str) -> list[str]:
    step = max(1, -(-len(args_json) // 3))
    return [args_json[i : i + step] for i in range(0, len(args_json), step)]


class CohereChat(Dialect):
    """The Cohere v2 Chat dialect (``match.protocol: "cohere"``)."""

    name = "cohere"
    request_id_header = "x-debug-trace-id"

    def authorized(self, headers: dict[str, str]) -> bool:
        """``Authorization: Bearer <key>`` with a non-empty key."""
        auth = headers.get("authorization", "")
        return auth[:7].lower() == "bearer " and bool(auth[7:].strip())

    def bad_json(self) -> ErrorReply:
        """400 for a body that is not a JSON object."""
        return ErrorReply(400, error_body("invalid request: body is not valid JSON"))

    def error_reply(self, status: int, message: str | None = None) -> ErrorReply:
        """Captured body for 404; synthesized ``{"id", "message"}`` for other statuses."""
        rel, fallback = _ERRORS.get(status, (None, f"Mock error {status}."))
        synthesized = error_body(message or fallback, status)
        if rel is None or message is not None:
            return ErrorReply(status, synthesized)
        return ErrorReply(status, self.fixtures.read_or(rel, synthesized))

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        """Validate ``model``/``messages`` as the API does and read the prompt."""
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return ErrorReply(400, error_body("invalid request: model must be specified"))
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return ErrorReply(400, error_body("invalid request: messages must not be empty"))
        chars = 0
        last_user, tool_result = "", None
        for msg in messages:
            if not isinstance(msg, dict):
                continue
            text = text_of(msg.get("content"))
            chars += len(text) + 4
            if msg.get("role") == "user":
                last_user = text
        results = []
        for msg in reversed(messages):
            if not isinstance(msg, dict) or msg.get("role") != "tool":
                break
            results.append(_tool_text(msg.get("content")))
        if results:
            tool_result = " ".join(reversed(results))
        tools = []
        for tool in body.get("tools") or ():
            fn = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                params = fn.get("parameters")
                tools.append(ToolSpec(fn["name"], params if isinstance(params, dict) else {}))
        stops = tuple(s for s in body.get("stop_sequences") or () if isinstance(s, str))
        cap = body.get("max_tokens")
        choice = body.get("tool_choice")
        return Prompt(
            model=model,
            stream=body.get("stream") is True,
            max_tokens=cap if isinstance(cap, int) and not isinstance(cap, bool) else None,
            stop=stops,
            last_user_text=last_user,
            tool_result=tool_result,
            tools=tools,
            tool_choice={"NONE": "none", "REQUIRED": "required"}.get(choice, "auto"),
            prompt_chars=chars,
        )

    @staticmethod
    def _usage(reply: Reply) -> dict[str, Any]:
        return {
            "billed_units": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens},
            "tokens": {
                "input_tokens": reply.prompt_tokens + 62,
                "output_tokens": reply.completion_tokens + 1,
            },
        }

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        """v2 chat JSON, or the SSE events ``message-start`` … ``message-end`` + ``[DONE]``."""
        mid = _uuid(seq, "msg")
        finish = _FINISH[reply.finish]
        call = reply.tool_call
        plan = f"I will use the {call.name} tool." if call else ""
        call_id = _call_id(call.name, seq) if call else ""
        if not prompt.stream:
            message: dict[str, Any] = {"role": "assistant"}
            if call:
                fn = {"name": call.name, "arguments": call.arguments_json}
                message["tool_plan"] = plan
                message["tool_calls"] = [{"id": call_id, "type": "function", "function": fn}]
            else:
                message["content"] = [{"type": "text", "text": reply.text}]
            obj = {"id": mid, "message": message, "finish_reason": finish, "usage": self._usage(reply)}
            return Rendered(_JSON, body=orjson.dumps(obj))
        start_msg = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}
        frames = [_frame({"id": mid, "type": "message-start", "delta": {"message": start_msg}})]
        if call:
            for n, word in enumerate(plan.split(" ")):
                piece = word if n == 0 else " " + word
                frames.append(_frame({"type": "tool-plan-delta", "delta": {"message": {"tool_plan": piece}}}))
            tc = {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": ""}}
            frames.append(
                _frame({"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": tc}}})
            )
            for frag in _split_args(call.arguments_json):
                delta = {"message": {"tool_calls": {"function": {"arguments": frag}}}}
                frames.append(_frame({"type": "tool-call-delta", "index": 0, "delta": delta}))
            frames.append(_frame({"type": "tool-call-end", "index": 0}))
        else:
            content = {"type": "text", "text": ""}
            frames.append(
                _frame({"type": "content-start", "index": 0, "delta": {"message": {"content": content}}})
            )
            for piece in reply.pieces:
                text_delta = {"message": {"content": {"text": piece}}}
                frames.append(_frame({"type": "content-delta", "index": 0, "delta": text_delta}))
            frames.append(_frame({"type": "content-end", "index": 0}))
        end = {"finish_reason": finish, "usage": self._usage(reply)}
        frames.append(_frame({"type": "message-end", "delta": end}))
        frames.append(_DONE)
        return Rendered(_SSE, frames=frames)

    def stream_error_frame(self, error: Any) -> bytes:
        """``message-end`` with ``finish_reason: "ERROR"`` (a string replaces the message; a dict is the payload)."""
        if isinstance(error, dict):
            payload = error
        else:
            message = error if isinstance(error, str) else "internal server error"
            payload = {"type": "message-end", "delta": {"error": message, "finish_reason": "ERROR"}}
        return b"event: message-end\ndata: " + orjson.dumps(payload) + b"\n\n"

    def sse_frame(self, item: Any) -> bytes:
        """Scripted item: a dict with a string ``type`` gets ``event: <type>``; others are data only."""
        if isinstance(item, dict) and isinstance(item.get("type"), str):
            return _frame(item)
        frame: bytes = super().sse_frame(item)
        return frame

    def request_id(self, seq: int) -> str:
        """Cohere trace ids are 32 hex digits."""
        return hashlib.blake2b(f"trace:{seq}".encode(), digest_size=16).hexdigest()
