"""Bedrock Converse (``POST [prefix]/model/{modelId}/converse`` / ``/converse-stream``) as AWS serves it.

Shapes follow ``fixtures/bedrock/``: a non-stream answer is compact JSON in the key order of
``converse-text.response.json`` (``metrics``, ``output.message`` {content, role}, ``stopReason``,
``usage`` {inputTokens, outputTokens, totalTokens}); a stream is binary
``application/vnd.amazon.eventstream`` (``eventstream.py``, valid CRCs) with the events of
``converse-stream-text.response.eventstream``: ``messageStart``, ``contentBlockDelta`` (text
blocks get no start event), ``contentBlockStart`` for a tool block, ``contentBlockStop``,
``messageStop`` {stopReason}, ``metadata`` {usage, metrics}; every JSON payload has sorted keys
and the ``"p"`` padding field.

The model id comes from the URL, percent-decoded (``us.amazon.nova-micro-v1%3A0`` ->
``...v1:0``); ``match.model`` compares with it. Auth: an ``Authorization: AWS4-HMAC-SHA256
Credential=…, SignedHeaders=…, Signature=…`` header (the signature is not verified: the mock
knows no secret) or a Bedrock API key as ``Authorization: Bearer``; without one, AWS's 403
``MissingAuthenticationTokenException``. Errors: ``{"message"}`` bodies (the captures for 400
``ValidationException`` and 429 ``ThrottlingException``) with the exception name in
``x-amzn-errortype``; mid-stream, an exception message (``:message-type exception``,
``:exception-type`` e.g. ``throttlingException``).

What must not live here: routing, fault injection, socket handling.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from .base import Dialect, ErrorReply, Rendered, mint_id, text_of
from .eventstream import event_message, exception_message
from .reply import Prompt, Reply, ToolSpec

__all__ = ["BedrockConverse"]

_JSON = "application/json"
_EVENTSTREAM = "application/vnd.amazon.eventstream"
_STOP = {"end": "end_turn", "stop_sequence": "stop_sequence", "length": "max_tokens", "tool": "tool_use"}
_CORAL = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
_CORAL_SERVICE = "{}:http://internal.amazon.com/coral/com.amazon.coral.service/"
_PAD = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

# status -> (capture, exception name, fallback message)
_ERRORS: dict[int, tuple[str | None, str, str]] = {
    400: (
        "bedrock/error-400-validation-invalid-model.response.json",
        "ValidationException",
        "The provided model identifier is invalid.",
    ),
    403: (None, "AccessDeniedException", "You don't have access to the model with the specified model ID."),
    404: (
        None,
        "ResourceNotFoundException",
        "Could not resolve the foundation model from the provided model identifier.",
    ),
    408: (None, "ModelTimeoutException", "Model has timed out in processing the request."),
    424: (None, "ModelErrorException", "The model returned an error."),
    429: (
        "bedrock/error-429-throttling.response.json",
        "ThrottlingException",
        "Too many requests, please wait before trying again.",
    ),
    500: (
        None,
        "InternalServerException",
        "The system encountered an unexpected error during processing. Try your request again.",
    ),
    503: (None, "ServiceUnavailableException", "Bedrock is unable to process your request."),
}


def _error(status: int, name: str, message: str) -> ErrorReply:
    return ErrorReply(status, orjson.dumps({"message": message}), (("x-amzn-errortype", name + _CORAL),))


def _event(kind: str, payload: dict[str, Any], n: int) -> bytes:
    payload["p"] = _PAD[: 1 + (n * 17 + len(kind)) % 60]
    return event_message(kind, orjson.dumps(payload, option=orjson.OPT_SORT_KEYS))


class BedrockConverse(Dialect):
    """The Bedrock Converse dialect (``match.protocol: "bedrock"``)."""

    name = "bedrock"
    request_id_header = "x-amzn-requestid"

    def authorized(self, headers: dict[str, str]) -> bool:
        """A SigV4 ``Authorization`` header (Credential, SignedHeaders, Signature) or ``Bearer <key>``."""
        auth = headers.get("authorization", "")
        if auth.startswith("AWS4-HMAC-SHA256 "):
            return all(f in auth for f in ("Credential=", "SignedHeaders=", "Signature="))
        return auth[:7].lower() == "bearer " and bool(auth[7:].strip())

    def auth_error(self) -> ErrorReply:
        """AWS's 403 for an unsigned request."""
        return ErrorReply(
            403,
            orjson.dumps({"message": "Missing Authentication Token"}),
            (("x-amzn-errortype", _CORAL_SERVICE.format("MissingAuthenticationTokenException")),),
        )

    def bad_json(self) -> ErrorReply:
        """400 ``SerializationException`` for a body that is not a JSON object."""
        return ErrorReply(
            400,
            orjson.dumps({"Message": "Unexpected character found in request body"}),
            (("x-amzn-errortype", _CORAL_SERVICE.format("SerializationException")),),
        )

    def error_reply(self, status: int, message: str | None = None) -> ErrorReply:
        """Captured body for 400/429, ``{"message"}`` otherwise; the exception name in ``x-amzn-errortype``."""
        rel, name, fallback = _ERRORS.get(
            status,
            (
                None,
                "InternalServerException" if status >= 500 else "ValidationException",
                f"Mock error {status}.",
            ),
        )
        err = _error(status, name, message or fallback)
        if rel is not None and message is None:
            err.body = self.fixtures.read_or(rel, err.body)
        return err

    def request_id(self, seq: int) -> str:
        """A UUID-shaped ``x-amzn-requestid`` (deterministic per request number)."""
        h = hashlib.blake2b(f"bedrock-{seq}".encode(), digest_size=16).hexdigest()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def read_prompt(self, body: Any) -> Prompt | ErrorReply:
        """Validate ``messages`` as Bedrock does and read the prompt (model/stream injected from the URL)."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "ValidationException", "The messages field is required and must not be empty.")
        first = messages[0] if isinstance(messages[0], dict) else {}
        if first.get("role") != "user":
            return _error(
                400,
                "ValidationException",
                "A conversation must start with a user message. Try again "
                "with a conversation that starts with a user message.",
            )
        chars = len(text_of(body.get("system")))
        last_user, tool_result = "", None
        for m in messages:
            if not isinstance(m, dict):
                continue
            raw_content = m.get("content")
            content: list[Any] = raw_content if isinstance(raw_content, list) else []
            chars += len(text_of(content)) + 4
            if m.get("role") != "user":
                continue
            results = [
                b["toolResult"]
                for b in content
                if isinstance(b, dict) and isinstance(b.get("toolResult"), dict)
            ]
            if results:
                texts = []
                for r in results:
                    for c in r.get("content") or ():
                        if isinstance(c, dict) and "json" in c:
                            texts.append(orjson.dumps(c["json"]).decode())
                        elif isinstance(c, dict) and isinstance(c.get("text"), str):
                            texts.append(c["text"])
                tool_result = " ".join(texts)
            else:
                last_user, tool_result = text_of(content), None
        if not isinstance(messages[-1], dict) or messages[-1].get("role") != "user":
            tool_result = None
        tc = body.get("toolConfig") if isinstance(body.get("toolConfig"), dict) else {}
        tools = []
        for t in tc.get("tools") or ():
            spec = t.get("toolSpec") if isinstance(t, dict) else None
            if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                schema = (spec.get("inputSchema") or {}).get("json")
                tools.append(
                    ToolSpec(spec["name"], schema if isinstance(schema, dict) else {"type": "object"})
                )
        raw_choice = tc.get("toolChoice")
        choice: dict[str, Any] = raw_choice if isinstance(raw_choice, dict) else {}
        tool_choice = "auto"
        if "any" in choice:
            tool_choice = "required"
        elif isinstance(choice.get("tool"), dict) and isinstance(choice["tool"].get("name"), str):
            tool_choice = choice["tool"]["name"]
        ic = body.get("inferenceConfig") if isinstance(body.get("inferenceConfig"), dict) else {}
        cap = ic.get("maxTokens")
        return Prompt(
            model=str(body.get("model") or ""),
            stream=body.get("stream") is True,
            max_tokens=cap if isinstance(cap, int) and not isinstance(cap, bool) else None,
            stop=tuple(s for s in ic.get("stopSequences") or () if isinstance(s, str)),
            last_user_text=last_user,
            tool_result=tool_result,
            tools=tools,
            tool_choice=tool_choice,
            prompt_chars=chars,
        )

    @staticmethod
    def _usage(reply: Reply) -> dict[str, Any]:
        return {
            "inputTokens": reply.prompt_tokens,
            "outputTokens": reply.completion_tokens,
            "totalTokens": reply.prompt_tokens + reply.completion_tokens,
        }

    def render(self, reply: Reply, prompt: Prompt, seq: int) -> Rendered:
        """Converse JSON, or the ConverseStream eventstream messages."""
        stop = _STOP[reply.finish]
        call = reply.tool_call
        tool_id = mint_id("tooluse_", seq, 30, salt="tooluse") if call else ""
        latency = 200 + seq % 800
        if not prompt.stream:
            if call:
                block: dict[str, Any] = {
                    "toolUse": {"input": call.arguments, "name": call.name, "toolUseId": tool_id}
                }
            else:
                block = {"text": reply.text}
            obj = {
                "metrics": {"latencyMs": latency},
                "output": {"message": {"content": [block], "role": "assistant"}},
                "stopReason": stop,
                "usage": self._usage(reply),
            }
            return Rendered(_JSON, body=orjson.dumps(obj))
        frames: list[bytes] = []

        def ev(kind: str, payload: dict[str, Any]) -> None:
            frames.append(_event(kind, payload, len(frames)))

        ev("messageStart", {"role": "assistant"})
        if call:
            ev(
                "contentBlockStart",
                {"contentBlockIndex": 0, "start": {"toolUse": {"name": call.name, "toolUseId": tool_id}}},
            )
            js = call.arguments_json
            step = max(1, -(-len(js) // 3))
            for i in range(0, len(js), step):
                ev(
                    "contentBlockDelta",
                    {"contentBlockIndex": 0, "delta": {"toolUse": {"input": js[i : i + step]}}},
                )
        else:
            for piece in reply.pieces:
                ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
        ev("contentBlockStop", {"contentBlockIndex": 0})
        ev("messageStop", {"stopReason": stop})
        ev("metadata", {"metrics": {"latencyMs": latency}, "usage": self._usage(reply)})
        return Rendered(_EVENTSTREAM, frames=frames)

    def stream_error_frame(self, error: Any) -> bytes:
        """An exception message: ``internalServerException`` by default, a message, or a given payload.

        A dict is the payload verbatim; its ``__type`` (if any) names the exception type, e.g.
        ``{"__type": "throttlingException", "message": "Too many requests"}``.
        """
        if isinstance(error, dict):
            kind = str(error.get("__type") or "internalServerException")
            return exception_message(kind, orjson.dumps(error))
        msg = error if isinstance(error, str) else _ERRORS[500][2]
        return exception_message("internalServerException", orjson.dumps({"message": msg}))

    def sse_frame(self, item: Any) -> bytes:
        """A scripted stream item as an eventstream message, in boto3's parsed-event shape.

        ``{"contentBlockDelta": {...}}`` -> an event message with that ``:event-type``;
        ``{"throttlingException": {"message": ...}}`` (a key ending in ``Exception``) -> an
        exception message; a string is sent as raw bytes.
        """
        if isinstance(item, dict) and len(item) == 1:
            kind, payload = next(iter(item.items()))
            data = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
            if kind.endswith("Exception"):
                return exception_message(kind, data)
            return event_message(kind, data)
        return item.encode() if isinstance(item, str) else orjson.dumps(item)
