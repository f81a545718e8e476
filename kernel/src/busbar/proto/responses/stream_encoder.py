"""OpenAI Responses stream encoder: IR events -> typed Responses events for the client.

Every frame is ``event: <type>`` + ``data: {"type", "sequence_number", …}``; sequence numbers
count 0, 1, 2 … with no gap and no repeat. The full lifecycle is written, as the API does and as
openai-python's ``responses.stream()`` accumulator requires (case C045)::

    response.created, response.in_progress                     (status in_progress, output [])
    text:     response.output_item.added (message, in_progress)   — once per run of text blocks
              response.content_part.added, response.output_text.delta …,
              response.output_text.done, response.content_part.done
              response.output_item.done (message, completed, every part with its full text)
    tool:     response.output_item.added (function_call, arguments "", in_progress),
              response.function_call_arguments.delta …, response.function_call_arguments.done,
              response.output_item.done (function_call, completed, full arguments)
    thinking: response.output_item.added (reasoning), response.reasoning_summary_part.added,
              response.reasoning_summary_text.delta …, response.reasoning_summary_text.done,
              response.reasoning_summary_part.done, response.output_item.done
              (the signature as ``encrypted_content``)
    end:      response.completed (status completed) or response.incomplete (max_output_tokens,
              content_filter), its ``response`` carrying the whole ``output`` and ``usage``

The ``response`` object is ``busbar.proto.responses.response.response_object`` — the same builder
as the non-stream body, so ``response.completed.response`` equals that body apart from timing.
No ``data: [DONE]`` is written. A ``StreamError`` is ``event: error`` (nested ``error``, on which
openai-python raises ``APIError``) followed by ``event: response.failed`` with status ``failed``
and ``error`` — and nothing after it (case C003).

Source: docs/protocols/responses.md#streaming; cases C003, C005, C045.
"""

from __future__ import annotations

import time
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
from busbar.proto.openai.request_writer import dump_arguments
from busbar.proto.responses.errors import error_object, failed_error
from busbar.proto.responses.response import (
    call_item,
    message_item,
    new_id,
    reasoning_item,
    response_object,
    status_for,
    text_part,
)


class _Open:
    """One open IR block: where it lives in the output and what it has accumulated."""

    __slots__ = ("block", "chunks", "ci", "item_id", "kind", "oi", "sig")

    def __init__(self, kind: str, oi: int, item_id: str, block: Any, ci: int = 0):
        self.kind = kind
        self.oi = oi
        self.ci = ci
        self.item_id = item_id
        self.block = block
        self.chunks: list[str] = []
        self.sig: list[str] = []


class ResponsesStreamEncoder:
    """IR events -> Responses stream events for a Responses client.

    The response id is ``resp_…`` (kept when the source already is one, else minted); ``model`` is
    the name the client called; the request's settings are echoed in every ``response`` object.
    Nothing is emitted after ``response.completed``/``response.incomplete``/``response.failed``.
    """

    content_type = "text/event-stream"

    __slots__ = (
        "_created",
        "_done",
        "_model",
        "_msg",
        "_open",
        "_output",
        "_reason",
        "_req",
        "_rid",
        "_seq",
        "_started",
        "_usage",
    )

    def __init__(self, model: str, req: IrRequest):
        self._model = model
        self._req = req
        self._seq = 0
        self._rid = ""
        self._created = 0
        self._started = False
        self._done = False
        self._output: list[dict[str, Any]] = []  # output_index -> item (in progress, then done)
        self._msg: tuple[int, str, list[dict[str, Any]]] | None = None  # the open message item
        self._open: dict[int, _Open] = {}  # IR block index -> open block
        self._reason: StopReason | None = None
        self._usage = Usage()

    # ------------------------------------------------------------ framing

    def _ev(self, etype: str, fields: dict[str, Any]) -> bytes:
        payload = {"type": etype, "sequence_number": self._seq, **fields}
        self._seq += 1
        return b"event: " + etype.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    def _response(self, status: str, usage: Usage | None, incomplete: Any = None, error: Any = None) -> Any:
        return response_object(
            self._rid,
            self._created,
            self._model,
            self._req,
            status,
            list(self._output),
            usage,
            incomplete,
            error,
        )

    def _start(self, event: MessageStart | None) -> bytes:
        self._started = True
        src = event.id if event is not None else None
        self._rid = src if src and src.startswith("resp_") else new_id("resp_")
        self._created = int(time.time())
        if event is not None:
            self._usage.merge(event.usage)
        r = self._response("in_progress", None)
        return self._ev("response.created", {"response": r}) + self._ev(
            "response.in_progress", {"response": r}
        )

    # ------------------------------------------------------------ events

    def encode(self, event: StreamEvent) -> bytes:
        """Bytes for one IR event (``b""`` when the event has no frame)."""
        if self._done:
            return b""
        if isinstance(event, MessageStart):
            return b"" if self._started else self._start(event)
        head = b"" if self._started or isinstance(event, StreamError) else self._start(None)
        if isinstance(event, BlockDelta):
            return head + self._delta(event)
        if isinstance(event, BlockStart):
            return head + self._block_start(event.index, event.block)
        if isinstance(event, BlockStop):
            o = self._open.pop(event.index, None)
            return head + (self._block_stop(o) if o is not None else b"")
        if isinstance(event, MessageDelta):
            self._reason = event.stop_reason
            self._usage.merge(event.usage)
            return head
        if isinstance(event, MessageStop):
            return head + self._finish()
        if isinstance(event, StreamError):
            return self._fail(event)
        return head

    def _delta(self, e: BlockDelta) -> bytes:
        o = self._open.get(e.index)
        if o is None or not e.value:
            return b""
        if o.kind == "text" and e.kind == "text":
            o.chunks.append(e.value)
            return self._ev(
                "response.output_text.delta",
                {
                    "item_id": o.item_id,
                    "output_index": o.oi,
                    "content_index": o.ci,
                    "delta": e.value,
                    "logprobs": [],
                },
            )
        if o.kind == "tool" and e.kind == "input_json":
            o.chunks.append(e.value)
            return self._ev(
                "response.function_call_arguments.delta",
                {"item_id": o.item_id, "output_index": o.oi, "delta": e.value},
            )
        if o.kind == "think" and e.kind == "thinking":
            o.chunks.append(e.value)
            return self._ev(
                "response.reasoning_summary_text.delta",
                {"item_id": o.item_id, "output_index": o.oi, "summary_index": 0, "delta": e.value},
            )
        if o.kind == "think" and e.kind == "signature":
            o.sig.append(e.value)
        return b""

    def _added(self, item: dict[str, Any]) -> tuple[int, bytes]:
        oi = len(self._output)
        self._output.append(item)
        return oi, self._ev("response.output_item.added", {"output_index": oi, "item": item})

    def _item_done(self, oi: int, item: dict[str, Any]) -> bytes:
        self._output[oi] = item
        return self._ev("response.output_item.done", {"output_index": oi, "item": item})

    def _close_message(self) -> bytes:
        if self._msg is None:
            return b""
        out = b""
        for idx in [i for i, o in self._open.items() if o.kind == "text"]:
            out += self._block_stop(self._open.pop(idx))
        oi, item_id, parts = self._msg
        self._msg = None
        return out + self._item_done(oi, message_item(item_id, parts))

    def _block_start(self, index: int, b: Any) -> bytes:
        if isinstance(b, TextBlock):
            out = b""
            if self._msg is None:
                item_id = new_id("msg_")
                parts: list[dict[str, Any]] = []
                oi, out = self._added(message_item(item_id, [], "in_progress"))
                self._msg = (oi, item_id, parts)
            oi, item_id, parts = self._msg
            ci = len(parts)
            parts.append(text_part(""))
            self._open[index] = _Open("text", oi, item_id, b, ci)
            out += self._ev(
                "response.content_part.added",
                {
                    "item_id": item_id,
                    "output_index": oi,
                    "content_index": ci,
                    "part": {"type": "output_text", "annotations": [], "logprobs": [], "text": ""},
                },
            )
            return out + self._delta(BlockDelta(index, "text", b.text))
        if isinstance(b, ToolUseBlock):
            out = self._close_message()
            item_id = new_id("fc_")
            oi, added = self._added(call_item(item_id, b, "", "in_progress"))
            self._open[index] = _Open("tool", oi, item_id, b)
            out += added
            if b.input:
                out += self._delta(BlockDelta(index, "input_json", dump_arguments(b.input)))
            return out
        if isinstance(b, ThinkingBlock):
            out = self._close_message()
            item_id = new_id("rs_")
            oi, added = self._added({"id": item_id, "type": "reasoning", "summary": []})
            self._open[index] = _Open("think", oi, item_id, b)
            out += added
            if not b.redacted:
                out += self._ev(
                    "response.reasoning_summary_part.added",
                    {
                        "item_id": item_id,
                        "output_index": oi,
                        "summary_index": 0,
                        "part": {"type": "summary_text", "text": ""},
                    },
                )
                if b.text:
                    out += self._delta(BlockDelta(index, "thinking", b.text))
                if b.signature:
                    self._open[index].sig.append(b.signature)
            return out
        return b""  # tool results, images, documents: not answer blocks

    def _block_stop(self, o: _Open) -> bytes:
        text = "".join(o.chunks)
        ids = {"item_id": o.item_id, "output_index": o.oi}
        if o.kind == "text":
            part = text_part(text)
            if self._msg is not None and self._msg[0] == o.oi:
                self._msg[2][o.ci] = part
            return self._ev(
                "response.output_text.done", {**ids, "content_index": o.ci, "text": text, "logprobs": []}
            ) + self._ev("response.content_part.done", {**ids, "content_index": o.ci, "part": part})
        if o.kind == "tool":
            args = text or "{}"
            return self._ev(
                "response.function_call_arguments.done", {**ids, "arguments": args}
            ) + self._item_done(o.oi, call_item(o.item_id, o.block, args))
        b: ThinkingBlock = o.block
        if b.redacted:
            return self._item_done(o.oi, reasoning_item(o.item_id, b))
        done = ThinkingBlock(text, "".join(o.sig) or None)
        part = {"type": "summary_text", "text": text}
        return (
            self._ev("response.reasoning_summary_text.done", {**ids, "summary_index": 0, "text": text})
            + self._ev("response.reasoning_summary_part.done", {**ids, "summary_index": 0, "part": part})
            + self._item_done(o.oi, reasoning_item(o.item_id, done))
        )

    def _finish(self) -> bytes:
        out = b""
        for idx in sorted(i for i, o in self._open.items() if o.kind != "text"):
            out += self._block_stop(self._open.pop(idx))
        out += self._close_message()
        self._done = True
        status, incomplete = status_for(self._reason)
        etype = "response.completed" if status == "completed" else "response.incomplete"
        return out + self._ev(etype, {"response": self._response(status, self._usage, incomplete)})

    def _fail(self, e: StreamError) -> bytes:
        self._done = True
        if not self._started:
            self._started = True
            self._rid = new_id("resp_")
            self._created = int(time.time())
        failed = self._response("failed", None, None, failed_error(e.kind, e.message))
        return self._ev("error", {"error": error_object(e.kind, e.message)}) + self._ev(
            "response.failed", {"response": failed}
        )

    def keepalive(self) -> bytes:
        """``: keep-alive`` comment frame (never dispatched by an SSE parser); ``b""`` once terminated."""
        return b"" if self._done else b": keep-alive\n\n"
