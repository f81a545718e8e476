"""Cohere v2 Chat stream decoder: provider events -> IR events (Busbar as the client).

Wire (capture ``cohere/chat-stream.response.sse.txt``): ``event: <type>`` + ``data: <JSON with
"type">`` frames, ended by ``data: [DONE]``::

    message-start  {id, delta.message{role, content[], tool_plan, tool_calls[], citations[]}}
                                                        -> MessageStart
    content-start  {index, delta.message.content{type: text|thinking, text|thinking}}
                                                        -> BlockStart(TextBlock | ThinkingBlock)
    content-delta  {index, delta.message.content{text|thinking}}      -> BlockDelta(text|thinking)
    content-end    {index}                                            -> BlockStop
    tool-plan-delta {delta.message.tool_plan}            -> a text block (opened on the first one)
    tool-call-start {index, delta.message.tool_calls{id, type, function{name, arguments}}}
                                                        -> BlockStart(ToolUseBlock)
    tool-call-delta {index, delta.message.tool_calls.function.arguments} -> BlockDelta(input_json)
    tool-call-end   {index}                                           -> BlockStop
    citation-start / citation-end / debug                             -> ignored
    message-end    {delta{finish_reason, usage, error?}} -> MessageDelta + MessageStop, or
                                                           StreamError for ERROR…/TIMEOUT (case C043)

Content and tool-call indexes are separate numbering spaces upstream; IR blocks are numbered
0, 1, 2 … in order of appearance. A body that ends before ``message-end`` is a ``StreamError``
(case C003).

Source: docs/protocols/cohere.md#streaming, docs/reliability.md#mid-stream-failures (Cohere ``message-end`` with
``finish_reason`` starting ``ERROR``); cases C003, C043.
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
from busbar.proto.cohere.response import failure, finish_to_ir, usage_from_cohere
from busbar.proto.decoder import SseDecoder, json_object
from busbar.proto.openai.response import mint_id

_PLAN = ("plan", 0)


def _message(obj: dict[str, Any]) -> dict[str, Any]:
    delta = obj.get("delta")
    msg = delta.get("message") if isinstance(delta, dict) else None
    return msg if isinstance(msg, dict) else {}


class CohereStreamDecoder(SseDecoder):
    """Provider Cohere v2 event stream -> IR events (see ``busbar.proto.base.StreamDecoder``)."""

    __slots__ = ("_calls", "_next", "_open", "_started")

    def __init__(self) -> None:
        super().__init__()
        self._started = False
        self._next = 0
        self._open: dict[tuple[str, int], int] = {}  # ("content"|"tool"|"plan", index) -> IR index
        self._calls = False

    def _frame(self, event: str | None, data: str, out: list[StreamEvent]) -> None:
        if data.startswith("[DONE]"):
            return  # the terminator after message-end; a [DONE] without it is still premature
        obj = json_object(data)
        t = obj.get("type") or event
        if t == "content-delta":
            c = _message(obj).get("content") or {}
            idx = self._open.get(("content", obj.get("index", 0)))
            if idx is None:  # a delta without its start: open a block of the delta's kind
                idx = self._start(
                    ("content", obj.get("index", 0)),
                    ThinkingBlock() if "thinking" in c else TextBlock(""),
                    out,
                )
            if c.get("thinking"):
                out.append(BlockDelta(idx, "thinking", c["thinking"]))
            elif c.get("text"):
                out.append(BlockDelta(idx, "text", c["text"]))
        elif t == "tool-call-delta":
            tc = _message(obj).get("tool_calls") or {}
            args = (tc.get("function") or {}).get("arguments")
            idx = self._open.get(("tool", obj.get("index", 0)))
            if idx is not None and args:
                out.append(BlockDelta(idx, "input_json", args))
        elif t == "content-start":
            c = _message(obj).get("content") or {}
            think = c.get("type") == "thinking"
            idx = self._start(
                ("content", obj.get("index", 0)), ThinkingBlock() if think else TextBlock(""), out
            )
            first = c.get("thinking") if think else c.get("text")
            if first:
                out.append(BlockDelta(idx, "thinking" if think else "text", first))
        elif t == "content-end":
            self._stop(("content", obj.get("index", 0)), out)
        elif t == "tool-plan-delta":
            plan = _message(obj).get("tool_plan")
            if plan:
                idx = self._open.get(_PLAN)
                if idx is None:
                    idx = self._start(_PLAN, TextBlock(""), out)
                out.append(BlockDelta(idx, "text", plan))
        elif t == "tool-call-start":
            self._stop(_PLAN, out)
            tc = _message(obj).get("tool_calls") or {}
            fn = tc.get("function") or {}
            block = ToolUseBlock(tc.get("id") or mint_id("call_", 24), fn.get("name") or "", {})
            idx = self._start(("tool", obj.get("index", 0)), block, out)
            self._calls = True
            if fn.get("arguments"):
                out.append(BlockDelta(idx, "input_json", fn["arguments"]))
        elif t == "tool-call-end":
            self._stop(("tool", obj.get("index", 0)), out)
        elif t == "message-start":
            if not self._started:
                self._started = True
                out.append(MessageStart(id=obj.get("id")))
        elif t == "message-end":
            self._end(obj.get("delta") or {}, out)

    def _start(self, key: tuple[str, int], block: Any, out: list[StreamEvent]) -> int:
        if not self._started:
            self._started = True
            out.append(MessageStart())
        self._stop(key, out)
        idx = self._next
        self._next += 1
        self._open[key] = idx
        out.append(BlockStart(idx, block))
        return idx

    def _stop(self, key: tuple[str, int], out: list[StreamEvent]) -> None:
        idx = self._open.pop(key, None)
        if idx is not None:
            out.append(BlockStop(idx))

    def _end(self, delta: dict[str, Any], out: list[StreamEvent]) -> None:
        self._done = True
        finish = delta.get("finish_reason")
        failed = failure(finish, delta.get("error"))
        if failed is not None:
            self._upstream_error(*failed, out)
            return
        if not self._started:
            self._started = True
            out.append(MessageStart())
        for key in sorted(self._open, key=self._open.__getitem__):
            out.append(BlockStop(self._open[key]))
        self._open.clear()
        out.append(
            MessageDelta(finish_to_ir(finish, self._calls), None, usage_from_cohere(delta.get("usage")))
        )
        out.append(MessageStop())
