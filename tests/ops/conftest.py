"""Fixtures for the operations tests: the mock provider, busbar processes over HTTP or HTTPS, and a
test CA (``tests.support.certs``) with a server and a client certificate made at test time."""
from __future__ import annotations

import ssl
import time
from pathlib import Path

import httpx
import pytest

from tests.support.certs import CA, Leaf, make_ca
from tests.support.fixtures import _clean_mock, mock, started_by  # noqa: F401
from tests.support.gateway import BusbarProcess
from tests.support.otlp import receiver  # noqa: F401

KEYS = {"T_OPENAI_KEY": "sk-test-openai", "T_ANTHROPIC_KEY": "sk-ant-api-test"}


class Pki:
    """A CA, a server leaf for 127.0.0.1/localhost and a client leaf, all on disk."""

    def __init__(self, directory: Path):
        self.ca: CA = make_ca(directory)
        self.server: Leaf = self.ca.issue(directory, "server")
        self.client: Leaf = self.ca.issue(directory, "client", hosts=("client.test",), client=True)

    def client_context(self, *, with_cert: bool) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca.cert_path))
        if with_cert:
            ctx.load_cert_chain(self.client.cert_path, self.client.key_path)
        return ctx


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


class Gateway(BusbarProcess):
    """``BusbarProcess`` that may serve HTTPS: ``verify`` is the client context its readiness poll uses."""

    def __init__(self, config_yaml: str, tmp_path: Path, env: dict | None = None,
                 verify: ssl.SSLContext | None = None):
        super().__init__(config_yaml, tmp_path, env=env)
        self.verify = verify
        if verify is not None:
            self.url = self.url.replace("http://", "https://")

    def start(self, timeout: float = 15.0) -> Gateway:
        if self.verify is None:
            super().start(timeout)
            return self
        import subprocess

        from tests.support.gateway import BIN

        self._log = open(self.log_path, "wb")  # noqa: SIM115 - the child writes it until stop()
        self.proc = subprocess.Popen([str(BIN / "busbar"), "--config", str(self.config_path)], env=self.env,
                                     stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"busbar exited {self.proc.returncode}: {self.log_path.read_text()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=0.5, verify=self.verify).status_code in (200, 503):
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"busbar did not start: {self.log_path.read_text()}")


@pytest.fixture(scope="module")
def gateway_factory(tmp_path_factory):
    def build(config_yaml: str, mock_url: str, env: dict | None = None, verify: ssl.SSLContext | None = None,
              start: bool = True) -> Gateway:
        """``start=False``: made, not started (``started_by`` reads the keyword)."""
        return Gateway(config_yaml.replace("MOCK", mock_url), tmp_path_factory.mktemp("gw"),
                       env={**KEYS, **(env or {})}, verify=verify)

    yield from started_by(build)
