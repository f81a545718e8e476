"""Fixtures for the front-door tests: the mock provider, real busbar processes, and an in-process
gateway whose store a test can mint keys into (until the admin API mints them over HTTP)."""
from __future__ import annotations

import pytest

from tests.auth.inproc import InProcessGateway
from tests.support.fixtures import _clean_mock, gateways, mock, started_by  # noqa: F401

PROTOCOLS = ("openai", "anthropic", "gemini", "bedrock", "cohere")
UPSTREAM_KEYS = {"KEY_OPENAI": "sk-o", "KEY_ANTHROPIC": "sk-ant-api-a", "KEY_GEMINI": "g-key",
                 "KEY_BEDROCK": "AKIDEXAMPLE:secretkey", "KEY_COHERE": "co-key"}


def config(chain: str = "[keys]", extra: str = "") -> str:
    """One provider, model and pool per protocol, all at the mock (``MOCK``), and ``auth.chain``."""
    out = ['listen: "127.0.0.1:{port}"\n', f"auth:\n  chain: {chain}\n", "providers:\n"]
    out += [f"  up-{p}: {{ protocol: {p}, base_url: MOCK, api_key: {{ env: KEY_{p.upper()} }} }}\n"
            for p in PROTOCOLS]
    out += ["models:\n"] + [f"  m-{p}: {{ provider: up-{p}, default_max_tokens: 64 }}\n" for p in PROTOCOLS]
    out += ["pools:\n"] + [f"  to-{p}: {{ members: [ {{ model: m-{p} }} ] }}\n" for p in PROTOCOLS]
    return "".join(out) + extra


@pytest.fixture(scope="module")
def busbar_factory(tmp_path_factory):
    yield from gateways(tmp_path_factory, UPSTREAM_KEYS)


@pytest.fixture(scope="module")
def inproc_factory(tmp_path_factory):
    def build(config_yaml: str, mock_url: str) -> InProcessGateway:
        return InProcessGateway(config_yaml.replace("MOCK", mock_url), tmp_path_factory.mktemp("inproc"),
                                UPSTREAM_KEYS)

    yield from started_by(build)
