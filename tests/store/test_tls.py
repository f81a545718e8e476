"""The shared stores over TLS, with certificates made at test time: a Valkey/Redis server started
with --tls-port (rediss://) and a second PostgreSQL cluster with ssl = on (sslmode). Each server is
a real process on a free loopback port, stopped at the end."""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from busbar_sdk.store import Store, StoreUnavailable, VirtualKey
from busbar_sdk.testing import PluginUnderTest

from tests.store.conftest import remote
from tests.support.certs import make_ca
from tests.support.gateway import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _roundtrip(store: Store) -> VirtualKey | None:
    async def run() -> VirtualKey | None:
        await store.open()
        try:
            await store.put_key(VirtualKey(id="k1", name="tls", created_at=1))
            return await store.get_key("k1")
        finally:
            await store.close()
    return asyncio.run(run())


def _unavailable(store: Store) -> str:
    with pytest.raises(StoreUnavailable) as exc:
        _roundtrip(store)
    return str(exc.value)


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    d = tmp_path_factory.mktemp("redis-tls")
    ca = make_ca(d)
    leaf = ca.issue(d, "redis")
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                             "--tls-cert-file", str(leaf.cert_path), "--tls-key-file", str(leaf.key_path),
                             "--tls-ca-cert-file", str(ca.cert_path), "--tls-auth-clients", "no",
                             "--save", "", "--appendonly", "no", "--dir", str(d)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.time() + 10
    while time.time() < deadline:
        if subprocess.run(["redis-cli", "--tls", "--cacert", str(ca.cert_path), "-p", str(port), "ping"],
                          capture_output=True, text=True).stdout.strip() == "PONG":
            break
        time.sleep(0.05)
    yield port, ca.cert_path
    proc.terminate()
    proc.wait(10)


def test_valkey_over_rediss_verifies_the_server_certificate(store_plugins: dict[str, PluginUnderTest],
                                                           tls_redis: tuple[int, Path], tmp_path: Path) -> None:
    port, ca = tls_redis
    p = store_plugins["valkey"]
    ok = remote(p, {"url": f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca}", "prefix": "tls:"}, "valkey")
    key = _roundtrip(ok)
    assert key is not None and key.name == "tls"
    other = make_ca(tmp_path, "other-ca")
    wrong = remote(p, {"url": f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={other.cert_path}",
                       "connect_timeout_secs": 2}, "valkey")
    assert "certificate verify failed" in _unavailable(wrong)
    plain = remote(p, {"url": f"redis://127.0.0.1:{port}/0", "connect_timeout_secs": 2}, "valkey")
    assert _unavailable(plain).startswith(f"valkey at redis://127.0.0.1:{port}/0 is unavailable: ")


def _as_postgres(*cmd: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", "postgres", "--", *cmd], capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def tls_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    if not (PG_BIN / "initdb").exists() or os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs PostgreSQL 15 server binaries and root (to run them as the postgres user)")
    base = Path(f"/tmp/busbar-pg-tls-{os.getpid()}")
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(mode=0o755)
    ca = make_ca(base / "certs")
    leaf = ca.issue(base / "certs", "server")
    data = base / "data"
    shutil.chown(base, "postgres", "postgres")
    for f in (base / "certs").iterdir():
        shutil.chown(f, "postgres", "postgres")
    r = _as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", timeout=120)
    assert r.returncode == 0, r.stderr
    port = free_port()
    with open(data / "postgresql.conf", "a") as conf:
        conf.write(f"\nport = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{base}'\n"
                   f"ssl = on\nssl_cert_file = '{leaf.cert_path}'\nssl_key_file = '{leaf.key_path}'\n"
                   f"fsync = off\n")
    (data / "pg_hba.conf").write_text("local all all trust\nhostssl all all 127.0.0.1/32 trust\n"
                                      "hostnossl all all 127.0.0.1/32 reject\n")
    r = _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "start", timeout=60)
    assert r.returncode == 0, r.stderr + (base / "log").read_text()
    yield port, ca.cert_path
    _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop", timeout=60)
    shutil.rmtree(base, ignore_errors=True)


def test_postgres_sslmode_turns_tls_on_and_verify_full_checks_the_certificate(
        store_plugins: dict[str, PluginUnderTest], tls_postgres: tuple[int, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    port, ca = tls_postgres
    p = store_plugins["postgres"]
    url = f"postgres://postgres@127.0.0.1:{port}/postgres"
    key = _roundtrip(remote(p, {"url": url + "?sslmode=require"}, "postgres"))
    assert key is not None and key.name == "tls"
    refused = _unavailable(remote(p, {"url": url + "?sslmode=disable", "connect_timeout_secs": 2}, "postgres"))
    assert refused.startswith(f"postgres at {url}?sslmode=disable is unavailable: ")
    assert "no encryption" in refused or "pg_hba.conf rejects" in refused
    monkeypatch.setenv("PGSSLROOTCERT", str(ca))
    assert _roundtrip(remote(p, {"url": url + "?sslmode=verify-full"}, "postgres")) is not None
