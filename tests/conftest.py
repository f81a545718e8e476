"""Root conftest: make ``tests.support`` importable, and mark tests by how they run.

Markers (registered in the root ``pyproject.toml``; ``--strict-markers`` refuses any other):

- ``e2e``: the test drives real processes over real sockets (``busbar``, ``busbar-mock-provider``,
  sidecars). Applied here to every test under ``tests/e2e``, ``tests/operations``, ``tests/cli``, ``tests/mock_provider``,
  ``tests/plugins``, ``tests/plugins_firstparty`` and ``tests/fleet``; a unit test that starts a
  process marks itself.
- ``slow``: a single test that takes more than ~5 s on a quiet 2-core machine (chaos and soak runs,
  the protocol matrix). ``scripts/test -m "not slow"`` gives a quick loop; CI runs everything.

Every test also has a wall-clock cap (``timeout`` in ``pyproject.toml``, pytest-timeout), so a hang
fails that test with a traceback instead of stalling the run.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_E2E_DIRS = ("e2e", "cli", "mock_provider", "plugins", "plugins_firstparty", "fleet", "ops", "operations", "auth",
             "admin", "router")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Add the ``e2e`` marker to every test collected from a process-level test directory."""
    tests_dir = ROOT / "tests"
    for item in items:
        try:
            top = item.path.relative_to(tests_dir).parts[0]
        except ValueError:
            continue
        if top in _E2E_DIRS:
            item.add_marker(pytest.mark.e2e)
