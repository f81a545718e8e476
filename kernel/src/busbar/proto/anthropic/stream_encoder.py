"""Anthropic Messages stream encoder: IR events -> Messages stream events for the client.

Content blocks are renumbered 0, 1, 2 in order of appearance; ``message_delta`` carries the
merged final usage (``input_tokens``, the cache counters when non-zero, ``output_tokens`` —
case C002). A ``StreamError`` is ``event: error`` with ``{"type": "error", "error": {type,
message}}`` and nothing after it — no ``message_delta``, no ``message_stop`` (case C003).
Keep-alive is ``event: ping`` with ``{"type": "ping"}`` (case C005).

Source: docs/protocols/README.md; cases C002, C003, C005, C010.
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
    StreamError,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from busbar.proto.anthropic.errors import error_payload
from busbar.proto.anthropic.response import IR_TO_STOP, mint_id

_ENC_DELTA = {
    "text": ("text_delta", "text"),
    "thinking": ("thinking_delta", "thinking"),
    "signature": ("signature_delta", "signature"),
    "input_json": ("input_json_delta", "partial_json"),
}


def _frame(name: bytes, payload: dict[str, Any]) -> bytes:
    return b"event: " + name + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


class AnthropicStreamEncoder:
    """IR events -> Messages stream events for an Anthropic client.

    ``message_start`` carries a ``msg_…`` id (kept when the source already is one, else minted),
    the name the client called as ``model`` and the usage known so far; ``message_delta`` carries
    the merged final usage: ``input_tokens`` and ``output_tokens`` always, the cache counters when
    non-zero. Nothing is emitted after ``message_stop`` or ``error``.
    """

    content_type = "text/event-stream"

    __slots__ = ("_model", "_started", "_done", "_map", "_usage", "_delta_sent")

    def __init__(self, model: str, req: IrRequest):
        self._model = model
        self._started = False
        self._done = False
        self._map: dict[int, int] = {}  # IR block index -> client block index
        self._usage = Usage()
        self._delta_sent = False

    def _start(self, event: MessageStart | None) -> bytes:
        self._started = True
        mid = event.id if event is not None and event.id and event.id.startswith("msg_") else mint_id()
        if event is not None:
            self._usage.merge(event.usage)
        u = self._usage
        usage = {
            "input_tokens": u.input_tokens,
            "cache_creation_input_tokens": u.cache_write_tokens,
            "cache_read_input_tokens": u.cache_read_tokens,
            "output_tokens": u.output_tokens,
        }
        msg: dict[str, Any] = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        return _frame(b"message_start", {"type": "message_start", "message": msg})

    def encode(self, event: StreamEvent) -> bytes:
        """Bytes for one IR event (``b""`` when the event has no frame)."""
        if self._done:
            return b""
        if isinstance(event, MessageStart):
            return b"" if self._started else self._start(event)
        head = b"" if self._started or isinstance(event, StreamError) else self._start(None)
        if isinstance(event, BlockDelta):
            n = self._map.get(event.index)
            spec = _ENC_DELTA.get(event.kind)
            if n is None or spec is None:
                return head
            return head + _frame(
                b"content_block_delta",
                {"type": "content_block_delta", "index": n, "delta": {"type": spec[0], spec[1]: event.value}},
            )
        if isinstance(event, BlockStart):
            return head + self._block_start(event)
        if isinstance(event, BlockStop):
            n = self._map.get(event.index)
            if n is None:
                return head
            return head + _frame(b"content_block_stop", {"type": "content_block_stop", "index": n})
        if isinstance(event, MessageDelta):
            self._delta_sent = True
            self._usage.merge(event.usage)
            reason = IR_TO_STOP.get(event.stop_reason, "end_turn") if event.stop_reason else "end_turn"
            delta = {
                "stop_reason": reason,
                "stop_sequence": event.stop_sequence if reason == "stop_sequence" else None,
            }
            return head + _frame(
                b"message_delta", {"type": "message_delta", "delta": delta, "usage": self._final_usage()}
            )
        if isinstance(event, MessageStop):
            self._done = True
            if not self._delta_sent:
                head += _frame(
                    b"message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": self._final_usage(),
                    },
                )
            return head + _frame(b"message_stop", {"type": "message_stop"})
        if isinstance(event, StreamError):
            self._done = True
            return _frame(b"error", error_payload(event.kind, event.message))
        return head

    def _final_usage(self) -> dict[str, Any]:
        u = self._usage
        out = {"input_tokens": u.input_tokens}
        if u.cache_write_tokens:
            out["cache_creation_input_tokens"] = u.cache_write_tokens
        if u.cache_read_tokens:
            out["cache_read_input_tokens"] = u.cache_read_tokens
        out["output_tokens"] = u.output_tokens
        return out

    def _block_start(self, event: BlockStart) -> bytes:
        b = event.block
        n = len(self._map)
        extra = b""
        if isinstance(b, TextBlock):
            cb: dict[str, Any] = {"type": "text", "text": ""}
            if b.text:
                extra = _frame(
                    b"content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": n,
                        "delta": {"type": "text_delta", "text": b.text},
                    },
                )
        elif isinstance(b, ThinkingBlock):
            cb = (
                {"type": "redacted_thinking", "data": b.data}
                if b.redacted
                else {"type": "thinking", "thinking": "", "signature": ""}
            )
        elif isinstance(b, ToolUseBlock):
            cb = {"type": "tool_use", "id": b.id, "name": b.name, "input": {}}
            if b.input:
                extra = _frame(
                    b"content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": n,
                        "delta": {"type": "input_json_delta", "partial_json": orjson.dumps(b.input).decode()},
                    },
                )
        else:
            return b""
        self._map[event.index] = n
        return (
            _frame(b"content_block_start", {"type": "content_block_start", "index": n, "content_block": cb})
            + extra
        )

    def keepalive(self) -> bytes:
        """``event: ping`` / ``{"type": "ping"}`` as the API sends it; ``b""`` once terminated."""
        return b"" if self._done else b'event: ping\ndata: {"type": "ping"}\n\n'
