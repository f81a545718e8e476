"""pytest fixtures for plugin authors (registered through the ``pytest11`` entry point).

* ``busbar_signing_key``: a throwaway ``(seed_hex, public_hex)`` for the session.
* ``busbar_pack``: ``busbar_pack(project_or_wheel, name=..., alias=..., kind=...) -> Path``, signed
  with ``busbar_signing_key``, written under ``tmp_path``.
* ``busbar_load``: ``busbar_load(tarball) -> PluginUnderTest``, unloaded after the test.

Importing this module does no I/O.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from busbar_sdk.testing._harness import PluginUnderTest, load_packed, pack, throwaway_key


@pytest.fixture(scope="session")
def busbar_signing_key() -> tuple[str, str]:
    """A throwaway signing keypair ``(private_seed_hex, public_key_hex)``."""
    return throwaway_key()


@pytest.fixture
def busbar_pack(tmp_path: Path, busbar_signing_key: tuple[str, str]) -> Callable[..., Path]:
    """Pack a project directory or wheel into ``tmp_path``, signed with the throwaway key."""
    def _pack(source: str | Path, **fields: Any) -> Path:
        fields.setdefault("signing_key", busbar_signing_key[0])
        out = tmp_path / f"{fields.get('name', 'plugin')}.tar.gz"
        return pack(source, out=out, **fields)
    return _pack


@pytest.fixture
def busbar_load(tmp_path: Path, busbar_signing_key: tuple[str, str]) -> Iterator[Callable[..., PluginUnderTest]]:
    """Load packed tarballs as the kernel does; every loaded plugin is unloaded afterwards."""
    loaded: list[PluginUnderTest] = []

    def _load(tarball: str | Path, public_key: str | None = busbar_signing_key[1]) -> PluginUnderTest:
        plugin = load_packed(tarball, public_key=public_key, workdir=tmp_path)
        loaded.append(plugin)
        return plugin

    yield _load
    for plugin in loaded:
        plugin.unload()
