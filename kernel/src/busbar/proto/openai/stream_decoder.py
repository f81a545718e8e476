"""OpenAI Chat Completions stream decoder: provider chunks -> IR events (Busbar as the client).

Wire: bare ``data: <chat.completion.chunk JSON>`` SSE frames ended by ``data: [DONE]``. Chunks
are flat, so the decoder synthesizes the IR's block boundaries (text, thinking from
``reasoning_content``, one block per ``tool_calls[].index``) and holds the ``MessageDelta``
until ``[DONE]`` so that a trailing usage-only chunk is merged (case C002). A mid-stream
``{"error": {...}}`` chunk is a ``StreamError`` (case C003); a body that ends with neither a
``finish_reason`` nor ``[DONE]`` is a ``StreamError`` too.

Source: docs/protocols/README.md (flat chunks fan out to IR events); cases C002, C003, C010.
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
    StreamError,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from busbar.proto.decoder import PREMATURE_END, SseDecoder, json_object
from busbar.proto.openai.errors import stream_error_kind
from busbar.proto.openai.request_writer import dump_arguments
from busbar.proto.openai.response import (
    finish_to_ir,
    mint_id,
    usage_from_openai,
)


class OpenAIStreamDecoder(SseDecoder):
    """Provider chunk stream -> IR events (see ``busbar.proto.base.StreamDecoder``).

    Only choice ``index`` 0 is followed (``n > 1`` is not a gateway shape). Usage from any chunk
    replaces the running figure (OpenAI usage is cumulative).
    """

    __slots__ = (
        "_started",
        "_open",
        "_next",
        "_tools",
        "_finish",
        "_stop_raw",
        "_usage",
        "_any_tool",
        "_open_kind",
    )

    MALFORMED = "upstream sent a malformed stream chunk"

    def __init__(self) -> None:
        super().__init__()
        self._started = False
        self._open: int | None = None  # IR index of the open block
        self._open_kind = ""
        self._next = 0
        self._tools: dict[int, int] = {}  # OpenAI tool_calls index -> IR block index
        self._finish: str | None = None
        self._stop_raw: object = None
        self._usage = Usage()
        self._any_tool = False

    def _at_end(self, out: list[StreamEvent]) -> None:
        """End of body: terminal events if a ``finish_reason`` was seen, else a ``StreamError``."""
        if self._finish is not None:
            self._terminate(out)
        else:
            out.append(StreamError("api_error", PREMATURE_END))

    def _frame(self, _event: str | None, data: str, out: list[StreamEvent]) -> None:
        if data.startswith("[DONE]"):
            if not self._started:
                out.append(MessageStart())
                self._started = True
            self._terminate(out)
            return
        obj = json_object(data, self.MALFORMED)
        err = obj.get("error")
        if err:
            kind, msg = stream_error_kind(err)
            self._upstream_error(kind, msg, out)
            return
        if not self._started:
            self._started = True
            out.append(MessageStart(id=obj.get("id"), model=obj.get("model")))
        u = obj.get("usage")
        if u:
            self._usage = usage_from_openai(u)
        choices = obj.get("choices")
        if not choices:
            return
        ch = choices[0]
        delta = ch.get("delta")
        if delta:
            rc = delta.get("reasoning_content") or delta.get("reasoning")
            if rc and isinstance(rc, str):
                out.append(BlockDelta(self._ensure("thinking", out), "thinking", rc))
            c = delta.get("content")
            if c and isinstance(c, str):
                out.append(BlockDelta(self._ensure("text", out), "text", c))
            tcs = delta.get("tool_calls")
            if tcs:
                self._tool_calls(tcs, out)
        fr = ch.get("finish_reason")
        if fr:
            self._finish = fr
            self._stop_raw = ch.get("stop_reason")
            self._close_open(out)

    def _ensure(self, kind: str, out: list[StreamEvent]) -> int:
        if self._open is not None and self._open_kind == kind:
            return self._open
        self._close_open(out)
        idx = self._next
        self._next += 1
        out.append(BlockStart(idx, TextBlock("") if kind == "text" else ThinkingBlock()))
        self._open, self._open_kind = idx, kind
        return idx

    def _tool_calls(self, tcs: list[Any], out: list[StreamEvent]) -> None:
        for pos, tc in enumerate(tcs):
            ti = tc.get("index", pos)
            fn = tc.get("function") or {}
            bi = self._tools.get(ti)
            if bi is None:
                self._close_open(out)
                bi = self._next
                self._next += 1
                self._tools[ti] = bi
                self._any_tool = True
                block = ToolUseBlock(tc.get("id") or mint_id("call_", 24), fn.get("name") or "", {})
                out.append(BlockStart(bi, block))
                self._open, self._open_kind = bi, "tool"
            args = fn.get("arguments")
            if args:
                out.append(
                    BlockDelta(bi, "input_json", args if isinstance(args, str) else dump_arguments(args))
                )

    def _close_open(self, out: list[StreamEvent]) -> None:
        if self._open is not None:
            out.append(BlockStop(self._open))
            self._open = None

    def _terminate(self, out: list[StreamEvent]) -> None:
        self._close_open(out)
        reason, seq = finish_to_ir(self._finish, self._stop_raw, self._any_tool)
        out.append(MessageDelta(reason, seq, self._usage))
        out.append(MessageStop())
        self._done = True
