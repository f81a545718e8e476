"""The store on a running gateway: ``gw.store``, ``gw.flusher`` and ``gw.keysync``, opened and closed.

``attach_store(gw, plugins)`` (from ``Gateway.build``, sync, no I/O) builds the configured store
(``store.module`` and ``store.settings``: the compiled-in memory store by default, else the
``kind: store`` plugin of the loaded plugin set) and hangs on the gateway:

- ``gw.store``: the :class:`~busbar_sdk.store.Store` (unopened until :func:`start_store`);
- ``gw.flusher``: a :class:`~busbar.store.flusher.UsageFlusher` flushing every
  ``advanced.usage_flush_interval_ms``; the request path calls ``gw.flusher.add_usage`` /
  ``gw.flusher.add_metering`` (no I/O);
- ``gw.keysync``: a :class:`~busbar.store.sync.KeySync`, the in-memory mirror of keys, credentials
  and the denylist the request path reads;
- ``gw.state_bridge``: a :class:`~busbar.store.shared.StoreBridge`, hook plugins' way to the store
  (``busbar_bind_state``), started once the store is open and stopped before it closes.

``await start_store(gw)`` opens the store (connect, create or migrate), checks the plugins against
the fleet's high-water marks in a shared store (``busbar.loader.highwater.check_fleet_marks``) and
starts the flusher loop; when ``auth.chain`` has the ``keys`` verifier (the mirror's only reader) it
also runs one key sync and starts the key-sync loop (no store polling for an unread mirror). Last,
it starts the state bridge and binds the hook instances that ask for shared state
(``busbar.store.shared.bind_hooks``; a shared store only).
``await stop_store(gw, tasks)`` stops the loops, flushes what is pending (bounded) and closes the
store. ``store_running(gw)`` is both as an
async context manager (tests: ``async with store_running(gw): ...``). Their metrics go on the
gateway's registry when a ``metrics:`` block is configured.

Raises :class:`~busbar.store.StoreBootError` (one line per fault; an unreachable store is named
without its password). See docs/stores.md.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from busbar_sdk.store import StoreError

from busbar.store import StoreBootError, open_store, select_store
from busbar.store.flusher import UsageFlusher
from busbar.store.shared import StoreBridge, bind_hooks
from busbar.store.sync import KeySync

if TYPE_CHECKING:
    from busbar.proxy.gateway import Gateway

__all__ = ["attach_store", "start_store", "stop_store", "store_running"]


def attach_store(gw: Gateway, plugins: Any) -> None:
    """Build the configured store and set ``gw.store``, ``gw.flusher``, ``gw.keysync`` (no I/O).

    Args:
        gw: the gateway being built (its ``config`` and ``metrics`` are read).
        plugins: the loaded :class:`~busbar.loader.registry.PluginSet` or ``None``.

    Raises:
        StoreBootError: the store plugin is not loaded or refuses its settings.
    """
    cfg = gw.config
    store = select_store(cfg.store.module, cfg.store.settings or {}, plugins)
    registry = getattr(gw.metrics, "registry", None)
    gw.store = store
    gw.flusher = UsageFlusher(store, interval_s=cfg.advanced.usage_flush_interval_ms / 1000, registry=registry)
    gw.keysync = KeySync(store, registry=registry)
    gw.state_bridge = StoreBridge(store)


async def start_store(gw: Gateway) -> list[asyncio.Task[None]]:
    """Open ``gw.store``, start the flusher loop and (``keys`` in ``auth.chain``) sync keys once and
    start the key-sync loop; returns the tasks.

    Raises:
        StoreBootError: the store is unreachable (named without its password), written by a newer
            Busbar, or failed the first key sync.
    """
    await open_store(gw.store)
    mirror = _mirror_needed(gw)
    try:
        marks = await _fleet_marks(gw)
        if mirror:
            await gw.keysync.sync()
    except StoreError as exc:
        with contextlib.suppress(StoreError):
            await gw.store.close()
        raise StoreBootError([f"store ({gw.store.backend}): {line}" for line in str(exc).splitlines()]) from None
    if marks:
        with contextlib.suppress(StoreError):
            await gw.store.close()
        raise StoreBootError(marks, summary=f"{len(marks)} plugin(s) below the fleet's high-water mark", status=2)
    tasks = [asyncio.ensure_future(gw.flusher.run())]
    if mirror:
        tasks.append(asyncio.ensure_future(gw.keysync.run()))
    gw.state_bridge.start(asyncio.get_running_loop())
    bind_hooks(gw)
    return tasks


def _mirror_needed(gw: Gateway) -> bool:
    """The key mirror has a reader: ``auth.chain`` has the built-in ``keys`` verifier (an ``auth:``
    change is restart-to-apply, so this holds for the life of the process)."""
    from busbar.config.schema_base import BUILTIN_CHAIN_MODULE

    return any(m.name == BUILTIN_CHAIN_MODULE for m in gw.config.auth.modules("chain"))


async def stop_store(gw: Gateway, tasks: list[asyncio.Task[None]], shutdown_timeout_s: float = 5.0) -> None:
    """Cancel the loops, flush what is pending (at most ``shutdown_timeout_s`` seconds; the rest is
    counted lost by the flusher) and close the store. Never raises a store error."""
    gw.state_bridge.stop()
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    await gw.flusher.close(shutdown_timeout_s)
    with contextlib.suppress(StoreError):
        await gw.store.close()


async def _fleet_marks(gw: Gateway) -> list[str]:
    """A shared store's plugin high-water marks (``busbar.loader.highwater.check_fleet_marks``)."""
    if gw.store.backend == "memory" or gw.plugins is None:
        return []
    from busbar.loader.highwater import allowed_downgrades, check_fleet_marks

    loaded = [(p.file, p.name, p.manifest.version, p.verdict) for p in gw.plugins.current]
    return await check_fleet_marks(gw.store, loaded, allowed_downgrades(os.environ))


@contextlib.asynccontextmanager
async def store_running(gw: Gateway) -> AsyncIterator[Gateway]:
    """``start_store`` on enter, ``stop_store`` on exit; yields ``gw``."""
    tasks = await start_store(gw)
    try:
        yield gw
    finally:
        await stop_store(gw, tasks)
