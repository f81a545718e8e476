"""Gemini ``streamGenerateContent?alt=sse`` decoder: provider chunks -> IR events (Busbar as the client).

Wire: bare ``data: <GenerateContentResponse JSON>`` SSE events separated by ``\\r\\n\\r\\n`` (no
``event:`` lines, no terminator). Each chunk is a complete response holding the new parts only
and the running (cumulative) ``usageMetadata``; ``finishReason`` comes on the last chunk.
Egress always asks for ``alt=sse`` (docs/protocols/gemini.md#streaming); an upstream that answers with the JSON-array
framing anyway is handled too: a body starting with ``[`` is read as a stream of array elements.

The decoder synthesizes the IR's block boundaries: consecutive text parts share one text block,
consecutive ``thought`` parts one thinking block (a ``thoughtSignature`` on a thought part is a
``signature`` delta); each ``functionCall`` part is a whole tool block (start, one
``input_json`` delta with the compact args, stop) whose id carries the part's signature
(``ids.carry``, case C037). A ``thoughtSignature`` on visible text is not turned into thinking.

The usage kept is the LAST ``usageMetadata`` seen, never a sum of the per-chunk copies (case
C038). Since the stream has no terminator, ``MessageDelta``/``MessageStop`` are emitted at end
of body once a ``finishReason`` was seen; a body that ends without one is a ``StreamError``
(case C003), and so is an in-stream ``{"error": {...}}`` chunk (kind from its google.rpc status,
e.g. RESOURCE_EXHAUSTED -> rate_limit, case C018). Events split across reads are reassembled
before decoding (case C042).

Source: docs/protocols/gemini.md#streaming; cases C003, C018, C037, C038, C042.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from busbar.ir.model import (
    BlockDelta,
    BlockStart,
    BlockStop,
    MessageDelta,
    MessageStart,
    MessageStop,
    StopReason,
    StreamError,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    Usage,
)
from busbar.proto.base import ErrorKind
from busbar.proto.decoder import PREMATURE_END, SseDecoder, json_object
from busbar.proto.gemini.errors import stream_error_kind
from busbar.proto.gemini.response import FINISH_TO_IR, call_block, finish_to_ir, usage_from_gemini


class _ArrayFramer:
    """Splits Gemini's JSON-array stream (``[{...},\\r\\n{...}]``) into element texts."""

    __slots__ = ("_buf", "_depth", "_esc", "_in_str", "_start")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._depth = 0
        self._in_str = False
        self._esc = False
        self._start = -1

    def feed(self, chunk: bytes) -> list[str]:
        out: list[str] = []
        buf = self._buf
        base = len(buf)
        buf += chunk
        depth, in_str, esc, start = self._depth, self._in_str, self._esc, self._start
        for i in range(base, len(buf)):
            c = buf[i]
            if in_str:
                if esc:
                    esc = False
                elif c == 92:  # backslash
                    esc = True
                elif c == 34:
                    in_str = False
            elif c == 34:
                in_str = True
            elif c == 123:  # {
                if depth == 0:
                    start = i
                depth += 1
            elif c == 125:  # }
                depth -= 1
                if depth == 0 and start >= 0:
                    out.append(buf[start : i + 1].decode("utf-8", "replace"))
                    start = -1
        cut = start if start >= 0 else len(buf)
        del buf[:cut]
        self._depth, self._in_str, self._esc = depth, in_str, esc
        self._start = 0 if start >= 0 else -1
        return out


class GeminiStreamDecoder(SseDecoder):
    """Provider chunk stream -> IR events (see ``busbar.proto.base.StreamDecoder``)."""

    __slots__ = (
        "_any_call",
        "_array",
        "_finish",
        "_next",
        "_open",
        "_open_kind",
        "_sniffed",
        "_started",
        "_usage",
    )

    MALFORMED = "upstream sent a malformed stream chunk"

    def __init__(self) -> None:
        super().__init__()
        self._array: _ArrayFramer | None = None
        self._sniffed = False
        self._started = False
        self._open: int | None = None
        self._open_kind = ""
        self._next = 0
        self._finish: Any = None
        self._any_call = False
        self._usage = Usage()

    def _split(self, chunk: bytes) -> list[Any]:
        """SSE frames, or JSON-array elements when the body starts with ``[`` (sniffed once)."""
        if not self._sniffed:
            if not chunk.lstrip():
                return []
            self._sniffed = True
            if chunk.lstrip()[:1] == b"[":
                self._array = _ArrayFramer()
        if self._array is not None:
            return [(None, d) for d in self._array.feed(chunk)]
        return super()._split(chunk)

    def _flush(self) -> Iterable[Any]:
        return [] if self._array is not None else super()._flush()

    def _at_end(self, out: list[StreamEvent]) -> None:
        """End of body: the terminal events if a ``finishReason`` was seen, else a ``StreamError``."""
        if self._finish is None:
            out.append(StreamError(ErrorKind.API_ERROR, PREMATURE_END))
            return
        self._close_open(out)
        out.append(MessageDelta(finish_to_ir(self._finish, self._any_call), None, self._usage))
        out.append(MessageStop())

    def _frame(self, _event: str | None, data: str, out: list[StreamEvent]) -> None:
        obj = json_object(data, self.MALFORMED)
        err = obj.get("error")
        if err:
            kind, msg = stream_error_kind(err)
            self._upstream_error(kind, msg, out)
            return
        if not self._started:
            self._started = True
            out.append(MessageStart(id=obj.get("responseId"), model=obj.get("modelVersion")))
        u = obj.get("usageMetadata")
        if u:
            self._usage = usage_from_gemini(u)
        cands = obj.get("candidates")
        if not cands:
            if (obj.get("promptFeedback") or {}).get("blockReason"):
                self._finish = "SAFETY"
            return
        cand = cands[0]
        for p in (cand.get("content") or {}).get("parts") or ():
            self._part(p, out)
        fr = cand.get("finishReason")
        if fr:
            self._finish = fr
            if FINISH_TO_IR.get(fr) is StopReason.ERROR:
                self._upstream_error(ErrorKind.API_ERROR, f"upstream model failed: finishReason {fr}", out)

    def _part(self, p: Any, out: list[StreamEvent]) -> None:
        if not isinstance(p, dict):
            return
        sig = p.get("thoughtSignature")
        text = p.get("text")
        if text is not None:
            if p.get("thought"):
                idx = self._ensure("thinking", out)
                if text:
                    out.append(BlockDelta(idx, "thinking", text))
                if sig:
                    out.append(BlockDelta(idx, "signature", sig))
            elif text:
                out.append(BlockDelta(self._ensure("text", out), "text", text))
            return
        fc = p.get("functionCall")
        if isinstance(fc, dict):
            self._close_open(out)
            block = call_block(fc, sig)
            args = block.input
            block.input = {}
            idx = self._next
            self._next += 1
            self._any_call = True
            out.append(BlockStart(idx, block))
            out.append(BlockDelta(idx, "input_json", orjson.dumps(args).decode()))
            out.append(BlockStop(idx))

    def _ensure(self, kind: str, out: list[StreamEvent]) -> int:
        if self._open is not None and self._open_kind == kind:
            return self._open
        self._close_open(out)
        idx = self._next
        self._next += 1
        out.append(BlockStart(idx, TextBlock("") if kind == "text" else ThinkingBlock()))
        self._open, self._open_kind = idx, kind
        return idx

    def _close_open(self, out: list[StreamEvent]) -> None:
        if self._open is not None:
            out.append(BlockStop(self._open))
            self._open = None
