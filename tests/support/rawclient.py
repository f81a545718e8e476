"""Raw-socket HTTP/1 clients for front-door tests: send exact bytes, read exact bytes, see closes.

``connect(url) -> socket``; ``read_to_close(sock, timeout_s) -> (bytes, seconds)`` reads until the
peer closes (EOF or reset) and says how long that took; ``parse(raw) -> Response`` splits a whole
response (status line, lower-cased headers, body as sent on the wire: chunked framing is kept).
"""
from __future__ import annotations

import socket
import time
from dataclasses import dataclass


def connect(url: str, timeout_s: float = 10.0) -> socket.socket:
    """A TCP connection to ``http://host:port`` (blocking, ``timeout_s`` per operation)."""
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=timeout_s)


def read_to_close(sock: socket.socket, timeout_s: float = 10.0) -> tuple[bytes, float]:
    """Everything the peer sends until it closes the connection, and the seconds that took.
    Raises ``TimeoutError`` when the peer neither closes nor sends for ``timeout_s``."""
    sock.settimeout(timeout_s)
    t0 = time.monotonic()
    data = bytearray()
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return bytes(data), time.monotonic() - t0


def read_response(sock: socket.socket, timeout_s: float = 10.0) -> Response:
    """One ``Content-Length`` response off a kept-alive connection (the connection stays open)."""
    sock.settimeout(timeout_s)
    data = bytearray()
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before the response head: {bytes(data)!r}")
        data += chunk
    resp = parse(bytes(data))
    need = int(resp.headers["content-length"])
    while len(resp.body) < need:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside the response body")
        resp.body += chunk
    return resp


@dataclass
class Response:
    status_line: str
    headers: dict[str, str]
    body: bytes

    @property
    def status(self) -> int:
        return int(self.status_line.split(" ", 2)[1])


def parse(raw: bytes) -> Response:
    """Split one response: status line, headers (lower-cased names), body bytes as on the wire."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Response(lines[0], headers, body)
