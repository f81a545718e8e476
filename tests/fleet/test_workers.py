"""``busbar --workers N`` (busbar.server.workers) as a real process: N workers behind one listener,
SIGHUP and SIGTERM reaching every worker, a crashed worker replaced, and the memory store refused."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import openai
import pytest

from tests.fleet.conftest import ENV, fleet_yaml, read_store
from tests.support.gateway import BusbarProcess, free_port
from tests.support.waiting import wait_until

BUSBAR = str(Path(sys.executable).parent / "busbar")
MSG = [{"role": "user", "content": "hi"}]


def children(pid: int) -> list[int]:
    return sorted(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())


def serving(gw: BusbarProcess, n: int) -> list[int]:
    """Wait until the master reports ``n`` workers serving; their pids."""
    assert gw.proc is not None
    wait_until(lambda: f"busbar: {n} workers serving" in gw.logs(), timeout=60, what=f"{n} workers serving")
    return children(gw.proc.pid)


@pytest.mark.parametrize("args", [["--workers", "2"], ["--validate", "--workers", "2"]])
def test_workers_over_the_memory_store_are_refused(tmp_path: Path, args: list[str]) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f'listen: "127.0.0.1:{free_port()}"\nproviders:\n  openai: {{ api_key: {{ env: T_FLEET_KEY }} }}\n'
                   f"models:\n  gpt: {{ provider: openai }}\n")
    r = subprocess.run([BUSBAR, *args, "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, **ENV, "BUSBAR_LOG": "error"})
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        "config.yaml: store.module: --workers 2 with the memory store: each worker would keep its own keys, usage "
        "and denylist; choose a shared store (sqlite, postgres or valkey: docs/stores.md#a-fleet) or run one worker",
        "busbar: 1 config error(s); refusing to start"]


def test_a_bad_workers_count_is_a_usage_error(tmp_path: Path) -> None:
    r = subprocess.run([BUSBAR, "--workers", "0", "--config", str(tmp_path / "none.yaml")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == "busbar: error: argument --workers: '0' is not a whole number >= 1"


def test_a_store_down_at_boot_is_reported_once_and_stops_the_start(tmp_path: Path, mock, plugins_dir: Path) -> None:
    dead = free_port()
    settings = {"url": f"postgres://busbar:s3cret@127.0.0.1:{dead}/busbar", "connect_timeout_secs": 1}
    cfg = tmp_path / "config.yaml"
    cfg.write_text(fleet_yaml("postgres", settings, mock.url, plugins_dir).replace("{port}", str(free_port())))
    r = subprocess.run([BUSBAR, "--workers", "3", "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, **ENV, "BUSBAR_LOG": "error"})
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"store (postgres): postgres at postgres://busbar:***@127.0.0.1:{dead}/busbar is unavailable: "
        f"ConnectionRefusedError: [Errno 111] Connection refused",
        "busbar: the store could not be opened; refusing to start"]


@pytest.mark.slow
def test_two_workers_serve_reload_and_stop_together(tmp_path: Path, mock, plugins_dir: Path,
                                                    store_config) -> None:
    module, settings = store_config("sqlite")
    gw = BusbarProcess(fleet_yaml(module, settings, mock.url, plugins_dir), tmp_path, env={**ENV, "BUSBAR_LOG": "info"},
                       args=["--workers", "2"]).start(timeout=60)
    try:
        workers = serving(gw, 2)
        assert len(workers) == 2
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
        for _ in range(6):
            reply = client.chat.completions.create(model="gpt", messages=MSG)
            assert reply.choices[0].message.content
        assert gw.proc is not None
        os.kill(gw.proc.pid, signal.SIGHUP)          # every worker rescans plugins.dir
        wait_until(lambda: all(f"[worker {i}]: plugin reload: 3 plugins now loaded" in gw.logs() for i in (0, 1)),
                   timeout=30, what="both workers reloaded")
        assert children(gw.proc.pid) == workers      # a reload restarts nobody
        day = datetime.now(UTC).date().isoformat()
        wait_until(lambda: [(r["requests"], r["billable_requests"])          # flushed (every 100 ms) before
                            for r in read_store(module, settings, "metering", day)] == [(6, 6)],   # the kill
                   timeout=30, what="the six requests flushed")

        os.kill(workers[0], signal.SIGKILL)          # a crashed worker is replaced
        wait_until(lambda: f"worker 0 (pid {workers[0]}) exited with status -9; starting a new one" in gw.logs(),
                   timeout=30, what="the crash logged")
        wait_until(lambda: len(children(gw.proc.pid)) == 2 and workers[0] not in children(gw.proc.pid),
                   timeout=60, what="a new worker 0")
        assert client.chat.completions.create(model="gpt", messages=MSG).choices[0].message.content

        os.kill(gw.proc.pid, signal.SIGTERM)         # graceful: every worker drains and exits, then the master
        assert gw.proc.wait(30) == 0
    finally:
        gw.stop()
    assert gw.logs().count("INFO:     Finished server process") == 2     # worker 1 and the new worker 0
    # every request metered once, by whichever worker served it
    assert [(r["requests"], r["billable_requests"]) for r in read_store(module, settings, "metering", day)] == [(7, 7)]


@pytest.mark.parametrize(("marker", "group"), [(b"busbar listening on", True), (b"\n", False)],
                         ids=["group-as-worker-0-listens", "master-at-first-line"])
def test_a_sigterm_while_the_workers_start_stops_the_fleet(tmp_path: Path, mock, plugins_dir: Path,
                                                           store_config, marker: bytes, group: bool) -> None:
    """SIGTERM to the process group (systemd's default) as worker 0 logs "busbar listening on", or
    to the master at its first line: every worker shuts down and the master exits 0."""
    module, settings = store_config("sqlite")
    gw = BusbarProcess(fleet_yaml(module, settings, mock.url, plugins_dir), tmp_path,
                       env={**ENV, "BUSBAR_LOG": "info"}, args=["--workers", "2"])
    try:
        proc = gw.launch()
        while marker not in gw.log_path.read_bytes():
            assert proc.poll() is None, gw.logs()
            time.sleep(0.001)
        (os.killpg if group else os.kill)(proc.pid, signal.SIGTERM)
        assert proc.wait(30) == 0, gw.logs()
        assert "Traceback" not in gw.logs()
        assert "did not stop" not in gw.logs()
    finally:
        gw.stop()
