"""Admin-plane fixtures: a real ``busbar`` process with its admin listener on a free port.

``admin_gateway(tmp_path, extra_yaml="", token="adm-t0ken")`` -> a started
:class:`AdminGateway` (``.admin`` = ``http://127.0.0.1:<admin port>``, ``.client`` an httpx client
carrying the admin token). The module-scoped ``gw`` fixture is one shared gateway for the tests that
do not need a config of their own.
"""
from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.gateway import BusbarProcess, free_port

TOKEN = "adm-t0ken-5d1e"
PROVIDER_SECRET = "sk-provider-secret-9f3b"
PREFIX = "/api/v1/admin"

BASE = """
listen: "127.0.0.1:{port}"
admin_listen: "127.0.0.1:{admin_port}"
auth:
  admin_auth:
    - admin-tokens: {{ token: {{ env: T_ADMIN_TOKEN }} }}
providers:
  openai: {{ api_key: {{ env: T_PROVIDER_KEY }}, base_url: "http://127.0.0.1:9" }}
models:
  gpt: {{ provider: openai }}
pools:
  fast: {{ members: [ {{ model: gpt }} ] }}
  slow: {{ members: [ {{ model: gpt }} ] }}
"""


class AdminGateway(BusbarProcess):
    """A :class:`BusbarProcess` whose config serves the admin API on ``admin_port``."""

    def __init__(self, tmp_path: Path, extra_yaml: str = "", token: str | None = TOKEN,
                 base: str = BASE, env: dict[str, str] | None = None, args: list[str] | None = None) -> None:
        self.admin_port = free_port()
        text = base.replace("{port}", "{{port}}").format(admin_port=self.admin_port) + extra_yaml
        super().__init__(text.replace("{{port}}", "{port}"), tmp_path,
                         env={"T_PROVIDER_KEY": PROVIDER_SECRET, **({"T_ADMIN_TOKEN": token} if token is not None
                                                                     else {}), **(env or {})},
                         args=args)
        self.admin = f"http://127.0.0.1:{self.admin_port}"
        self.token = token
        self.client = httpx.Client(base_url=self.admin + PREFIX, timeout=30,
                                   headers={"authorization": f"Bearer {token}"} if token else {})

    def start(self, timeout: float = 15.0) -> BusbarProcess:
        """Start, then (with a token, so a listener is expected) wait until the admin port accepts:
        the data listener's /healthz can answer before the admin listener is bound."""
        super().start(timeout)
        deadline = time.monotonic() + timeout
        while self.token is not None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.admin_port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.client.close()
        super().stop()


@pytest.fixture
def admin_gateway(tmp_path: Path) -> Iterator[Callable[..., AdminGateway]]:
    started: list[AdminGateway] = []

    def make(extra_yaml: str = "", **kw: object) -> AdminGateway:
        g = AdminGateway(tmp_path, extra_yaml, **kw)  # type: ignore[arg-type]
        started.append(g)
        return g.start()  # type: ignore[return-value]
    yield make
    for g in started:
        g.stop()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminGateway]:
    g = AdminGateway(tmp_path_factory.mktemp("admin"))
    g.start()
    yield g
    g.stop()
