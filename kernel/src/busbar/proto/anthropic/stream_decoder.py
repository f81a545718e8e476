"""Anthropic Messages stream decoder: provider events -> IR events (Busbar as the client).

Wire: ``event: <name>`` + ``data: <JSON>`` frames — ``message_start``, ``content_block_start``,
``content_block_delta`` (``text_delta``, ``thinking_delta``, ``signature_delta``,
``input_json_delta``), ``content_block_stop``, ``message_delta``, ``message_stop``, ``ping``,
``error``. The IR stream grammar is this one, so the mapping is near one to one; usage from
``message_start`` (input and cache counts) and ``message_delta`` (output) is merged into the
``MessageDelta``. An ``event: error``, or a body that ends before ``message_stop``, is a
``StreamError`` (case C003).

Source: docs/protocols/README.md; cases C003, C006.
"""

from __future__ import annotations

from typing import Any

import orjson

from busbar.ir.model import (
    BlockDelta,
    BlockStart,
    BlockStop,
    MessageDelta,
    MessageStart,
    MessageStop,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from busbar.proto.anthropic.errors import ANTHROPIC_TO_KIND
from busbar.proto.anthropic.response import stop_to_ir, usage_from_anthropic
from busbar.proto.base import ErrorKind
from busbar.proto.decoder import SseDecoder, json_object

_DELTA_KIND: dict[Any, tuple[str, str]] = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("signature", "signature"),
    "input_json_delta": ("input_json", "partial_json"),
}


def _copy(u: Usage) -> Usage:
    return Usage(
        u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.reasoning_tokens
    )


class AnthropicStreamDecoder(SseDecoder):
    """Provider event stream -> IR events (see ``busbar.proto.base.StreamDecoder``).

    Blocks of types the IR does not model (server tool blocks) are skipped with their deltas.
    """

    __slots__ = ("_usage", "_skip")

    def __init__(self) -> None:
        super().__init__()
        self._usage = Usage()
        self._skip: set[int] = set()

    def _frame(self, event: str | None, data: str, out: list[StreamEvent]) -> None:
        obj = json_object(data)
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
            out.append(
                MessageDelta(stop_to_ir(d.get("stop_reason")), d.get("stop_sequence"), _copy(self._usage))
            )
        elif t == "message_stop":
            out.append(MessageStop())
            self._done = True
        elif t == "error":
            err = obj.get("error") or {}
            kind = ANTHROPIC_TO_KIND.get(err.get("type"), ErrorKind.API_ERROR)
            self._upstream_error(kind, err.get("message") or "upstream stream error", out)

    def _block_start(self, idx: int, cb: dict[str, Any], out: list[StreamEvent]) -> None:
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
