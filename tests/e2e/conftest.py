"""Shared fixtures for end-to-end tests: a real mock-provider process and real busbar processes."""
from __future__ import annotations

import pytest
from busbar_mock_provider.process import MockProcess

from tests.support.gateway import BusbarProcess

KEYS = {"T_OPENAI_KEY": "sk-test-openai", "T_ANTHROPIC_KEY": "sk-ant-api-test"}


@pytest.fixture(scope="session")
def mock():
    with MockProcess() as m:
        yield m


@pytest.fixture(autouse=True)
def _clean_mock(request):
    if "mock" in request.fixturenames:
        m = request.getfixturevalue("mock")
        m.clear()
    yield


@pytest.fixture(scope="module")
def gateway_factory(tmp_path_factory):
    started = []

    def make(config_yaml: str, mock_url: str, env: dict | None = None) -> BusbarProcess:
        text = config_yaml.replace("MOCK", mock_url)
        gw = BusbarProcess(text, tmp_path_factory.mktemp("gw"), env={**KEYS, **(env or {})})
        started.append(gw)
        return gw.start()

    yield make
    for gw in started:
        gw.stop()
