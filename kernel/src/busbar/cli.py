"""The ``busbar`` command: serve the gateway, or validate / inspect its config without serving.

Usage::

    busbar [--config PATH] [--providers PATH] [--log-level LEVEL]   # serve
    busbar --workers N [--config PATH] ...                          # serve with N worker processes
    busbar --validate [--config PATH] [--providers PATH]            # check both files; exit 0/2
    busbar --list-plugins [--config PATH]                           # plugin inventory
    busbar --migrate-config OLD.yaml > NEW.yaml                     # 1.x -> 1.5.0 config
    busbar --print-schema [config|providers]                        # JSON Schema of the config
    busbar route --dry-run --pool P --data @req.json                # how a pool would route it (busbar.routecli)
    busbar hooks test|calibrate --pool P --cases cases.yaml         # score / calibrate its gates
    busbar admin keys mint --name N [--group G] ...                 # the admin API (busbar.admin.cli)

Files: ``--config`` / ``BUSBAR_CONFIG`` (default ``/etc/busbar/config.yaml``), ``--providers`` /
``BUSBAR_PROVIDERS`` (default ``/etc/busbar/providers.yaml`` when it exists, else the catalog
shipped in the package). Log level: ``--log-level`` / ``BUSBAR_LOG`` (error, warn, info, debug,
trace; default info); ``--log-format`` / ``BUSBAR_LOG_FORMAT`` ``text`` or ``json``
(docs/operations.md#log-lines). ``BUSBAR_ALLOW_DOWNGRADE=<plugin>[,...]``: let this boot load those plugins
below their recorded version (docs/plugins.md#downgrade-protection). Exit status: 0 ok, 2 invalid
config (one line per fault on stderr, never
a traceback), 1 any other start-up failure (e.g. the listen address is taken).

Source: docs/config-at-a-glance.md#listen
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from busbar import __version__

EXIT_INVALID = 2
_LEVELS = {"error": "ERROR", "warn": "WARNING", "warning": "WARNING", "info": "INFO", "debug": "DEBUG",
           "trace": "DEBUG"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="busbar", description="Busbar LLM control plane")
    p.add_argument("--config", help="config.yaml path (env BUSBAR_CONFIG)")
    p.add_argument("--providers", help="providers.yaml path (env BUSBAR_PROVIDERS)")
    p.add_argument("--validate", action="store_true", help="validate both files and exit (0 ok, 2 invalid)")
    p.add_argument("--list-plugins", action="store_true", help="print the plugin inventory and exit")
    p.add_argument("--migrate-config", metavar="OLD.yaml",
                   help="convert a 1.x config to 1.5.0 on stdout (change summary on stderr) and exit")
    p.add_argument("--print-schema", nargs="?", const="config", choices=("config", "providers"),
                   help="print the JSON Schema of config.yaml (or providers.yaml) and exit")
    p.add_argument("--workers", type=_workers, default=1, metavar="N",
                   help="worker processes sharing the listener (default 1; > 1 needs a shared store)")
    p.add_argument("--log-level", help="error|warn|info|debug|trace (env BUSBAR_LOG; default info)")
    p.add_argument("--log-format", choices=("text", "json"),
                   help="log lines as readable text or one JSON object each (env BUSBAR_LOG_FORMAT; default text)")
    p.add_argument("--version", action="version", version=f"busbar {__version__}")
    return p


def _workers(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number >= 1")
    return int(text)


def _fleet_faults(loaded, workers: int) -> list[str]:
    """``--workers`` > 1 over the per-process memory store: each worker would keep its own state."""
    if workers > 1 and loaded.config.store.module == "memory":
        return [f"{loaded.config_path.name}: store.module: --workers {workers} with the memory store: each worker "
                f"would keep its own keys, usage and denylist; choose a shared store (sqlite, postgres or valkey: "
                f"docs/stores.md#a-fleet) or run one worker"]
    return []


def _setup_logging(level: str | None, fmt: str | None = None) -> None:
    from busbar.observe.logformat import configure

    name = (level or os.environ.get("BUSBAR_LOG") or "info").lower()
    form = (fmt or os.environ.get("BUSBAR_LOG_FORMAT") or "text").lower()
    configure(_LEVELS.get(name, "INFO"), "json" if form == "json" else "text")
    logging.getLogger("httpx").setLevel(logging.WARNING)      # one line per upstream call is noise


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["store"]:                      # busbar store info|prune (busbar.store.cli)
        from busbar.store.cli import main as store_main

        return store_main(argv[1:])
    if argv[:1] in (["route"], ["hooks"]):         # busbar route --dry-run / hooks test|calibrate (busbar.routecli)
        from busbar.routecli import hooks_main, route_main

        return route_main(argv[1:]) if argv[0] == "route" else hooks_main(argv[1:])
    if argv[:1] == ["admin"]:                      # busbar admin keys|groups|hooks|audit|usage (busbar.admin.cli)
        from busbar.admin.cli import main as admin_main

        return admin_main(argv[1:])
    args = _parser().parse_args(argv)
    if not (args.print_schema or args.migrate_config or args.validate or args.list_plugins):
        from busbar.server import stopsignals

        stopsignals.hold()      # serving: a SIGTERM/SIGINT during the boot stops it once it listens
    _setup_logging(args.log_level, args.log_format)
    if args.print_schema:
        from busbar.config.schema_export import schema_text

        print(schema_text(args.print_schema))
        return 0
    if args.migrate_config:
        from busbar.config.migrate import main as migrate_main

        return migrate_main(args.migrate_config)
    from busbar.config.errors import ConfigError
    from busbar.config.load import load_config, resolve_paths

    cfg_path, prov_path = resolve_paths(args.config, args.providers)
    try:
        # serving (and --validate, which says what serving would) refuses keys this build cannot honour
        loaded = load_config(cfg_path, prov_path, check_support=not args.list_plugins)
    except ConfigError as e:
        return _refuse(e.faults, "config")
    fleet_faults = _fleet_faults(loaded, args.workers)
    if fleet_faults and not args.list_plugins:
        return _refuse(fleet_faults, "config")
    if args.validate and not args.list_plugins:
        from busbar.server.boot import check_plugins

        plugin_faults = check_plugins(loaded, os.environ)   # the boot's own check, nothing imported
        if plugin_faults:
            return _refuse(plugin_faults, "config")
        for w in loaded.warnings:
            print(f"warning: {w}", file=sys.stderr)
        note = f" ({len(loaded.warnings)} warning(s))" if loaded.warnings else ""
        print(f"busbar: {cfg_path} is valid{note}")
        return 0
    for w in loaded.warnings:
        logging.getLogger("busbar.config").warning("%s", w)
    if args.list_plugins:
        return _list_plugins(loaded)
    return serve(loaded, args.workers)


def _refuse(faults: list[str], what: str) -> int:
    """Print one line per fault and the summary on stderr; the exit status for an invalid config.

    ``what`` is ``config`` for faults ``--validate`` finds too (the boot prints the same lines) and
    ``start-up`` for those only a real boot can see (a plugin's import or ``busbar_open`` failing).
    """
    for line in faults:
        print(line, file=sys.stderr)
    print(f"busbar: {len(faults)} {what} error(s); refusing to start", file=sys.stderr)
    return EXIT_INVALID


def _list_plugins(loaded) -> int:
    from busbar.loader.inventory import list_plugins_lines

    for line in list_plugins_lines(loaded.config.plugins, Path.cwd()):
        print(line)
    return 0


def serve(loaded, workers: int = 1) -> int:
    """Run the gateway on ``listen`` until SIGINT/SIGTERM (see ``server.lifecycle``); with ``workers``
    > 1 as a pre-fork master over one listening socket (``server.workers``)."""
    host, _, port = loaded.config.listen.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    try:
        port_n = int(port)
    except ValueError:
        print(f"{loaded.config_path.name}: listen: '{loaded.config.listen}' is not host:port", file=sys.stderr)
        return EXIT_INVALID
    if workers == 1:
        return serve_one(loaded, host, port_n)
    from busbar.server.workers import listen_socket, run_workers

    try:
        sock = listen_socket(host, port_n)
    except OSError as e:
        print(f"busbar: cannot listen on {loaded.config.listen}: {e.strerror}", file=sys.stderr)
        return 1
    return run_workers(workers, lambda _i, ready: serve_one(loaded, host, port_n, sock=sock, ready=ready))


def serve_one(loaded, host: str, port: int, **listener) -> int:
    """Boot and serve one gateway process; ``listener``: ``sock``/``ready`` of ``lifecycle.run``."""
    import asyncio

    from busbar.server.boot import BootError, boot
    from busbar.server.lifecycle import run
    from busbar.store import StoreBootError

    try:
        gateway, _reloader = boot(loaded, os.environ)
    except BootError as e:
        return _refuse(e.faults, "config" if e.checked else "start-up")
    from busbar.observe.traces import TraceSetupError, build_tracer
    from busbar.server.tls import TlsError, listener_context

    try:                    # tls: -> HTTPS (docs/operations.md#tls-and-mtls); otlp_url -> traces
        tls = listener_context(loaded.config.tls, "tls", os.environ,
                               gateway.plugins.current if gateway.plugins is not None else None)
        tracing = build_tracer(loaded)
    except (TlsError, TraceSetupError) as e:
        return _refuse(e.faults, "config")
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop ships with uvicorn[standard]
        runner = asyncio.run
    try:
        status = runner(run(loaded, gateway, host, port, tls=tls, tracing=tracing, **listener))
    except StoreBootError as e:
        for line in e.faults:
            print(line, file=sys.stderr)
        print(f"busbar: {e.summary}; refusing to start", file=sys.stderr)
        return e.status
    return status


if __name__ == "__main__":
    sys.exit(main())
