"""Bedrock ConverseStream decoder: binary eventstream messages -> IR events (Busbar as the client).

Wire: ``application/vnd.amazon.eventstream`` messages (``eventstream``), both CRCs verified. By
``:event-type``: ``messageStart`` ``{role}``; ``contentBlockStart`` ``{contentBlockIndex, start:
{toolUse: {toolUseId, name}}}`` (sent for tool blocks only); ``contentBlockDelta``
``{contentBlockIndex, delta: {text}|{reasoningContent: {text}|{signature}|{redactedContent}}|
{toolUse: {input}}}``; ``contentBlockStop``; ``messageStop`` ``{stopReason}``; ``metadata``
``{usage, metrics}``. Payloads carry a ``"p"`` padding field, ignored.

Mapping: text and reasoning blocks have no start event on the wire, so the decoder opens the IR
block on its first delta (``BlockStart`` TextBlock / ThinkingBlock, the redacted form when the
first delta is ``redactedContent``). ``messageStop`` is held until ``metadata`` so the
``MessageDelta`` carries both the stop reason and the usage, then ``MessageStop`` follows; a body
that ends after ``messageStop`` without ``metadata`` still finishes (usage zero).

``MessageStart`` is emitted with the first content event, not on ``messageStart`` (which carries
nothing but the role): a throttling exception right after ``messageStart`` is then the first IR
event, so the proxy can still fail over or answer 429 before any byte reached the client (C018).

Failures: ``:message-type exception`` with ``:exception-type`` (``throttlingException`` ->
``rate_limit``, ``serviceUnavailableException`` -> ``overloaded``, ``validationException`` ->
``invalid_request``, ``internalServerException`` / ``modelStreamErrorException`` ->
``api_error``) and ``:message-type error`` (``:error-code``/``:error-message``) become a
``StreamError`` (case C018); so do a bad CRC, a stop reason of ``malformed_model_output`` /
``malformed_tool_use`` (case C047) and a body that ends before ``messageStop`` (case C003).

Source: docs/protocols/bedrock.md#streaming-binary-eventstream; cases C003, C018, C047.
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
    StopReason,
    StreamError,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from busbar.proto.base import ErrorKind
from busbar.proto.bedrock.errors import kind_of
from busbar.proto.bedrock.eventstream import EventStreamDecoder, Headers, split_eventstream
from busbar.proto.bedrock.names import client_name
from busbar.proto.bedrock.response import FAILURE_STOPS, stop_to_ir, usage_from_bedrock
from busbar.proto.decoder import PREMATURE_END, FrameDecoder, json_object


class BedrockStreamDecoder(FrameDecoder):
    """Provider eventstream -> IR events (see ``busbar.proto.base.StreamDecoder``)."""

    __slots__ = ("_es", "_open", "_started", "_stop")

    def __init__(self) -> None:
        super().__init__()
        self._es = EventStreamDecoder()
        self._started = False
        self._open: dict[int, str] = {}  # Bedrock contentBlockIndex -> "text" | "thinking" | "tool"
        self._stop: StopReason | None = None

    def _split(self, chunk: bytes) -> list[tuple[Headers, bytes]]:
        return split_eventstream(self._es, chunk)

    def _at_end(self, out: list[StreamEvent]) -> None:
        """End of body: finish after ``messageStop``; anything else is a ``StreamError``."""
        if self._stop is None:
            out.append(StreamError(ErrorKind.API_ERROR, PREMATURE_END))
            return
        self._ensure_started(out)
        out += [MessageDelta(self._stop, None, Usage()), MessageStop()]

    def _frame(self, headers: dict[str, Any], payload: bytes, out: list[StreamEvent]) -> None:
        mtype = headers.get(":message-type", "event")
        if mtype == "exception":
            exc = str(headers.get(":exception-type") or "")
            self._upstream_error(kind_of(exc), _message_of(payload) or exc or "upstream stream exception", out)
            return
        if mtype == "error":
            msg = headers.get(":error-message") or headers.get(":error-code") or "upstream stream error"
            self._upstream_error(ErrorKind.API_ERROR, str(msg), out)
            return
        obj = json_object(payload) if payload else {}
        et = headers.get(":event-type")
        if et == "contentBlockDelta":
            self._delta(obj.get("contentBlockIndex", 0), obj.get("delta") or {}, out)
        elif et == "contentBlockStart":
            idx = obj.get("contentBlockIndex", 0)
            tu = (obj.get("start") or {}).get("toolUse")
            if isinstance(tu, dict) and idx not in self._open:
                self._ensure_started(out)
                self._open[idx] = "tool"
                name = client_name(tu.get("name") or "")
                out.append(BlockStart(idx, ToolUseBlock(tu.get("toolUseId") or "", name, {})))
        elif et == "contentBlockStop":
            idx = obj.get("contentBlockIndex", 0)
            if self._open.pop(idx, None) is not None:
                out.append(BlockStop(idx))
        elif et == "messageStart":
            pass  # MessageStart is sent with the first content: an exception before it stays pre-commit
        elif et == "messageStop":
            raw = obj.get("stopReason")
            if raw in FAILURE_STOPS:
                self._upstream_error(ErrorKind.API_ERROR, f"upstream model failed: stopReason {raw}", out)
                return
            self._close_open(out)
            self._stop = stop_to_ir(raw)
        elif et == "metadata":
            self._ensure_started(out)
            self._close_open(out)
            out.append(
                MessageDelta(self._stop or StopReason.END_TURN, None, usage_from_bedrock(obj.get("usage")))
            )
            out.append(MessageStop())
            self._done = True

    def _ensure_started(self, out: list[StreamEvent]) -> None:
        if not self._started:
            self._started = True
            out.append(MessageStart())

    def _close_open(self, out: list[StreamEvent]) -> None:
        for idx in list(self._open):
            out.append(BlockStop(idx))
        self._open.clear()

    def _delta(self, idx: int, d: dict[str, Any], out: list[StreamEvent]) -> None:
        self._ensure_started(out)
        if "text" in d:
            if idx not in self._open:
                self._open[idx] = "text"
                out.append(BlockStart(idx, TextBlock("")))
            if d["text"]:
                out.append(BlockDelta(idx, "text", d["text"]))
        elif "reasoningContent" in d:
            rc = d["reasoningContent"] or {}
            if idx not in self._open:
                self._open[idx] = "thinking"
                red = rc.get("redactedContent")
                out.append(
                    BlockStart(idx, ThinkingBlock(redacted=True, data=red) if red else ThinkingBlock())
                )
                if red:
                    return
            if rc.get("text"):
                out.append(BlockDelta(idx, "thinking", rc["text"]))
            if rc.get("signature"):
                out.append(BlockDelta(idx, "signature", rc["signature"]))
        elif "toolUse" in d:
            if idx not in self._open:  # a start event should have come first; be lenient
                self._open[idx] = "tool"
                out.append(BlockStart(idx, ToolUseBlock("", "", {})))
            frag = (d["toolUse"] or {}).get("input")
            if frag:
                out.append(
                    BlockDelta(
                        idx, "input_json", frag if isinstance(frag, str) else orjson.dumps(frag).decode()
                    )
                )


def _message_of(payload: bytes) -> str | None:
    try:
        obj = orjson.loads(payload) if payload else None
    except orjson.JSONDecodeError:
        return payload.decode("utf-8", "replace") or None
    if isinstance(obj, dict):
        m = obj.get("message") or obj.get("Message")
        return m if isinstance(m, str) else None
    return None
