"""Fixtures for the plugin-system tests: real wheels, real tarballs, a scratch plugins dir.

Wheels are built once per session, offline, by calling each project's PEP 517 backend without
isolation (``busbar_sdk.artifact.build_wheels``, what ``busbar-plugin-pack pack --wheel <dir>``
uses) over the example project and the throwaway projects of ``helpers.PROJECTS``; tarballs are made by
``busbar-plugin-pack`` (its ``main``) from those wheels. Every plugin set a test builds is
unloaded afterwards so modules never leak between tests.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from busbar.config.schema_plugins import PluginsConfig
from busbar.loader import PluginSet, load_plugins, unload
from busbar.loader.unpack import Staging
from busbar_sdk.artifact import build_wheels, generate_signing_key

from tests.plugins.helpers import EXAMPLE, PROJECTS, run_pack, write_project


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """key -> built wheel, for the example ("hello") and every throwaway project of PROJECTS."""
    root = tmp_path_factory.mktemp("wheel-projects")
    sources = {"hello": EXAMPLE}
    for key, (dist, version, module, source, deps) in PROJECTS.items():
        sources[key] = write_project(root / key, dist, version, module, source, deps)
    built = build_wheels(list(sources.values()), root / "wheels")
    return dict(zip(sources, built))


@pytest.fixture(scope="session")
def keys() -> dict[str, tuple[str, str]]:
    """Named throwaway keypairs ``(seed_hex, public_hex)``: acme, other, release."""
    return {name: generate_signing_key() for name in ("acme", "other", "release")}


@pytest.fixture
def pack(wheels: dict[str, Path], keys: dict[str, tuple[str, str]]) -> Callable[..., Path]:
    """``pack(out, wheel="hello", name=..., alias=..., kind="hook", version=..., publisher="acme",
    key="acme" | None, extra=[...])``: a real tarball made by busbar-plugin-pack."""
    def _pack(out: Path, *, wheel: str = "hello", name: str = "hello-order", alias: str = "hello",
              kind: str = "hook", version: str = "1.0.0", publisher: str = "acme", key: str | None = "acme",
              extra: list[str] | None = None) -> Path:
        args = ["pack", "--wheel", str(wheels[wheel]), "--name", name, "--alias", alias, "--kind", kind,
                "--version", version, "--publisher", publisher, "--out", str(out), *(extra or [])]
        if key is None:
            args.append("--allow-unsigned")
        status = run_pack(args, keys[key][0] if key else None)
        assert status == 0, f"busbar-plugin-pack {' '.join(args)} exited {status}"
        return out
    return _pack


@pytest.fixture
def plugdir(tmp_path: Path) -> Path:
    """``<tmp>/plugins``: the plugins.dir of the tests (base_dir is ``tmp_path``)."""
    d = tmp_path / "plugins"
    d.mkdir()
    return d


@pytest.fixture
def staging(tmp_path: Path) -> Staging:
    return Staging(tmp_path / "staging")


@pytest.fixture
def load(tmp_path: Path, staging: Staging, keys: dict[str, tuple[str, str]]) -> Iterator[Callable[..., PluginSet]]:
    """``load(cfg, **kw)``: ``load_plugins`` with base_dir=tmp_path, the test release key and a
    scratch staging dir; every set is unloaded after the test."""
    built: list[PluginSet] = []

    def _load(cfg: PluginsConfig, **kw: Any) -> PluginSet:
        kw.setdefault("release_key", bytes.fromhex(keys["release"][1]))
        kw.setdefault("staging", staging)
        ps = load_plugins(cfg, base_dir=tmp_path, **kw)
        built.append(ps)
        return ps

    yield _load
    for ps in built:
        unload(ps)
