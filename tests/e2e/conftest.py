"""Shared fixtures for end-to-end tests: a real mock-provider process and real busbar processes."""
from __future__ import annotations

import pytest

from tests.support.fixtures import _clean_mock, mock, started_by  # noqa: F401
from tests.support.gateway import BusbarProcess

KEYS = {"T_OPENAI_KEY": "sk-test-openai", "T_ANTHROPIC_KEY": "sk-ant-api-test"}


@pytest.fixture(scope="module")
def gateway_factory(tmp_path_factory):
    def build(config_yaml: str, mock_url: str, env: dict | None = None) -> BusbarProcess:
        return BusbarProcess(config_yaml.replace("MOCK", mock_url), tmp_path_factory.mktemp("gw"),
                             env={**KEYS, **(env or {})})

    yield from started_by(build)
