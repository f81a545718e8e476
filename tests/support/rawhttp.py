"""Raw HTTP/1.1 peers for client-side tests: a keep-alive upstream that counts connections and
requests, and an injectable resolver (a hosts table). No network: everything is on 127.0.0.1."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"

#: ``async (writer) -> None``: writes one whole response (may sleep, stream, or stop half way).
Responder = Callable[[asyncio.StreamWriter], Awaitable[None]]


class Upstream:
    """A tiny keep-alive HTTP/1.1 server. Answers every request with ``response`` (bytes) or by
    calling ``responder(writer)``; counts ``connections``, ``requests`` and ``closed`` (connections
    the client closed)."""

    def __init__(self, response: bytes = RESPONSE, responder: Responder | None = None) -> None:
        self.response = response
        self.responder = responder
        self.connections = 0
        self.requests = 0
        self.closed = 0
        self.heads: list[bytes] = []
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not head:
                    break
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                self.requests += 1
                self.heads.append(head)
                if self.responder is not None:
                    await self.responder(writer)
                else:
                    writer.write(self.response)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed += 1
        except asyncio.CancelledError:      # the test's loop is closing
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> Upstream:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()


class Hosts:
    """Injectable resolver: a fixed hosts table; records every lookup."""

    def __init__(self, table: dict[str, Sequence[str]]):
        self.table = table
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.lookups.append(host)
        if host not in self.table:
            raise OSError(f"unknown host {host}")
        return self.table[host]


HOSTS = {
    "api.localtest.me": ["127.0.0.1"],
    "svc.localhost": ["127.0.0.1"],
    "imds.attacker.example": ["169.254.169.254"],
    "rebind.attacker.example": ["93.184.215.14", "169.254.169.254"],
    "internal.attacker.example": ["10.0.0.5"],
    "mapped.attacker.example": ["::ffff:169.254.169.254"],
    "alibaba.attacker.example": ["100.100.100.200"],
    "loop.attacker.example": ["127.0.0.1"],
    "localhost": ["127.0.0.1", "::1"],
}
