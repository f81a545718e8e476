"""``plugins.min_versions`` keys: a floor keyed by a plugin's alias applies exactly as one keyed by
its manifest name (the higher floor when both are keyed), and a key naming no plugin in plugins.dir
is a config warning naming ``plugins.min_versions.<key>`` and what is installed.

The first-party cases are real ``busbar`` processes (``--validate`` and the boot, the same binary)
against the signed tarballs in dist/plugins (``scripts/setup``), with the log on: both must print the
same lines, the SKIPPED log line included.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
from busbar.loader.catalog import ManifestCatalog
from busbar.loader.registry import Record
from busbar.loader.verify import config_floors
from busbar_sdk.artifact import Manifest

from tests.plugins.helpers import make_cfg
from tests.plugins.test_validate_equals_boot import BUSBAR, SUMMARY, _config, both

REPO = Path(__file__).resolve().parents[2]
DIST = REPO / "dist" / "plugins"
WEBREQUEST = "busbar-webrequest-hook-1.5.0.tar.gz"
OIDC = "busbar-auth-oidc-1.5.0.tar.gz"
_STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ")
WEBREQUEST_HOOK = ("pools:\n  p:\n    members: [ { model: m } ]\n    hooks:\n"
                   "      - { module: busbar-webrequest, settings: { url: \"http://127.0.0.1:8731/rank\" } }\n")


def _manifest(name: str = "acme-x", alias: str = "x") -> Manifest:
    with tarfile.open(DIST / WEBREQUEST) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        real = Manifest.model_validate(json.loads(member.read()))
    return real.model_copy(update={"name": name, "alias": alias})


# --- the rule (pure) ----------------------------------------------------------------------------

@pytest.mark.parametrize(("floors", "expected"), [
    ({}, []),
    ({"acme-x": "2.0.0"}, [("2.0.0", "plugins.min_versions.acme-x")]),
    ({"x": "2.0.0"}, [("2.0.0", "plugins.min_versions.x")]),
    ({"acme-x": "2.0.0", "x": "3.0.0"}, [("3.0.0", "plugins.min_versions.x")]),
    ({"acme-x": "3.0.0", "x": "2.0.0"}, [("3.0.0", "plugins.min_versions.acme-x")]),
    ({"acme-x": "2.0.0", "x": "2.0.0"}, [("2.0.0", "plugins.min_versions.acme-x")]),
    ({"acme-y": "2.0.0", "y": "2.0.0"}, []),
], ids=["none", "name", "alias", "alias-higher", "name-higher", "tie-cites-name", "other-plugin"])
def test_config_floors_by_name_or_alias(floors: dict[str, str], expected: list[tuple[str, str]]) -> None:
    assert config_floors(_manifest(), floors) == expected


def test_catalog_lists_every_parsed_manifest_loadable_or_not() -> None:
    records = [Record("plugins/b.tar.gz", _manifest("acme-b", "b"), "trusted", "SKIPPED", "below"),
               Record("plugins/a.tar.gz", _manifest("acme-a", "acme-a"), "trusted", "ready", ""),
               Record("plugins/junk.tar.gz", None, "-", "INVALID", "truncated")]
    assert ManifestCatalog(records).installed() == {"acme-a": "acme-a", "acme-b": "b"}


# --- the loader (in process) --------------------------------------------------------------------

def _skip_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "SKIPPED" in r.getMessage()]


@pytest.mark.parametrize(("floors", "key", "floor"), [
    ({"hello": "2.0.0"}, "hello", "2.0.0"),
    ({"hello-order": "2.0.0"}, "hello-order", "2.0.0"),
    ({"hello-order": "2.0.0", "hello": "3.0.0"}, "hello", "3.0.0"),
    ({"hello-order": "3.0.0", "hello": "1.0.0"}, "hello-order", "3.0.0"),
], ids=["alias", "name", "both-alias-higher", "both-name-higher"])
def test_a_floor_by_alias_or_name_skips_the_plugin(pack, plugdir, keys, load, caplog, floors, key, floor) -> None:
    pack(plugdir / "p.tar.gz")
    ps = load(make_cfg(keys, min_versions=floors))
    assert ps.get("hello") is None and ps.get("hello-order") is None
    assert _skip_lines(caplog) == [f"plugins/p.tar.gz: SKIPPED: version 1.0.0 is below the floor {floor} "
                                   f"(plugins.min_versions.{key}); install {floor} or newer"]


def test_a_lower_alias_floor_does_not_lift_the_name_floor(pack, plugdir, keys, load) -> None:
    pack(plugdir / "p.tar.gz")
    assert load(make_cfg(keys, min_versions={"hello": "1.0.0"})).get("hello") is not None
    assert load(make_cfg(keys, min_versions={"hello": "0.1.0", "hello-order": "1.0.1"})).get("hello") is None


def test_an_alias_floor_needs_a_trusted_signature(pack, plugdir, keys, load, caplog) -> None:
    pack(plugdir / "p.tar.gz", key=None)
    load(make_cfg(keys, min_versions={"hello": "0.1.0"}, trust={"allow_unsigned": True}))
    assert _skip_lines(caplog) == [
        "plugins/p.tar.gz: SKIPPED: 'hello-order' has a version floor 0.1.0 (plugins.min_versions.hello) that only "
        "a trusted signature can prove, and it is unsigned; opt-ins never bypass a floor"]


# --- real processes: --validate and the boot ----------------------------------------------------

def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BUSBAR, *args], capture_output=True, text=True, cwd=cwd, timeout=60,
                          env={**os.environ, "K": "sk-test", "BUSBAR_LOG": "warning"})


def _lines(r: subprocess.CompletedProcess[str]) -> list[str]:
    """stderr with the log timestamps cut (the levels, logger names and messages kept)."""
    return [_STAMP.sub("", line) for line in r.stderr.splitlines() if line]


def _both_with_logs(cfg: Path) -> list[str]:
    """Both refuse with the same lines, the plugin log lines included (the boot also logs the config
    warnings before it loads plugins, where a refusing --validate prints none: those are left out)."""
    v, b = _run(["--validate", "--config", str(cfg)], cfg.parent), _run(["--config", str(cfg)], cfg.parent)
    assert (v.returncode, b.returncode) == (2, 2), (v.stderr, b.stderr)
    boot = [line for line in _lines(b) if not line.startswith("WARNING busbar.config: ")]
    assert _lines(v) == boot
    return boot


def _first_party(plugdir: Path, *names: str) -> None:
    for name in names:
        shutil.copy(DIST / name, plugdir / name)


@pytest.mark.parametrize("key", ["busbar-webrequest", "busbar-webrequest-hook"], ids=["alias", "name"])
def test_webrequest_floor_skips_it_and_the_hook_is_a_missing_plugin(tmp_path, plugdir, keys, key) -> None:
    _first_party(plugdir, WEBREQUEST)
    cfg = _config(tmp_path, keys, WEBREQUEST_HOOK, trust=f"  min_versions: {{ {key}: 9.0.0 }}\n")
    reason = (f"version 1.5.0 is below the floor 9.0.0 (plugins.min_versions.{key}); install 9.0.0 or newer")
    assert _both_with_logs(cfg) == [
        f"WARNING busbar.plugins: plugins/{WEBREQUEST}: SKIPPED: {reason}",
        f"config.yaml: pools.p.hooks[0].module: 'busbar-webrequest' will not load: plugins/{WEBREQUEST} is "
        f"SKIPPED: {reason}",
        SUMMARY.format(n=1)]
    listing = subprocess.run([BUSBAR, "--list-plugins", "--config", str(cfg)], capture_output=True, text=True,
                             cwd=tmp_path, timeout=60, env={**os.environ, "K": "sk-test", "BUSBAR_LOG": "error"})
    row = next(line for line in listing.stdout.splitlines() if line.startswith(f"plugins/{WEBREQUEST}"))
    assert row.split(None, 6)[6] == f"first-party (below floor)  SKIPPED: {reason}"


def test_oidc_alias_floor_skips_it_and_the_chain_module_is_a_missing_plugin(tmp_path, plugdir, keys) -> None:
    _first_party(plugdir, OIDC)
    cfg = _config(tmp_path, keys, "auth:\n  chain: [ oidc ]\n", trust="  min_versions: { oidc: 2.0.0 }\n")
    reason = "version 1.5.0 is below the floor 2.0.0 (plugins.min_versions.oidc); install 2.0.0 or newer"
    assert both(cfg) == [f"config.yaml: auth.chain[0]: 'oidc' will not load: plugins/{OIDC} is SKIPPED: {reason}",
                         SUMMARY.format(n=1)]


OPEN_DOOR = "config.yaml: auth.chain: [] is an open front door: no client authentication (development only)"
UNKNOWN = ("config.yaml: plugins.min_versions.busbar-webreqest: names no plugin in plugins.dir (plugins): no "
           "manifest name or alias is 'busbar-webreqest' (installed: busbar-webrequest-hook (alias "
           "busbar-webrequest), hello-order (alias hello)); the floor applies once such a plugin is installed, "
           "fix the key if it is a typo")


def test_a_floor_key_naming_no_plugin_warns_in_validate_and_boot(tmp_path, plugdir, pack, keys) -> None:
    _first_party(plugdir, WEBREQUEST)
    pack(plugdir / "p.tar.gz")
    body = WEBREQUEST_HOOK.replace("hooks:\n", "hooks:\n      - { module: hello }\n")
    cfg = _config(tmp_path, keys, body, trust="  min_versions: { busbar-webreqest: 9.0.0, hello: 1.0.0 }\n")
    v = _run(["--validate", "--config", str(cfg)], tmp_path)
    assert (v.returncode, v.stdout, _lines(v)) == (0, f"busbar: {cfg} is valid (2 warning(s))\n",
                                                   [f"warning: {OPEN_DOOR}", f"warning: {UNKNOWN}"])
    log = tmp_path / "boot.log"
    with log.open("wb") as out:
        boot = subprocess.Popen([BUSBAR, "--config", str(cfg)], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "K": "sk-test", "BUSBAR_LOG": "warning"})
        try:
            deadline = time.time() + 30
            while "plugins.min_versions" not in log.read_text() and boot.poll() is None and time.time() < deadline:
                time.sleep(0.05)
            assert boot.poll() is None, log.read_text()    # the boot goes on: a warning, not an error
        finally:
            boot.terminate()
            boot.wait(10)
    warned = [_STAMP.sub("", line) for line in log.read_text().splitlines() if "busbar.config:" in line]
    assert warned == [f"WARNING busbar.config: {OPEN_DOOR}", f"WARNING busbar.config: {UNKNOWN}"]


def test_a_floor_key_naming_an_installed_plugin_is_no_warning(tmp_path, plugdir, keys) -> None:
    """A floor its plugin meets, keyed by name or by alias: valid, no warning (a 1.5.0 config boots
    unchanged)."""
    _first_party(plugdir, WEBREQUEST)
    cfg = _config(tmp_path, keys, WEBREQUEST_HOOK,
                  trust="  min_versions: { busbar-webrequest: 1.5.0, busbar-webrequest-hook: 1.0.0 }\n")
    v = _run(["--validate", "--config", str(cfg)], tmp_path)
    assert (v.returncode, v.stdout, _lines(v)) == (0, f"busbar: {cfg} is valid (1 warning(s))\n",
                                                   [f"warning: {OPEN_DOOR}"])
