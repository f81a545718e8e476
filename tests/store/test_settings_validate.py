"""``store.settings`` judged from the store plugin's signed manifest ``settings_schema``: ``busbar
--validate`` and the boot print the same config-error lines (exit 2) before any plugin code is
imported, and they are the lines the plugin itself raises at open (one rule in the sdk:
``busbar_sdk.store.settings``). Real ``busbar`` processes against the signed tarballs in dist/plugins
(``scripts/setup``); the plugin-side lines through the loaded plugins of tests/store/conftest.py."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from busbar_sdk.store import StoreInvalid
from busbar_sdk.store.settings import REQUIRED, Setting, SettingsSpec, check_settings, schema_faults, settings_spec
from busbar_sdk.testing import PluginUnderTest

from tests.plugins.test_validate_equals_boot import both
from tests.store.test_gateway_store import BUSBAR, ENV, config
from tests.support.gateway import free_port

REPO = Path(__file__).resolve().parents[2]
PLUGIN = {"sqlite": "busbar-store-sqlite", "postgres": "busbar-store-postgres", "valkey": "busbar-store-valkey"}
REF = ("expected a str, got a {{ {k}: ... }} secret reference (store settings reach the plugin verbatim; write the "
       "value, or interpolate it with ${{VAR}})")

# (backend, settings, the fault lines after "store.settings.")
CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("sqlite", {"path": "/tmp/b.db"}, [
        "path: unknown setting for the sqlite store (it takes busy_timeout_ms, db_path)",
        "db_path: required by the sqlite store"]),
    ("sqlite", {"db_path": "/tmp/b.db", "busy_timeout_ms": "5s"}, ["busy_timeout_ms: expected an integer, got str"]),
    ("sqlite", {"db_path": "/tmp/b.db", "busy_timeout_ms": -1}, ["busy_timeout_ms: must be between 0 and 600000"]),
    ("sqlite", {"db_path": "", "busy_timeout_ms": True}, [
        "db_path: must not be empty", "busy_timeout_ms: expected an integer, got bool"]),
    ("sqlite", {"db_path": {"env": "DB_PATH"}}, ["db_path: " + REF.format(k="env")]),
    ("postgres", {"url": "postgres://127.0.0.1/busbar", "pool": 3}, [
        "pool: unknown setting for the postgres store (it takes connect_timeout_secs, pool_size, url)"]),
    ("postgres", {"pool_size": 5}, ["url: required by the postgres store"]),
    ("postgres", {"url": 5432}, ["url: expected a str, got int"]),
    ("postgres", {"url": "postgres://127.0.0.1/busbar", "pool_size": 0, "connect_timeout_secs": 301}, [
        "pool_size: must be between 1 and 100", "connect_timeout_secs: must be between 1 and 300"]),
    ("postgres", {"url": {"file": "/run/secrets/pg"}}, ["url: " + REF.format(k="file")]),
    ("postgres", {"url": "postgresql+asyncpg://busbar:hunter2@127.0.0.1/busbar"}, [
        "url: scheme postgresql+asyncpg:// is not supported by the postgres store; use postgres:// or postgresql://"]),
    ("postgres", {"url": "127.0.0.1:5432/busbar"}, [
        "url: scheme (none) is not supported by the postgres store; use postgres:// or postgresql://"]),
    ("valkey", {"url": "HTTP://cache:6379"}, [
        "url: scheme http:// is not supported by the valkey store; use redis:// or rediss://"]),
    ("valkey", {"url": "redis://127.0.0.1:6379/0", "prefix": 3, "connect_timeout_secs": 0}, [
        "prefix: expected a str, got int", "connect_timeout_secs: must be between 1 and 300"]),
]
IDS = [f"{b}-{'-'.join(line.split(':')[0] for line in lines)}" for b, _, lines in CASES]


def _config(tmp_path: Path, backend: str, settings: dict[str, Any]) -> Path:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(config(tmp_path, backend, settings, PLUGIN[backend]).replace("{port}", str(free_port())))
    return cfg


@pytest.mark.parametrize(("backend", "settings", "lines"), CASES, ids=IDS)
def test_validate_and_boot_refuse_bad_store_settings_with_the_same_lines(
        tmp_path: Path, backend: str, settings: dict[str, Any], lines: list[str]) -> None:
    assert both(_config(tmp_path, backend, settings), ENV) == [
        *(f"config.yaml: store.settings.{line}" for line in lines),
        f"busbar: {len(lines)} config error(s); refusing to start"]


@pytest.mark.parametrize(("backend", "settings", "lines"), CASES, ids=IDS)
def test_the_plugin_raises_the_lines_the_manifest_schema_gives(
        store_plugins: dict[str, PluginUnderTest], backend: str, settings: dict[str, Any], lines: list[str]) -> None:
    with pytest.raises(StoreInvalid) as exc:
        store_plugins[backend].open(settings)
    assert str(exc.value).splitlines() == [f"store.settings.{line}" for line in lines]
    schema = (REPO / "plugins" / PLUGIN[backend] / "src" / PLUGIN[backend].replace("-", "_") / "settings_schema.json")
    assert schema_faults(settings, schema.read_text(), backend) == str(exc.value).splitlines()


@pytest.mark.parametrize(("backend", "settings"), [
    ("sqlite", {"db_path": "{tmp}/b.db", "busy_timeout_ms": 600000}),
    ("postgres", {"url": "postgres://busbar@127.0.0.1:5432/test?sslmode=disable", "pool_size": 100,
                  "connect_timeout_secs": 1}),
    ("valkey", {"url": "redis://127.0.0.1:6379/0", "prefix": "busbar-validate:", "connect_timeout_secs": 300}),
])
def test_a_correct_store_config_is_still_valid(tmp_path: Path, backend: str, settings: dict[str, Any]) -> None:
    cfg = _config(tmp_path, backend, json.loads(json.dumps(settings).replace("{tmp}", str(tmp_path))))
    r = subprocess.run([BUSBAR, "--validate", "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env={**os.environ, **ENV, "BUSBAR_LOG": "error"})
    assert (r.returncode, r.stdout, r.stderr) == (0, f"busbar: {cfg} is valid (1 warning(s))\n",
                                                  "warning: config.yaml: auth.chain: [] is an open front door: no "
                                                  "client authentication (development only)\n")


def test_a_spec_from_a_schema() -> None:
    spec = settings_spec({"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string", "minLength": 2}, "n": {"type": "number", "minimum": 0.5, "default": 1.5},
        "any": {"default": None}, "flag": {"type": "boolean", "default": False}}})
    assert settings_spec({"properties": {"u": {"type": "string", "x-busbar-url-schemes": ["HTTPS"]},
                                         "v": {"type": "string", "x-busbar-url-schemes": []}}}) == SettingsSpec(
        {"u": Setting(str, None, schemes=("https",)), "v": Setting(str, None)}, closed=False)
    assert spec == SettingsSpec({"a": Setting(str, REQUIRED, min_length=2), "n": Setting((int, float), 1.5, 0.5),
                                 "any": Setting(None, None), "flag": Setting(bool, False)}, closed=False)
    assert check_settings({"a": "ok", "n": 2, "extra": [1]}, spec, "acme") == {
        "a": "ok", "n": 2, "any": None, "flag": False, "extra": [1]}      # not closed: unknown keys pass through
    with pytest.raises(StoreInvalid) as exc:
        check_settings({"a": "x", "n": 0.1, "flag": 1}, spec, "acme")
    assert str(exc.value).splitlines() == ["store.settings.a: must be at least 2 characters",
                                           "store.settings.n: must be >= 0.5",
                                           "store.settings.flag: expected a bool, got int"]
    with pytest.raises(ValueError, match="must be a JSON Schema object"):
        settings_spec("[1]")


def test_a_tuple_spec_still_checks_as_before() -> None:
    spec = {"url": (str, REQUIRED), "size": (int, 5)}
    assert check_settings({"url": "x"}, spec, "mine") == {"url": "x", "size": 5}
    with pytest.raises(StoreInvalid) as exc:
        check_settings({"size": "5", "sz": 1}, spec, "mine")
    assert str(exc.value).splitlines() == ["store.settings.sz: unknown setting for the mine store (it takes size, url)",
                                           "store.settings.url: required by the mine store",
                                           "store.settings.size: expected an integer, got str"]
