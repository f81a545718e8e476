"""Fleet fixtures: a real mock provider, private plugin directories with the first-party store
tarballs (dist/plugins, built by ``scripts/setup``), and one isolated store per test on the
machine's PostgreSQL, Redis/Valkey or a SQLite file.

``store_config(backend) -> (module, settings)`` creates the backend (a fresh PostgreSQL database, a
fresh key prefix) and drops it after the test; ``fleet_yaml(module, settings, mock_url)`` is a config
with one OpenAI-protocol model ``gpt`` on the mock, ``listen`` left as ``{port}``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from busbar_mock_provider.process import MockProcess

from tests.store.conftest import _pg, _redis_clear

ROOT = Path(__file__).resolve().parents[2]
ENV = {"T_FLEET_KEY": "sk-test-fleet"}
PG = "postgres://postgres@127.0.0.1:5432/{db}"
REDIS = "redis://127.0.0.1:6379/0"
MODULES = {"sqlite": "sqlite", "postgres": "postgres", "valkey": "valkey"}


@pytest.fixture(scope="session")
def mock() -> Iterator[MockProcess]:
    with MockProcess() as m:
        yield m


@pytest.fixture(scope="session")
def plugins_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plugins.dir with the three store tarballs (its high-water file lands beside it, not in dist/)."""
    out = tmp_path_factory.mktemp("fleet") / "plugins"
    out.mkdir()
    for name in ("sqlite", "postgres", "valkey"):
        shutil.copy(ROOT / "dist" / "plugins" / f"busbar-store-{name}-1.5.0.tar.gz", out)
    return out


@pytest.fixture
def store_config(tmp_path: Path) -> Iterator[Callable[[str], tuple[str, dict[str, Any]]]]:
    cleanups: list[Callable[[], None]] = []

    def make(backend: str) -> tuple[str, dict[str, Any]]:
        tag = uuid.uuid4().hex[:12]
        if backend == "sqlite":
            return "sqlite", {"db_path": str(tmp_path / f"fleet-{tag}.db")}
        if backend == "postgres":
            db = f"busbar_fleet_{tag}"
            _pg(f"CREATE DATABASE {db}")
            cleanups.append(lambda: _pg(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
            return "postgres", {"url": PG.format(db=db), "connect_timeout_secs": 2}
        prefix = f"busbar-fleet:{tag}:"
        cleanups.append(lambda: _redis_clear(prefix))
        return "valkey", {"url": REDIS, "prefix": prefix, "connect_timeout_secs": 2}

    yield make
    for cleanup in cleanups:
        cleanup()


def fleet_yaml(module: str, settings: dict[str, Any], mock_url: str, plugins: Path, extra: str = "") -> str:
    return f"""\
listen: "127.0.0.1:{{port}}"
plugins: {{ enabled: true, dir: {plugins} }}
store: {{ module: {module}, settings: {json.dumps(settings)} }}
advanced: {{ usage_flush_interval_ms: 50 }}
metrics: {{ buffer_seconds: 60 }}
providers:
  oa: {{ protocol: openai, base_url: "{mock_url}", api_key: {{ env: T_FLEET_KEY }} }}
models:
  gpt: {{ provider: oa }}
{extra}"""


_READ = """
import asyncio, dataclasses, json, sys
module, _, name = sys.argv[1].partition(":")
cls = getattr(__import__(module), name)

async def read():
    store = cls.from_settings(json.loads(sys.argv[2]))
    await store.open()
    try:
        if sys.argv[3] == "metering":
            rows = [dataclasses.asdict(r) for r in await store.list_metering(sys.argv[4])]
        elif sys.argv[3] == "get_meta":
            rows = {name: await store.get_meta(name) for name in sys.argv[4:]}
        elif sys.argv[3] == "put_meta":
            rows = await store.put_meta(sys.argv[4], sys.argv[5])
        elif sys.argv[3] == "put_key":
            from busbar_sdk.store import VirtualKey
            await store.put_key(VirtualKey(**json.loads(sys.argv[4])))
            rows = None
        elif sys.argv[3] == "strict_get":
            rows = dataclasses.asdict(await store.strict_get(sys.argv[4], int(sys.argv[5]), sys.argv[6]))
        elif sys.argv[3] == "deny":
            await store.add_denylist(sys.argv[4], "fleet test", int(sys.argv[5]))
            rows = None
        else:
            rows = (await store.info())["counts"]
    finally:
        await store.close()
    print(json.dumps(rows, sort_keys=True))
asyncio.run(read())
"""
_CLASSES = {"sqlite": ("busbar-store-sqlite", "busbar_store_sqlite:SqliteStore"),
            "postgres": ("busbar-store-postgres", "busbar_store_postgres:PostgresStore"),
            "valkey": ("busbar-store-valkey", "busbar_store_valkey:ValkeyStore")}


def read_store(module: str, settings: dict[str, Any], what: str, *args: str) -> Any:
    """``what`` = ``metering`` (rows of day ``args[0]``, as dicts), ``get_meta`` (names ``args`` ->
    values), ``put_meta`` (``args`` = name, value), ``put_key`` (``args[0]``: VirtualKey fields as
    JSON), ``strict_get`` (``args`` = bucket, window start, metric: ``{"used", "reserved"}``), ``deny``
    (``args`` = subject, now) or ``counts`` of the store, read or written with
    the plugin's own code in a child process (importing a plugin package here would shadow the
    signed tarballs other tests load)."""
    project, cls = _CLASSES[module]
    out = subprocess.run([sys.executable, "-c", _READ, cls, json.dumps(settings), what, *args], check=True,
                         timeout=60, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "plugins" / project / "src")})
    return json.loads(out.stdout)
