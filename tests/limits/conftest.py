"""Fixtures for the limits tests: a real mock provider and real busbar processes bound to a group.

``gateway_factory(config, mock_url, group)`` starts a gateway with the keys chain and the admin plane
and mints a key bound to ``group`` (``tests.support.groupkey``): requests send ``gw.headers`` /
``gw.token`` and charge through the group (docs/limits.md#testing).
"""
from __future__ import annotations

import pytest

from tests.support.fixtures import _clean_mock, mock, started_by  # noqa: F401
from tests.support.groupkey import GroupKeyProcess

KEYS = {"T_OPENAI_KEY": "sk-test-openai", "T_ANTHROPIC_KEY": "sk-ant-api-test"}


@pytest.fixture(scope="module")
def gateway_factory(tmp_path_factory):
    def build(config_yaml: str, mock_url: str, group: str | None = None, env: dict | None = None) -> GroupKeyProcess:
        return GroupKeyProcess(config_yaml.replace("MOCK", mock_url), tmp_path_factory.mktemp("gw"), group,
                               env={**KEYS, **(env or {})})

    yield from started_by(build)
