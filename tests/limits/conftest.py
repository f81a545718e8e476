"""Fixtures for the limits tests: a real mock provider and real busbar processes bound to a group.

Until keys exist end to end, a gateway is started with ``BUSBAR_TEST_OPEN_GROUP`` naming the group
every request without an identity charges through (docs/limits.md#testing).
"""
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
        request.getfixturevalue("mock").clear()
    yield


@pytest.fixture(scope="module")
def gateway_factory(tmp_path_factory):
    started = []

    def make(config_yaml: str, mock_url: str, group: str | None = None, env: dict | None = None) -> BusbarProcess:
        env = {**KEYS, **({"BUSBAR_TEST_OPEN_GROUP": group} if group else {}), **(env or {})}
        gw = BusbarProcess(config_yaml.replace("MOCK", mock_url), tmp_path_factory.mktemp("gw"), env=env)
        started.append(gw)
        return gw.start()

    yield make
    for gw in started:
        gw.stop()
