"""Raw ASGI I/O for the data plane: bounded body reads, replies, and client-disconnect cancellation.

- ``read_body(scope, receive, cap, frame_timeout_s)``: the request body, or ``PayloadTooLarge`` as
  soon as the declared or received size passes ``limits.request_body_max_bytes`` (bytes), or
  ``BodyReadTimeout`` (408) when body frames stop for ``limits.request_body_read_timeout_secs``.
- ``run_cancellable(receive, coro)``: await ``coro`` while watching for ``http.disconnect``; a
  client that goes away cancels the upstream work at once (case C026). Returns ``None`` then.
- ``send_reply(send, receive, reply)``: write a ``Reply``; a streaming body is cancelled the
  moment the client disconnects, so the upstream connection is closed and the permit released.
  Header values that are not printable latin-1 (a client-chosen model name echoed in a header)
  go out percent-encoded, never as a failed reply.

Source: docs/config-at-a-glance.md#limits (request_body_max_bytes).
"""
from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import AsyncGenerator, Awaitable
from typing import TypeVar
from urllib.parse import quote

from starlette.types import Receive, Scope, Send

from busbar.proto.errors import PayloadTooLarge, ProtoError
from busbar.proxy.relay import Reply, StreamAborted

T = TypeVar("T")
log = logging.getLogger("busbar")


class BodyReadTimeout(ProtoError):
    """No body frame within ``limits.request_body_read_timeout_secs`` (slow-loris defence): 408."""

    status = 408


async def read_body(scope: Scope, receive: Receive, cap: int, frame_timeout_s: float | None = None) -> bytes:
    """Read the whole request body, refusing anything over ``cap`` bytes with ``PayloadTooLarge``
    and a gap of more than ``frame_timeout_s`` seconds between body frames with ``BodyReadTimeout``.
    The body is held once: frames are appended to one buffer that becomes the returned bytes."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                if int(value) > cap:
                    raise PayloadTooLarge(f"request body of {int(value)} bytes exceeds the "
                                          f"{cap}-byte limit (limits.request_body_max_bytes)")
            except ValueError:
                pass
            break
    first = b""
    buf: io.BytesIO | None = None    # more than one frame: one growing buffer (no join of a chunk list)
    size = 0
    while True:
        if frame_timeout_s:
            try:
                async with asyncio.timeout(frame_timeout_s):    # no task per frame (wait_for makes one)
                    msg = await receive()
            except TimeoutError:
                raise BodyReadTimeout(f"no request body data for {frame_timeout_s:g}s "
                                      f"(limits.request_body_read_timeout_secs)") from None
        else:
            msg = await receive()
        if msg["type"] == "http.disconnect":
            raise ConnectionAbortedError("client disconnected while sending the body")
        body = msg.get("body", b"")
        if body:
            size += len(body)
            if size > cap:
                raise PayloadTooLarge(f"request body exceeds the {cap}-byte limit "
                                      f"(limits.request_body_max_bytes)")
            if not first:
                first = body
            else:
                if buf is None:
                    buf = io.BytesIO()
                    buf.write(first)
                buf.write(body)
        if not msg.get("more_body", False):
            break
    # getvalue() hands over BytesIO's own buffer (trimmed in place), so a large upload is held once,
    # never as frames plus their join (docs/beyond-chat.md#audio; bench/bench_audio.py)
    return first if buf is None else buf.getvalue()


async def run_cancellable(receive: Receive, coro: Awaitable[T]) -> T | None:
    """Await ``coro`` in the calling task unless the client disconnects first; then the calling task
    is cancelled where ``coro`` is waiting (its ``finally`` blocks run: permits, upstream responses
    and streams are released) and ``None`` is returned. One watcher task per request; an outside
    cancellation (server shutdown) still propagates."""
    task = asyncio.current_task()
    assert task is not None             # always: a coroutine runs in a task
    state = {"gone": False, "over": False}

    def on_disconnect(w: asyncio.Future[None]) -> None:
        if w.cancelled() or w.exception() is not None or state["over"]:   # exception(): retrieved
            return
        state["gone"] = True
        task.cancel()

    watch = asyncio.ensure_future(_wait_disconnect(receive))
    watch.add_done_callback(on_disconnect)
    try:
        result = await coro
    except asyncio.CancelledError:
        if state["gone"] and task.uncancel() == 0:    # our own cancellation: the client went away
            return None
        raise
    finally:
        state["over"] = True
        watch.cancel()
    if state["gone"]:              # coro absorbed our cancellation: drop the pending request
        task.uncancel()
        return None
    return result


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return


_HEADER_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")


def _header_bytes(value: str) -> bytes:
    """``value`` as header bytes: latin-1 when it is printable and encodable (the usual case),
    else percent-encoded UTF-8 (a reply header, e.g. a relayed upstream one, can never carry CR/LF
    or fail to encode)."""
    if value.isprintable():
        try:
            return value.encode("latin-1")
        except UnicodeEncodeError:
            pass
    return quote(value, safe=_HEADER_SAFE, errors="backslashreplace").encode("ascii")


def _raw_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), _header_bytes(v)) for k, v in headers.items()]


async def send_reply(send: Send, receive: Receive, reply: Reply) -> None:
    """Write ``reply``; for a stream, cancel it as soon as the client disconnects."""
    if reply.stream is None:
        headers = _raw_headers(reply.headers)
        headers.append((b"content-length", str(len(reply.body)).encode()))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})
        return
    await send({"type": "http.response.start", "status": reply.status,
                "headers": _raw_headers(reply.headers)})
    await run_cancellable(receive, _pump(send, reply.stream))


async def _pump(send: Send, stream: AsyncGenerator[bytes, None]) -> None:
    try:
        async for frame in stream:
            if frame:
                await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except StreamAborted as e:      # no final frame: uvicorn closes the connection mid-body
        log.warning("%s: the connection is cut so the client sees an incomplete body", e)
    finally:
        await stream.aclose()
