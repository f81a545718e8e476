"""Store backends under test: the compiled-in memory store and the three first-party plugins, each
plugin a real signed tarball built once per session and loaded as the kernel loads it.

``store_backend(name)`` -> ``(factory, cleanup)``: ``factory()`` is a new unopened handle (a
:class:`~busbar_sdk.store.RemoteStore` over the plugin's async twin, so every call crosses the
plugin wire) on one isolated backend: a new SQLite file, a new PostgreSQL database on the
machine's server, a new key prefix on the machine's Redis/Valkey.
"""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from busbar_sdk.artifact import build_wheels
from busbar_sdk.store import MemoryStore, RemoteStore, Store
from busbar_sdk.testing import PluginUnderTest, load_packed, pack

REPO = Path(__file__).resolve().parents[2]
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/0"
STORE_PLUGINS = {
    "sqlite": ("busbar-store-sqlite", "sqlite"),
    "postgres": ("busbar-store-postgres", "postgres"),
    "valkey": ("busbar-store-valkey", "redis"),
}


@pytest.fixture(scope="session")
def store_tarballs(tmp_path_factory: pytest.TempPathFactory,
                   busbar_signing_key: tuple[str, str]) -> dict[str, Path]:
    """backend -> the signed tarball of its plugin (built and packed once per session)."""
    out = tmp_path_factory.mktemp("store-plugins")
    wheels = build_wheels([REPO / "plugins" / name for name, _ in STORE_PLUGINS.values()], out)
    tarballs = {}
    for (backend, (name, alias)), wheel in zip(STORE_PLUGINS.items(), wheels, strict=True):
        schema = (REPO / "plugins" / name / "src" / name.replace("-", "_") / "settings_schema.json").read_text()
        tarballs[backend] = pack(wheel, out=out / f"{name}-1.5.0.tar.gz", name=name, alias=alias, kind="store",
                                 version="1.5.0", publisher="busbar", signing_key=busbar_signing_key[0],
                                 settings_schema=schema)
    return tarballs


@pytest.fixture(scope="session")
def store_plugins(store_tarballs: dict[str, Path], busbar_signing_key: tuple[str, str],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, PluginUnderTest]]:
    """backend -> the loaded plugin (unloaded at the end of the session)."""
    work = tmp_path_factory.mktemp("store-load")
    loaded = {b: load_packed(t, public_key=busbar_signing_key[1], workdir=work) for b, t in store_tarballs.items()}
    yield loaded
    for plugin in loaded.values():
        plugin.unload()


def remote(plugin: PluginUnderTest, settings: dict[str, Any], backend: str) -> RemoteStore:
    """A new handle: ``busbar_open(settings)`` then every operation through ``busbar_call.busbar_acall``."""
    instance = plugin.open(settings)
    acall = plugin.binding.call.busbar_acall  # type: ignore[attr-defined]
    return RemoteStore(lambda payload: acall(instance.handle, payload), backend)


def _pg(sql: str) -> None:
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(PG_ADMIN)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()
    asyncio.run(run())


def _redis_clear(prefix: str) -> None:
    import redis

    r = redis.Redis.from_url(REDIS_URL)
    keys = list(r.scan_iter(match=prefix + "*", count=1000))
    if keys:
        r.delete(*keys)
    r.close()


@pytest.fixture
def store_backend(store_plugins: dict[str, PluginUnderTest],
                  tmp_path: Path) -> Iterator[Callable[[str], Callable[[], Store]]]:
    cleanups: list[Callable[[], None]] = []

    def make(backend: str) -> Callable[[], Store]:
        if backend == "memory":
            shared = MemoryStore()
            return lambda: shared
        tag = uuid.uuid4().hex[:12]
        if backend == "sqlite":
            settings: dict[str, Any] = {"db_path": str(tmp_path / f"busbar-{tag}.db")}
        elif backend == "postgres":
            db = f"busbar_test_{tag}"
            _pg(f"CREATE DATABASE {db}")
            cleanups.append(lambda: _pg(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
            settings = {"url": f"postgres://postgres@127.0.0.1:5432/{db}", "pool_size": 3}
        else:
            prefix = f"busbar-test:{tag}:"
            cleanups.append(lambda: _redis_clear(prefix))
            settings = {"url": REDIS_URL, "prefix": prefix}
        return lambda: remote(store_plugins[backend], settings, backend)

    yield make
    for cleanup in cleanups:
        cleanup()
