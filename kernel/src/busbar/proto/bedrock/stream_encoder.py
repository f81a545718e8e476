"""Bedrock ConverseStream encoder: IR events -> binary eventstream messages for a Bedrock client.

Every message carries ``:event-type``, ``:content-type application/json`` and ``:message-type
event`` with valid prelude and message CRC32s (``eventstream``); payloads carry Bedrock's ``"p"``
padding field so frame sizes look like the service's (docs/protocols/bedrock.md#streaming-binary-eventstream). Events:

- ``messageStart`` ``{"role": "assistant"}`` first (synthesized when the source sends none);
- tool blocks: ``contentBlockStart`` ``{start: {toolUse: {toolUseId, name}}}``, then
  ``contentBlockDelta`` ``{toolUse: {input: <json fragment>}}``; text and reasoning blocks have no
  start event on the wire (as Bedrock sends them), only ``contentBlockDelta`` ``{text}`` /
  ``{reasoningContent: {text}|{signature}|{redactedContent}}``; ``contentBlockStop`` closes each.
  Block indexes are renumbered 0, 1, 2 in order of appearance.
- ``MessageDelta`` is held and ``MessageStop`` writes ``messageStop`` ``{stopReason}`` and then
  exactly one ``metadata`` ``{usage, metrics}`` (both deferred for this reason).
- ``StreamError``: one exception message (``:message-type exception``, ``:exception-type``, e.g.
  ``throttlingException``), then nothing — boto3 raises ``EventStreamError`` with that code.
- ``keepalive()`` is ``b""``: eventstream has no comment frame.

Source: docs/protocols/bedrock.md#streaming-binary-eventstream (encode_frame, encode_exception_frame, deferred
metadata), docs/reliability.md#mid-stream-failures (mid-stream = binary exception frame); cases C003, C018.
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
from busbar.proto.bedrock.errors import exception_frame
from busbar.proto.bedrock.eventstream import encode_event
from busbar.proto.bedrock.response import IR_TO_STOP, usage_to_bedrock

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_PAD = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _event(name: str, payload: dict[str, Any]) -> bytes:
    pad = 1 + (len(payload) * 7 + sum(map(len, payload)) * 13) % 60
    payload["p"] = _PAD[:pad]
    return encode_event(name, orjson.dumps(payload, option=orjson.OPT_SORT_KEYS))


class BedrockStreamEncoder:
    """IR events -> ConverseStream eventstream messages (see the module docstring)."""

    content_type = CONTENT_TYPE

    __slots__ = ("_done", "_map", "_started", "_stop", "_usage")

    def __init__(self, model: str, req: IrRequest):
        self._started = False
        self._done = False
        self._map: dict[int, int] = {}  # IR block index -> client contentBlockIndex
        self._usage = Usage()
        self._stop: StopReason | None = None

    def _start(self) -> bytes:
        self._started = True
        return _event("messageStart", {"role": "assistant"})

    def encode(self, event: StreamEvent) -> bytes:
        """Bytes for one IR event (``b""`` when Converse has no message for it)."""
        if self._done:
            return b""
        if isinstance(event, MessageStart):
            self._usage.merge(event.usage)
            return b"" if self._started else self._start()
        if isinstance(event, StreamError):
            self._done = True
            return exception_frame(event.kind, event.message)
        head = b"" if self._started else self._start()
        if isinstance(event, BlockDelta):
            n = self._map.get(event.index)
            if n is None or not event.value:
                return head
            return head + self._delta(n, event.kind, event.value)
        if isinstance(event, BlockStart):
            return head + self._block_start(event)
        if isinstance(event, BlockStop):
            n = self._map.get(event.index)
            if n is None:
                return head
            return head + _event("contentBlockStop", {"contentBlockIndex": n})
        if isinstance(event, MessageDelta):
            self._usage.merge(event.usage)
            if event.stop_reason is not None:
                self._stop = event.stop_reason
            return head
        if isinstance(event, MessageStop):
            self._done = True
            stop = IR_TO_STOP.get(self._stop, "end_turn")
            meta = {"usage": usage_to_bedrock(self._usage), "metrics": {"latencyMs": 0}}
            return head + _event("messageStop", {"stopReason": stop}) + _event("metadata", meta)
        return head

    def _delta(self, n: int, kind: str, value: str) -> bytes:
        if kind == "text":
            delta: dict[str, Any] = {"text": value}
        elif kind == "thinking":
            delta = {"reasoningContent": {"text": value}}
        elif kind == "signature":
            delta = {"reasoningContent": {"signature": value}}
        elif kind == "input_json":
            delta = {"toolUse": {"input": value}}
        else:
            return b""
        return _event("contentBlockDelta", {"contentBlockIndex": n, "delta": delta})

    def _block_start(self, event: BlockStart) -> bytes:
        b = event.block
        n = len(self._map)
        if isinstance(b, ToolUseBlock):
            self._map[event.index] = n
            start = {"toolUse": {"toolUseId": b.id, "name": b.name}}
            out = _event("contentBlockStart", {"contentBlockIndex": n, "start": start})
            if b.input:
                out += self._delta(n, "input_json", orjson.dumps(b.input).decode())
            return out
        if isinstance(b, TextBlock):
            self._map[event.index] = n
            return self._delta(n, "text", b.text) if b.text else b""
        if isinstance(b, ThinkingBlock):
            self._map[event.index] = n
            if b.redacted:
                delta = {"reasoningContent": {"redactedContent": b.data or ""}}
                return _event("contentBlockDelta", {"contentBlockIndex": n, "delta": delta})
            return self._delta(n, "thinking", b.text) if b.text else b""
        return b""

    def keepalive(self) -> bytes:
        """``b""``: the eventstream format has no comment frame a parser would skip."""
        return b""
