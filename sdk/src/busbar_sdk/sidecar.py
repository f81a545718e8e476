"""Serve a hook plugin as the HTTP sidecar ``busbar-webrequest-hook`` forwards to.

The sidecar wire carries the same op-discriminated JSON as ``busbar_call``, one POST body per
message, so the class (or plain-pluggy module) you load in-process serves unchanged out of
process::

    from busbar_sdk.sidecar import serve
    from my_hook import MyHook

    serve(MyHook, settings={"threshold": 3}, host="127.0.0.1", port=8787)   # blocks

or from a shell: ``python -m busbar_sdk.sidecar my_hook:plugin --port 8787``.

HTTP mapping (seeds 003 "The wire, precisely"): any path, ``POST`` with a JSON object body;
``200`` with the reply JSON (``{}`` = abstain, also for ``notify`` and unknown ops); ``400`` for an
empty or non-JSON body, ``413`` above ``max_body_bytes``, ``405`` for other methods, ``500`` when
the plugin raised or returned a non-dict. Non-200 statuses are transport errors on the Busbar
side (the gate's ``on_error``), never an abstain. Stdlib only (``http.server``); for an ASGI
server use :func:`asgi_app`.

The forwarder requires ``https://`` for a remote sidecar; put TLS in front (or bind loopback).

Source: seeds 003 "Webrequest", "The sidecar wire contract".
"""
from __future__ import annotations

import argparse
import importlib
import json
import threading
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from busbar_sdk._base import Plugin, export_plugin
from busbar_sdk._binding import bind_plugin

__all__ = ["SidecarServer", "asgi_app", "main", "make_dispatch", "serve", "start"]

Dispatch = Callable[[dict[str, Any]], dict[str, Any]]
MAX_BODY_BYTES = 8 << 20


def make_dispatch(plugin: object, settings: dict[str, Any] | None = None) -> Dispatch:
    """Open one instance of ``plugin`` and return ``payload -> reply``.

    Args:
        plugin: a :class:`HookPlugin` subclass, an :func:`export_plugin` object, or any object or
            module implementing the ABI with pluggy markers.
        settings: the instance settings (what ``busbar_open`` receives).

    Raises:
        BindingError: the object does not satisfy the ABI or is not a hook.
    """
    if isinstance(plugin, type) and issubclass(plugin, Plugin):
        plugin = export_plugin(plugin)
    binding = bind_plugin(plugin, name="sidecar", expected_kind="hook")
    handle = binding.open(dict(settings or {}))
    call = binding.call

    def dispatch(payload: dict[str, Any]) -> dict[str, Any]:
        return call(handle, payload)
    return dispatch


def _respond(dispatch: Dispatch, body: bytes) -> tuple[int, dict[str, Any]]:
    if not body.strip():
        return 400, {"error": "empty body"}
    try:
        payload = json.loads(body)
    except ValueError:
        return 400, {"error": "body is not JSON"}
    if not isinstance(payload, dict):
        return 400, {"error": "body is not a JSON object"}
    try:
        reply = dispatch(payload)
    except Exception as exc:  # noqa: BLE001 - plugin code: a 500 is the on_error path on the Busbar side
        return 500, {"error": f"{type(exc).__name__}: {exc}"}
    if not isinstance(reply, dict):
        return 500, {"error": "the plugin returned a non-dict reply"}
    return 200, reply


class SidecarServer(ThreadingHTTPServer):
    """A threading HTTP server bound to one dispatch; ``url`` is where it listens."""

    daemon_threads = True

    def __init__(self, dispatch: Dispatch, host: str, port: int, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.dispatch = dispatch
        self.max_body_bytes = max_body_bytes
        self._thread: threading.Thread | None = None
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        """Stop serving and release the socket."""
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    server: SidecarServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True    # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        return None

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            return self._send(400, {"error": "bad Content-Length"})
        if length > self.server.max_body_bytes:
            self.close_connection = True
            return self._send(413, {"error": f"body above {self.server.max_body_bytes} bytes"})
        status, reply = _respond(self.server.dispatch, self.rfile.read(length))
        self._send(status, reply)

    def _not_allowed(self) -> None:
        self._send(405, {"error": "POST a JSON message"})

    do_GET = do_PUT = do_DELETE = do_PATCH = _not_allowed


def start(plugin: object, *, settings: dict[str, Any] | None = None, host: str = "127.0.0.1",
          port: int = 0) -> SidecarServer:
    """Serve in a background thread (``port=0`` picks a free port); returns the server."""
    server = SidecarServer(make_dispatch(plugin, settings), host, port)
    server._thread = threading.Thread(target=server.serve_forever, name="busbar-sidecar", daemon=True)
    server._thread.start()
    return server


def serve(plugin: object, *, settings: dict[str, Any] | None = None, host: str = "127.0.0.1",
          port: int = 8787) -> None:
    """Serve in the foreground until interrupted."""
    server = SidecarServer(make_dispatch(plugin, settings), host, port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]],
                    Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]


def asgi_app(plugin: object, settings: dict[str, Any] | None = None, *,
             max_body_bytes: int = MAX_BODY_BYTES) -> ASGIApp:
    """The same contract as an ASGI 3 application (for uvicorn, hypercorn, ...)."""
    dispatch = make_dispatch(plugin, settings)

    async def app(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                  send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            status, reply = 405, {"error": "POST a JSON message"}
        else:
            body, more = b"", True
            while more:
                event = await receive()
                body += event.get("body", b"")
                more = event.get("more_body", False)
                if len(body) > max_body_bytes:
                    break
            status, reply = ((413, {"error": f"body above {max_body_bytes} bytes"}) if len(body) > max_body_bytes
                             else _respond(dispatch, body))
        data = json.dumps(reply, separators=(",", ":")).encode("utf-8")
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})
    return app


def main(argv: list[str] | None = None) -> int:
    """``python -m busbar_sdk.sidecar module:object [--host H] [--port P] [--settings JSON]``."""
    parser = argparse.ArgumentParser(prog="python -m busbar_sdk.sidecar", description=__doc__.split("\n")[0])
    parser.add_argument("target", help="module:object naming the hook class, export or pluggy module")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--settings", default="{}", help="instance settings as a JSON object")
    args = parser.parse_args(argv)
    module, _, attr = args.target.partition(":")
    obj: object = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    settings = json.loads(args.settings)
    if not isinstance(settings, dict):
        parser.error("--settings must be a JSON object")
    print(f"busbar sidecar serving {args.target} on http://{args.host}:{args.port}", flush=True)
    serve(obj, settings=settings, host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
