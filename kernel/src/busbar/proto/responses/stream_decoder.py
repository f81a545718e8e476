"""OpenAI Responses stream decoder: provider typed events -> IR events (Busbar as the client).

Wire (captures ``openai-responses/*.sse.txt``): ``event: <type>`` + ``data: <JSON with "type">``
frames, each with ``sequence_number`` (absent in 2025-03 captures; not needed here)::

    response.created / response.in_progress            -> MessageStart (once)
    response.output_item.added  {output_index, item}   message: nothing yet;
                                                       function_call -> BlockStart(ToolUseBlock)
    response.content_part.added {output_index, content_index, part: output_text | refusal}
                                                       -> BlockStart(TextBlock)
    response.output_text.delta / response.refusal.delta  -> BlockDelta(text)
    response.content_part.done                         -> BlockStop
    response.function_call_arguments.delta             -> BlockDelta(input_json)
    response.reasoning_summary_text.delta / response.reasoning_text.delta
                                                       -> BlockStart(ThinkingBlock) once, BlockDelta(thinking)
    response.output_item.done                          -> BlockStop of the item's open blocks
    response.completed / response.incomplete           -> MessageDelta(stop, usage), MessageStop
    error / response.failed                            -> StreamError

Blocks get IR indexes 0, 1, 2 … in order of appearance. A body that ends before
``response.completed``/``response.incomplete`` is a ``StreamError`` (case C003). Reasoning
``encrypted_content`` from the provider is not carried (see ``response.reasoning_to_block``).

Source: docs/protocols/responses.md#streaming; cases C003, C045.
"""

from __future__ import annotations

from typing import Any

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
)
from busbar.proto.decoder import SseDecoder, json_object
from busbar.proto.openai.response import mint_id
from busbar.proto.responses.errors import error_kind
from busbar.proto.responses.response import read_output, stop_for, usage_from_responses

_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
_THINK_DELTAS = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})


class ResponsesStreamDecoder(SseDecoder):
    """Provider Responses event stream -> IR events (see ``busbar.proto.base.StreamDecoder``)."""

    __slots__ = ("_calls", "_items", "_next", "_open", "_refusal", "_started", "_think_part")

    def __init__(self) -> None:
        super().__init__()
        self._started = False
        self._next = 0
        self._open: dict[tuple[int, int], int] = {}  # (output_index, content_index|-1) -> IR index
        self._items: dict[int, str] = {}  # output_index -> item type
        self._calls = False
        self._refusal = False
        self._think_part: dict[int, int] = {}  # output_index -> last summary/content index seen

    # ------------------------------------------------------------ frames

    def _frame(self, event: str | None, data: str, out: list[StreamEvent]) -> None:
        if data.startswith("[DONE]"):
            return
        obj = json_object(data)
        t = obj.get("type") or event
        if t in _TEXT_DELTAS:
            key = (obj.get("output_index", 0), obj.get("content_index", 0))
            idx = self._open.get(key)
            if idx is None:
                idx = self._start(key, TextBlock(""), out)
            if t == "response.refusal.delta":
                self._refusal = True
            out.append(BlockDelta(idx, "text", obj.get("delta") or ""))
        elif t == "response.function_call_arguments.delta":
            idx = self._open.get((obj.get("output_index", 0), -1))
            if idx is not None and obj.get("delta"):
                out.append(BlockDelta(idx, "input_json", obj["delta"]))
        elif t in _THINK_DELTAS:
            self._thinking(obj, out)
        elif t == "response.content_part.added":
            part = obj.get("part") or {}
            if part.get("type") in ("output_text", "refusal"):
                key = (obj.get("output_index", 0), obj.get("content_index", 0))
                if key not in self._open:
                    idx = self._start(key, TextBlock(""), out)
                    text = part.get("text") or part.get("refusal")
                    if text:
                        out.append(BlockDelta(idx, "text", text))
        elif t == "response.content_part.done":
            idx = self._open.pop((obj.get("output_index", 0), obj.get("content_index", 0)), None)
            if idx is not None:
                out.append(BlockStop(idx))
        elif t == "response.output_item.added":
            self._item_added(obj.get("output_index", 0), obj.get("item") or {}, out)
        elif t == "response.output_item.done":
            self._item_done(obj.get("output_index", 0), obj.get("item") or {}, out)
        elif t == "response.created" or t == "response.in_progress" or t == "response.queued":
            self._begin(obj.get("response") or {}, out)
        elif t == "response.completed" or t == "response.incomplete":
            self._finish(obj.get("response") or {}, out)
        elif t == "response.failed":
            resp = obj.get("response") or {}
            kind, msg = error_kind(resp.get("error"))
            self._upstream_error(kind, msg, out)
        elif t == "error":
            err = obj.get("error")
            kind, msg = error_kind(err if isinstance(err, dict) else obj)
            self._upstream_error(kind, msg, out)

    def _begin(self, resp: dict[str, Any], out: list[StreamEvent]) -> None:
        if not self._started:
            self._started = True
            out.append(MessageStart(id=resp.get("id"), model=resp.get("model")))

    def _start(self, key: tuple[int, int], block: Any, out: list[StreamEvent]) -> int:
        if not self._started:
            self._begin({}, out)
        idx = self._next
        self._next += 1
        self._open[key] = idx
        out.append(BlockStart(idx, block))
        return idx

    def _item_added(self, oi: int, item: dict[str, Any], out: list[StreamEvent]) -> None:
        t = item.get("type")
        self._items[oi] = str(t)
        if t == "function_call":
            self._calls = True
            call_id = item.get("call_id") or item.get("id") or mint_id("call_", 24)
            idx = self._start((oi, -1), ToolUseBlock(call_id, item.get("name") or "", {}), out)
            if item.get("arguments"):
                out.append(BlockDelta(idx, "input_json", item["arguments"]))

    def _thinking(self, obj: dict[str, Any], out: list[StreamEvent]) -> None:
        oi = obj.get("output_index", 0)
        part = obj.get("summary_index", obj.get("content_index", 0))
        idx = self._open.get((oi, -2))
        if idx is None:
            idx = self._start((oi, -2), ThinkingBlock(), out)
            self._think_part[oi] = part
        elif self._think_part.get(oi) != part:  # a new summary part: separate it as read_output does
            self._think_part[oi] = part
            out.append(BlockDelta(idx, "thinking", "\n\n"))
        if obj.get("delta"):
            out.append(BlockDelta(idx, "thinking", obj["delta"]))

    def _item_done(self, oi: int, item: dict[str, Any], out: list[StreamEvent]) -> None:
        t = item.get("type") or self._items.get(oi)
        if t == "reasoning" and (oi, -2) not in self._open:
            blocks, _, _ = read_output([item])  # summary only present at the end: one whole block
            for b in blocks:
                if isinstance(b, ThinkingBlock) and b.text:
                    idx = self._start((oi, -2), ThinkingBlock(), out)
                    out.append(BlockDelta(idx, "thinking", b.text))
        elif t == "function_call" and (oi, -1) not in self._open and item.get("call_id"):
            idx = self._start((oi, -1), ToolUseBlock(item["call_id"], item.get("name") or "", {}), out)
            self._calls = True
            if item.get("arguments"):
                out.append(BlockDelta(idx, "input_json", item["arguments"]))
        for key in sorted(k for k in self._open if k[0] == oi):
            out.append(BlockStop(self._open.pop(key)))

    def _finish(self, resp: dict[str, Any], out: list[StreamEvent]) -> None:
        if not self._started:
            self._begin(resp, out)
        for key in sorted(self._open):
            out.append(BlockStop(self._open[key]))
        self._open.clear()
        reason = stop_for(resp, self._calls, self._refusal)
        out.append(MessageDelta(reason, None, usage_from_responses(resp.get("usage"))))
        out.append(MessageStop())
        self._done = True

