"""The store on the gateway (busbar.store.attach): ``gw.store``, ``gw.flusher``, ``gw.keysync`` built at
boot, opened by the serving coroutine, flushed and closed at shutdown; a store that is down at boot
refuses to start naming its URL without the password. Real ``busbar`` processes against the signed
tarballs in dist/plugins (``scripts/setup``)."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from busbar.config.load import load_config_text
from busbar.proxy.gateway import Gateway
from busbar.store.attach import start_store, stop_store, store_running
from busbar.store.flusher import UsageFlusher
from busbar.store.sync import KeySync
from busbar_sdk.store import MemoryStore, MeteringDelta, VirtualKey

from tests.support.gateway import BusbarProcess, free_port

BUSBAR = str(Path(sys.executable).parent / "busbar")
ROOT = Path(__file__).resolve().parents[2]
ENV = {"T_GW_STORE_KEY": "sk-test"}
BASE = """\
listen: "127.0.0.1:{port}"
plugins: {{ enabled: true, dir: {plugins} }}
store:
  module: {module}
  settings: {settings}
advanced: {{ usage_flush_interval_ms: 50 }}
providers:
  openai: {{ api_key: {{ env: T_GW_STORE_KEY }} }}
models:
  gpt: {{ provider: openai }}
"""


def plugins_dir(tmp_path: Path, *names: str) -> Path:
    """A private plugins.dir holding copies of the named first-party tarballs (its high-water file
    lands beside it, not in dist/)."""
    out = tmp_path / "plugins"
    out.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(ROOT / "dist" / "plugins" / f"{name}-1.5.0.tar.gz", out)
    return out


def config(tmp_path: Path, module: str, settings: dict[str, object], *plugins: str) -> str:
    return BASE.format(port="{port}", plugins=plugins_dir(tmp_path, *plugins), module=module,
                       settings=json.dumps(settings))


def test_without_the_keys_verifier_the_mirror_is_not_polled() -> None:
    loaded = load_config_text("providers:\n  openai: { api_key: { env: K } }\nmodels:\n  gpt: { provider: openai }\n",
                              {"K": "sk"})
    gw = Gateway.build(loaded, {"K": "sk"}, transport=httpx.MockTransport(lambda r: httpx.Response(500)))

    async def main() -> tuple[int, float]:
        tasks = await start_store(gw)
        try:
            await gw.store.put_key(VirtualKey(id="k1", name="one", group="g", created_at=1))
            await asyncio.sleep(0.4)            # > one key-sync interval (0.25 s)
            return len(tasks), gw.keysync.age_s()
        finally:
            await stop_store(gw, tasks)

    assert asyncio.run(main()) == (1, float("inf"))    # the flusher alone; the mirror never synced
    assert gw.keysync.keys == {}


def test_the_memory_store_is_the_default_and_runs_under_the_helper() -> None:
    loaded = load_config_text("providers:\n  openai: { api_key: { env: K } }\nmodels:\n  gpt: { provider: openai }\n"
                              "advanced: { usage_flush_interval_ms: 20 }\nauth: { chain: [keys] }\n", {"K": "sk"})
    gw = Gateway.build(loaded, {"K": "sk"}, transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    assert isinstance(gw.store, MemoryStore)
    assert isinstance(gw.flusher, UsageFlusher) and gw.flusher.interval_s == 0.02
    assert isinstance(gw.keysync, KeySync) and gw.keysync.store is gw.store

    async def main() -> tuple[list[MeteringDelta], bool]:
        async with store_running(gw):
            await gw.store.put_key(VirtualKey(id="k1", name="one", group="g", created_at=1))
            gw.flusher.add_metering(MeteringDelta(day="2026-12-02", key_id="k1", model="gpt", provider="openai",
                                                  input=3, output=4, requests=1))
            for _ in range(200):          # the flusher (20 ms) and the key sync (250 ms) run meanwhile
                if gw.keysync.live_key("k1", 2) is not None and gw.flusher.pending == 0:
                    break
                await asyncio.sleep(0.01)
            rows = await gw.store.list_metering("2026-12-02")
        return rows, gw.flusher.flushed["metering"] == 1

    rows, flushed = asyncio.run(main())
    assert rows == [MeteringDelta(day="2026-12-02", key_id="k1", model="gpt", provider="openai", input=3, output=4,
                                  requests=1)]
    assert flushed


def test_a_sqlite_store_is_opened_at_boot_and_migrated(tmp_path: Path) -> None:
    db = tmp_path / "busbar.db"
    text = config(tmp_path, "sqlite", {"db_path": str(db)}, "busbar-store-sqlite")
    gw = BusbarProcess(text, tmp_path, env=ENV).start()
    try:
        assert httpx.get(gw.url + "/healthz").status_code == 200
    finally:
        gw.stop()
    assert gw.proc is not None and gw.proc.returncode == 0
    info = subprocess.run([BUSBAR, "store", "--config", str(gw.config_path), "info", "--json"], capture_output=True,
                          text=True, env={**os.environ, **ENV}, timeout=60, cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["backend"] == "sqlite"
    assert json.loads(info.stdout)["schema_version"] >= 1


def test_a_store_down_at_boot_refuses_to_start_without_the_password(tmp_path: Path) -> None:
    dead = free_port()
    url = f"postgres://busbar:s3cret@127.0.0.1:{dead}/busbar"
    text = config(tmp_path, "postgres", {"url": url, "connect_timeout_secs": 1}, "busbar-store-postgres")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text.replace("{port}", str(free_port())))
    r = subprocess.run([BUSBAR, "--config", str(cfg)], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env={**os.environ, **ENV, "BUSBAR_LOG": "error"})
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"store (postgres): postgres at postgres://busbar:***@127.0.0.1:{dead}/busbar is unavailable: "
        f"ConnectionRefusedError: [Errno 111] Connection refused",
        "busbar: the store could not be opened; refusing to start"]
    assert "s3cret" not in r.stdout + r.stderr


@pytest.mark.parametrize(("flag", "line"), [
    ("false", "config.yaml: store.module: 'sqlite' is a kind: store plugin but plugins.enabled is false; set "
              "plugins.enabled: true and install its tarball in plugins.dir"),
    ("true", "config.yaml: store.module: 'sqlite' does not resolve to a loadable plugin in plugins.dir ({dir}); "
             "install its signed tarball or fix the name (busbar --list-plugins shows what loads)"),
])
def test_validate_and_boot_name_the_missing_flag_or_tarball(tmp_path: Path, flag: str, line: str) -> None:
    plugins = plugins_dir(tmp_path)          # empty: no store tarball
    cfg = tmp_path / "config.yaml"
    cfg.write_text(BASE.format(port=free_port(), plugins=plugins, module="sqlite",
                               settings=json.dumps({"db_path": str(tmp_path / "b.db")}))
                   .replace("enabled: true", f"enabled: {flag}"))
    for args in (["--validate"], []):
        r = subprocess.run([BUSBAR, *args, "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                           cwd=tmp_path, env={**os.environ, **ENV, "BUSBAR_LOG": "error"})
        assert r.returncode == 2, args
        assert r.stderr.splitlines() == [line.format(dir=plugins),
                                         "busbar: 1 config error(s); refusing to start"], args


@pytest.mark.parametrize("module", ["valkey", "redis", "busbar-store-valkey"])
def test_every_name_of_the_valkey_store_validates(tmp_path: Path, module: str) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(config(tmp_path, module, {"url": "redis://127.0.0.1:6379/0", "prefix": "busbar-validate:"},
                          "busbar-store-valkey").replace("{port}", str(free_port())))
    r = subprocess.run([BUSBAR, "--validate", "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env={**os.environ, **ENV, "BUSBAR_LOG": "error"})
    assert (r.returncode, r.stdout) == (0, f"busbar: {cfg} is valid (1 warning(s))\n"), r.stderr
