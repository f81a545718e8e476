"""Shared fixtures for end-to-end tests: a real mock-provider process and real busbar processes."""
from __future__ import annotations

import pytest

from tests.support.fixtures import _clean_mock, gateways, mock  # noqa: F401

KEYS = {"T_OPENAI_KEY": "sk-test-openai", "T_ANTHROPIC_KEY": "sk-ant-api-test"}


@pytest.fixture(scope="module")
def gateway_factory(tmp_path_factory):
    yield from gateways(tmp_path_factory, KEYS)
