"""Raw ASGI plumbing: one :class:`Exchange` per request, and :func:`deliver` for every answer.

:class:`Outcome` describes an answer completely (status, headers, a body or a list of stream
frames) together with its faults: a delay before the headers, a hang, a pause between frames, an
abort after N frames (or N body bytes), or an in-band error frame after N frames. :func:`deliver`
plays it on the socket and reports a client disconnect seen while waiting or streaming, detected
through the ASGI ``http.disconnect`` message.

An abort raises :class:`AbortConnection` out of the app: uvicorn then closes the transport without
the chunked terminator, which is what a crashed upstream looks like (``__main__`` filters the log
line uvicorn writes for it).

What must not live here: protocol shapes or script matching.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
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
