"""Anthropic Messages streams: provider events -> IR events, IR events -> client events.

Wire: ``event: <name>`` + ``data: <JSON>`` frames — ``message_start``, ``content_block_start``,
``content_block_delta`` (``text_delta``, ``thinking_delta``, ``signature_delta``,
``input_json_delta``), ``content_block_stop``, ``message_delta``, ``message_stop``, ``ping``,
``error``. The IR stream grammar is this one, so both directions are near one to one; the
decoder merges usage from ``message_start`` and ``message_delta`` (Anthropic reports input and
cache counts at the start, output at the end), the encoder renumbers content blocks 0, 1, 2 in
order of appearance and puts the full final usage in ``message_delta`` (case C002).

An ``event: error`` (or a body that ends before ``message_stop``) is a ``StreamError``; the
encoder writes ``event: error`` and nothing after it — no ``message_delta``, no ``message_stop``
(case C003). Keep-alive is ``event: ping`` with ``{"type": "ping"}`` (case C005).

Source: ORIGINAL.md §2.3 "Streaming"; cases C002, C003, C005, C006, C010.
"""
from __future__ import annotations

import orjson

from busbar.ir.model import (
    BlockDelta, BlockStart, BlockStop, IrRequest, MessageDelta, MessageStart, MessageStop,
    StreamError, StreamEvent, TextBlock, ThinkingBlock, ToolUseBlock, Usage,
)
from busbar.proto.anthropic.errors import ANTHROPIC_TO_KIND, error_payload
from busbar.proto.anthropic.response import IR_TO_STOP, mint_id, stop_to_ir, usage_from_anthropic
from busbar.proto.base import ErrorKind
from busbar.proto.sse import SseBufferOverflow, SseParser

PREMATURE_END = "upstream stream ended prematurely"

_DELTA_KIND = {"text_delta": ("text", "text"), "thinking_delta": ("thinking", "thinking"),
               "signature_delta": ("signature", "signature"),
               "input_json_delta": ("input_json", "partial_json")}
_ENC_DELTA = {"text": ("text_delta", "text"), "thinking": ("thinking_delta", "thinking"),
              "signature": ("signature_delta", "signature"), "input_json": ("input_json_delta", "partial_json")}


def _copy(u: Usage) -> Usage:
    return Usage(u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.reasoning_tokens)


class AnthropicStreamDecoder:
    """Provider event stream -> IR events (see ``busbar.proto.base.StreamDecoder``).

    Blocks of types the IR does not model (server tool blocks) are skipped with their deltas.
    """

    __slots__ = ("_sse", "_usage", "_skip", "_done")

    def __init__(self) -> None:
        self._sse = SseParser()
        self._usage = Usage()
        self._skip: set[int] = set()
        self._done = False

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        """Consume upstream bytes; return completed IR events."""
        if self._done:
            return []
        try:
            frames = self._sse.feed(chunk)
        except SseBufferOverflow as e:
            self._done = True
            return [StreamError(ErrorKind.API_ERROR, str(e))]
        out: list[StreamEvent] = []
        for event, data in frames:
            self._frame(event, data, out)
            if self._done:
                break
        return out

    def close(self) -> list[StreamEvent]:
        """End of body: a ``StreamError`` unless ``message_stop`` (or an error) was seen."""
        if self._done:
            return []
        out: list[StreamEvent] = []
        for event, data in self._sse.close():
            self._frame(event, data, out)
            if self._done:
                return out
        self._done = True
        out.append(StreamError(ErrorKind.API_ERROR, PREMATURE_END))
        return out

    def _frame(self, event: str | None, data: str, out: list[StreamEvent]) -> None:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            self._done = True
            out.append(StreamError(ErrorKind.API_ERROR, "upstream sent a malformed stream event"))
            return
        t = obj.get("type") or event
        if t == "content_block_delta":
            idx = obj.get("index", 0)
            d = obj.get("delta") or {}
            spec = _DELTA_KIND.get(d.get("type"))
            if spec is not None and idx not in self._skip:
                out.append(BlockDelta(idx, spec[0], d.get(spec[1]) or ""))
        elif t == "content_block_start":
            self._block_start(obj.get("index", 0), obj.get("content_block") or {}, out)
        elif t == "content_block_stop":
            idx = obj.get("index", 0)
            if idx not in self._skip:
                out.append(BlockStop(idx))
        elif t == "message_start":
            m = obj.get("message") or {}
            self._usage = usage_from_anthropic(m.get("usage"))
            out.append(MessageStart(id=m.get("id"), model=m.get("model"), usage=_copy(self._usage)))
        elif t == "message_delta":
            d = obj.get("delta") or {}
            self._usage.merge(usage_from_anthropic(obj.get("usage")))
            out.append(MessageDelta(stop_to_ir(d.get("stop_reason")), d.get("stop_sequence"), _copy(self._usage)))
        elif t == "message_stop":
            out.append(MessageStop())
            self._done = True
        elif t == "error":
            err = obj.get("error") or {}
            kind = ANTHROPIC_TO_KIND.get(err.get("type"), ErrorKind.API_ERROR)
            out.append(StreamError(kind, err.get("message") or "upstream stream error"))
            self._done = True

    def _block_start(self, idx: int, cb: dict, out: list[StreamEvent]) -> None:
        t = cb.get("type")
        if t == "text":
            out.append(BlockStart(idx, TextBlock("")))
            if cb.get("text"):
                out.append(BlockDelta(idx, "text", cb["text"]))
        elif t == "thinking":
            out.append(BlockStart(idx, ThinkingBlock()))
            if cb.get("thinking"):
                out.append(BlockDelta(idx, "thinking", cb["thinking"]))
            if cb.get("signature"):
                out.append(BlockDelta(idx, "signature", cb["signature"]))
        elif t == "redacted_thinking":
            out.append(BlockStart(idx, ThinkingBlock(redacted=True, data=cb.get("data"))))
        elif t == "tool_use":
            out.append(BlockStart(idx, ToolUseBlock(cb.get("id") or "", cb.get("name") or "", {})))
            if cb.get("input"):
                out.append(BlockDelta(idx, "input_json", orjson.dumps(cb["input"]).decode()))
        else:
            self._skip.add(idx)


def _frame(name: bytes, payload: dict) -> bytes:
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
        self._map: dict[int, int] = {}     # IR block index -> client block index
        self._usage = Usage()
        self._delta_sent = False

    def _start(self, event: MessageStart | None) -> bytes:
        self._started = True
        mid = event.id if event is not None and event.id and event.id.startswith("msg_") else mint_id()
        if event is not None:
            self._usage.merge(event.usage)
        u = self._usage
        usage = {"input_tokens": u.input_tokens, "cache_creation_input_tokens": u.cache_write_tokens,
                 "cache_read_input_tokens": u.cache_read_tokens, "output_tokens": u.output_tokens}
        msg = {"id": mid, "type": "message", "role": "assistant", "model": self._model, "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": usage}
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
            return head + _frame(b"content_block_delta", {"type": "content_block_delta", "index": n,
                                                          "delta": {"type": spec[0], spec[1]: event.value}})
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
            delta = {"stop_reason": reason,
                     "stop_sequence": event.stop_sequence if reason == "stop_sequence" else None}
            return head + _frame(b"message_delta", {"type": "message_delta", "delta": delta,
                                                    "usage": self._final_usage()})
        if isinstance(event, MessageStop):
            self._done = True
            if not self._delta_sent:
                head += _frame(b"message_delta", {"type": "message_delta",
                                                  "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                                  "usage": self._final_usage()})
            return head + _frame(b"message_stop", {"type": "message_stop"})
        if isinstance(event, StreamError):
            self._done = True
            return _frame(b"error", error_payload(event.kind, event.message))
        return head

    def _final_usage(self) -> dict:
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
            cb: dict = {"type": "text", "text": ""}
            if b.text:
                extra = _frame(b"content_block_delta", {"type": "content_block_delta", "index": n,
                                                        "delta": {"type": "text_delta", "text": b.text}})
        elif isinstance(b, ThinkingBlock):
            cb = ({"type": "redacted_thinking", "data": b.data} if b.redacted
                  else {"type": "thinking", "thinking": "", "signature": ""})
        elif isinstance(b, ToolUseBlock):
            cb = {"type": "tool_use", "id": b.id, "name": b.name, "input": {}}
            if b.input:
                extra = _frame(b"content_block_delta", {
                    "type": "content_block_delta", "index": n,
                    "delta": {"type": "input_json_delta", "partial_json": orjson.dumps(b.input).decode()}})
        else:
            return b""
        self._map[event.index] = n
        return _frame(b"content_block_start", {"type": "content_block_start", "index": n,
                                               "content_block": cb}) + extra

    def keepalive(self) -> bytes:
        """``event: ping`` / ``{"type": "ping"}`` as the API sends it; ``b""`` once terminated."""
        return b"" if self._done else b'event: ping\ndata: {"type": "ping"}\n\n'
