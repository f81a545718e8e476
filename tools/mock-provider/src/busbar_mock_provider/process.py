"""Run the mock as a real subprocess from tests, and drive its control API.

Example::

    from busbar_mock_provider.process import MockProcess

    with MockProcess() as mock:                       # starts on a free port, waits for /healthz
        mock.script([{"match": {"protocol": "openai"}, "response": {"status": 429}}])
        client = openai.OpenAI(base_url=mock.url + "/v1", api_key="sk-test", max_retries=0)
        ...
        assert mock.requests()[0]["headers"]["authorization"] == "Bearer sk-test"

The child runs ``python -m busbar_mock_provider --port 0`` in its own session; the URL is
read from its ready line, so there is no free-port race. :meth:`MockProcess.stop` sends SIGTERM to
that one process and SIGKILL after a timeout. Its stderr goes to a temporary file whose tail is put
into :class:`MockStartError` when start-up fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

__all__ = ["MockProcess", "MockStartError"]

_READY_PREFIX = "busbar-mock-provider listening on "


class MockStartError(RuntimeError):
    """The mock did not come up (exited, or no ready line / healthy /healthz in time).

    The message ends with the child's stderr.
    """


class MockProcess:
    """A ``busbar-mock-provider`` subprocess plus small control-API client helpers.

    Args:
        host: listen address (loopback).
        port: listen port; 0 (default) picks a free one.
        script: a ``{"rules": [...]}`` file to preload (``--script``).
        fixtures: captures directory (``--fixtures``); default: the CLI's default.
        no_auth: pass ``--no-auth``.
        extra_args: more CLI arguments, e.g. ``["--chunk-delay-ms", "5"]``.
        env: extra environment variables for the child.
        startup_timeout_s: how long :meth:`start` waits for the ready line and /healthz.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        script: str | Path | None = None,
        fixtures: str | Path | None = None,
        no_auth: bool = False,
        extra_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        startup_timeout_s: float = 20.0,
    ) -> None:
        self.host, self.port = host, port
        self.args: list[str] = ["--host", host, "--port", str(port)]
        if script is not None:
            self.args += ["--script", str(script)]
        if fixtures is not None:
            self.args += ["--fixtures", str(fixtures)]
        if no_auth:
            self.args.append("--no-auth")
        self.args += list(extra_args)
        self.env = env
        self.startup_timeout_s = startup_timeout_s
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None
        self._stderr: IO[bytes] | None = None
        self._client: httpx.Client | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")[-4000:]

    def _read_ready_line(self, proc: subprocess.Popen[str]) -> str | None:
        found: list[str] = []

        def reader() -> None:
            if proc.stdout is None:
                return
            for line in proc.stdout:
                if line.startswith(_READY_PREFIX) and not found:
                    found.append(line[len(_READY_PREFIX) :].strip())
            # keep draining until EOF so the child never blocks on a full pipe

        threading.Thread(target=reader, name="mock-provider-stdout", daemon=True).start()
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline and not found and proc.poll() is None:
            time.sleep(0.01)
        return found[0] if found else None

    def start(self) -> MockProcess:
        """Start the child, wait for its ready line and a 200 from ``/healthz``; return self.

        Raises:
            MockStartError: the child exited or did not become healthy within ``startup_timeout_s``.
        """
        if self.proc is not None:
            return self
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 -- kept open for the child; closed in __exit__
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})}
        cmd = [sys.executable, "-m", "busbar_mock_provider", *self.args]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env, start_new_session=True
        )
        url = self._read_ready_line(self.proc)
        if url is None:
            self.stop()
            raise MockStartError(f"mock provider did not start: {' '.join(cmd)}\n{self._stderr_tail()}")
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])
        self._client = httpx.Client(base_url=url, timeout=10.0)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            try:
                if self._client.get("/healthz").status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        self.stop()
        raise MockStartError(f"mock provider at {url} never answered /healthz\n{self._stderr_tail()}")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the child (SIGTERM, then SIGKILL after ``timeout_s``); safe to call twice."""
        if self._client is not None:
            self._client.close()
            self._client = None
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout_s)
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()

    @property
    def stderr(self) -> str:
        """What the child wrote to stderr so far (last 4000 characters)."""
        return self._stderr_tail()

    def __enter__(self) -> MockProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # -- control API -------------------------------------------------------------------------
    @property
    def client(self) -> httpx.Client:
        """An httpx client on the mock's base URL (valid between start and stop)."""
        if self._client is None:
            raise RuntimeError("MockProcess is not started")
        return self._client

    def script(self, rules: list[dict[str, Any]]) -> dict[str, Any]:
        """Append script rules (``POST /_mock/script``); return ``{"added", "pending"}``.

        Raises:
            httpx.HTTPStatusError: the script is invalid (400; the body lists the faults).
        """
        resp = self.client.post("/_mock/script", json={"rules": rules})
        resp.raise_for_status()
        result: dict[str, Any] = resp.json()
        return result

    def pending_rules(self) -> list[dict[str, Any]]:
        """The rules not yet used up (``GET /_mock/script``)."""
        rules: list[dict[str, Any]] = self.client.get("/_mock/script").raise_for_status().json()["rules"]
        return rules

    def requests(self) -> list[dict[str, Any]]:
        """The request log (``GET /_mock/requests``): ``[{ts, method, path, query, headers, body}]``."""
        log: list[dict[str, Any]] = self.client.get("/_mock/requests").raise_for_status().json()
        return log

    def events(self) -> list[dict[str, Any]]:
        """The event log (``GET /_mock/events``), e.g. ``{"type": "client_disconnected", ...}``."""
        log: list[dict[str, Any]] = self.client.get("/_mock/events").raise_for_status().json()
        return log

    def wait_for_events(self, count: int = 1, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """Poll :meth:`events` until at least ``count`` exist or the timeout passes; return them."""
        deadline = time.monotonic() + timeout_s
        events = self.events()
        while len(events) < count and time.monotonic() < deadline:
            time.sleep(0.02)
            events = self.events()
        return events

    def clear(self) -> None:
        """Drop rules, requests and events (``POST /_mock/reset``)."""
        self.client.post("/_mock/reset").raise_for_status()
