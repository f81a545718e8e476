"""``busbar store info`` and ``busbar store prune --before YYYY-MM-DD``: the store, from the shell.

Both read the same two config files as ``busbar`` (``--config``/``BUSBAR_CONFIG``,
``--providers``/``BUSBAR_PROVIDERS``), load the plugins the config enables, open the configured
store (creating or migrating its schema) and act on it:

- ``info``: backend, schema version and row counts (``--json`` for machines).
- ``prune --before DAY``: delete every metering row of a UTC day before ``DAY``. Metering is
  observability only, never read for enforcement, so pruning cannot change an admission.

Exit status: 0 done; 1 the store could not be opened or the operation failed; 2 bad config or
arguments.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from busbar_sdk.store import Store, StoreError, parse_day

from busbar.store import StoreBootError, open_store, select_store

__all__ = ["main"]

EXIT_FAILED, EXIT_INVALID = 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="busbar store", description="Inspect and maintain the configured store.")
    p.add_argument("--config", help="config.yaml path (env BUSBAR_CONFIG)")
    p.add_argument("--providers", help="providers.yaml path (env BUSBAR_PROVIDERS)")
    sub = p.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="backend, schema version and row counts")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    prune = sub.add_parser("prune", help="delete metering rows of days before --before")
    prune.add_argument("--before", required=True, metavar="YYYY-MM-DD", help="first day to keep (UTC)")
    return p


def _fail(lines: list[str], code: int, what: str) -> int:
    for line in lines:
        print(line, file=sys.stderr)
    print(f"busbar store: {what}", file=sys.stderr)
    return code


def _store(args: argparse.Namespace) -> Store | int:
    from busbar.config.errors import ConfigError
    from busbar.config.load import load_config, resolve_paths

    cfg_path, prov_path = resolve_paths(args.config, args.providers)
    try:
        loaded = load_config(cfg_path, prov_path)
    except ConfigError as e:
        return _fail(list(e.faults), EXIT_INVALID, f"{len(e.faults)} config error(s)")
    cfg = loaded.config
    plugins = None
    if cfg.plugins.enabled and cfg.store.module != "memory":
        from busbar.loader import PluginBootError, load_plugins

        try:
            plugins = load_plugins(cfg.plugins, base_dir=Path.cwd())
        except PluginBootError as e:
            return _fail(list(e.faults), EXIT_INVALID, "the plugins did not load")
    try:
        return select_store(cfg.store.module, cfg.store.settings or {}, plugins)
    except StoreBootError as e:
        return _fail(e.faults, EXIT_INVALID, "the store cannot be built")


async def _info(store: Store, as_json: bool) -> int:
    info: dict[str, Any] = await store.info()
    if as_json:
        print(json.dumps(info, sort_keys=True))
        return 0
    print(f"backend: {info['backend']}")
    print(f"schema_version: {info['schema_version']}")
    for name, count in info["counts"].items():
        print(f"{name}: {count}")
    return 0


async def _prune(store: Store, day: str) -> int:
    gone = await store.purge_metering_before(day)
    print(f"busbar store: pruned {gone} metering row(s) of days before {day} ({store.backend})")
    return 0


def main(argv: list[str]) -> int:
    """Run ``busbar store <argv>``; returns the exit status (see the module docstring)."""
    args = _parser().parse_args(argv)
    day = ""
    if args.command == "prune":
        try:
            day = parse_day(args.before)
        except ValueError as e:
            return _fail([f"--before: {e}"], EXIT_INVALID, "bad arguments")
    built = _store(args)
    if isinstance(built, int):
        return built
    store = built

    async def run() -> int:
        try:
            await open_store(store)
            if args.command == "info":
                return await _info(store, args.json)
            return await _prune(store, day)
        finally:
            try:
                await store.close()
            except StoreError:
                pass
    try:
        return asyncio.run(run())
    except StoreBootError as e:
        return _fail(e.faults, EXIT_FAILED, "the store could not be opened")
    except StoreError as e:
        return _fail([f"store ({store.backend}): {e}"], EXIT_FAILED, "the operation failed")
