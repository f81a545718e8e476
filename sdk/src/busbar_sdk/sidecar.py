"""Serve a hook plugin as the HTTP sidecar ``busbar-webrequest-hook`` forwards to.

The sidecar wire carries the same op-discriminated JSON as ``busbar_call``, one POST body per
message, so the class (or plain-pluggy module) you load in-process serves unchanged out of
process::

    from busbar_sdk.sidecar import serve
    from my_hook import MyHook

    serve(MyHook, settings={"threshold": 3}, host="127.0.0.1", port=8787)   # blocks

or from a shell: ``python -m busbar_sdk.sidecar my_hook:plugin --port 8787``.

HTTP mapping (docs/hooks.md#what-a-hook-receives): any path, ``POST`` with a JSON object body;
``200`` with the reply JSON (``{}`` = abstain, also for ``notify`` and unknown ops); ``400`` for an
empty or non-JSON body, ``413`` above ``max_body_bytes``, ``405`` for other methods, ``500`` when
the plugin raised or returned a non-dict. Non-200 statuses are transport errors on the Busbar
side (the gate's ``on_error``), never an abstain.

The server is uvicorn (uvloop and the httptools parser when installed; no access log, no
``X-Forwarded-*`` middleware) serving :func:`asgi_app`: a keep-alive round trip costs a fraction of
``http.server``'s. Plugin code runs on a worker thread
(a slow or blocking hook never holds other connections up), unless the plugin declares
``busbar_call.busbar_inline = True`` (CPU-only and bounded, as in-process): then it runs on the
event loop, saving the thread hand-off. Keep-alive connections are not timed out by the server
(the forwarder's ``keepalive_s`` decides). To run it under another ASGI server, use
:func:`asgi_app`.

The forwarder requires ``https://`` for a remote sidecar; put TLS in front (or bind loopback).

Source: docs/hooks-firstparty.md#busbar-webrequest-hook.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

from busbar_sdk._base import Plugin, export_plugin
from busbar_sdk._binding import bind_plugin
from busbar_sdk.wire import INLINE_CAPABILITY

__all__ = ["SidecarServer", "asgi_app", "main", "make_dispatch", "serve", "start"]

Dispatch = Callable[[dict[str, Any]], dict[str, Any]]
MAX_BODY_BYTES = 8 << 20
#: ``json.dumps(reply, separators=(",", ":"))`` without building an encoder per reply.
_ENCODER = json.JSONEncoder(separators=(",", ":"))
#: The attribute of a ``busbar_call`` implementation declaring it CPU-only and bounded.
INLINE_ATTRIBUTE = INLINE_CAPABILITY


def make_dispatch(plugin: object, settings: dict[str, Any] | None = None) -> Dispatch:
    """Open one instance of ``plugin`` and return ``payload -> reply``.

    Args:
        plugin: a :class:`HookPlugin` subclass, an :func:`export_plugin` object, or any object or
            module implementing the ABI with pluggy markers.
        settings: the instance settings (what ``busbar_open`` receives).

    The returned function carries ``busbar_inline = True`` when the plugin's ``busbar_call``
    declares it (see the module docstring).

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
    dispatch.busbar_inline = getattr(call, INLINE_ATTRIBUTE, False) is True  # type: ignore[attr-defined]
    return dispatch


def _respond(dispatch: Dispatch, body: bytes) -> tuple[int, dict[str, Any]]:
    payload = _payload(body)
    if isinstance(payload, tuple):
        return payload
    return _reply(dispatch, payload)


def _payload(body: bytes) -> dict[str, Any] | tuple[int, dict[str, Any]]:
    """The request body as a JSON object, or the ``(400, error)`` answer."""
    if not body.strip():
        return 400, {"error": "empty body"}
    try:
        payload = json.loads(body)
    except ValueError:
        return 400, {"error": "body is not JSON"}
    if not isinstance(payload, dict):
        return 400, {"error": "body is not a JSON object"}
    return payload


def _reply(dispatch: Dispatch, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    try:
        reply = dispatch(payload)
    except Exception as exc:  # noqa: BLE001 - plugin code: a 500 is the on_error path on the Busbar side
        return 500, {"error": f"{type(exc).__name__}: {exc}"}
    if not isinstance(reply, dict):
        return 500, {"error": "the plugin returned a non-dict reply"}
    return 200, reply


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]],
                    Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]


def asgi_app(plugin: object, settings: dict[str, Any] | None = None, *,
             max_body_bytes: int = MAX_BODY_BYTES) -> ASGIApp:
    """The sidecar contract as an ASGI 3 application (for uvicorn, hypercorn, ...): see the module
    docstring for the HTTP mapping and where plugin code runs."""
    dispatch = make_dispatch(plugin, settings)
    inline = getattr(dispatch, INLINE_ATTRIBUTE, False)

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
            if len(body) > max_body_bytes:
                status, reply = 413, {"error": f"body above {max_body_bytes} bytes"}
            else:
                payload = _payload(body)
                if isinstance(payload, tuple):
                    status, reply = payload
                elif inline:
                    status, reply = _reply(dispatch, payload)
                else:
                    status, reply = await asyncio.to_thread(_reply, dispatch, payload)
        data = _ENCODER.encode(reply).encode("utf-8")
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})
    return app


class SidecarServer:
    """A sidecar bound to one plugin instance, listening on ``url`` (see the module docstring).

    ``port=0`` picks a free port. :meth:`serve_forever` blocks; :func:`start` runs it on a
    background thread; :meth:`close` stops it and releases the socket.
    """

    def __init__(self, plugin: object, host: str, port: int, *, settings: dict[str, Any] | None = None,
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self._sock.listen(1024)             # connections queue from now on, before the loop runs
        self.server_address = self._sock.getsockname()
        config = uvicorn.Config(asgi_app(plugin, settings, max_body_bytes=max_body_bytes), lifespan="off",
                                loop="auto", http="auto", access_log=False, log_level="warning",
                                proxy_headers=False,        # no X-Forwarded-* rewriting per request
                                timeout_keep_alive=24 * 3600, server_header=False, date_header=False)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}" if ":" not in str(host) else f"http://[{host}]:{port}"

    def serve_forever(self) -> None:
        """Serve until :meth:`close` (or, on the main thread, SIGINT/SIGTERM)."""
        self._server.run(sockets=[self._sock])

    def close(self) -> None:
        """Stop serving and release the socket."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close()


def start(plugin: object, *, settings: dict[str, Any] | None = None, host: str = "127.0.0.1",
          port: int = 0) -> SidecarServer:
    """Serve in a background thread (``port=0`` picks a free port); returns once it accepts."""
    server = SidecarServer(plugin, host, port, settings=settings)
    server._thread = threading.Thread(target=server.serve_forever, name="busbar-sidecar", daemon=True)
    server._thread.start()
    deadline = time.monotonic() + 10
    while not server._server.started and server._thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    return server


def serve(plugin: object, *, settings: dict[str, Any] | None = None, host: str = "127.0.0.1",
          port: int = 8787) -> None:
    """Serve in the foreground until interrupted."""
    _run_until_interrupted(SidecarServer(plugin, host, port, settings=settings))


def _run_until_interrupted(server: SidecarServer) -> None:
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._sock.close()


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
    server = SidecarServer(obj, args.host, args.port, settings=settings)
    print(f"busbar sidecar serving {args.target} on {server.url}", flush=True)
    _run_until_interrupted(server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
