"""Gemini stream encoder: IR events -> ``streamGenerateContent`` chunks for a Gemini client.

Each chunk is a complete ``GenerateContentResponse`` (``candidates[0].content.parts`` holds the
new parts only, ``role: model``, ``index: 0``; ``modelVersion`` = the name the client called;
one ``responseId`` for the whole stream). Text and thought deltas are one part each
(``{"text"}`` / ``{"text", "thought": true}``, a thinking signature as
``{"text": "", "thought": true, "thoughtSignature"}``); a tool call is buffered until its block
stops and sent as one ``functionCall`` part (Gemini never streams arguments) with its id and
``thoughtSignature`` (signatures that are not base64 are left out: google-genai would reject the
chunk). ``MessageStart`` sends nothing; ``MessageStop`` sends the last chunk:
an empty text part, ``finishReason`` and the final ``usageMetadata`` (case C042: "Hel", "lo"
and the finish chunk are three responses).

Two framings (case C042; docs/protocols/gemini.md#streaming):

- ``alt=sse``: ``text/event-stream``, every chunk ``data: <json>\\r\\n\\r\\n`` (Google's
  separator), no terminator, no ``[DONE]``. Keep-alive is a bare ``\\r\\n``: a blank line that no
  SSE parser dispatches and that google-genai's line reader skips (a ``:`` comment line would
  reach its JSON parser).
- no ``alt`` (the proxy sets ``req.extra["__busbar_gemini_json_array"]``): ``application/json``,
  one JSON array written as it goes — ``[`` with the first chunk, ``,\\r\\n`` before each
  following one, ``]`` at the end. Keep-alive is whitespace between elements.

A ``StreamError`` is one ``{"error": {"code", "message", "status"}}`` chunk (SSE: a ``data:``
event, google-genai raises ``ClientError``/``ServerError`` on it; array: the last element, then
``]``), and nothing after it.

Source: cases C003, C005, C037, C042.
"""

from __future__ import annotations

from typing import Any

import orjson

from busbar.ir.model import (
    BlockDelta,
    BlockStart,
    BlockStop,
    IrRequest,
    MessageDelta,
    MessageStart,
    MessageStop,
    StopReason,
    StreamError,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from busbar.proto.base import ErrorKind
from busbar.proto.gemini.errors import error_payload
from busbar.proto.gemini.response import (
    IR_TO_FINISH,
    args_object,
    is_base64,
    mint_response_id,
    usage_to_gemini,
)

JSON_ARRAY_SHIM = "__busbar_gemini_json_array"
"""``IrRequest.extra`` key the proxy sets when the client called without ``alt=sse``."""


class GeminiStreamEncoder:
    """IR events -> Gemini stream chunks (SSE or JSON array, see the module docstring)."""

    __slots__ = (
        "_array",
        "_count",
        "_done",
        "_kinds",
        "_model",
        "_rid",
        "_stop",
        "_tools",
        "_usage",
        "content_type",
    )

    def __init__(self, model: str, req: IrRequest):
        self._array = bool(req.extra.get(JSON_ARRAY_SHIM))
        self.content_type = "application/json" if self._array else "text/event-stream"
        self._model = model
        self._rid = mint_response_id()
        self._count = 0
        self._done = False
        self._tools: dict[int, tuple[ToolUseBlock, list[str]]] = {}
        self._kinds: dict[int, str] = {}
        self._usage = Usage()
        self._stop: StopReason | None = None

    def _emit(self, obj: dict[str, Any]) -> bytes:
        data = orjson.dumps(obj)
        n = self._count
        self._count += 1
        if self._array:
            return (b"[" if n == 0 else b",\r\n") + data
        return b"data: " + data + b"\r\n\r\n"

    def _chunk(self, parts: list[dict[str, Any]], finish: str | None = None, usage: bool = False) -> bytes:
        cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if finish is not None:
            cand["finishReason"] = finish
        cand["index"] = 0
        obj: dict[str, Any] = {"candidates": [cand]}
        if usage:
            obj["usageMetadata"] = usage_to_gemini(self._usage)
        obj["modelVersion"] = self._model
        obj["responseId"] = self._rid
        return self._emit(obj)

    def encode(self, event: StreamEvent) -> bytes:
        """Bytes for one IR event (``b""`` when Gemini has no chunk for it)."""
        if self._done:
            return b""
        if isinstance(event, BlockDelta):
            if not event.value:
                return b""
            kind = event.kind
            if kind == "text":
                return self._chunk([{"text": event.value}])
            if kind == "thinking":
                return self._chunk([{"text": event.value, "thought": True}])
            if kind == "signature" and self._kinds.get(event.index) == "thinking" and is_base64(event.value):
                return self._chunk([{"text": "", "thought": True, "thoughtSignature": event.value}])
            if kind == "input_json" and event.index in self._tools:
                self._tools[event.index][1].append(event.value)
            return b""
        if isinstance(event, BlockStart):
            b = event.block
            if isinstance(b, ToolUseBlock):
                self._tools[event.index] = (b, [orjson.dumps(b.input).decode()] if b.input else [])
            elif isinstance(b, TextBlock):
                self._kinds[event.index] = "text"
                if b.text:
                    return self._chunk([{"text": b.text}])
            elif isinstance(b, ThinkingBlock) and not b.redacted:
                self._kinds[event.index] = "thinking"
                if b.text:
                    return self._chunk([{"text": b.text, "thought": True}])
            return b""
        if isinstance(event, BlockStop):
            entry = self._tools.pop(event.index, None)
            if entry is None:
                return b""
            block, frags = entry
            raw = "".join(frags)
            try:
                args: Any = orjson.loads(raw) if raw else {}
            except orjson.JSONDecodeError:
                args = raw
            fc = {"id": block.id, "name": block.name, "args": args_object(args)}
            part: dict[str, Any] = {"functionCall": fc}
            if block.thought_signature and is_base64(block.thought_signature):
                part["thoughtSignature"] = block.thought_signature
            return self._chunk([part])
        if isinstance(event, MessageStart):
            self._usage.merge(event.usage)
            return b""
        if isinstance(event, MessageDelta):
            self._usage.merge(event.usage)
            if event.stop_reason is not None:
                self._stop = event.stop_reason
            return b""
        if isinstance(event, MessageStop):
            self._done = True
            out = self._chunk([{"text": ""}], IR_TO_FINISH.get(self._stop, "STOP"), usage=True)
            return out + b"]" if self._array else out
        if isinstance(event, StreamError):
            self._done = True
            status = ErrorKind.STATUS.get(event.kind, 500)
            out = self._emit(error_payload(status, event.kind, event.message)[1])
            return out + b"]" if self._array else out
        return b""

    def keepalive(self) -> bytes:
        """SSE: a bare ``\\r\\n`` (blank line); JSON array: ``\\n`` whitespace; ``b""`` once terminated."""
        if self._done:
            return b""
        return b"\n" if self._array else b"\r\n"
