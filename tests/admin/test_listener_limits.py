"""The admin listener's protections, through a real busbar process (docs/admin.md#listener).

Authentication comes before the body is read (an unauthenticated ``POST /keys`` with a broken or
huge body is a 401, the connection closed without reading the body); a body over 1 MiB is a 413
``payload_too_large`` (by ``Content-Length`` or as a chunked body passes the cap); the data plane's
connection limits apply: a request head over 64 KiB is a 431, a head not received within
``limits.header_read_timeout_secs`` a 408, an idle keep-alive connection closes after
``limits.keep_alive_timeout_secs``.
"""
from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.admin.conftest import PREFIX, TOKEN, AdminGateway

UNAUTHORIZED = {"error": {"code": "unauthorized", "message": "a valid admin credential is required "
                                                             "(Authorization: Bearer <token> or x-admin-token)"}}
TOO_LARGE = {"error": {"code": "payload_too_large", "message": "the request body exceeds the admin API's "
                                                               "1048576-byte (1 MiB) limit; send a smaller body"}}
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def lgw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminGateway]:
    g = AdminGateway(tmp_path_factory.mktemp("admin-limits"),
                     "limits: { header_read_timeout_secs: 1, keep_alive_timeout_secs: 1 }\n")
    g.start()
    yield g
    g.stop()


def _connect(g: AdminGateway) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", g.admin_port), timeout=10)
    return s


def _read_reply(s: socket.socket) -> tuple[int, dict[str, str], bytes, bool]:
    """``(status, headers, body, closed)`` of one reply with a Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    length = int(headers["content-length"])
    while len(rest) < length:
        chunk = s.recv(65536)
        assert chunk
        rest += chunk
    closed = False
    try:
        closed = s.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        closed = True
    return int(lines[0].split()[1]), headers, rest[:length], closed


def _chunked_post(g: AdminGateway, auth: bool, chunks: int, size: int = 64 * 1024) -> tuple[
        int, dict[str, str], bytes, bool, int]:
    """POST /keys with a chunked body of up to ``chunks`` x ``size`` bytes, stopping when the server
    answers; returns the reply and how many body bytes were sent."""
    s = _connect(g)
    head = (f"POST {PREFIX}/keys HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            f"transfer-encoding: chunked\r\n" + (f"authorization: Bearer {TOKEN}\r\n" if auth else "") + "\r\n")
    s.sendall(head.encode())
    sent = 0
    piece = f"{size:x}\r\n".encode() + b"a" * size + b"\r\n"
    s.settimeout(0.05)
    for _ in range(chunks):
        try:
            if s.recv(1, socket.MSG_PEEK):
                break
        except TimeoutError:
            pass
        try:
            s.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += size
    s.settimeout(10)
    try:
        status, headers, body, closed = _read_reply(s)
    finally:
        s.close()
    return status, headers, body, closed, sent


def test_an_unauthenticated_body_is_never_parsed(lgw: AdminGateway) -> None:
    r = httpx.post(lgw.admin + PREFIX + "/keys", content=b"notjson", headers={"content-type": "application/json"})
    assert (r.status_code, r.json(), r.headers["www-authenticate"], r.headers["connection"]) == (
        401, UNAUTHORIZED, "Bearer", "close")
    r = lgw.client.post("/keys", content=b"notjson", headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == (400, {"error": {"code": "invalid_request",
                                                         "message": "the body is not valid JSON"}})


def test_an_unauthenticated_chunked_body_is_refused_without_reading_it(lgw: AdminGateway) -> None:
    status, headers, body, closed, sent = _chunked_post(lgw, auth=False, chunks=300 * 16)   # up to 300 MB
    assert (status, json.loads(body), headers["connection"], closed) == (401, UNAUTHORIZED, "close", True)
    assert sent < 64 * MIB


def test_a_chunked_body_over_1_mib_is_a_413(lgw: AdminGateway) -> None:
    status, headers, body, closed, sent = _chunked_post(lgw, auth=True, chunks=300 * 16)
    assert (status, json.loads(body), headers["connection"], closed) == (413, TOO_LARGE, "close", True)
    assert sent < 64 * MIB


def test_a_content_length_over_1_mib_is_a_413_before_reading(lgw: AdminGateway) -> None:
    s = _connect(lgw)
    s.sendall((f"POST {PREFIX}/keys HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
               f"authorization: Bearer {TOKEN}\r\ncontent-length: {MIB + 1}\r\n\r\n{{").encode())
    status, headers, body, closed = _read_reply(s)
    s.close()
    assert (status, json.loads(body), headers["connection"], closed) == (413, TOO_LARGE, "close", True)


def test_a_body_at_the_cap_is_served(lgw: AdminGateway) -> None:
    body = json.dumps({"name": "cap", "labels": {"pad": ""}})
    pad = MIB - len(body)
    exact = json.dumps({"name": "cap", "labels": {"pad": "p" * pad}}).encode()
    assert len(exact) == MIB
    r = lgw.client.post("/keys", content=exact, headers={"content-type": "application/json"})
    assert r.status_code != 413, r.text


def test_a_request_head_over_64_kib_is_a_431(lgw: AdminGateway) -> None:
    s = _connect(lgw)
    s.sendall(f"GET {PREFIX}/keys HTTP/1.1\r\nhost: x\r\nx-pad: {'p' * 70000}".encode())   # still no end
    status, _, body, closed = _read_reply(s)
    s.close()
    assert (status, body, closed) == (431, b"request head exceeds the 65536-byte limit", True)


def test_a_complete_head_over_64_kib_in_one_send_is_a_431(lgw: AdminGateway) -> None:
    start = f"GET {PREFIX}/keys HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\nx-pad: ".encode()
    s = _connect(lgw)
    s.sendall(start + b"p" * (68_000 - len(start) - 4) + b"\r\n\r\n")         # complete, 68000 bytes
    status, _, body, closed = _read_reply(s)
    s.close()
    assert (status, body, closed) == (431, b"request head exceeds the 65536-byte limit", True)


def test_a_slow_head_is_a_408(lgw: AdminGateway) -> None:
    s = _connect(lgw)
    s.sendall(f"GET {PREFIX}/keys HTTP/1.1\r\nhost: x\r\n".encode())
    t0 = time.monotonic()
    status, _, body, closed = _read_reply(s)
    s.close()
    assert (status, body, closed) == (408, b"request head not received within 1s", True)
    assert 0.8 < time.monotonic() - t0 < 5


def test_an_idle_keep_alive_connection_closes(lgw: AdminGateway) -> None:
    s = _connect(lgw)
    s.sendall(f"GET {PREFIX}/keys HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\r\n".encode())
    s.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    assert data.startswith(b"HTTP/1.1 200 ")
    t0 = time.monotonic()
    while s.recv(65536):
        pass
    assert 0.5 < time.monotonic() - t0 < 5
    s.close()


