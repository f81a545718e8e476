"""Cohere v2 Chat stream encoder: IR events -> Cohere stream events for the client.

Frames copy the capture ``cohere/chat-stream.response.sse.txt``: ``event: <type>`` +
``data: <compact JSON with "type">``, then ``data: [DONE]`` after ``message-end``::

    message-start {"id", "type", "delta": {"message": {"role": "assistant", "content": [],
                   "tool_plan": "", "tool_calls": [], "citations": []}}}
    text / thinking: content-start {"index", "delta": {"message": {"content": {"type", "text"|"thinking": ""}}}},
                     content-delta {"index", "delta": {"message": {"content": {"text"|"thinking"}}}},
                     content-end {"index"}
    tool call: tool-call-start {"index", "delta": {"message": {"tool_calls": {"id", "type": "function",
               "function": {"name", "arguments": ""}}}}}, tool-call-delta (argument fragments),
               tool-call-end {"index"}
    message-end {"delta": {"finish_reason", "usage": {"billed_units", "tokens"}}}

Content parts and tool calls are numbered separately, 0, 1, 2 … each, in order of appearance
(never the source block index). Signatures and redacted thinking have no Cohere field. A
``StreamError`` is a ``message-end`` whose ``finish_reason`` is ``ERROR`` and whose ``error`` is
the message — and nothing after it, no ``[DONE]``; case C003). Keep-alive is a
``: keep-alive`` comment (case C005).

Source: docs/protocols/cohere.md#streaming; cases C003, C005, C043.
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
from busbar.proto.cohere.response import IR_TO_FINISH, new_id, usage_to_cohere
from busbar.proto.openai.request_writer import dump_arguments

_DONE = b"data: [DONE]\n\n"


def _frame(etype: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + etype.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


class CohereStreamEncoder:
    """IR events -> Cohere v2 stream events for a Cohere client (``content_type`` text/event-stream)."""

    content_type = "text/event-stream"

    __slots__ = ("_contents", "_done", "_map", "_reason", "_started", "_tools", "_usage")

    def __init__(self, model: str, req: IrRequest):
        self._started = False
        self._done = False
        self._map: dict[int, tuple[str, int]] = {}  # IR index -> ("text"|"thinking"|"tool", Cohere index)
        self._contents = 0
        self._tools = 0
        self._reason: StopReason | None = None
        self._usage = Usage()

    def _start(self, event: MessageStart | None) -> bytes:
        self._started = True
        src = event.id if event is not None else None
        mid = src if src and len(src) == 36 and src.count("-") == 4 else new_id()
        if event is not None:
            self._usage.merge(event.usage)
        msg = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}
        return _frame("message-start", {"id": mid, "type": "message-start", "delta": {"message": msg}})

    def encode(self, event: StreamEvent) -> bytes:
        """Bytes for one IR event (``b""`` when Cohere has no frame for it)."""
        if self._done:
            return b""
        if isinstance(event, MessageStart):
            return b"" if self._started else self._start(event)
        head = b"" if self._started or isinstance(event, StreamError) else self._start(None)
        if isinstance(event, BlockDelta):
            return head + self._delta(event)
        if isinstance(event, BlockStart):
            return head + self._block_start(event)
        if isinstance(event, BlockStop):
            m = self._map.pop(event.index, None)
            if m is None:
                return head
            etype = "tool-call-end" if m[0] == "tool" else "content-end"
            return head + _frame(etype, {"type": etype, "index": m[1]})
        if isinstance(event, MessageDelta):
            self._reason = event.stop_reason
            self._usage.merge(event.usage)
            return head
        if isinstance(event, MessageStop):
            return head + self._end()
        if isinstance(event, StreamError):
            self._done = True
            delta = {"error": event.message, "finish_reason": "ERROR", "usage": usage_to_cohere(self._usage)}
            return _frame("message-end", {"type": "message-end", "delta": delta})
        return head

    def _delta(self, e: BlockDelta) -> bytes:
        m = self._map.get(e.index)
        if m is None or not e.value:
            return b""
        kind, n = m
        if kind == "tool":
            if e.kind != "input_json":
                return b""
            tc = {"function": {"arguments": e.value}}
            return _frame(
                "tool-call-delta",
                {"type": "tool-call-delta", "index": n, "delta": {"message": {"tool_calls": tc}}},
            )
        if e.kind != kind:  # signature deltas have no Cohere field
            return b""
        return _frame(
            "content-delta",
            {"type": "content-delta", "index": n, "delta": {"message": {"content": {kind: e.value}}}},
        )

    def _block_start(self, event: BlockStart) -> bytes:
        b = event.block
        if isinstance(b, ToolUseBlock):
            n = self._tools
            self._tools += 1
            self._map[event.index] = ("tool", n)
            tc = {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": ""}}
            out = _frame(
                "tool-call-start",
                {"type": "tool-call-start", "index": n, "delta": {"message": {"tool_calls": tc}}},
            )
            if b.input:
                out += self._delta(BlockDelta(event.index, "input_json", dump_arguments(b.input)))
            return out
        if isinstance(b, TextBlock):
            kind, first = "text", b.text
        elif isinstance(b, ThinkingBlock) and not b.redacted:
            kind, first = "thinking", b.text
        else:
            return b""
        n = self._contents
        self._contents += 1
        self._map[event.index] = (kind, n)
        out = _frame(
            "content-start",
            {
                "type": "content-start",
                "index": n,
                "delta": {"message": {"content": {"type": kind, kind: ""}}},
            },
        )
        return out + (self._delta(BlockDelta(event.index, kind, first)) if first else b"")

    def _end(self) -> bytes:
        out = b""
        for idx in sorted(self._map):
            kind, n = self._map[idx]
            etype = "tool-call-end" if kind == "tool" else "content-end"
            out += _frame(etype, {"type": etype, "index": n})
        self._map.clear()
        self._done = True
        delta = {
            "finish_reason": IR_TO_FINISH.get(self._reason, "COMPLETE"),
            "usage": usage_to_cohere(self._usage),
        }
        return out + _frame("message-end", {"type": "message-end", "delta": delta}) + _DONE

    def keepalive(self) -> bytes:
        """``: keep-alive`` comment frame (never dispatched by an SSE parser); ``b""`` once terminated."""
        return b"" if self._done else b": keep-alive\n\n"
