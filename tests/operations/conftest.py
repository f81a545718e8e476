"""Fixtures for the non-chat operations: one mock provider and real busbar processes per module."""
from __future__ import annotations

import pytest
from busbar_mock_provider.process import MockProcess

from tests.support.gateway import BusbarProcess

KEYS = {"T_OPENAI_KEY": "sk-test-openai", "T_COHERE_KEY": "co-test-key", "T_GEMINI_KEY": "g-test-key",
        "T_AWS_CREDS": "AKIDEXAMPLE:secretkey", "T_ANTHROPIC_KEY": "sk-ant-api-test"}


@pytest.fixture(scope="session")
def mock():
    with MockProcess() as m:
        yield m


@pytest.fixture(autouse=True)
def _clean_mock(request):
    if "mock" in request.fixturenames:
        request.getfixturevalue("mock").clear()
    yield


@pytest.fixture(scope="module")
def gateway_factory(tmp_path_factory):
    started = []

    def make(config_yaml: str, mock_url: str, env: dict | None = None) -> BusbarProcess:
        gw = BusbarProcess(config_yaml.replace("MOCK", mock_url), tmp_path_factory.mktemp("gw"),
                           env={**KEYS, **(env or {})})
        started.append(gw)
        return gw.start()

    yield make
    for gw in started:
        gw.stop()
