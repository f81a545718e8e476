"""tools/build-plugins: embeds the release public key and signs first-party plugins, so a
from-source kernel trusts its own first-party plugins with zero configuration.

Source: issue 4 (release key, tools/build-plugins); docs/releasing.md.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest
from busbar.loader import release_key
from busbar_sdk.artifact import generate_signing_key, public_key_from_seed

from tests.plugins.helpers import EXAMPLE, REPO, decide, make_cfg

SCRIPT = REPO / "tools" / "build-plugins"


def first_party_tree(root: Path, version: str = "1.5.0") -> Path:
    project = root / "busbar-hello-hook"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    text = (project / "pyproject.toml").read_text().replace('version = "0.1.0"', f'version = "{version}"')
    text += '\n[tool.busbar-plugin]\nname = "busbar-hello-hook"\nalias = "hello"\nkind = "hook"\n'
    (project / "pyproject.toml").write_text(text)
    (root / "not-a-plugin").mkdir()
    (root / "not-a-plugin" / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1.0.0"\n')
    return root


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BUSBAR_RELEASE")}
    clean.update(env)
    return subprocess.run([sys.executable, str(SCRIPT), "--key-file", str(tmp_path / "key" / "release.key"),
                           "--pubkey-module", str(tmp_path / "_release_pubkey.py"), *args],
                          capture_output=True, text=True, env=clean, check=False)


def embedded(tmp_path: Path) -> str:
    spec = importlib.util.spec_from_file_location("generated_pubkey", tmp_path / "_release_pubkey.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return str(mod.RELEASE_PUBKEY)


def test_from_source_build_trusts_its_own_first_party_plugins(tmp_path, load) -> None:
    root = first_party_tree(tmp_path / "plugins-root")
    dist = tmp_path / "plugins"
    proc = run(tmp_path, "--plugins-root", str(root), "--out", str(dist))
    assert proc.returncode == 0, proc.stderr
    key_file = tmp_path / "key" / "release.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    public = public_key_from_seed(key_file.read_text().strip())
    assert embedded(tmp_path) == public
    assert "not-a-plugin: no [tool.busbar-plugin] table, not a plugin; skipped" in proc.stdout
    assert [p.name for p in dist.iterdir()] == ["busbar-hello-hook-1.5.0.tar.gz"]

    ps = load(make_cfg(None), release_key=bytes.fromhex(public))  # zero trust configuration
    plugin = ps.get("hello")
    assert plugin.verdict == "first-party" and plugin.manifest.publisher == "busbar"
    assert plugin.open({}).call(decide(2)) == {"order": [1, 0]}

    again = run(tmp_path, "--plugins-root", str(root), "--out", str(dist), "--embed-only")
    assert again.returncode == 0 and f"release public key {public}" in again.stdout and "already in" in again.stdout


def test_release_ci_keys(tmp_path) -> None:
    seed, public = generate_signing_key()
    proc = run(tmp_path, "--embed-only", BUSBAR_RELEASE_SIGN_KEY=seed)
    assert proc.returncode == 0 and embedded(tmp_path) == public
    assert not (tmp_path / "key").exists()  # no local key is created when CI provides one

    other = generate_signing_key()[1]
    proc = run(tmp_path, "--embed-only", BUSBAR_RELEASE_SIGN_KEY=seed, BUSBAR_RELEASE_PUBKEY=other)
    assert proc.returncode == 2
    assert "BUSBAR_RELEASE_PUBKEY is not the public half of BUSBAR_RELEASE_SIGN_KEY" in proc.stderr

    proc = run(tmp_path, BUSBAR_RELEASE_PUBKEY=other)
    assert proc.returncode == 2 and "BUSBAR_RELEASE_PUBKEY alone cannot sign plugins" in proc.stderr
    proc = run(tmp_path, "--embed-only", BUSBAR_RELEASE_PUBKEY=other)
    assert proc.returncode == 0 and embedded(tmp_path) == other


def test_a_first_party_plugin_below_the_kernel_version_is_refused_at_build(tmp_path) -> None:
    root = first_party_tree(tmp_path / "plugins-root", version="1.4.0")
    proc = run(tmp_path, "--plugins-root", str(root), "--out", str(tmp_path / "dist"))
    assert proc.returncode == 1
    assert "busbar-hello-hook: version 1.4.0 is below the kernel's 1.5.0" in proc.stderr


@pytest.fixture
def fake_generated(monkeypatch):
    def install(value: object) -> None:
        mod = types.ModuleType(release_key.GENERATED_MODULE)
        mod.RELEASE_PUBKEY = value  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, release_key.GENERATED_MODULE, mod)
        release_key.embedded_release_key.cache_clear()
    yield install
    release_key.embedded_release_key.cache_clear()


def test_the_kernel_reads_the_generated_module(fake_generated, caplog) -> None:
    fake_generated("ab" * 32)
    assert release_key.embedded_release_key() == bytes.fromhex("ab" * 32)
    fake_generated("not hex")
    with caplog.at_level(logging.ERROR, logger="busbar.plugins"):
        assert release_key.embedded_release_key() is None
    assert "is malformed" in caplog.text
