"""Process lifecycle of a serving gateway: restore state, start background tasks, serve, shut down.

``run(loaded, gateway, host, port)`` (a coroutine): opens the store (``busbar.store.attach``; raises
``StoreBootError`` when it is unreachable, after closing the gateway), restores the
``BUSBAR_STATE_FILE`` snapshot, starts the front door (``busbar.auth.boot``) and the admin plane on
``admin_listen`` (``busbar.admin.server``; a failure to start either stops the boot), spawns the
health probers, the usage flusher, the key sync and the periodic state saver, moves the boot-time
heap out of the garbage collector's scans (``gc.freeze``: full collections then walk only
request-time objects, a shorter tail latency), serves with uvicorn until SIGINT/SIGTERM (the
listener's head cap, head-read and keep-alive idle timeouts and HTTP/1.0 framing:
``busbar.server.listener``; TLS: ``busbar.server.tls``) and applies a new config on SIGHUP
(``busbar.server.apply``). A stop signal that arrives earlier in the boot (held by
``busbar.server.stopsignals``) shuts the listener down as soon as it is up. On SIGTERM the listener
stops accepting and drains in-flight requests for ``BUSBAR_DRAIN_SECS`` (default 20 s), then ends
the rest with an error reply (``busbar.server.listener.ListenerServer.shutdown``); then this cancels
the background tasks, stops the admin plane, flushes queued trace spans, writes a final snapshot,
flushes pending usage to the store and closes it, and closes the upstream client.

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
import ssl
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from busbar.admin.server import AdminStartError, start_admin
from busbar.auth.boot import FrontDoorBootError, start_front_door
from busbar.observe.access import access_finisher
from busbar.observe.sinks import build_sinks
from busbar.observe.watch import BreakerWatch
from busbar.proxy.health import start_probers
from busbar.proxy.state import SAVE_INTERVAL_S, restore, save, state_path
from busbar.server import stopsignals
from busbar.server.app import AppState, create_app
from busbar.server.apply import ConfigApplier
from busbar.server.listener import DRAIN_SECS, ListenerServer, protocol_class
from busbar.store.attach import start_store, stop_store
from busbar.store.metering import metering_finisher

if TYPE_CHECKING:
    from busbar.config.load import LoadedConfig
    from busbar.loader.registry import PluginSet
    from busbar.observe.traces import Tracing
    from busbar.proxy.gateway import Gateway

log = logging.getLogger("busbar")


def drain_secs(env: Mapping[str, str] = os.environ) -> float:
    """``BUSBAR_DRAIN_SECS`` (seconds a SIGTERM lets in-flight requests finish), default
    ``busbar.server.listener.DRAIN_SECS``; an unparsable or negative value is the default."""
    try:
        value = float(env.get("BUSBAR_DRAIN_SECS", DRAIN_SECS))
    except ValueError:
        return DRAIN_SECS
    return value if value >= 0 else DRAIN_SECS


async def _saver(state: AppState, path: Path) -> None:
    while True:
        await asyncio.sleep(SAVE_INTERVAL_S)
        save(state.gateway, path)


async def _when_started(server: uvicorn.Server, ready: Callable[[], None]) -> None:
    while not server.started:
        await asyncio.sleep(0.01)
    ready()


async def run(loaded: LoadedConfig, gateway: Gateway, host: str, port: int, *, sock: socket.socket | None = None,
              ready: Callable[[], None] | None = None, tls: ssl.SSLContext | None = None,
              tracing: Tracing | None = None) -> int:
    """Serve until stopped; returns the process's exit status: 0 once it served and stopped, 2 when
    the front door or the admin plane refused the config at start-up (an auth plugin that does not
    open, like every other start-up refusal), 1 when it could not start otherwise (a port taken).

    ``sock``: an already listening socket to accept on (a ``--workers`` worker's inherited one)
    instead of binding ``host:port``; ``ready()`` is called once the server accepts connections.
    ``tls``: the data listener's context (``busbar.server.tls.listener_context``), ``None`` = plain
    HTTP; each handshake is capped by ``limits.tls_handshake_timeout_secs``. ``tracing``: the OTLP
    exporter (``busbar.observe.traces.build_tracer``), flushed after the drain. ``SIGHUP`` runs a
    config apply (``busbar.server.apply.ConfigApplier``, also ``state.applier`` for the admin API).

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
    state.finishers.append(access_finisher)              # one busbar.access line per request
    watch = BreakerWatch(state)
    state.finishers.append(watch.finisher)                # breaker / hard-down change logs
    state.finishers.append(lambda rec: state.gateway.metrics.finished(rec, state.gateway))  # latency, tokens
    if tracing is not None:
        tracing.state = state
        tracing.count_into(gateway.metrics)               # busbar_otlp_connect_refused_total, _traces_dropped_total
        tracing.start()                                   # the exporter thread
        state.finishers.append(tracing.finisher)          # spans per request and attempt
    webhook, logfile = build_sinks(loaded, gateway.metrics)
    for sink in (webhook, logfile):
        if sink is not None:
            state.finishers.append(sink.finisher)          # request-log webhook / JSONL file
    applier = ConfigApplier(state, loaded)
    state.applier = applier
    limits = loaded.config.limits
    app = create_app(state)
    if gateway.metrics.enabled:
        gateway.metrics.inbound = lambda: app.inflight      # type: ignore[attr-defined]
    config = uvicorn.Config(app, host=host, port=port, lifespan="off", access_log=False,
                            log_level=logging.getLogger().getEffectiveLevel(),
                            http=protocol_class(limits.header_read_timeout_secs),
                            timeout_keep_alive=limits.keep_alive_timeout_secs)
    server = ListenerServer(config, tls, limits.tls_handshake_timeout_secs, drain_secs())
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
        return e.status
    probers = start_probers(gateway)

    def follow(old: Gateway, new: Gateway) -> None:       # a config apply: probe the new lanes
        nonlocal probers
        for t in probers:
            t.cancel()
        probers = start_probers(new)

    applier.on_swap.append(follow)
    if gateway.plugins is not None:
        from busbar.hooks import reattach

        def plugins_follow(old: object, new: PluginSet) -> None:   # hooks follow a plugin reload
            reattach(state.gateway, new)

        gateway.plugins.on_swap = plugins_follow
    tasks = [*front, asyncio.ensure_future(watch.run())]
    if path is not None:
        tasks.append(asyncio.ensure_future(_saver(state, path)))
    if ready is not None:
        tasks.append(asyncio.ensure_future(_when_started(server, ready)))
    log.info("busbar listening on %s://%s:%d (%d pools, %d models)", "https" if tls else "http", host, port,
             len(gateway.pools), len(gateway.lanes))
    # A stop signal from here on (before serve() installs uvicorn's handlers, during it, and in the
    # shutdown below) asks the server to exit, as uvicorn's own handler does; one that came earlier
    # in the boot (busbar.server.stopsignals) does too, so the listener shuts down as soon as it is up.
    # uvicorn re-raises the stop signal after serve() returns, with the handlers it found installed:
    # these, so the shutdown below (final state snapshot, store flush) runs to completion.
    def stop(sig: int, _frame: FrameType | None) -> None:
        if server.should_exit and sig == signal.SIGINT:
            server.force_exit = True
        server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in stopsignals.STOP_SIGNALS}
    if stopsignals.take():
        log.info("busbar: a stop signal arrived during start-up; shutting down")
        server.should_exit = True
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(applier.apply("sighup")))
    gc.collect()
    gc.freeze()          # boot-time objects (config, plugins, pools) leave the collector's scans: shorter full GCs
    try:
        await server.serve(sockets=[sock] if sock is not None else None)
    finally:
        loop.remove_signal_handler(signal.SIGHUP)
        for t in (*tasks, *probers):
            t.cancel()
        for t in (*tasks, *probers):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await admin.stop()
        gateway = state.gateway
        if tracing is not None:
            await asyncio.to_thread(tracing.shutdown)       # flush queued spans
        if webhook is not None:
            await webhook.aclose()
        if logfile is not None:
            logfile.close()
        if gateway.limiter is not None:        # settled usage not yet handed to the flusher
            await gateway.limiter.stop()
        if path is not None:
            save(gateway, path)
        await stop_store(gateway, store_tasks)
        await gateway.aclose()
        if gateway.plugins is not None:
            gateway.plugins.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0 if server.started else 1
