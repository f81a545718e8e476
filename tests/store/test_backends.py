"""What is particular to each first-party store: its settings errors, a backend that is down at
boot, a store written by a newer Busbar, a connection lost at run time, and the plugin wire's
own refusals. Real PostgreSQL and Redis on 127.0.0.1."""
from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from busbar_sdk.store import (
    RemoteStore,
    Store,
    StoreInvalid,
    StoreSchemaError,
    StoreUnavailable,
    TierTokens,
    UsageDelta,
    UsageItem,
    UsageLedger,
)
from busbar_sdk.testing import PluginUnderTest

from tests.store.conftest import remote


def _open(store: Store) -> None:
    async def run() -> None:
        try:
            await store.open()
        finally:
            await store.close()
    asyncio.run(run())


def _settings_error(plugin: PluginUnderTest, settings: dict[str, Any]) -> str:
    with pytest.raises(StoreInvalid) as exc:
        plugin.open(settings)
    return str(exc.value)


# -- settings ---------------------------------------------------------------------------------
def test_sqlite_settings_errors_name_the_key_and_the_path(store_plugins: dict[str, PluginUnderTest],
                                                         tmp_path: Path) -> None:
    p = store_plugins["sqlite"]
    assert _settings_error(p, {}) == "store.settings.db_path: required by the sqlite store"
    assert _settings_error(p, {"db_path": "x.db", "busy_timeout": 10, "busy_timeout_ms": "5"}) == (
        "store.settings.busy_timeout: unknown setting for the sqlite store (it takes busy_timeout_ms, db_path)\n"
        "store.settings.busy_timeout_ms: expected an integer, got str")
    missing = tmp_path / "no" / "such"
    assert _settings_error(p, {"db_path": str(missing / "b.db")}) == (
        f"store.settings.db_path: directory {missing} does not exist; create it or choose another path")
    if os.geteuid() != 0:     # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert "is not writable by this process" in _settings_error(p, {"db_path": str(locked / "b.db")})


def test_postgres_settings_errors(store_plugins: dict[str, PluginUnderTest]) -> None:
    p = store_plugins["postgres"]
    assert _settings_error(p, {"url": "mysql://u:pw@db/busbar"}) == (
        "store.settings.url: scheme mysql:// is not supported by the postgres store; use postgres:// or "
        "postgresql://")
    assert _settings_error(p, {"url": "postgres://u:hunter2@db.internal:5432"}) == (
        "store.settings.url: postgres://u:***@db.internal:5432 needs a host and a database name "
        "(postgres://user:password@host:5432/busbar)")
    assert _settings_error(p, {"url": "postgres://db/x?sslmode=always"}) == (
        "store.settings.url: sslmode=always is not one of disable, allow, prefer, require, verify-ca, verify-full")
    assert _settings_error(p, {"url": "postgres://db/x", "pool": 3}) == (
        "store.settings.pool: unknown setting for the postgres store (it takes connect_timeout_secs, pool_size, url)")


def test_valkey_settings_errors(store_plugins: dict[str, PluginUnderTest]) -> None:
    p = store_plugins["valkey"]
    assert _settings_error(p, {"url": "http://cache:6379"}) == (
        "store.settings.url: scheme http:// is not supported by the valkey store; use redis:// or rediss://")
    assert _settings_error(p, {"url": "redis://", "prefix": 3}) == "store.settings.prefix: expected a str, got int"


# -- down at boot -----------------------------------------------------------------------------
@pytest.mark.parametrize("backend,url,shown", [
    ("postgres", "postgres://busbar:hunter2@127.0.0.1:1/busbar", "postgres at postgres://busbar:***@127.0.0.1:1/busbar "
                                                              "is unavailable: "),
    ("valkey", "redis://default:hunter2@127.0.0.1:1/0", "valkey at redis://default:***@127.0.0.1:1/0 is unavailable: "),
    # a password inside the words around it: only the driver's text is masked, so they stay whole
    ("postgres", "postgres://busbar:gres@127.0.0.1:1/busbar", "postgres at postgres://busbar:***@127.0.0.1:1/busbar "
                                                           "is unavailable: "),
    ("valkey", "redis://default:valkey@127.0.0.1:1/0", "valkey at redis://default:***@127.0.0.1:1/0 is unavailable: "),
])
def test_a_store_that_is_down_at_boot_is_named_without_its_password(
        store_plugins: dict[str, PluginUnderTest], backend: str, url: str, shown: str) -> None:
    store = remote(store_plugins[backend], {"url": url, "connect_timeout_secs": 2}, backend)
    with pytest.raises(StoreUnavailable) as exc:
        _open(store)
    message = str(exc.value)
    assert message.startswith(shown), message
    assert "hunter2" not in message and "***" not in message.removeprefix(shown)


# -- a newer schema ---------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["sqlite", "postgres", "valkey"])
def test_a_store_written_by_a_newer_busbar_is_refused(store_backend: Callable[[str], Callable[[], Store]],
                                                      backend: str) -> None:
    factory = store_backend(backend)
    _open(factory())                                   # creates schema version 1
    store = factory()

    async def bump() -> None:
        inner = store
        if backend == "valkey":
            import redis.asyncio as r
            settings_prefix = _prefix_of(inner)
            client = r.Redis.from_url("redis://127.0.0.1:6379/0")
            await client.set(settings_prefix + "schema", 99)
            await client.aclose()
        else:
            await inner.open()
            import sqlalchemy as sa
            from busbar_sdk.store.sql import SCHEMA
            handle = _handle_of(inner)
            async with handle.engine.begin() as conn:
                await conn.execute(sa.update(SCHEMA).values(version=99))
            await inner.close()
    asyncio.run(bump())
    with pytest.raises(StoreSchemaError) as exc:
        _open(factory())
    assert str(exc.value) == ("the store holds schema version 99, written by a newer Busbar (this build reads up to "
                              "1); upgrade Busbar, or point store.settings at another database")


def _handle_of(store: Store) -> Any:
    """The plugin-side store object behind a RemoteStore built by ``conftest.remote``."""
    assert isinstance(store, RemoteStore)
    cell = store._call.__closure__  # type: ignore[attr-defined]
    return next(c.cell_contents for c in cell if hasattr(c.cell_contents, "handle")).handle


def _prefix_of(store: Store) -> str:
    return str(_handle_of(store)._p)


# -- the plugin wire --------------------------------------------------------------------------
def test_the_wire_refuses_sync_calls_unknown_operations_and_bad_arguments(
        store_plugins: dict[str, PluginUnderTest], tmp_path: Path) -> None:
    plugin = store_plugins["sqlite"]
    assert plugin.manifest.kind == "store"
    instance = plugin.open({"db_path": str(tmp_path / "w.db")})
    assert instance.call({"op": "get_key", "args": {"key_id": "k"}}) == {"error": {
        "kind": "unsupported", "message": "store operations are asynchronous: call busbar_call.busbar_acall"}}
    acall = plugin.binding.call.busbar_acall  # type: ignore[attr-defined]

    async def run() -> list[dict[str, Any]]:
        out = [await acall(instance.handle, {"op": "open"}),
               await acall(instance.handle, {"op": "drop_everything"}),
               await acall(instance.handle, {"op": "get_usage", "args": {"bucket": "b"}}),
               await acall(instance.handle, {"op": "get_usage", "args": {"bucket": "b", "window_start": "0"}}),
               await acall(instance.handle, {"op": "list_keys", "args": {"since": 0, "limit": 5}}),
               await acall(instance.handle, {"op": "get_usage", "args": {"bucket": "b", "window_start": 0}})]
        await acall(instance.handle, {"op": "close"})
        return out
    opened, unknown, missing, mistyped, extra, ok = asyncio.run(run())
    assert opened == {"result": None}
    assert unknown == {"error": {"kind": "unsupported", "message": "unknown store operation 'drop_everything'"}}
    assert missing == {"error": {"kind": "invalid", "message": "get_usage: missing argument 'window_start'"}}
    assert mistyped == {"error": {"kind": "invalid", "message": "get_usage: expected int, got str"}}
    assert extra == {"error": {"kind": "invalid", "message": "list_keys: unknown argument(s) limit"}}
    assert ok == {"result": {"requests": 0, "billable_requests": 0, "models": {}}}


# -- a connection lost at run time ------------------------------------------------------------
def _flush_until_done(store: Store, item: UsageItem, tries: int = 20) -> int:
    """Send one additive flush, retrying only on StoreUnavailable (as the kernel's flusher does)."""
    async def run() -> int:
        for attempt in range(tries):
            try:
                await store.add_usage([item])
                return attempt
            except StoreUnavailable:
                await asyncio.sleep(0.05)
        raise AssertionError("the store never came back")
    return asyncio.run(run())


@pytest.mark.parametrize("backend", ["postgres", "valkey"])
def test_a_lost_connection_is_replaced_and_no_delta_is_lost_or_doubled(
        store_backend: Callable[[str], Callable[[], Store]], backend: str) -> None:
    factory = store_backend(backend)
    store = factory()
    item = UsageItem("group:bob@total", 0, UsageDelta(1, 1, {"m": TierTokens(10, 1)}))

    async def scenario() -> UsageLedger:
        await store.open()
        try:
            for i in range(6):
                await store.add_usage([item])
                if i % 2 == 1:
                    await _kill_connections(backend, store)
                    for _ in range(20):             # the flusher's retry: only a refused write is re-sent
                        try:
                            await store.add_usage([item])
                            break
                        except StoreUnavailable:
                            await asyncio.sleep(0.05)
            return await store.get_usage("group:bob@total", 0)
        finally:
            await store.close()
    ledger = asyncio.run(scenario())
    assert ledger == UsageLedger(9, 9, {"m": TierTokens(90, 9)})


async def _kill_connections(backend: str, store: Store) -> None:
    handle = _handle_of(store)
    if backend == "postgres":
        import asyncpg
        db = handle.engine.url.database
        conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/test")
        try:
            killed = await conn.fetchval("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                         "WHERE datname = $1 AND pid <> pg_backend_pid()", db)
        finally:
            await conn.close()
        assert killed >= 1
    else:
        import redis.asyncio as r
        admin = r.Redis.from_url("redis://127.0.0.1:6379/0")
        me = await handle._r.client_id()
        await admin.client_kill_filter(_id=me)
        await admin.aclose()
