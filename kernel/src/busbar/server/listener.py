"""The listener's HTTP/1 protocol: uvicorn's httptools protocol plus the front-door connection limits.

``protocol_class(head_timeout_s) -> type[FrontDoorProtocol]`` is handed to ``uvicorn.Config(http=...)``.
What it adds to uvicorn (whose own ``timeout_keep_alive`` already closes a connection idle after a
response, ``limits.keep_alive_timeout_secs``):

- **Request head cap** (``HEAD_MAX_BYTES`` = 64 KiB: request line plus headers, up to and
  including the blank line that ends them). A head longer than that is answered ``431 request head
  exceeds the 65536-byte limit`` and the connection is closed, exactly: whether it arrives in many
  reads or complete in one (a read that would take the head past the cap is searched for the head's
  end before the parser sees it); at most one socket read more than the cap is ever buffered.
- **Head-read timeout** (``limits.header_read_timeout_secs``): from the connection's start, and
  from the first byte of each later request, the whole head must arrive within the timeout. A
  connection that sent nothing is closed silently; one that sent part of a head gets
  ``408 request head not received within <n>s`` and is closed. A head that arrives in one read (the
  usual case) costs no timer.
- **HTTP/1.0 framing**: an HTTP/1.0 client cannot decode ``Transfer-Encoding: chunked``, so a reply
  without ``Content-Length`` (a stream) is close-delimited instead: the body is written as it comes
  and the connection closed at its end (HTTP/1.0 connections are never kept alive).

``ListenerServer(config, tls, handshake_timeout_s, drain_s)`` is the ``uvicorn.Server`` the lifecycle
runs: with a ``tls`` context it opens the listening socket itself so that
``limits.tls_handshake_timeout_secs`` caps every handshake (``busbar.server.tls``); its shutdown
stops accepting, drains in-flight requests for ``drain_s`` seconds (default :data:`DRAIN_SECS`),
then ends the rest with an error reply (``busbar.proxy.shutdown``; docs/operations.md#stopping).

See docs/configuration.md#front-door-connection-limits, docs/operations.md#tls-and-mtls.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle

from busbar.proxy.shutdown import begin_close
from busbar.server.tls import uvicorn_ssl

log = logging.getLogger("busbar")

DRAIN_SECS = 20.0
"""Default seconds a ``SIGTERM`` lets in-flight requests finish (``BUSBAR_DRAIN_SECS`` overrides)."""
CUT_GRACE_S = 2.0
"""Seconds the requests cut at the end of the drain get to write their error reply."""

HEAD_MAX_BYTES = 64 * 1024
"""Largest request head (request line + header lines, bytes) a connection may send: 431 past it."""


class _CloseDelimitedCycle(RequestResponseCycle):
    """An HTTP/1.0 request's cycle: a reply without ``Content-Length`` is close-delimited, never
    chunked (uvicorn would add ``Transfer-Encoding: chunked``, which HTTP/1.0 does not define)."""

    close_delimited = False

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.start" and not self.response_started:
            if not any(name.lower() == b"content-length" for name, _ in message.get("headers", ())):
                self.close_delimited = True
                self.chunked_encoding = False        # uvicorn then writes body frames as they are
        elif self.close_delimited and message["type"] == "http.response.body":
            self.expected_content_length = len(message.get("body", b""))   # each frame is its own length
        await super().send(message)


class FrontDoorProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` with the head cap, the head-read timeout and HTTP/1.0 framing (see the
    module docstring). ``head_timeout_s`` is set on the subclass ``protocol_class`` returns."""

    head_timeout_s: float = 30.0
    head_max_bytes: int = HEAD_MAX_BYTES

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._in_head = True            # waiting for (the rest of) a request head
        self._head_bytes = 0            # bytes received since that head began
        self._head_tail = b""           # the last 3 bytes of them (a head's end split across reads)
        self._head_timer: asyncio.TimerHandle | None = self.loop.call_later(
            self.head_timeout_s, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._in_head:
            return super().data_received(data)
        before = self._head_bytes
        self._head_bytes += len(data)
        if self._head_bytes > self.head_max_bytes and self._head_over(before, data):
            self._refuse(431, f"request head exceeds the {self.head_max_bytes}-byte limit")
            return
        self._head_tail = (self._head_tail + data)[-3:]
        super().data_received(data)
        if not self._in_head or self.transport.is_closing():
            return
        if self._head_bytes > self.head_max_bytes:
            self._refuse(431, f"request head exceeds the {self.head_max_bytes}-byte limit")
        elif self._head_bytes and self._head_timer is None:   # a head split across reads: a deadline
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _head_over(self, before: int, data: bytes) -> bool:
        """Does the head this read continues (``before`` bytes of it already received) end past the
        cap, or not end within this read at all? Its end is the first blank line (CRLF CRLF, or a
        bare LF LF), searched across the previous read's tail."""
        buf = self._head_tail + data
        ends = [i + len(sep) for sep in (b"\r\n\r\n", b"\n\n") if (i := buf.find(sep)) >= 0]
        if not ends:
            return True
        return before - len(self._head_tail) + min(ends) > self.head_max_bytes

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._head_timer is not None:
            self._cancel_head_timer()
        super().on_headers_complete()
        cycle = self.cycle
        if self.scope["http_version"] == "1.0" and cycle is not None and cycle.scope is self.scope:
            cycle.__class__ = _CloseDelimitedCycle

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True            # the next read starts the next head
        self._head_bytes = 0
        self._head_tail = b""

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._in_head:
            return
        if self.cycle is not None and not self.cycle.response_complete:   # a reply still in flight
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)
            return
        if self._head_bytes:
            self._refuse(408, f"request head not received within {self.head_timeout_s:g}s")
        else:
            self.transport.close()

    def _refuse(self, status: int, text: str) -> None:
        """Answer ``status`` with a plain-text ``text`` and close the connection (just close it while
        an earlier request's reply is still being written: the answer would land inside it)."""
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()
            return
        body = text.encode("ascii")
        self.transport.write(b"".join((
            STATUS_LINE[status], b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: ", str(len(body)).encode("ascii"), b"\r\nconnection: close\r\n\r\n", body)))
        self.transport.close()


def protocol_class(head_timeout_s: float) -> type[FrontDoorProtocol]:
    """The listener protocol with ``limits.header_read_timeout_secs`` = ``head_timeout_s`` (seconds)."""
    return type("FrontDoorProtocol", (FrontDoorProtocol,), {"head_timeout_s": float(head_timeout_s)})


class ListenerServer(uvicorn.Server):
    """``uvicorn.Server`` whose listening socket terminates TLS with a handshake deadline.

    ``tls``: the server ``SSLContext`` (``busbar.server.tls.server_context``) or ``None`` for plain
    HTTP (then uvicorn's own start-up runs unchanged). ``handshake_timeout_s``:
    ``limits.tls_handshake_timeout_secs``; a client that has not finished its handshake by then is
    disconnected (uvicorn itself cannot pass ``ssl_handshake_timeout`` to ``create_server``).
    """

    def __init__(self, config: uvicorn.Config, tls: ssl.SSLContext | None = None,
                 handshake_timeout_s: float = 10.0, drain_s: float = DRAIN_SECS) -> None:
        super().__init__(config)
        self.tls = tls
        self.handshake_timeout_s = handshake_timeout_s
        self.drain_s = drain_s

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop accepting, let requests in flight finish for ``drain_s`` seconds, then cut the rest
        with a reply (``busbar.proxy.shutdown``: a stream's in-band error, else a 503)."""
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()           # idle keep-alive connections close now; busy ones after their reply
        running = len(self.server_state.tasks)
        if running:
            log.info("shutting down: draining %d request(s) in flight for up to %gs", running, self.drain_s)
        try:
            await asyncio.wait_for(self._wait_tasks_to_complete(), timeout=self.drain_s)
        except TimeoutError:
            tasks = list(self.server_state.tasks)
            log.warning("shutting down: the %gs drain is over; ending %d request(s) still in flight",
                        self.drain_s, len(tasks))
            begin_close()
            for t in tasks:
                t.cancel()
            if tasks:                       # let each write its error reply
                await asyncio.wait(tasks, timeout=CUT_GRACE_S)
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if self.tls is None:
            return await super().startup(sockets)
        config = self.config
        if not config.loaded:
            config.load()
        await self.lifespan.startup()

        def create_protocol(_loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Protocol:
            return config.http_protocol_class(config=config, server_state=self.server_state,  # type: ignore[call-arg]
                                              app_state=self.lifespan.state, _loop=_loop)

        loop = asyncio.get_running_loop()
        tls_kw = uvicorn_ssl(self.tls, self.handshake_timeout_s)
        try:
            if sockets:
                self.servers = [await loop.create_server(create_protocol, sock=s, backlog=config.backlog, **tls_kw)
                                for s in sockets]
            else:
                self.servers = [await loop.create_server(create_protocol, host=config.host, port=config.port,
                                                         backlog=config.backlog, **tls_kw)]
        except OSError as exc:
            log.error("cannot listen on %s:%s: %s", config.host, config.port, exc.strerror or exc)
            self.should_exit = True
            return
        self.started = True
