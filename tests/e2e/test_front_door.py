"""Front-door connection limits through the real busbar process, over raw sockets: the request-head
cap (431), the head-read and keep-alive idle timeouts, and HTTP/1.0 framing (docs/configuration.md
#front-door-connection-limits)."""
from __future__ import annotations

import json
import selectors
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.rawclient import connect, parse, read_response, read_to_close

CONFIG = """
listen: "127.0.0.1:{port}"
limits: { header_read_timeout_secs: 1, keep_alive_timeout_secs: 2 }
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  m: { provider: up-openai }
pools:
  p: { members: [ { model: m } ] }
"""
HEAD_MAX = 65536
CHAT = b'{"model":"p","stream":%s,"messages":[{"role":"user","content":"hi there"}]}'


@pytest.fixture(scope="module")
def gw(gateway_factory, mock):
    return gateway_factory(CONFIG, mock.url)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("head", [
    b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * (HEAD_MAX + 1000),      # one huge header
    b"GET /healthz HTTP/1.1\r\n" + b"x-h: v\r\n" * (HEAD_MAX // 8 + 100),           # many small ones
    b"GET /" + b"p" * (HEAD_MAX + 1000),                                             # the request line
], ids=["one-header", "many-headers", "request-line"])
def test_head_over_the_cap_is_431_and_closed(gw, head):
    s = connect(gw.url)
    s.sendall(head)
    raw, _ = read_to_close(s)
    s.close()
    body = b"request head exceeds the 65536-byte limit"
    assert raw == (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
                   b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body)


@pytest.mark.parametrize("size", [HEAD_MAX + 1, HEAD_MAX + 2000, 70_000])
def test_a_complete_head_over_the_cap_in_one_send_is_431(gw, size):
    """A head that is complete (its blank line included) but longer than the cap is refused however
    it arrives: in one read the parser would otherwise have taken it whole."""
    start = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: "
    head = start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"
    assert len(head) == size
    s = connect(gw.url)
    s.sendall(head)
    raw, _ = read_to_close(s)
    s.close()
    assert raw.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert raw.endswith(b"\r\n\r\nrequest head exceeds the 65536-byte limit")


def test_a_head_of_exactly_the_cap_with_a_body_is_served(gw):
    """The cap counts the head up to its blank line; the body that follows in the same send does not count."""
    body = CHAT % b"false"
    start = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    tail = b"content-length: %d\r\nx-big: " % len(body)
    head = start + tail + b"a" * (HEAD_MAX - len(start) - len(tail) - 4) + b"\r\n\r\n"
    assert len(head) == HEAD_MAX
    s = connect(gw.url)
    s.sendall(head + body)
    resp = read_response(s)
    s.close()
    assert resp.status == 200
    assert json.loads(resp.body)["object"] == "chat.completion"


def test_head_under_the_cap_is_served(gw):
    s = connect(gw.url)
    s.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * (HEAD_MAX - 200) + b"\r\n\r\n")
    resp = read_response(s)
    s.close()
    assert (resp.status, resp.body) == (200, b"ok")


def test_head_flood_keeps_memory_flat_and_healthz_responsive(gw):
    """4 attackers each stream 128 MiB of header bytes (reconnecting whenever they are cut off):
    RSS grows by less than 32 MiB and /healthz keeps answering within 1 s throughout."""
    before = _rss_kib(gw.proc.pid)
    quota = 128 * 1024 * 1024
    sent = [0, 0, 0, 0]
    junk = b"x" * 65536

    def attack(i: int) -> None:
        while sent[i] < quota:
            s = connect(gw.url, timeout_s=2)
            try:
                s.sendall(b"GET / HTTP/1.1\r\nhost: x\r\nx-flood: ")
                while sent[i] < quota:
                    s.sendall(junk)
                    sent[i] += len(junk)
            except OSError:
                pass
            finally:
                s.close()

    threads = [threading.Thread(target=attack, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    peak, slowest, probes = before, 0.0, 0
    while any(t.is_alive() for t in threads) or probes < 5:
        t0 = time.monotonic()
        r = httpx.get(gw.url + "/healthz", timeout=5)
        slowest = max(slowest, time.monotonic() - t0)
        assert (r.status_code, r.text) == (200, "ok")
        peak = max(peak, _rss_kib(gw.proc.pid))
        probes += 1
        time.sleep(0.05)
    assert sum(sent) >= 4 * quota
    assert peak - before < 32 * 1024, (before, peak)
    assert slowest < 1.0, (slowest, probes)


def test_partial_head_gets_408_after_the_head_read_timeout(gw):
    s = connect(gw.url)
    s.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
    raw, took = read_to_close(s, timeout_s=5)
    s.close()
    body = b"request head not received within 1s"
    assert raw == (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                   b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body)
    assert 0.8 <= took < 2.5


def test_silent_connection_is_closed_after_the_head_read_timeout(gw):
    s = connect(gw.url)
    raw, took = read_to_close(s, timeout_s=5)
    s.close()
    assert raw == b""
    assert 0.8 <= took < 2.5


def test_head_split_across_reads_within_the_timeout_is_served(gw):
    s = connect(gw.url)
    s.sendall(b"GET /healthz HTTP/1.1\r\n")
    time.sleep(0.5)
    s.sendall(b"host: x\r\n\r\n")
    resp = read_response(s)
    assert (resp.status, resp.body) == (200, b"ok")
    time.sleep(0.6)                                 # idle < both timeouts: still open
    s.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
    assert read_response(s).status == 200
    s.close()


def test_idle_keep_alive_connection_is_closed(gw):
    s = connect(gw.url)
    s.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
    resp = read_response(s)
    assert (resp.status, resp.body) == (200, b"ok")
    raw, took = read_to_close(s, timeout_s=6)
    s.close()
    assert raw == b""
    assert 1.8 <= took < 3.5                        # keep_alive_timeout_secs: 2


def test_500_idle_and_half_sent_connections_do_not_hold(gw):
    """250 connections that sent nothing and 250 that sent part of a head are all closed by the
    server within 3 s (head-read timeout 1 s); the partial ones got their 408 first."""
    sel = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    for i in range(500):
        s = connect(gw.url)
        if i % 2:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-")
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, bytearray())
        socks.append(s)
    deadline = time.monotonic() + 3.0
    closed: dict[int, bytes] = {}
    while len(closed) < len(socks) and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if chunk:
                key.data.extend(chunk)
            else:
                closed[s.fileno()] = bytes(key.data)
                sel.unregister(s)
    for s in socks:
        s.close()
    assert len(closed) == 500
    answers = sorted(set(closed.values()))
    assert len(answers) == 2 and answers[0] == b""
    assert parse(answers[1]).status == 408
    assert sum(1 for v in closed.values() if v) == 250


def _http10_chat(gw, stream: bytes):
    """POST a chat request as HTTP/1.0 and read the reply until the server closes."""
    body = CHAT % stream
    s = connect(gw.url)
    s.sendall(b"POST /v1/chat/completions HTTP/1.0\r\ncontent-type: application/json\r\n"
              b"content-length: %d\r\n\r\n" % len(body) + body)
    raw, _ = read_to_close(s)
    s.close()
    return parse(raw)


def test_http10_stream_is_close_delimited_not_chunked(gw):
    resp = _http10_chat(gw, b"true")
    assert resp.status_line == "HTTP/1.1 200 OK"
    assert "transfer-encoding" not in resp.headers and "content-length" not in resp.headers
    assert resp.headers["connection"] == "close"
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = resp.body.decode().split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]           # raw SSE, no chunk-size lines
    assert all(e.startswith("data: {") for e in events[:-2])
    chunks = [json.loads(e[6:]) for e in events[:-2]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello from m. You said: hi there"


def test_http10_json_reply_keeps_content_length(gw):
    resp = _http10_chat(gw, b"false")
    assert resp.status == 200 and resp.headers["connection"] == "close"
    assert int(resp.headers["content-length"]) == len(resp.body)
    assert "transfer-encoding" not in resp.headers


def test_keep_alive_gap_longer_than_the_head_timeout_is_not_a_late_head(gw):
    """The head-read deadline runs from a head's first byte, not from the previous response: a
    connection idle for longer than header_read_timeout_secs (1 s) but within
    keep_alive_timeout_secs (2 s) still gets its next prompt request served."""
    s = connect(gw.url)
    s.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
    assert read_response(s).status == 200
    time.sleep(1.5)
    s.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
    resp = read_response(s)
    s.close()
    assert (resp.status, resp.body) == (200, b"ok")
