"""`busbar store info` and `busbar store prune --before DAY` on every first-party store, as a process
against the signed plugin tarballs `scripts/setup` builds into dist/plugins (real PostgreSQL and
Redis on 127.0.0.1)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.conftest import _pg, _redis_clear

BUSBAR = str(Path(sys.executable).parent / "busbar")
ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "dist" / "plugins"
BASE = """
listen: "127.0.0.1:18080"
plugins: {{ enabled: true, dir: {plugins} }}
store:
  module: {module}
  settings: {settings}
providers:
  openai: {{ api_key: {{ env: T_STORE_CLI_KEY }} }}
models:
  gpt: {{ provider: openai }}
"""


def run(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BUSBAR, "store", "--config", str(cfg), *args], capture_output=True, text=True,
                          env={**os.environ, "T_STORE_CLI_KEY": "sk-test"}, timeout=60, cwd=cfg.parent)


@pytest.fixture
def backend_config(tmp_path: Path) -> Iterator[callable]:  # type: ignore[valid-type]
    cleanups = []

    def make(backend: str) -> tuple[Path, dict[str, object]]:
        tag = uuid.uuid4().hex[:12]
        if backend == "sqlite":
            module, settings = "sqlite", {"db_path": str(tmp_path / "busbar.db")}
        elif backend == "postgres":
            db = f"busbar_cli_{tag}"
            _pg(f"CREATE DATABASE {db}")
            cleanups.append(lambda: _pg(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
            module, settings = "postgres", {"url": f"postgres://postgres@127.0.0.1:5432/{db}"}
        else:
            prefix = f"busbar-cli:{tag}:"
            cleanups.append(lambda: _redis_clear(prefix))
            module, settings = "redis", {"url": "redis://127.0.0.1:6379/0", "prefix": prefix}
        cfg = tmp_path / "config.yaml"
        cfg.write_text(BASE.format(plugins=PLUGINS, module=module, settings=json.dumps(settings)))
        return cfg, settings

    yield make
    for c in cleanups:
        c()


_SEED = """
import asyncio, json, sys
from busbar_sdk.store import MeteringDelta
module, _, name = sys.argv[1].partition(":")
cls = getattr(__import__(module), name)

async def seed():
    store = cls.from_settings(json.loads(sys.argv[2]))
    await store.open()
    await store.add_metering([MeteringDelta(day=d, key_id="k1", model="gpt", provider="openai", input=5, requests=1)
                              for d in ("2026-10-31", "2026-11-01", "2026-11-02")])
    await store.close()
asyncio.run(seed())
"""
_CLASSES = {"sqlite": ("busbar-store-sqlite", "busbar_store_sqlite:SqliteStore"),
            "postgres": ("busbar-store-postgres", "busbar_store_postgres:PostgresStore"),
            "valkey": ("busbar-store-valkey", "busbar_store_valkey:ValkeyStore")}


def _seed_metering(backend: str, settings: dict[str, object]) -> None:
    """Write three metering rows (two days before 2026-11-02, one on it) with the plugin's own code,
    in a child process (importing a plugin package here would shadow the signed tarballs other
    tests load)."""
    project, cls = _CLASSES[backend]
    subprocess.run([sys.executable, "-c", _SEED, cls, json.dumps(settings)], check=True, timeout=60,
                   env={**os.environ, "PYTHONPATH": str(ROOT / "plugins" / project / "src")})


@pytest.mark.parametrize("backend,shown", [("sqlite", "sqlite"), ("postgres", "postgres"), ("valkey", "valkey")])
def test_info_and_prune_on_every_store(backend_config, backend: str, shown: str) -> None:  # type: ignore[no-untyped-def]
    cfg, settings = backend_config(backend)
    r = run(cfg, "info")
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == ("backend: " + shown + "\nschema_version: 1\nkeys: 0\nusage_windows: 0\nmetering_rows: 0\n"
                        "audit_records: 0\ndenylist: 0\ncredentials: 0\n")
    _seed_metering(backend, settings)
    r = run(cfg, "info", "--json")
    assert json.loads(r.stdout)["counts"]["metering_rows"] == 3
    r = run(cfg, "prune", "--before", "2026-11-02")
    assert (r.returncode, r.stdout) == (0, f"busbar store: pruned 2 metering row(s) of days before 2026-11-02 "
                                           f"({shown})\n")
    assert json.loads(run(cfg, "info", "--json").stdout)["counts"]["metering_rows"] == 1


def test_prune_refuses_a_malformed_day(backend_config) -> None:  # type: ignore[no-untyped-def]
    cfg, _ = backend_config("sqlite")
    r = run(cfg, "prune", "--before", "2026-13-01")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("--before: '2026-13-01' is not a day in the form YYYY-MM-DD\n"
                        "busbar store: bad arguments\n")


def test_an_unreachable_store_exits_1_naming_it_without_the_password(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(BASE.format(plugins=PLUGINS, module="postgres",
                               settings='{ url: "postgres://busbar:hunter2@127.0.0.1:1/busbar" }'))
    r = run(cfg, "info")
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert lines[0].startswith("store (postgres): postgres at postgres://busbar:***@127.0.0.1:1/busbar is "
                               "unavailable: ")
    assert lines[1:] == ["busbar store: the store could not be opened"]
    assert "hunter2" not in r.stderr


def test_a_bad_setting_exits_2_naming_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(BASE.format(plugins=PLUGINS, module="sqlite", settings='{ db_path: x.db, wal: true }'))
    r = run(cfg, "info")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        "store.settings.wal: unknown setting for the sqlite store (it takes busy_timeout_ms, db_path)",
        "busbar store: the store cannot be built"]
