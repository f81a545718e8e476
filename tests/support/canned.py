"""A canned HTTP upstream for SDK-parsing tests: a real uvicorn server on a free port, in a thread.

Queue replies with ``reply(status, headers, *chunks)``; each POST takes the next one (streamed chunk by
chunk) and is recorded in ``requests`` as ``{path, raw_path, query, body, headers}``.
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import Any, Self

import uvicorn


class Canned:
    """A tiny uvicorn server on a free port: each POST gets the next queued (status, headers, chunks)."""

    def __init__(self) -> None:
        self.replies: deque[tuple[int, dict[str, str], list[bytes]]] = deque()
        self.requests: list[dict[str, Any]] = []
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=0, lifespan="off", log_level="error", interface="asgi3"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = ""

    def reply(self, status: int, headers: dict[str, str], *chunks: bytes) -> None:
        self.replies.append((status, headers, list(chunks)))

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        self.requests.append(
            {
                "path": scope["path"],
                "raw_path": scope["raw_path"],
                "query": scope["query_string"],
                "body": body,
                "headers": {k.decode(): v.decode() for k, v in scope["headers"]},
            }
        )
        status, headers, chunks = self.replies.popleft()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
            }
        )
        for c in chunks:
            await send({"type": "http.response.body", "body": c, "more_body": True})
            await asyncio.sleep(0)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("canned server did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(5)
