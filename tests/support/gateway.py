"""Run a real ``busbar`` process for tests: a config written to disk, a free port, /healthz polled.

``BusbarProcess(config_yaml: str, tmp_path, env=None).start()`` -> ``.url`` (http://127.0.0.1:PORT);
``{port}`` in the YAML text is replaced by the chosen port; ``args`` are extra command-line arguments
(e.g. ``["--workers", "2"]``); ``.launch()`` only starts the process (no /healthz wait);
``.stop()`` ends the process group.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BusbarProcess:
    def __init__(self, config_yaml: str, tmp_path: Path, env: dict | None = None, providers: str | None = None,
                 args: list[str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = tmp_path / f"config-{self.port}.yaml"
        self.config_path.write_text(config_yaml.replace("{port}", str(self.port)))
        self.providers = providers
        self.args = list(args or [])
        self.env = {**os.environ, "BUSBAR_LOG": "warn", **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.log_path = tmp_path / f"busbar-{self.port}.log"

    def launch(self) -> subprocess.Popen:
        """Start the process without waiting for it to serve; its output goes to ``log_path``."""
        cmd = [str(BIN / "busbar"), "--config", str(self.config_path)]
        if self.providers:
            cmd += ["--providers", self.providers]
        cmd += self.args
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - the child writes it until stop()
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        return self.proc

    def start(self, timeout: float = 15.0) -> BusbarProcess:
        self.launch()
        assert self.proc is not None
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"busbar exited {self.proc.returncode}: {self.log_path.read_text()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=0.5).status_code in (200, 503):
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"busbar did not start: {self.log_path.read_text()}")

    def logs(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        if getattr(self, "_log", None):
            self._log.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
