"""Fixtures and fixture helpers the process-level test folders share.

Import the fixtures into a folder's ``conftest.py`` (pytest registers what the conftest module
holds): ``from tests.support.fixtures import _clean_mock, mock  # noqa: F401``.

- ``mock`` (session): one real ``busbar-mock-provider`` process (``MockProcess``).
- ``_clean_mock`` (autouse): a test that uses ``mock`` starts with its recordings and scripts cleared.
- :func:`started_by`: the body of a module-scoped factory fixture (``yield from started_by(build)``):
  each call builds a process, starts it and remembers it; every one is stopped at teardown.
- :func:`gateways`: that body for plain ``BusbarProcess`` gateways with a folder's upstream keys.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import pytest
from busbar_mock_provider.process import MockProcess

from tests.support.gateway import BusbarProcess

__all__ = ["_clean_mock", "gateways", "mock", "started_by"]


class _Process(Protocol):
    def start(self) -> Any: ...
    def stop(self) -> None: ...


P = TypeVar("P", bound=_Process)


@pytest.fixture(scope="session")
def mock() -> Iterator[MockProcess]:
    with MockProcess() as m:
        yield m


@pytest.fixture(autouse=True)
def _clean_mock(request: pytest.FixtureRequest) -> Iterator[None]:
    if "mock" in request.fixturenames:
        request.getfixturevalue("mock").clear()
    yield


def started_by(build: Callable[..., P]) -> Iterator[Callable[..., P]]:
    """Yield ``make(*args, **kwargs)``: ``build(*args, **kwargs)``, started (``.start()``, its return
    value is the answer) unless ``start=False`` was passed; after the yield, stop every process made."""
    started: list[P] = []

    def make(*args: Any, **kwargs: Any) -> P:
        proc = build(*args, **kwargs)
        started.append(proc)
        return proc if kwargs.get("start") is False else proc.start()  # type: ignore[no-any-return]

    yield make
    for proc in started:
        proc.stop()


def gateways(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, str]) -> Iterator[Callable[..., BusbarProcess]]:
    """:func:`started_by` for ``make(config_yaml, mock_url, env=None) -> BusbarProcess`` (started):
    ``MOCK`` in the YAML is ``mock_url``, the environment is ``keys`` updated with ``env``."""
    def build(config_yaml: str, mock_url: str, env: dict[str, str] | None = None) -> BusbarProcess:
        return BusbarProcess(config_yaml.replace("MOCK", mock_url), tmp_path_factory.mktemp("gw"),
                             env={**keys, **(env or {})})

    yield from started_by(build)
