"""Upstream faults and client disconnects through a real busbar, against a raw HTTP/1.1 upstream
(tests/support/rawhttp.py) that misbehaves on purpose.

- Case C026: a client that goes away closes the upstream connection at once, whatever phase the
  attempt is in (waiting for the first stream event, reading a JSON body), and the lane's
  ``max_concurrent`` permit comes back.
"""
from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.gateway import BusbarProcess
from tests.support.rawhttp import Upstream

OK_JSON = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"},
                                   "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(OK_JSON), OK_JSON)

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  raw: { protocol: openai, base_url: "http://127.0.0.1:UPPORT/v1", api_key: { env: T_KEY } }
models:
  m1: { provider: raw, max_concurrent: 1 }
pools:
  p: { members: [ { model: m1 } ] }
"""


async def _post(port: int, body: dict) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    raw = json.dumps(body).encode()
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: busbar\r\ncontent-type: application/json\r\n"
                 b"content-length: %d\r\n\r\n%s" % (len(raw), raw))
    await writer.drain()
    return reader, writer


async def _until(cond, timeout_s: float) -> bool:
    for _ in range(int(timeout_s / 0.02)):
        if cond():
            return True
        await asyncio.sleep(0.02)
    return cond()


@pytest.mark.parametrize("stream", [True, False])
async def test_client_gone_before_the_first_event_closes_the_upstream_connection(tmp_path, stream):
    """The upstream answered 200 and started its body, the gateway is still waiting for the first
    decodable event (stream) or the rest of the JSON body, and the client disconnects: the upstream
    connection is closed at once (well within 2 s) and the permit is released (the next request is served)."""
    async def stall_then_ok(writer: asyncio.StreamWriter) -> None:
        if up.requests > 1:
            writer.write(OK)
        elif stream:       # headers and an SSE comment: no event yet, the attempt has not committed
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked"
                         b"\r\n\r\ne\r\n: keep-alive\n\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n"
                         b'{"id":')

    async with Upstream(responder=stall_then_ok) as up:
        gw = BusbarProcess(CONFIG.replace("UPPORT", str(up.port)), tmp_path, env={"T_KEY": "k"}).start()
        try:
            _r, w = await _post(gw.port, {"model": "p", "stream": stream,
                                          "messages": [{"role": "user", "content": "hi"}]})
            assert await _until(lambda: up.requests == 1, 5)
            await asyncio.sleep(0.3)             # the gateway has read the partial body by now
            w.close()
            assert await _until(lambda: up.closed == 1, 2), "upstream connection left open"
            r, w2 = await _post(gw.port, {"model": "p", "messages": [{"role": "user", "content": "again"}]})
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 5)
            w2.close()
            assert head.startswith(b"HTTP/1.1 200 ")
            assert b"x-busbar-route-target: m1\r\n" in head
        finally:
            gw.stop()
