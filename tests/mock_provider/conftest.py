"""Shared fixtures: one real mock-provider process per session, reset before every test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from busbar_mock_provider.fixtures import default_fixtures_dir
from busbar_mock_provider.process import MockProcess

FIXTURES: Path = default_fixtures_dir()


@pytest.fixture(scope="session")
def mock() -> Iterator[MockProcess]:
    """The mock provider subprocess (auth required), shared by the session."""
    with MockProcess() as proc:
        yield proc


@pytest.fixture(autouse=True)
def _reset(request: pytest.FixtureRequest) -> None:
    """Clear rules, requests and events before each test that uses the shared mock."""
    if "mock" in request.fixturenames:
        request.getfixturevalue("mock").clear()


@pytest.fixture
def oai(mock: MockProcess) -> Iterator[openai.OpenAI]:
    """openai SDK client pointed straight at the mock (no retries)."""
    with openai.OpenAI(
        base_url=mock.url + "/v1", api_key="sk-test-openai", max_retries=0, timeout=10
    ) as client:
        yield client


@pytest.fixture
def ant(mock: MockProcess) -> Iterator[anthropic.Anthropic]:
    """anthropic SDK client pointed straight at the mock (no retries)."""
    with anthropic.Anthropic(base_url=mock.url, api_key="sk-ant-test", max_retries=0, timeout=10) as client:
        yield client


def fixture_bytes(rel: str) -> bytes:
    """Raw bytes of a shared capture."""
    return (FIXTURES / rel).read_bytes()


WEATHER_SCHEMA: Any = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "The city and state"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"},
        "verbose": {"type": "boolean"},
    },
    "required": ["location", "unit", "days"],
}
WEATHER_ARGS: Any = {"location": "test", "unit": "celsius", "days": 1}
