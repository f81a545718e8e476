"""Relay a committed attempt to the client: a whole body, or a stream past the first-byte boundary.

``Reply`` is what the server writes: status, headers, and either ``body`` bytes or an async
``stream`` of frames. Framing headers of the upstream (content-length, transfer-encoding,
content-encoding, connection) are never copied onto a re-encoded body (case C052).

After the first byte a failure cannot fail over: the lane is penalized, the lifetime budget slot
is refunded, and the client receives the in-band error frame of its own streaming dialect —
never a clean finish (cases C003, C025). That includes upstream bytes the decoder refuses (not
the protocol, a wrong-typed field): on a same-protocol hop they are not relayed, the gateway's
error frame is sent instead. Long gaps between upstream chunks are bridged with the
ingress dialect's keep-alive (a comment / ``ping`` event that no SDK dispatches, case C005); a gap
longer than ``limits.upstream_idle_timeout_secs`` ends the stream with that in-band error, as do
more than ``limits.upstream_body_max_bytes`` bytes without a decoded event, and a stream still
running when the shutdown drain ends (``busbar.proxy.shutdown``).

Source: docs/reliability.md#the-walk-and-the-first-byte-boundary (Failover boundary, Budget refund)
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from busbar.ir.model import IrRequest, MessageDelta, MessageStart, StreamError, StreamEvent, Usage
from busbar.ir.ops import OpUsage
from busbar.proto.base import ErrorKind
from busbar.proto.openai.usage_ask import UsageStripper
from busbar.proxy import shutdown
from busbar.proxy.upstream import UpstreamError, UpstreamResponse

if TYPE_CHECKING:
    from busbar.proto.base import Dialect, StreamEncoder
    from busbar.proxy.attempt import AttemptFailure, AttemptSuccess
    from busbar.proxy.runtime import Lane
    from busbar.proxy.translate import Call

log = logging.getLogger("busbar")


@dataclass(slots=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    stream: AsyncGenerator[bytes, None] | None = None
    usage: Usage = field(default_factory=Usage)
    # a same-protocol passthrough body's parse: its usage is read from it only when asked
    # (``busbar.proxy.record.RequestRecord.usage``)
    usage_doc: tuple[Dialect, dict[str, Any]] | None = None
    op_usage: OpUsage | None = None     # a non-chat operation's normalised usage (busbar.proxy.operation)


class StreamAborted(Exception):
    """Raised by a ``Reply.stream`` that broke mid-body and has no in-band error to send (audio
    bytes): the server ends the response without its final frame, so the connection is cut and the
    client sees an incomplete body instead of a short one (``busbar.server.asgi_io.send_reply``)."""


def error_reply(ingress: Dialect, status: int, kind: str, message: str,
                extra: dict[str, str] | None = None) -> Reply:
    """A Busbar-originated error in the caller's own envelope."""
    st, headers, body = ingress.error_response(status, kind, message)
    if extra:
        headers = {**headers, **extra}
    return Reply(st, headers, body)


def relay_failure(call: Call, failure: AttemptFailure, same_protocol: bool) -> Reply:
    """Relay an upstream error: verbatim on a same-protocol hop, re-enveloped otherwise (C020)."""
    if same_protocol and failure.status and failure.body:
        return Reply(failure.status, dict(failure.headers or {"content-type": "application/json"}),
                     failure.body)
    msg = failure.info.message if failure.info else f"upstream returned HTTP {failure.status}"
    status = failure.status or 502
    return error_reply(call.ingress, status, ErrorKind.from_status(status), msg)


def whole_reply(call: Call, lane: Lane, success: AttemptSuccess) -> Reply:
    """A non-stream 2xx: passthrough bytes, or translate through the IR."""
    assert success.body is not None     # a non-stream success holds the whole body (attempt.attempt)
    if call.op is not None:             # embeddings & co. (busbar.proxy.operation)
        return call.op.reply(call, lane, success)
    egress = lane.provider.dialect
    if egress is call.ingress and not call.reencode:
        ctype = success.response.headers.get("content-type", "application/json")
        doc = success.doc
        return Reply(200, {"content-type": ctype}, success.body,
                     usage_doc=(egress, doc) if doc is not None else None)
    doc = success.doc if success.doc is not None else orjson.loads(success.body)
    resp = egress.read_response(doc)
    out = call.ingress.write_response(resp, call.called, call.ir)
    return Reply(200, {"content-type": "application/json"}, orjson.dumps(out), usage=resp.usage)


@dataclass(slots=True, frozen=True)
class StreamLimits:
    """Bounds on a committed stream: ``keepalive_s`` of upstream silence before a client keep-alive,
    ``idle_s`` of upstream silence before the stream ends with an in-band error
    (``limits.upstream_idle_timeout_secs``), ``max_pending`` bytes relayed without a decoded event
    (``limits.upstream_body_max_bytes``: the decoder's buffer never grows past it)."""

    keepalive_s: float
    idle_s: float
    max_pending: int


class _StreamFault(Exception):
    """A committed stream that must end with the in-band error ``str(self)``."""


def stream_reply(call: Call, lane: Lane, success: AttemptSuccess, *, bounds: StreamLimits,
                 on_end: Callable[[bool | None], None]) -> Reply:
    """A committed stream. ``on_end(outcome)`` runs exactly once when the stream ends: ``True`` for
    a clean finish, ``False`` for a mid-stream upstream failure (a break, ``bounds.idle_s`` of
    silence, ``bounds.max_pending`` bytes without an event), ``None`` when the client went away (a
    cancellation is not a member failure — case C026)."""
    if call.op is not None:             # audio speech: raw bytes (busbar.proxy.audio)
        return call.op.stream_reply(call, lane, success, bounds, on_end)
    same = lane.provider.dialect is call.ingress and not call.reencode
    encoder = call.ingress.stream_encoder(call.called, call.ir if not same else _passthrough_ir(call))
    usage = Usage()
    gen = _frames(call, success, encoder, same, bounds, on_end, usage)
    ctype = "text/event-stream" if not same else success.response.headers.get("content-type",
                                                                               "text/event-stream")
    headers = {"content-type": getattr(encoder, "content_type", ctype) if not same else ctype,
               "cache-control": "no-cache"}
    return Reply(200, headers, stream=gen, usage=usage)


def _passthrough_ir(call: Call) -> IrRequest:
    return IrRequest(stream=True)


async def _frames(call: Call, success: AttemptSuccess, encoder: StreamEncoder, same: bool, bounds: StreamLimits,
                  on_end: Callable[[bool | None], None], usage: Usage) -> AsyncGenerator[bytes, None]:
    """Yield client frames: raw upstream bytes (same protocol) or re-encoded IR events."""
    # a stream success carries its decoder, first chunks and first events (attempt._read_first)
    assert success.decoder is not None and success.first is not None and success.events is not None
    decoder, it = success.decoder
    resp: UpstreamResponse = success.response
    outcome: bool | None = None
    raw: list[bytes] = success.first
    events: list[StreamEvent] = success.events
    ended = False
    boundary = True      # same protocol: the relayed bytes end between two events (keep-alive safe)
    stripper = UsageStripper() if same and call.strip_usage else None
    loop = asyncio.get_running_loop()
    heard = loop.time()  # when the upstream last sent a byte
    pending = 0          # bytes received since the last decoded event
    try:
        while True:
            # same protocol: bytes the decoder refused are never relayed (their error frame is ours)
            if same and not any(isinstance(ev, StreamError) and not ev.upstream_frame for ev in events):
                if stripper is not None:     # the usage asked for the gateway only (held to event ends)
                    out = b"".join(stripper.feed(chunk) for chunk in raw) + (stripper.close() if ended else b"")
                    if out:
                        yield out
                else:
                    for chunk in raw:
                        yield chunk
                    if raw:
                        boundary = raw[-1].endswith((b"\n\n", b"\r\n\r\n", b"\r\r"))
            failed = False
            for ev in events:
                _tap_usage(ev, usage)
                if isinstance(ev, StreamError):
                    failed = True
                    if not same or not ev.upstream_frame:   # the upstream's own error frame was relayed
                        yield encoder.encode(ev)
                    break
                if not same:
                    out = encoder.encode(ev)
                    if out:
                        yield out
            if failed or ended:
                outcome = not failed
                break
            while True:
                silent = loop.time() - heard
                if silent >= bounds.idle_s:
                    raise _StreamFault(f"upstream stream idle for more than {bounds.idle_s:g}s")
                try:     # the chunk wait is cancel-safe
                    async with asyncio.timeout(min(bounds.keepalive_s, bounds.idle_s - silent)):
                        chunk = await it.__anext__()
                except TimeoutError:
                    if boundary and loop.time() - heard < bounds.idle_s:   # never inside a relayed event
                        yield encoder.keepalive()
                    continue
                except StopAsyncIteration:
                    raw, events, ended = [], decoder.close(), True
                else:
                    heard = loop.time()
                    raw, events = [chunk], decoder.feed(chunk)
                    pending = 0 if events else pending + len(chunk)
                    if pending > bounds.max_pending:
                        raise _StreamFault("upstream stream event exceeds limits.upstream_body_max_bytes")
                break
    except UpstreamError as e:
        log.warning("upstream stream for %s broke after the first byte: %s", call.called, e)
        outcome = False
        yield encoder.encode(StreamError(ErrorKind.API_ERROR, "upstream connection lost mid-stream"))
    except _StreamFault as e:
        log.warning("upstream stream for %s ended after the first byte: %s", call.called, e)
        outcome = False
        yield encoder.encode(StreamError(ErrorKind.API_ERROR, str(e)))
    except asyncio.CancelledError:
        if not shutdown.closing():
            raise
        outcome = False              # the shutdown drain is over: end the stream in-band, not by a cut
        yield encoder.encode(StreamError(ErrorKind.OVERLOADED, shutdown.MESSAGE))
    finally:
        await resp.aclose()
        on_end(outcome)


def _tap_usage(ev: StreamEvent, usage: Usage) -> None:
    if isinstance(ev, (MessageStart, MessageDelta)):
        usage.merge(ev.usage)
