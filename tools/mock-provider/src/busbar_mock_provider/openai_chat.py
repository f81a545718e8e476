"""OpenAI Chat Completions (``POST /v1/chat/completions``) as the real API speaks it.

Shapes follow the captures in ``fixtures/openai-chat/``: ``text-basic.response.json`` and
``tool-result-followup.response.json`` (non-stream), ``text-stream-include-usage.response.sse.txt``
(``data:`` lines only, ``"usage":null`` on every chunk when usage was requested, a final chunk with
``"choices":[]`` and the usage, then ``data: [DONE]``) and ``tool-calls-parallel-stream.response.sse.txt``
(the first delta of a call carries index, id, type, name and ``arguments:""``; later ones only
argument fragments; no ``usage`` key when usage was not requested). Error bodies are the captured
``error-*.response.json`` files, byte for byte.

What must not live here: routing, fault injection, socket handling.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from .base import Dialect, ErrorReply, Rendered, mint_id, text_of
from .reply import Prompt, Reply, ToolSpec

__all__ = ["OpenAIChat"]

_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"
_FINISH = {"end": "stop", "stop_sequence": "stop", "length": "length", "tool": "tool_calls"}
_FINGERPRINT = "fp_mock0b5e7c"
_DONE = b"data: [DONE]\n\n"

# status -> (capture, fallback message, type, code)
_ERRORS: dict[int, tuple[str | None, str, str, str | None]] = {
    400: (
        "openai-chat/error-400-unsupported-value.response.json",
        "Invalid request.",
        "invalid_request_error",
        None,
    ),
    401: (
        "openai-chat/error-401-invalid-api-key.response.json",
        "Incorrect API key provided.",
        "invalid_request_error",
        "invalid_api_key",
    ),
    404: (
        "openai-chat/error-404-model-not-found.response.json",
        "The model does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
    ),
    429: (
        None,
        "Rate limit reached for requests. Please try again in 1s. "
        "Visit https://platform.openai.com/account/rate-limits to learn more.",
        "requests",
        "rate_limit_exceeded",
    ),
    500: (
        None,
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
    ),
    503: (None, "The server is overloaded or not ready yet.", "server_error", None),
}
_BAD_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
    "HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. "
    "If you have trouble figuring out how to fix this, please contact us through our help center at "
    "help.openai.com.)"
)


def error_body(message: str, kind: str, param: str | None = None, code: str | None = None) -> bytes:
    """An OpenAI error envelope, 2-space indented with a trailing newline as the API sends it."""
    obj = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"


def _tool_choice(raw: Any) -> str:
    if raw in ("none", "auto", "required"):
        return str(raw)
    if isinstance(raw, dict):
        fn = raw.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return str(fn["name"])
    return "auto"


def _split_args(args_json: str) -> list[str]:
    if len(args_json) <= 2:
        return [args_json]
    step = max(1, -(-len(args_json) // 3))
    return [args_json[i : i + step] for i in range(0, len(args_json), step)]


class OpenAIChat(Dialect):
    """The OpenAI Chat Completions dialect (``match.protocol: "openai"``)."""

    name = "openai"
    request_id_header = "x-request-id"

    def authorized(self, headers: dict[str, str]) -> bool:
        """``Authorization: Bearer <key>`` with a non-empty key, or Azure's ``api-key: <key>``."""
        if headers.get("api-key", "").strip():
            return True
        auth = headers.get("authorization", "")
        return auth[:7].lower() == "bearer " and bool(auth[7:].strip())

    def bad_json(self) -> ErrorReply:
        """400 ``invalid_request_error`` with the API's "could not parse the JSON body" text."""
        return ErrorReply(400, error_body(_BAD_JSON, "invalid_request_error"))

    def error_reply(self, status: int, message: str | None = None) -> ErrorReply:
        """Captured body for 400/401/404; synthesized OpenAI envelope for other statuses."""
        rel, fallback, kind, code = _ERRORS.get(
            status,
            (
                None,
                f"Mock error {status}.",
                "server_error" if status >= 500 else "invalid_request_error",
                None,
            ),
        )
        synthesized = error_body(message or fallback, kind, None, code)
        if rel is None or message is not None:
            return ErrorReply(status, synthesized)
        return ErrorReply(status, self.fixtures.read_or(rel, synthesized))

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        """Validate model/messages as the API does and read the prompt (see :class:`~.reply.Prompt`)."""
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return ErrorReply(400, error_body("you must provide a model parameter", "invalid_request_error"))
        messages = body.get("messages")
        if messages is None:
            msg = "Missing required parameter: 'messages'."
            return ErrorReply(
                400, error_body(msg, "invalid_request_error", "messages", "missing_required_parameter")
            )
        if not isinstance(messages, list) or not messages:
            msg = (
                "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                "but got an empty array instead."
            )
            return ErrorReply(400, error_body(msg, "invalid_request_error", "messages", "empty_array"))
        chars = 0
        last_user, tool_result = "", None
        for msg in messages:
            if not isinstance(msg, dict):
                continue
            text = text_of(msg.get("content"))
            chars += len(text) + 4
            for call in msg.get("tool_calls") or ():
                if isinstance(call, dict) and isinstance(call.get("function"), dict):
                    chars += len(str(call["function"].get("arguments", "")))
            if msg.get("role") == "user":
                last_user = text
        last = messages[-1] if isinstance(messages[-1], dict) else {}
        if last.get("role") in ("tool", "function"):
            tool_result = text_of(last.get("content"))
        tools = []
        for tool in body.get("tools") or ():
            fn = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                params = fn.get("parameters")
                tools.append(ToolSpec(fn["name"], params if isinstance(params, dict) else {}))
        stop = body.get("stop")
        stops = (stop,) if isinstance(stop, str) else tuple(s for s in stop or () if isinstance(s, str))
        cap = body.get("max_completion_tokens", body.get("max_tokens"))
        options = body.get("stream_options")
        return Prompt(
            model=model,
            stream=body.get("stream") is True,
            include_usage=isinstance(options, dict) and options.get("include_usage") is True,
            max_tokens=cap if isinstance(cap, int) and not isinstance(cap, bool) else None,
            stop=stops,
            last_user_text=last_user,
            tool_result=tool_result,
            tools=tools,
            tool_choice=_tool_choice(body.get("tool_choice")),
            prompt_chars=chars,
        )

    def _usage(self, reply: Reply) -> dict[str, Any]:
        return {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        """``chat.completion`` JSON, or ``chat.completion.chunk`` SSE frames ending in ``[DONE]``."""
        cid = mint_id("chatcmpl-", seq, 29)
        created = int(time.time())
        finish = _FINISH[reply.finish]
        call = reply.tool_call
        call_id = mint_id("call_", seq, 24, salt="call") if call else ""
        if not prompt.stream:
            message: dict[str, Any] = {"role": "assistant", "content": None if call else reply.text}
            if call:
                fn = {"name": call.name, "arguments": call.arguments_json}
                message["tool_calls"] = [{"id": call_id, "type": "function", "function": fn}]
            message["refusal"] = None
            obj = {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": prompt.model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": self._usage(reply),
                "system_fingerprint": _FINGERPRINT,
            }
            return Rendered(_JSON, body=orjson.dumps(obj))
        head = (
            b'data: {"id":"'
            + cid.encode()
            + b'","object":"chat.completion.chunk","created":'
            + str(created).encode()
            + b',"model":'
            + orjson.dumps(prompt.model)
            + b',"system_fingerprint":"'
            + _FINGERPRINT.encode()
            + b'","choices":['
        )
        tail = b'],"usage":null}\n\n' if prompt.include_usage else b"]}\n\n"

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            return head + orjson.dumps(choice) + tail

        if call:
            frames = [chunk({"role": "assistant", "content": None})]
            first = {"name": call.name, "arguments": ""}
            frames.append(
                chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": first}]})
            )
            for frag in _split_args(call.arguments_json):
                frames.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": frag}}]}))
        else:
            frames = [chunk({"role": "assistant", "content": "", "refusal": None})]
            frames.extend(chunk({"content": piece}) for piece in reply.pieces)
        frames.append(chunk({}, finish))
        if prompt.include_usage:
            frames.append(head + b'],"usage":' + orjson.dumps(self._usage(reply)) + b"}\n\n")
        frames.append(_DONE)
        return Rendered(_SSE, frames=frames)

    def stream_error_frame(self, error: Any) -> bytes:
        """``data: {"error":{...}}`` (type ``server_error``), as OpenAI-compatible servers fail mid-stream."""
        if isinstance(error, dict):
            return b"data: " + orjson.dumps(error) + b"\n\n"
        message = error if isinstance(error, str) else _ERRORS[500][1]
        obj = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
        return b"data: " + orjson.dumps(obj) + b"\n\n"
