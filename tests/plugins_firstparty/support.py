"""Shared test material: the projects under test, a programmable loopback HTTP server, payloads
shaped exactly as docs/hooks.md#what-a-hook-receives specifies."""
from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

PROJECTS: dict[str, dict[str, Any]] = {
    "webrequest": {"project": REPO / "plugins" / "busbar-webrequest-hook", "name": "busbar-webrequest-hook",
                   "alias": "busbar-webrequest", "version": "1.5.0", "publisher": "busbar",
                   "needs_prompt": "rw", "needs_user": "ro",
                   "schema": "src/busbar_webrequest_hook/settings_schema.json"},
    "headroom": {"project": REPO / "plugins" / "busbar-headroom-hook", "name": "busbar-headroom-hook",
                 "alias": "busbar-headroom", "version": "1.5.0", "publisher": "busbar",
                 "needs_prompt": "rw", "needs_user": "no",
                 "schema": "src/busbar_headroom_hook/settings_schema.json"},
    "smart-router": {"project": REPO / "examples" / "hooks" / "smart-router", "name": "smart-router",
                     "alias": "router", "version": "1.0.0", "publisher": "acme",
                     "needs_prompt": "no", "needs_user": "no"},
    "pii-guard": {"project": REPO / "examples" / "hooks" / "pii-guard", "name": "pii-guard", "alias": "pii",
                  "version": "1.0.0", "publisher": "acme", "needs_prompt": "ro", "needs_user": "no"},
}


# ------------------------------------------------------------------------------- payloads

def request(**fields: Any) -> dict[str, Any]:
    """A request projection (docs/hooks.md#what-a-hook-receives); optional fields only when given."""
    req: dict[str, Any] = {"request_id": "req-1", "pool": "smart", "ingress_protocol": "anthropic",
                           "message_count": 1, "has_tools": False, "total_chars": 12, "stream": False}
    req.update(fields)
    return req


def per_request(op: str, req: dict[str, Any], candidates: list[dict[str, Any]] | None = None,
                context: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"op": op, "request": req, "candidates": candidates or [], "context": context or {}, **extra}


def prompt_request(messages: list[tuple[str, str]], system: str | None = None, **fields: Any) -> dict[str, Any]:
    """A projection carrying prompt text (``prompt: ro|rw``): ``messages`` as ``{role, text}``."""
    msgs = [{"role": r, "text": t} for r, t in messages]
    req = request(message_count=len(msgs), total_chars=sum(len(t) for _, t in messages) + len(system or ""),
                  messages=msgs, **fields)
    if system is not None:
        req["system"] = system
    return req


# ------------------------------------------------------------------------------- a sidecar stub

@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes
    client_port: int


@dataclass
class Script:
    """What the stub answers: a status, headers and body (or a callable building them)."""

    status: int = 200
    body: bytes | Callable[[bytes], bytes] = b"{}"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    delay_s: float = 0.0
    send_length: bool = True


class Stub(ThreadingHTTPServer):
    """A loopback HTTP/1.1 server that records every request and answers from :attr:`script`."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.script = Script()
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.concurrent = 0
        self.max_concurrent = 0
        super().__init__(("127.0.0.1", 0), _StubHandler)
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a client that gave up (timeouts under test) is expected, not news

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(s.body) for s in self.seen]

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _StubHandler(BaseHTTPRequestHandler):
    server: Stub
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        stub = self.server
        with stub.lock:
            stub.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                                  self.client_address[1]))
            stub.concurrent += 1
            stub.max_concurrent = max(stub.max_concurrent, stub.concurrent)
        try:
            script = stub.script
            if script.delay_s:
                time.sleep(script.delay_s)
            data = script.body(body) if callable(script.body) else script.body
            self.send_response(script.status)
            for k, v in script.headers.items():
                self.send_header(k, v)
            if script.send_length:
                self.send_header("Content-Length", str(len(data)))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with stub.lock:
                stub.concurrent -= 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")
