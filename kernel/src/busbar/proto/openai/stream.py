"""OpenAI Chat Completions streams: provider chunks -> IR events, IR events -> client chunks.

Wire: bare ``data: <chat.completion.chunk JSON>`` SSE frames ended by ``data: [DONE]``; no
``event:``/``id:``/``retry:`` lines. Chunks are flat, so the decoder synthesizes the IR's block
boundaries (text, thinking from ``reasoning_content``, one block per ``tool_calls[].index``) and
holds the ``MessageDelta`` until ``[DONE]`` so that a trailing usage-only chunk is merged. The
encoder gives tool calls sequential indexes 0, 1, 2 in order of appearance — never the source
block index (case C001).

A mid-stream ``{"error": {...}}`` chunk is a ``StreamError`` (case C003); openai-python raises
``APIError`` on such a chunk (``_streaming.py``: ``data.get("error")`` in legacy mode), so the
encoder writes one and then stops: no ``[DONE]``, nothing after it.

Source: ORIGINAL.md §2.3 "Streaming" (synthesis anchor: stable id/created/model); cases C001,
C002, C003, C005, C010.
"""
from __future__ import annotations

import time

import orjson

from busbar.ir.model import (
    BlockDelta, BlockStart, BlockStop, IrRequest, MessageDelta, MessageStart, MessageStop, StreamError,
    StreamEvent, TextBlock, ThinkingBlock, ToolUseBlock, Usage,
)
from busbar.proto.openai.errors import error_payload, stream_error_kind
from busbar.proto.openai.request_writer import dump_arguments
from busbar.proto.openai.response import IR_TO_FINISH, finish_to_ir, mint_id, usage_from_openai, usage_to_openai
from busbar.proto.sse import SseBufferOverflow, SseParser

PREMATURE_END = "upstream stream ended prematurely"


class OpenAIStreamDecoder:
    """Provider chunk stream -> IR events (see ``busbar.proto.base.StreamDecoder``).

    Only choice ``index`` 0 is followed (``n > 1`` is not a gateway shape). Usage from any chunk
    replaces the running figure (OpenAI usage is cumulative).
    """

    __slots__ = ("_sse", "_started", "_open", "_next", "_tools", "_finish", "_stop_raw",
                 "_usage", "_done", "_any_tool", "_open_kind")

    def __init__(self) -> None:
        self._sse = SseParser()
        self._started = False
        self._open: int | None = None      # IR index of the open block
        self._open_kind = ""
        self._next = 0
        self._tools: dict[int, int] = {}    # OpenAI tool_calls index -> IR block index
        self._finish: str | None = None
        self._stop_raw: object = None
        self._usage = Usage()
        self._done = False
        self._any_tool = False

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        """Consume upstream bytes; return completed IR events."""
        if self._done:
            return []
        out: list[StreamEvent] = []
        try:
            frames = self._sse.feed(chunk)
        except SseBufferOverflow as e:
            self._done = True
            return [StreamError("api_error", str(e))]
        for _event, data in frames:
            self._frame(data, out)
            if self._done:
                break
        return out

    def close(self) -> list[StreamEvent]:
        """End of body: terminal events if a ``finish_reason`` was seen, else a ``StreamError``."""
        if self._done:
            return []
        out: list[StreamEvent] = []
        for _event, data in self._sse.close():
            self._frame(data, out)
            if self._done:
                return out
        self._done = True
        if self._finish is not None:
            self._terminate(out)
        else:
            out.append(StreamError("api_error", PREMATURE_END))
        return out

    def _frame(self, data: str, out: list[StreamEvent]) -> None:
        if data.startswith("[DONE]"):
            if not self._started:
                out.append(MessageStart())
                self._started = True
            self._terminate(out)
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            self._done = True
            out.append(StreamError("api_error", "upstream sent a malformed stream chunk"))
            return
        err = obj.get("error")
        if err:
            self._done = True
            kind, msg = stream_error_kind(err)
            out.append(StreamError(kind, msg))
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

    def _tool_calls(self, tcs: list, out: list[StreamEvent]) -> None:
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
                out.append(BlockDelta(bi, "input_json", args if isinstance(args, str) else dump_arguments(args)))

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


_ROLE_DELTA = [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                "finish_reason": None}]


class OpenAIStreamEncoder:
    """IR events -> ``chat.completion.chunk`` frames for an OpenAI client.

    One id (``chatcmpl-…``, minted unless the source already is one), ``created`` and ``model``
    (the name the client called) on every chunk. The first chunk's delta is
    ``{"role": "assistant", "content": ""}``. With ``req.include_usage`` every chunk carries
    ``"usage": null`` and a final ``"choices": []`` chunk carries the usage, before ``[DONE]``.
    Nothing is emitted after the terminal frame (``[DONE]`` or an error chunk).
    """

    content_type = "text/event-stream"

    __slots__ = ("_model", "_usage_on", "_prefix", "_suffix", "_started", "_done", "_tool_idx",
                 "_finished", "_usage")

    def __init__(self, model: str, req: IrRequest):
        self._model = model
        self._usage_on = req.include_usage
        self._suffix = b',"usage":null}\n\n' if req.include_usage else b"}\n\n"
        self._set_id(mint_id())
        self._started = False
        self._done = False
        self._finished = False
        self._tool_idx: dict[int, int] = {}   # IR block index -> OpenAI tool_calls index
        self._usage = Usage()

    def _set_id(self, cid: str) -> None:
        head = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                "model": self._model}
        self._prefix = b"data: " + orjson.dumps(head)[:-1] + b',"choices":'

    def _chunk(self, delta: dict, finish: str | None = None) -> bytes:
        choice = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return self._prefix + orjson.dumps(choice) + self._suffix

    def _start(self) -> bytes:
        self._started = True
        return self._prefix + orjson.dumps(_ROLE_DELTA) + self._suffix

    def encode(self, event: StreamEvent) -> bytes:
        """Bytes for one IR event (``b""`` when Chat Completions has no frame for it)."""
        if self._done:
            return b""
        if isinstance(event, MessageStart):
            if self._started:
                return b""
            if event.id and event.id.startswith("chatcmpl-"):
                self._set_id(event.id)
            self._usage.merge(event.usage)
            return self._start()
        head = b"" if self._started or isinstance(event, StreamError) else self._start()
        if isinstance(event, BlockDelta):
            if not event.value:
                return head
            if event.kind == "text":
                return head + self._chunk({"content": event.value})
            if event.kind == "input_json":
                n = self._tool_idx.get(event.index)
                if n is not None:
                    return head + self._chunk({"tool_calls": [{"index": n, "function": {"arguments": event.value}}]})
            return head
        if isinstance(event, BlockStart):
            return head + self._block_start(event)
        if isinstance(event, MessageDelta):
            self._usage.merge(event.usage)
            self._finished = True
            return head + self._chunk({}, IR_TO_FINISH.get(event.stop_reason, "stop"))
        if isinstance(event, MessageStop):
            self._done = True
            tail = b"" if self._finished else self._chunk({}, "stop")
            if self._usage_on:
                tail += self._prefix + b'[],"usage":' + orjson.dumps(usage_to_openai(self._usage)) + b"}\n\n"
            return head + tail + b"data: [DONE]\n\n"
        if isinstance(event, StreamError):
            self._done = True
            return b"data: " + orjson.dumps(error_payload(event.kind, event.message)) + b"\n\n"
        return head   # BlockStop: no frame

    def _block_start(self, event: BlockStart) -> bytes:
        b = event.block
        if isinstance(b, ToolUseBlock):
            n = len(self._tool_idx)
            self._tool_idx[event.index] = n
            args = dump_arguments(b.input) if b.input else ""
            return self._chunk({"tool_calls": [{"index": n, "id": b.id, "type": "function",
                                                "function": {"name": b.name, "arguments": args}}]})
        if isinstance(b, TextBlock) and b.text:
            return self._chunk({"content": b.text})
        return b""

    def keepalive(self) -> bytes:
        """``: keep-alive`` comment frame (never dispatched by an SSE parser); ``b""`` once terminated."""
        return b"" if self._done else b": keep-alive\n\n"

