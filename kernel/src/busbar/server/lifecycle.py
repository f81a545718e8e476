"""Process lifecycle of a serving gateway: restore state, start background tasks, serve, shut down.

``run(loaded, gateway, host, port)`` (a coroutine): opens the store (``busbar.store.attach``; raises
``StoreBootError`` when it is unreachable, after closing the gateway), restores the
``BUSBAR_STATE_FILE`` snapshot, starts the front door (``busbar.auth.boot``) and the admin plane on
``admin_listen`` (``busbar.admin.server``; a failure to start either stops the boot), spawns the
health probers, the usage flusher, the key sync and the periodic state saver, moves the boot-time
heap out of the garbage collector's scans (``gc.freeze``: full collections then walk only
request-time objects, a shorter tail latency), serves with uvicorn until SIGINT/SIGTERM (the
listener's head cap, head-read and keep-alive idle timeouts and HTTP/1.0 framing:
``busbar.server.listener``), then cancels the background tasks, stops the admin plane, writes a
final snapshot, flushes pending usage to the store and closes it, and closes the upstream client.

Source: docs/configuration.md, docs/reliability.md#health-probing
"""
from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from busbar.admin.server import AdminStartError, start_admin
from busbar.auth.boot import FrontDoorBootError, start_front_door
from busbar.proxy.health import start_probers
from busbar.proxy.state import SAVE_INTERVAL_S, restore, save, state_path
from busbar.server.app import AppState, create_app
from busbar.server.listener import protocol_class
from busbar.store.attach import start_store, stop_store
from busbar.store.metering import metering_finisher

if TYPE_CHECKING:
    from busbar.config.load import LoadedConfig
    from busbar.proxy.gateway import Gateway

log = logging.getLogger("busbar")


async def _saver(gw: Gateway, path: Path) -> None:
    while True:
        await asyncio.sleep(SAVE_INTERVAL_S)
        save(gw, path)


async def _when_started(server: uvicorn.Server, ready: Callable[[], None]) -> None:
    while not server.started:
        await asyncio.sleep(0.01)
    ready()


async def run(loaded: LoadedConfig, gateway: Gateway, host: str, port: int, *, sock: socket.socket | None = None,
              ready: Callable[[], None] | None = None) -> bool:
    """Serve until stopped; returns whether the server started (False: e.g. the port was taken).

    ``sock``: an already listening socket to accept on (a ``--workers`` worker's inherited one)
    instead of binding ``host:port``; ``ready()`` is called once the server accepts connections.

    Raises:
        busbar.store.StoreBootError: the store could not be opened (nothing was served).
    """
    try:
        store_tasks = await start_store(gateway)
    except BaseException:
        await gateway.aclose()
        if gateway.plugins is not None:
            gateway.plugins.close()
        raise
    path = state_path(loaded.config_path)
    if path is not None:
        restore(gateway, path)
    state = AppState(gateway=gateway, started_at=time.time())
    state.finishers.append(metering_finisher(gateway))    # per-request metering into gw.flusher
    limits = loaded.config.limits
    config = uvicorn.Config(create_app(state), host=host, port=port, lifespan="off", access_log=False,
                            log_level=logging.getLogger().getEffectiveLevel(),
                            http=protocol_class(limits.header_read_timeout_secs),
                            timeout_keep_alive=limits.keep_alive_timeout_secs)
    server = uvicorn.Server(config)
    front: list[asyncio.Task[None]] = []
    try:
        front = await start_front_door(gateway, loaded, os.environ)
        admin = await start_admin(state, loaded)
        if gateway.limiter is not None:        # runtime groups, counters seeded from the ledger
            await gateway.limiter.start(gateway)
    except (FrontDoorBootError, AdminStartError) as e:
        for t in front:
            t.cancel()
        faults = e.faults if isinstance(e, FrontDoorBootError) else [str(e)]
        for line in faults:
            print(line, file=sys.stderr)
        print(f"busbar: {len(faults)} start-up error(s); refusing to start", file=sys.stderr)
        await stop_store(gateway, store_tasks)
        await gateway.aclose()
        if gateway.plugins is not None:
            gateway.plugins.close()
        return False
    tasks = start_probers(gateway) + front
    if path is not None:
        tasks.append(asyncio.ensure_future(_saver(gateway, path)))
    if ready is not None:
        tasks.append(asyncio.ensure_future(_when_started(server, ready)))
    log.info("busbar listening on %s:%d (%d pools, %d models)", host, port, len(gateway.pools),
             len(gateway.lanes))
    # uvicorn re-raises the stop signal after serve() returns, with the handlers it found installed;
    # inert handlers here let the shutdown below (final state snapshot) run to completion.
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    if gateway.plugins is not None:
        gateway.plugins.install_sighup()          # SIGHUP: rescan plugins.dir, swap atomically
    gc.collect()
    gc.freeze()          # boot-time objects (config, plugins, pools) leave the collector's scans: shorter full GCs
    try:
        await server.serve(sockets=[sock] if sock is not None else None)
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await admin.stop()
        if path is not None:
            save(gateway, path)
        await stop_store(gateway, store_tasks)
        await gateway.aclose()
        if gateway.plugins is not None:
            gateway.plugins.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return server.started
