"""Raw ASGI plumbing: one :class:`Exchange` per request, and :func:`deliver` for every answer.

:class:`Outcome` describes an answer completely (status, headers, a body or a list of stream
frames) together with its faults: a delay before the headers, a hang, a pause between frames, an
abort after N frames (or N body bytes), or an in-band error frame after N frames. :func:`deliver`
plays it on the socket and reports a client disconnect seen while waiting or streaming, detected
through the ASGI ``http.disconnect`` message. A plain body may also be generated piece by piece
(``pieces``: a huge answer the mock never holds whole), gzip-compressed on the fly, written one
byte at a time (``trickle_s``) or stopped after N bytes with the connection held open
(``stall_after``: headers, then silence); frames stall the same way after N frames.

An abort raises :class:`AbortConnection` out of the app: uvicorn then closes the transport without
the chunked terminator, which is what a crashed upstream looks like (``__main__`` filters the log
line uvicorn writes for it).

What must not live here: protocol shapes or script matching.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AbortConnection", "Exchange", "Outcome", "deliver"]

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
MAX_BODY_BYTES = 64 * 1024 * 1024


class AbortConnection(Exception):
    """Raised to drop the client connection mid-response (fault ``drop_after``)."""


class BodyTooLarge(Exception):
    """The request body exceeds :data:`MAX_BODY_BYTES`."""


@dataclass(slots=True)
class Outcome:
    """A complete answer plus its faults.

    Attributes:
        status: HTTP status.
        headers: response headers, names lower-case.
        body: the body for a plain answer (``frames`` None).
        frames: stream frames written one by one (``body`` ignored).
        delay_s: wait before the headers, seconds.
        hang: never answer; hold the connection until the client leaves.
        chunk_delay_s: pause before every frame but the first, seconds (0: all frames in one write).
        drop_after: abort after this many frames (stream) or body bytes (plain); None = no abort.
        error_after: write this many frames, then ``error_frame``, then end the body; None = off.
        error_frame: the in-band error event for ``error_after``.
        stall_after: after this many frames (stream) or body bytes (plain), stop writing and hold
            the connection open until the client leaves; None = off.
        trickle_s: write the body (or the frames) one byte at a time with this pause; 0 = off.
        pieces: a generated plain body (``body`` ignored), sent with chunked framing.
        gzip: send the plain body ``content-encoding: gzip``, compressed piece by piece.
    """

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    frames: list[bytes] | None = None
    delay_s: float = 0.0
    hang: bool = False
    chunk_delay_s: float = 0.0
    drop_after: int | None = None
    error_after: int | None = None
    error_frame: bytes = b""
    stall_after: int | None = None
    trickle_s: float = 0.0
    pieces: Iterable[bytes] | None = None
    gzip: bool = False


class Exchange:
    """One HTTP request on the ASGI interface, with disconnect detection once the body is read.

    Args:
        scope, receive, send: the ASGI callables of the request.
    """

    __slots__ = ("_watcher", "frames_sent", "receive", "scope", "send", "t0")

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope, self.receive, self.send = scope, receive, send
        self.t0 = time.monotonic()
        self.frames_sent = 0
        self._watcher: asyncio.Task[None] | None = None

    def headers(self) -> dict[str, str]:
        """Request headers as a dict, lower-case names; repeated headers joined with ", "."""
        out: dict[str, str] = {}
        for raw_name, raw_value in self.scope["headers"]:
            name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
            out[name] = f"{out[name]}, {value}" if name in out else value
        return out

    async def read_body(self) -> bytes:
        """Read the whole request body.

        Raises:
            BodyTooLarge: more than :data:`MAX_BODY_BYTES`.
        """
        parts: list[bytes] = []
        size = 0
        while True:
            msg = await self.receive()
            if msg["type"] == "http.disconnect":
                return b"".join(parts)
            part = msg.get("body", b"")
            size += len(part)
            if size > MAX_BODY_BYTES:
                raise BodyTooLarge
            parts.append(part)
            if not msg.get("more_body", False):
                return b"".join(parts)

    def elapsed_ms(self) -> float:
        """Milliseconds since the request arrived (rounded to 0.1)."""
        return round((time.monotonic() - self.t0) * 1000, 1)

    async def _watch(self) -> None:
        while (await self.receive())["type"] != "http.disconnect":
            pass

    def watch(self) -> asyncio.Task[None]:
        """Start (once) the task that completes when ``http.disconnect`` arrives."""
        if self._watcher is None:
            self._watcher = asyncio.ensure_future(self._watch())
        return self._watcher

    @property
    def gone(self) -> bool:
        """True once the client has disconnected (only meaningful after :meth:`watch`)."""
        return self._watcher is not None and self._watcher.done()

    async def pause(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; return False as soon as the client disconnects."""
        watcher = self.watch()
        if seconds <= 0:
            await asyncio.sleep(0)
            return not watcher.done()
        await asyncio.wait((watcher,), timeout=seconds)
        return not watcher.done()

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        """Send the status line and headers."""
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        await self.send({"type": "http.response.start", "status": status, "headers": raw})

    async def write(self, data: bytes, more: bool) -> None:
        """Send body bytes (``more`` False ends the response)."""
        await self.send({"type": "http.response.body", "body": data, "more_body": more})


async def _stream(ex: Exchange, out: Outcome, frames: list[bytes], on_gone: Callable[[str], None]) -> bool:
    """Write frames, paced by ``out.chunk_delay_s``; False when the client left meanwhile."""
    if out.chunk_delay_s <= 0:
        if frames:
            await ex.write(b"".join(frames), True)
            ex.frames_sent += len(frames)
        return True
    for i, frame in enumerate(frames):
        if i and not await ex.pause(out.chunk_delay_s):
            on_gone("streaming")
            return False
        await ex.write(frame, True)
        ex.frames_sent += 1
    return True


async def deliver(ex: Exchange, out: Outcome, on_gone: Callable[[str], None]) -> None:
    """Play an :class:`Outcome` on the socket.

    Args:
        ex: the request.
        out: the answer and its faults.
        on_gone: called with the phase ("waiting", "hang" or "streaming") when the client disconnects
            before the answer is complete.

    Raises:
        AbortConnection: for ``drop_after``, after the partial answer was written.
    """
    if out.delay_s > 0 and not await ex.pause(out.delay_s):
        on_gone("waiting")
        return
    if out.hang:
        await ex.watch()
        on_gone("hang")
        return
    if out.frames is None:
        if out.pieces is not None or out.gzip or out.stall_after is not None or out.trickle_s > 0:
            await _deliver_shaped(ex, out, on_gone)
            return
        body = out.body
        headers = [*out.headers, ("content-length", str(len(body)))]
        await ex.start(out.status, headers)
        if out.drop_after is not None and out.drop_after < len(body):
            if out.drop_after:
                await ex.write(body[: out.drop_after], True)
            raise AbortConnection
        await ex.write(body, False)
        return
    await ex.start(out.status, out.headers)
    frames = out.frames
    if out.stall_after is not None or out.trickle_s > 0:
        head = b"".join(frames if out.stall_after is None else frames[: out.stall_after])
        stall = None if out.stall_after is None else len(head)
        if await _write_bytes(ex, out.trickle_s, stall, (head,), on_gone):
            await ex.write(b"", False)
        return
    if out.drop_after is not None:
        if not await _stream(ex, out, frames[: out.drop_after], on_gone):
            return
        raise AbortConnection
    if out.error_after is not None:
        frames = [*frames[: out.error_after], out.error_frame]
    if out.chunk_delay_s > 0:
        ex.watch()
    if not await _stream(ex, out, frames, on_gone):
        return
    await ex.write(b"", False)


def _gzipped(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """gzip-compress ``pieces`` on the fly (level 6: 512 MiB of one byte repeated -> about 0.5 MiB)."""
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    for piece in pieces:
        yield z.compress(piece)      # often b"" (zlib buffers): the writer still yields to the loop
    yield z.flush()


async def _write_bytes(
    ex: Exchange, trickle_s: float, stall: int | None, pieces: Iterable[bytes], on_gone: Callable[[str], None]
) -> bool:
    """Write ``pieces``, one byte every ``trickle_s`` when > 0, stopping after ``stall`` bytes (then
    silence until the client leaves) and when the client leaves. False when it stalled or the client
    left (the response is then left unfinished)."""
    ex.watch()
    left = stall
    for piece in pieces:
        if ex.gone:
            on_gone("streaming")
            return False
        if left is not None:
            piece, left = piece[:left], left - min(left, len(piece))
        if trickle_s > 0:
            for i in range(len(piece)):
                if not await ex.pause(trickle_s):
                    on_gone("streaming")
                    return False
                await ex.write(piece[i : i + 1], True)
        elif piece:
            await ex.write(piece, True)
        else:
            await asyncio.sleep(0)   # a generated body never starves the loop (disconnects, other requests)
        if left == 0:
            break
    if stall is not None:
        await ex.watch()
        on_gone("stall")
        return False
    return True


async def _deliver_shaped(ex: Exchange, out: Outcome, on_gone: Callable[[str], None]) -> None:
    """A plain answer that is generated, gzip-encoded, trickled or stalled (see :class:`Outcome`).
    A body held whole keeps its ``content-length`` (so a stalled answer is visibly incomplete)."""
    headers = list(out.headers)
    pieces: Iterable[bytes] = out.pieces if out.pieces is not None else (out.body,)
    if out.gzip:
        headers.append(("content-encoding", "gzip"))
        pieces = _gzipped(pieces)
        if out.pieces is None:
            pieces = (b"".join(pieces),)
    if out.pieces is None:
        whole = b"".join(pieces)
        headers.append(("content-length", str(len(whole))))
        pieces = (whole,)
    await ex.start(out.status, headers)
    if await _write_bytes(ex, out.trickle_s, out.stall_after, pieces, on_gone):
        await ex.write(b"", False)
