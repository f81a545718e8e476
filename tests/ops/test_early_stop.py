"""A stop signal at any point of a real busbar's start (docs/operations.md#stopping): SIGTERM or
SIGINT sent the moment "busbar listening on" is logged (before uvicorn's own handlers are in), or
earlier while it still boots, ends in the graceful shutdown (final state snapshot, store flush) and
exit 0; a signal in that window used to be swallowed and the process kept serving."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.gateway import BusbarProcess

# auth.chain: [] logs its warning before the boot: the first output, ~1 s before the listener is up
CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up-openai: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  es-quick: { provider: up-openai }
"""
LISTENING = b"busbar listening on"


def signal_when(gw: BusbarProcess, marker: bytes, sig: int) -> float:
    """Poll the log tightly; send ``sig`` as soon as ``marker`` is in it; the monotonic time sent."""
    proc = gw.launch()
    deadline = time.monotonic() + 30
    while marker not in gw.log_path.read_bytes():
        assert proc.poll() is None, gw.logs()
        assert time.monotonic() < deadline, gw.logs()
        time.sleep(0.001)
    os.kill(proc.pid, sig)
    return time.monotonic()


def stopped(gw: BusbarProcess, sent: float) -> tuple[int | None, float]:
    """The exit status within 5 s of ``sent`` (``None`` when still running) and the seconds taken."""
    assert gw.proc is not None
    while gw.proc.poll() is None and time.monotonic() - sent < 5:
        time.sleep(0.01)
    return gw.proc.poll(), time.monotonic() - sent


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_as_the_listening_line_appears_shuts_down(tmp_path: Path, mock, sig: int) -> None:
    gw = BusbarProcess(CONFIG.replace("MOCK", mock.url), tmp_path, env={"BUSBAR_LOG": "info", "T_OPENAI_KEY": "x"})
    try:
        sent = signal_when(gw, LISTENING, sig)
        status, took = stopped(gw, sent)
        assert status == 0, gw.logs()
        assert took < 5
        assert (tmp_path / "busbar-state.json").is_file()      # the shutdown's final snapshot ran
        assert "Finished server process" in gw.logs()
        assert "Traceback" not in gw.logs()
    finally:
        gw.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_during_the_boot_shuts_down_once_listening(tmp_path: Path, mock, sig: int) -> None:
    gw = BusbarProcess(CONFIG.replace("MOCK", mock.url), tmp_path, env={"BUSBAR_LOG": "info", "T_OPENAI_KEY": "x"})
    try:
        sent = signal_when(gw, b"\n", sig)                  # its first line: the config warning
        status, took = stopped(gw, sent)
        assert status == 0, gw.logs()
        assert took < 5
        lines = [ln.split(": ", 1)[1] for ln in gw.logs().splitlines() if " INFO busbar: " in ln]
        assert lines == ["busbar listening on " + gw.url + " (0 pools, 1 models)",
                         "busbar: a stop signal arrived during start-up; shutting down"]
        assert (tmp_path / "busbar-state.json").is_file()
        assert "Traceback" not in gw.logs()
    finally:
        gw.stop()
