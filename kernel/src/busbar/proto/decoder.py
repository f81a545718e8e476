"""The stream decoders' shared loop: frames in, IR events out, and a decoder never raises.

``FrameDecoder`` owns ``feed``/``close`` (``busbar.proto.base.StreamDecoder``); a dialect's
decoder supplies how bytes become frames (``_split``/``_flush``), what one frame means
(``_frame``) and what a body that ends without its terminator means (``_at_end``, by default
a ``StreamError``: a truncated stream must not look like a clean finish).

Whatever the upstream sends, ``feed``/``close`` return events: a frame that is not what the
protocol allows (not JSON, a field of the wrong type — ``choices`` as a string —, bytes that are
not server-sent events, a bad eventstream CRC) ends the stream with one
``StreamError(api_error)`` whose ``upstream_frame`` is False (the gateway detected it; the
proxy then sends the client its protocol's in-band error and records a transient failure on the
lane, see ``docs/reliability.md#mid-stream-failures``). ``SseDecoder`` is the base of the five
SSE dialects.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import orjson

from busbar.ir.model import (
    BlockDelta,
    BlockStart,
    BlockStop,
    MessageDelta,
    MessageStart,
    StopReason,
    StreamError,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from busbar.proto.base import ErrorKind
from busbar.proto.sse import SseBufferOverflow, SseGarbage, SseParser

log = logging.getLogger("busbar.proto")

PREMATURE_END = "upstream stream ended prematurely"
"""``StreamError`` message of a body that ended before the protocol's terminator."""


class MalformedFrame(ValueError):
    """A frame the protocol does not allow; ``str()`` is the client-facing message."""


def json_object(data: str | bytes, message: str = "upstream sent a malformed stream event") -> dict[str, Any]:
    """``data`` parsed as a JSON object.

    Raises:
        MalformedFrame: ``data`` is not JSON, or is JSON but not an object (``message``).
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict):
        raise MalformedFrame(message)
    return obj


WRONG_TYPE = "upstream sent a stream event with a field of the wrong type"
_LO, _HI = -(2**63), 2**64      # what every encoder can write as a JSON integer


def _int(v: object) -> bool:
    return type(v) is int and _LO <= v < _HI


def _opt_str(v: object) -> bool:
    return v is None or type(v) is str


def _usage_ok(u: Usage) -> bool:
    return (_int(u.input_tokens) and _int(u.output_tokens) and _int(u.cache_read_tokens)
            and _int(u.cache_write_tokens) and _int(u.reasoning_tokens))


def _block_ok(b: object) -> bool:
    if type(b) is TextBlock:
        return type(b.text) is str
    if type(b) is ThinkingBlock:
        return type(b.text) is str and _opt_str(b.signature) and _opt_str(b.data)
    if type(b) is ToolUseBlock:
        return type(b.id) is str and type(b.name) is str and _opt_str(b.thought_signature)
    return False


def first_wrong(events: list[StreamEvent]) -> int:
    """Index of the first event with a field of the wrong type for the stream encoders, or -1.

    A decoder copies provider values into IR events; a provider value of the wrong type (an id
    that is a number, a text that is a list, a token count that is a string) must stop at the
    decoder, not inside a client's encoder.
    """
    for i, ev in enumerate(events):
        t = type(ev)
        if t is BlockDelta:
            idx = ev.index  # type: ignore[union-attr]
            ok = type(ev.value) is str and type(idx) is int and _LO <= idx < _HI  # type: ignore[union-attr]
        elif t is BlockStart:
            ok = _int(ev.index) and _block_ok(ev.block)  # type: ignore[union-attr]
        elif t is BlockStop:
            ok = _int(ev.index)  # type: ignore[union-attr]
        elif t is MessageStart:
            ok = _opt_str(ev.id) and _opt_str(ev.model) and _usage_ok(ev.usage)  # type: ignore[union-attr]
        elif t is MessageDelta:
            ok = ((ev.stop_reason is None or type(ev.stop_reason) is StopReason)  # type: ignore[union-attr]
                  and _opt_str(ev.stop_sequence) and _usage_ok(ev.usage))  # type: ignore[union-attr]
        else:
            ok = True
        if not ok:
            return i
    return -1


def fault_message(exc: BaseException, malformed: str) -> str:
    """The ``StreamError`` text for a decoding fault: the reassembly cap and the named faults keep
    their own text; anything else (a wrong-typed field) is ``malformed``."""
    if isinstance(exc, (SseBufferOverflow, SseGarbage, MalformedFrame)):
        return str(exc)
    return malformed


class FrameDecoder:
    """Base of every stream decoder: the feed/close loop and the never-raise rule.

    Subclasses implement ``_split(chunk) -> frames`` (pairs) and ``_frame(a, b, out)`` (one
    frame: SSE ``(event, data)``, eventstream ``(headers, payload)``); optionally ``_flush() ->
    frames`` (the framer's tail at end of body, default none) and ``_at_end(out)`` (end of body
    before the terminator, default ``StreamError(api_error, PREMATURE_END)``). A framer that finds
    garbage after some good frames returns those and leaves the fault in ``self._late``. A
    subclass sets ``self._done = True`` once its terminator (or an upstream error event) is seen.
    ``MALFORMED`` is the message of a fault with no text of its own.
    """

    __slots__ = ("_done", "_late")

    MALFORMED = "upstream sent a malformed stream event"

    def __init__(self) -> None:
        self._done = False
        self._late: BaseException | None = None   # a framer fault found after the frames it returned

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        """Consume upstream bytes; return the IR events completed so far (never raises)."""
        if self._done:
            return []
        out: list[StreamEvent] = []
        fault: BaseException | None = None
        try:
            frames = self._split(chunk)
            if not frames and self._late is None:
                return out                  # the common case of a read inside one event
            frame = self._frame
            for a, b in frames:
                frame(a, b, out)
                if self._done:
                    break
            else:
                fault, self._late = self._late, None
        except Exception as e:  # noqa: BLE001 - any decoding fault is the upstream's: in-band error
            fault = e
        return self._checked(out, fault)

    def close(self) -> list[StreamEvent]:
        """End of upstream body: flush the framer, then the terminal events or a ``StreamError``."""
        if self._done:
            return []
        out: list[StreamEvent] = []
        fault: BaseException | None = None
        try:
            for a, b in self._flush():
                self._frame(a, b, out)
                if self._done:
                    break
            else:
                fault, self._late = self._late, None
                if fault is None:
                    self._done = True
                    self._at_end(out)
        except Exception as e:  # noqa: BLE001 - as in feed: never raise past the decoder
            fault = e
        return self._checked(out, fault)

    def _checked(self, out: list[StreamEvent], fault: BaseException | None) -> list[StreamEvent]:
        """``out`` up to its first wrong-typed event; a fault (or that event) ends the stream."""
        bad = first_wrong(out) if out else -1
        if bad >= 0:
            del out[bad:]
            fault = fault or MalformedFrame(WRONG_TYPE)
        if fault is not None:
            self._fault(fault, out)
        return out

    # ---- what a dialect supplies
    def _split(self, chunk: bytes) -> list[Any]:
        raise NotImplementedError

    def _frame(self, a: Any, b: Any, out: list[StreamEvent]) -> None:
        raise NotImplementedError

    def _flush(self) -> Iterable[Any]:
        return ()

    def _at_end(self, out: list[StreamEvent]) -> None:
        out.append(StreamError(ErrorKind.API_ERROR, PREMATURE_END))

    # ---- shared
    def _fault(self, exc: BaseException, out: list[StreamEvent]) -> None:
        self._done = True
        log.info("%s: undecodable upstream stream: %r", type(self).__name__, exc)
        out.append(StreamError(ErrorKind.API_ERROR, fault_message(exc, self.MALFORMED)))

    def _upstream_error(self, kind: str, message: str, out: list[StreamEvent]) -> None:
        """End the stream with the provider's own in-band error (relayed as is on a same-protocol hop)."""
        self._done = True
        out.append(StreamError(kind, message, upstream_frame=True))


class SseDecoder(FrameDecoder):
    """A ``FrameDecoder`` over ``text/event-stream``: frames are ``(event name | None, data)``."""

    __slots__ = ("_sse",)

    def __init__(self) -> None:
        super().__init__()
        self._sse = SseParser()

    def _split(self, chunk: bytes) -> list[Any]:
        try:
            return self._sse.feed(chunk)
        except SseGarbage as e:   # the frames before the garbage still count, then the fault
            self._late = e
            return e.frames

    def _flush(self) -> Iterable[Any]:
        try:
            return self._sse.close()
        except SseGarbage as e:
            self._late = e
            return e.frames
