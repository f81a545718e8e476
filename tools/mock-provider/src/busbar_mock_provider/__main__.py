"""Command line: ``busbar-mock-provider --host 127.0.0.1 --port 9100 [--script FILE.json] ...``.

Serves :class:`~.app.MockProvider` on uvicorn (uvloop + httptools when installed, no lifespan, no
access log) and prints exactly one line to stdout once the socket listens::

    busbar-mock-provider listening on http://HOST:PORT

(``--port 0`` picks a free port; the line tells which.) Logs go to stderr. Exit status 2 for bad
arguments or an invalid ``--script`` file, with one line per fault.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

import orjson
import uvicorn

from .app import MockConfig, MockProvider
from .faults import ScriptError, parse_rules
from .fixtures import ENV_FIXTURES, default_fixtures_dir
from .wire import AbortConnection

__all__ = ["build_parser", "main"]

READY_LINE = "busbar-mock-provider listening on http://{host}:{port}"


class _QuietAborts(logging.Filter):
    """Drop uvicorn's "Exception in ASGI application" record for intentional aborts and cancellations."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, (AbortConnection, asyncio.CancelledError))


class _Server(uvicorn.Server):
    """uvicorn server that prints the ready line after binding."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit or not self.servers:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        print(READY_LINE.format(host=shown, port=port), flush=True)


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser (documented in docs/mock-provider.md)."""
    ap = argparse.ArgumentParser(
        prog="busbar-mock-provider",
        description="Provider-faithful mock upstream (OpenAI Chat, Anthropic Messages) with fault injection.",
    )
    ap.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=9100, help="listen port; 0 picks a free one (default 9100)")
    ap.add_argument(
        "--script", type=Path, help='JSON file {"rules": [...]} preloaded as by POST /_mock/script'
    )
    ap.add_argument(
        "--fixtures", type=Path, help=f"captures directory (env {ENV_FIXTURES}; default: the packaged captures)"
    )
    ap.add_argument("--no-auth", action="store_true", help="do not require provider credentials")
    ap.add_argument(
        "--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"]
    )
    ap.add_argument(
        "--record-max",
        type=int,
        default=10_000,
        help="cap of the request and event logs; 0 disables the request log (default 10000)",
    )
    ap.add_argument("--delay-ms", type=float, default=0.0, help="default delay before headers (path /d<ms>)")
    ap.add_argument(
        "--chunks", type=int, default=None, help="default text pieces / stream chunks (path /c<n>)"
    )
    ap.add_argument(
        "--chunk-delay-ms", type=float, default=0.0, help="default pause between frames (path /i<ms>)"
    )
    ap.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="UNSAFE: listen on a non-loopback address (the mock has no real auth)",
    )
    return ap


def _fail(lines: Sequence[str]) -> int:
    for line in lines:
        print(f"busbar-mock-provider: {line}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the mock until SIGINT/SIGTERM; return the exit status."""
    args = build_parser().parse_args(argv)
    loopback = args.host in ("localhost", "::1") or args.host.startswith("127.")
    if not loopback and not args.allow_non_loopback:
        return _fail(
            [f"--host {args.host}: not a loopback address; pass --allow-non-loopback to listen there"]
        )
    fixtures = args.fixtures or default_fixtures_dir()
    if not fixtures.is_dir():
        print(
            f"busbar-mock-provider: warning: fixtures dir {fixtures} not found; captured bodies fall back "
            "to synthesized ones and script `fixture` keys are refused",
            file=sys.stderr,
        )
    config = MockConfig(
        fixtures, not args.no_auth, args.record_max, args.delay_ms, args.chunks, args.chunk_delay_ms
    )
    app = MockProvider(config)
    if args.script is not None:
        try:
            app.script.add(parse_rules(orjson.loads(args.script.read_bytes()), app.fixtures))
        except OSError as exc:
            return _fail([f"--script {args.script}: {exc.strerror}"])
        except orjson.JSONDecodeError as exc:
            return _fail([f"--script {args.script}: not JSON ({exc})"])
        except ScriptError as exc:
            return _fail([f"--script {args.script}: {fault}" for fault in exc.faults])
    if args.allow_non_loopback and not loopback:
        print(f"busbar-mock-provider: warning: listening on non-loopback {args.host}", file=sys.stderr)
    fast = (
        importlib.util.find_spec("uvloop") is not None and importlib.util.find_spec("httptools") is not None
    )
    uv_config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop" if fast else "asyncio",
        http="httptools" if fast else "h11",
        lifespan="off",
        access_log=False,
        log_level=args.log_level,
        server_header=False,
        date_header=True,
        timeout_keep_alive=75,
        backlog=4096,
        timeout_graceful_shutdown=1,
    )
    logging.getLogger("uvicorn.error").addFilter(_QuietAborts())
    _Server(uv_config).run()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
