"""The request path's upstream client (busbar.proxy.upstream.AiohttpUpstream on the guarded connector).

Real sockets to a raw HTTP/1.1 server on 127.0.0.1 (tests/support/rawhttp.py); DNS is an injected
hosts table. Covers the seam's contract (status, headers, whole body, cancel-safe chunks, early close
closes the connection, transport errors as UpstreamError), the SSRF guard at request and connect
time (C032), and the pool limits of docs/config-at-a-glance.md#limits.
"""
from __future__ import annotations

import asyncio
import socket

import pytest
from busbar.proxy.upstream import AiohttpUpstream, UpstreamError, form_request
from busbar.security.ssrf import HostGuard, SsrfBlocked, SsrfPolicy

from tests.support.rawhttp import HOSTS, Hosts, Upstream


def client(*, max_idle: int = 1024, total_timeout_s: float = 5.0, hosts: Hosts | None = None,
           policy: SsrfPolicy | None = None) -> AiohttpUpstream:
    guard = HostGuard(policy or SsrfPolicy(), purpose="provider", allow_private=True)
    return AiohttpUpstream(guard, total_timeout_s=total_timeout_s, max_idle_per_host=max_idle,
                           idle_timeout_s=300, resolver=hosts or Hosts(HOSTS))


async def test_send_reads_status_headers_body_and_sends_exact_headers() -> None:
    async with Upstream() as up:
        c = client()
        r = await c.send("POST", f"http://127.0.0.1:{up.port}/v1/chat/completions",
                         {"authorization": "Bearer k", "content-type": "application/json",
                          "accept-encoding": "identity"}, b'{"a":1}')
        assert (r.status, r.headers["content-type"], r.headers.get("CONTENT-TYPE")) == (200, "text/plain",
                                                                                         "text/plain")
        assert await r.read() == b"ok"
        await r.aclose()
        await c.aclose()
    head = up.heads[0].decode().lower()
    assert head.startswith("post /v1/chat/completions http/1.1\r\n")
    for line in ("authorization: bearer k", "content-type: application/json", "accept-encoding: identity",
                 "content-length: 7", "user-agent: busbar/1.5.0"):
        assert f"\r\n{line}\r\n" in head
    assert "cookie" not in head


async def test_keep_alive_reuses_one_connection() -> None:
    async with Upstream() as up:
        c = client()
        for _ in range(5):
            r = await c.send("POST", f"http://127.0.0.1:{up.port}/x", {}, b"{}")
            assert await r.read() == b"ok"
            await r.aclose()
        await c.aclose()
    assert (up.connections, up.requests) == (1, 5)


async def test_pool_max_idle_per_host_caps_idle_connections() -> None:
    async def slow(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.05)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    async def burst(c: AiohttpUpstream, port: int) -> None:
        async def one() -> None:
            r = await c.send("POST", f"http://127.0.0.1:{port}/x", {}, b"{}")
            await r.read()
            await r.aclose()
        await asyncio.gather(*(one() for _ in range(3)))

    async with Upstream(responder=slow) as up:
        c = client(max_idle=1)
        await burst(c, up.port)          # 3 connections; 1 stays idle
        await burst(c, up.port)          # reuses the idle one, opens 2
        await c.aclose()
    assert (up.connections, up.requests) == (5, 6)

    async with Upstream() as up:
        c = client(max_idle=0)           # no idle connection is kept: every request connects
        for _ in range(3):
            r = await c.send("POST", f"http://127.0.0.1:{up.port}/x", {}, b"{}")
            await r.read()
            await r.aclose()
        await c.aclose()
    assert (up.connections, up.requests) == (3, 3)


async def _chunked(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    for part in (b"data: 1\n\n", b"data: 2\n\n"):
        writer.write(b"%x\r\n%s\r\n" % (len(part), part))
        await writer.drain()
        await asyncio.sleep(0.15)
    writer.write(b"0\r\n\r\n")


async def test_chunks_survive_a_cancelled_wait() -> None:
    """A keep-alive timer may cancel a pending chunk wait; no byte is lost (relay relies on it)."""
    async with Upstream(responder=_chunked) as up:
        c = client()
        r = await c.send("POST", f"http://127.0.0.1:{up.port}/s", {}, b"{}")
        it = r.chunks()
        got, timeouts = [], 0
        while True:
            try:
                async with asyncio.timeout(0.02):
                    got.append(await it.__anext__())
            except TimeoutError:
                timeouts += 1
                continue
            except StopAsyncIteration:
                break
        await r.aclose()
        await c.aclose()
    assert b"".join(got) == b"data: 1\n\ndata: 2\n\n"
    assert timeouts >= 5


async def test_aclose_mid_body_closes_the_upstream_connection() -> None:
    """Case C026: a client that goes away mid-stream closes the upstream connection."""
    async def endless(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(200):
            writer.write(b"9\r\ndata: x\n\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)

    async with Upstream(responder=endless) as up:
        c = client()
        r = await c.send("POST", f"http://127.0.0.1:{up.port}/s", {}, b"{}")
        assert (await r.chunks().__anext__()).startswith(b"data: x")
        await r.aclose()
        for _ in range(100):
            if up.closed:
                break
            await asyncio.sleep(0.01)
        await c.aclose()
    assert up.closed == 1


async def test_transport_failures_are_upstream_errors() -> None:
    with socket.socket() as s:                     # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = client()
    with pytest.raises(UpstreamError, match="ClientConnectorError"):
        await c.send("POST", f"http://127.0.0.1:{port}/x", {}, b"{}")

    async def hang(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await asyncio.sleep(0.3)

    async with Upstream(responder=hang) as up:
        c2 = client(total_timeout_s=0.1)
        r = await c2.send("POST", f"http://127.0.0.1:{up.port}/x", {}, b"{}")
        with pytest.raises(UpstreamError) as exc:
            await r.read()
        assert str(exc.value) == ("upstream request exceeded its wall-clock timeout "
                                  "(limits.upstream_request_timeout_secs)")
        await r.aclose()
        await c2.aclose()
    with pytest.raises(UpstreamError, match=r"cannot resolve nowhere.example"):
        await c.send("POST", "https://nowhere.example/x", {}, b"{}")
    await c.aclose()


async def test_wall_clock_cap_ends_a_stream_that_never_stops() -> None:
    """limits.upstream_request_timeout_secs (docs/config-at-a-glance.md#limits): connect through the LAST byte, not per
    read."""
    async def trickle(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(100):
            writer.write(b"9\r\ndata: x\n\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)

    async with Upstream(responder=trickle) as up:
        c = client(total_timeout_s=0.4)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        r = await c.send("POST", f"http://127.0.0.1:{up.port}/s", {}, b"{}")
        got = 0
        with pytest.raises(UpstreamError, match="wall-clock timeout"):
            async for _chunk in r.chunks():
                got += 1
        elapsed = loop.time() - t0
        await r.aclose()
        await c.aclose()
    assert got >= 3
    assert 0.35 < elapsed < 1.0


async def test_a_gzip_encoded_answer_is_decoded_json_and_stream() -> None:
    """An upstream that compresses although Busbar never asks (no Accept-Encoding is sent): the body
    and the stream chunks reach the relay decoded (the client sees plain JSON / SSE)."""
    import gzip
    import zlib

    doc = b'{"id":"x","choices":[]}'
    packed = gzip.compress(doc)

    async def gz_json(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(packed), packed))

    async def gz_sse(writer: asyncio.StreamWriter) -> None:
        z = zlib.compressobj(wbits=31)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        for part in (b"data: 1\n\n", b"data: 2\n\n"):
            piece = z.compress(part) + z.flush(zlib.Z_SYNC_FLUSH)
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        tail = z.flush()
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))

    async with Upstream(responder=gz_json) as up:
        c = client()
        r = await c.send("POST", f"http://127.0.0.1:{up.port}/x", {}, b"{}")
        assert await r.read() == doc
        await r.aclose()
        await c.aclose()
    assert b"accept-encoding" not in up.heads[0].lower()
    async with Upstream(responder=gz_sse) as up:
        c = client()
        r = await c.send("POST", f"http://127.0.0.1:{up.port}/s", {}, b"{}")
        got = b"".join([chunk async for chunk in r.chunks()])
        await r.aclose()
        await c.aclose()
    assert got == b"data: 1\n\ndata: 2\n\n"


async def test_ssrf_guard_refuses_metadata_by_name_and_by_literal() -> None:
    hosts = Hosts(HOSTS)
    c = client(hosts=hosts)
    with pytest.raises(SsrfBlocked) as exc:
        await c.send("POST", "https://imds.attacker.example/latest/meta-data/", {}, b"")
    assert exc.value.reason == ("provider: imds.attacker.example resolved to 169.254.169.254, a "
                                "cloud-metadata address; refused at connect time by the SSRF guard")
    with pytest.raises(SsrfBlocked, match=r"resolved to 169.254.169.254, a cloud-metadata address"):
        await c.send("POST", "https://rebind.attacker.example/x", {}, b"")
    with pytest.raises(SsrfBlocked, match=r"169.254.169.254 is a cloud-metadata endpoint"):
        await c.send("POST", "http://169.254.169.254/latest/meta-data/", {}, b"")
    assert hosts.lookups == ["imds.attacker.example", "rebind.attacker.example"]   # literal: no DNS
    await c.aclose()


async def test_ssrf_guard_lets_a_name_on_loopback_through() -> None:
    async with Upstream() as up:
        hosts = Hosts(HOSTS)
        c = client(hosts=hosts)
        r = await c.send("POST", f"http://svc.localhost:{up.port}/x", {}, b"{}")
        assert (r.status, await r.read()) == (200, b"ok")
        await r.aclose()
        await c.aclose()
    assert hosts.lookups == ["svc.localhost"]


def test_form_request_encodes_body_and_basic_auth() -> None:
    headers, body = form_request({"grant_type": "client_credentials", "scope": "a b"}, ("id", "s:cret"))
    assert body == b"grant_type=client_credentials&scope=a+b"
    assert headers == {"content-type": "application/x-www-form-urlencoded", "accept": "application/json",
                       "authorization": "Basic aWQ6czpjcmV0"}


async def test_read_capped_counts_decoded_bytes_and_refuses_a_large_content_length() -> None:
    """read_capped: a gzip body is counted inflated (a 4 MiB bomb of 4 KiB is refused at a 1 MiB
    cap), a declared content-length over the cap is refused before any read, an error body is
    truncated at the cap, and a body within the cap is returned whole."""
    import gzip

    from busbar.proxy.upstream import BodyTooLarge, read_capped

    bomb = gzip.compress(b"a" * (4 << 20))
    answers = {
        "/bomb": b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (len(bomb), bomb),
        "/declared": b"HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n",
        "/small": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    }

    async def respond(writer: asyncio.StreamWriter) -> None:
        writer.write(answers[up.heads[-1].split(b" ")[1].decode()])

    assert len(bomb) < 8192
    async with Upstream(responder=respond) as up:
        c = client()
        for path, truncate, want in (("/bomb", False, BodyTooLarge), ("/declared", False, BodyTooLarge),
                                     ("/bomb", True, b"a" * (1 << 20)), ("/small", False, b"hello")):
            r = await c.send("POST", f"http://127.0.0.1:{up.port}{path}", {}, b"{}")
            try:
                if isinstance(want, bytes):
                    assert await read_capped(r, 1 << 20, truncate=truncate) == want
                else:
                    with pytest.raises(want):
                        await read_capped(r, 1 << 20, truncate=truncate)
            finally:
                await r.aclose()
        await c.aclose()
