"""A TCP relay in front of a real database, so a test can cut the store off from Busbar without
touching the machine's shared PostgreSQL or Redis server.

``TcpProxy(port).start()`` listens on ``127.0.0.1:<.port>`` and relays every connection to
``127.0.0.1:<port>``. ``drop()`` closes every relayed connection (what a server restart looks like
to a client); ``down()`` does that and then closes each new connection at once until ``up()`` (the
server is unreachable). ``stop()`` ends the relay thread.
"""
from __future__ import annotations

import asyncio
import contextlib
import threading


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.accepting = True
        self._loop = asyncio.new_event_loop()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> TcpProxy:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._relay, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def _call(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.accepting:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}

    async def _abort_all(self) -> int:
        n = len(self._writers)
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()
        return n

    def drop(self) -> int:
        """Close every relayed connection; returns how many sockets were closed."""
        return int(self._call(self._abort_all()))

    def down(self) -> None:
        self.accepting = False
        self.drop()

    def up(self) -> None:
        self.accepting = True

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self.drop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
