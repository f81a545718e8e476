"""OpenAI Chat Completions stream encoder: IR events -> ``chat.completion.chunk`` frames for the client.

Wire: bare ``data:`` frames, no ``event:``/``id:``/``retry:`` lines (case C005), ended by
``data: [DONE]``. One id/created/model "synthesis anchor" on every chunk. Tool calls get
sequential indexes 0, 1, 2 in order of appearance — never the source block index (case C001).
An in-band failure is one ``data: {"error": {...}}`` chunk and then nothing: openai-python raises
``APIError`` on such a chunk (``_streaming.py``: ``data.get("error")`` in legacy mode), so no
``[DONE]`` follows it (case C003).

Source: docs/protocols/README.md (synthesis anchor, ingress terminator); cases C001, C003, C005.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from busbar.ir.model import (
    BlockDelta,
    BlockStart,
    IrRequest,
    MessageDelta,
    MessageStart,
    MessageStop,
    StreamError,
    StreamEvent,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from busbar.proto.openai.errors import error_payload
from busbar.proto.openai.request_writer import dump_arguments
from busbar.proto.openai.response import (
    IR_TO_FINISH,
    mint_id,
    usage_to_openai,
)

_ROLE_DELTA = [
    {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
]


class OpenAIStreamEncoder:
    """IR events -> ``chat.completion.chunk`` frames for an OpenAI client.

    One id (``chatcmpl-…``, minted unless the source already is one), ``created`` and ``model``
    (the name the client called) on every chunk. The first chunk's delta is
    ``{"role": "assistant", "content": ""}``. With ``req.include_usage`` every chunk carries
    ``"usage": null`` and a final ``"choices": []`` chunk carries the usage, before ``[DONE]``.
    Nothing is emitted after the terminal frame (``[DONE]`` or an error chunk).
    """

    content_type = "text/event-stream"

    __slots__ = (
        "_model",
        "_usage_on",
        "_prefix",
        "_suffix",
        "_started",
        "_done",
        "_tool_idx",
        "_finished",
        "_usage",
    )

    def __init__(self, model: str, req: IrRequest):
        self._model = model
        self._usage_on = req.include_usage
        self._suffix = b',"usage":null}\n\n' if req.include_usage else b"}\n\n"
        self._set_id(mint_id())
        self._started = False
        self._done = False
        self._finished = False
        self._tool_idx: dict[int, int] = {}  # IR block index -> OpenAI tool_calls index
        self._usage = Usage()

    def _set_id(self, cid: str) -> None:
        head = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self._model,
        }
        self._prefix = b"data: " + orjson.dumps(head)[:-1] + b',"choices":'

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
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
                    return head + self._chunk(
                        {"tool_calls": [{"index": n, "function": {"arguments": event.value}}]}
                    )
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
        return head  # BlockStop: no frame

    def _block_start(self, event: BlockStart) -> bytes:
        b = event.block
        if isinstance(b, ToolUseBlock):
            n = len(self._tool_idx)
            self._tool_idx[event.index] = n
            args = dump_arguments(b.input) if b.input else ""
            return self._chunk(
                {
                    "tool_calls": [
                        {
                            "index": n,
                            "id": b.id,
                            "type": "function",
                            "function": {"name": b.name, "arguments": args},
                        }
                    ]
                }
            )
        if isinstance(b, TextBlock) and b.text:
            return self._chunk({"content": b.text})
        return b""

    def keepalive(self) -> bytes:
        """``: keep-alive`` comment frame (never dispatched by an SSE parser); ``b""`` once terminated."""
        return b"" if self._done else b": keep-alive\n\n"
