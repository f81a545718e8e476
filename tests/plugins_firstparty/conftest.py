"""Fixtures for the first-party hook plugins and the hook examples.

Every plugin under test is a real signed tarball loaded the way the kernel loads it
(``busbar_sdk.testing.load_packed``: structure, signature, requires_dist, private extraction,
import through the plugin importer, ABI binding and kind cross-check). The four wheels are built
once per session (one offline PEP 517 subprocess) and packed once; each test module loads the
tarballs it needs and unloads them when it is done, so no plugin module outlives its module.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from busbar_sdk.artifact import build_wheels
from busbar_sdk.testing import PluginUnderTest, load_packed, pack

from tests.plugins_firstparty.support import PROJECTS


@pytest.fixture(scope="session")
def fp_wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """key -> built wheel for every project of ``support.PROJECTS``."""
    out = tmp_path_factory.mktemp("fp-wheels")
    built = build_wheels([spec["project"] for spec in PROJECTS.values()], out)
    return dict(zip(PROJECTS, built))


@pytest.fixture(scope="session")
def fp_tarball(fp_wheels: dict[str, Path], busbar_signing_key: tuple[str, str],
               tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``fp_tarball(key)``: the session's signed tarball for a project (packed once, on first use)."""
    out = tmp_path_factory.mktemp("fp-tarballs")
    cache: dict[str, Path] = {}

    def _tarball(key: str) -> Path:
        if key not in cache:
            spec = PROJECTS[key]
            schema = (spec["project"] / spec["schema"]).read_text() if "schema" in spec else None
            cache[key] = pack(fp_wheels[key], out=out / f"{spec['name']}-{spec['version']}.tar.gz",
                              name=spec["name"], alias=spec["alias"], kind="hook", version=spec["version"],
                              publisher=spec["publisher"], signing_key=busbar_signing_key[0],
                              needs_prompt=spec["needs_prompt"], needs_user=spec["needs_user"],
                              settings_schema=schema)
        return cache[key]
    return _tarball


@pytest.fixture(scope="module")
def load_plugin(tmp_path_factory: pytest.TempPathFactory, fp_tarball: Callable[[str], Path],
                busbar_signing_key: tuple[str, str]) -> Iterator[Callable[[str], PluginUnderTest]]:
    """``load_plugin("webrequest" | "headroom" | "smart-router" | "pii-guard")``: the signed tarball
    (manifest fields as the release build writes them) loaded as the kernel does, once per test
    module (each test opens its own instances); unloaded when the module is done."""
    loaded: dict[str, PluginUnderTest] = {}
    workdir = tmp_path_factory.mktemp("fp-load")

    def _load(key: str) -> PluginUnderTest:
        if key not in loaded:
            loaded[key] = load_packed(fp_tarball(key), public_key=busbar_signing_key[1], workdir=workdir / key)
        return loaded[key]

    yield _load
    for plugin in loaded.values():
        plugin.unload()


def plugin_module(name: str) -> ModuleType:
    """A module of a currently loaded plugin (for white-box tests: the resolver seam, the policy)."""
    module = sys.modules.get(name)
    assert module is not None and getattr(module, "__busbar_plugin__", False), f"{name} is not a loaded plugin module"
    return module
