"""Issue 11 item 16: ``busbar --validate`` says exactly what the boot says.

One corpus of bad configs; each runs through ``busbar --validate --config X`` and the real boot
``busbar --config X`` (the same binary, real processes) and both must exit 2 with the same lines on
stderr (log lines aside), and those lines are pinned. A kind mismatch is refused from the manifest
before any plugin code is imported: the plugin's module writes a marker file when imported, and no
marker appears.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.gateway import free_port

BUSBAR = str(Path(sys.executable).parent / "busbar")
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ")
SUMMARY = "busbar: {n} config error(s); refusing to start"
EGRESS_FAULT = ("config.yaml: pools.p.hooks[0].settings.url: 169.254.169.254 is a cloud-metadata endpoint; refused "
                "by the SSRF guard (list it in allow_metadata_hosts only if this is deliberate)")


def _config(tmp_path: Path, keys, body: str, *, trust: str = "") -> Path:
    acme = keys["acme"][1]
    text = f"""\
listen: "127.0.0.1:{free_port()}"
providers:
  up: {{ protocol: openai, base_url: "http://127.0.0.1:9", api_key: {{ env: K }} }}
models:
  m: {{ provider: up }}
plugins:
  enabled: true
  dir: plugins
  trust:
    publishers: [ {{ name: acme, public_key: "{acme}" }} ]
{trust}{body}"""
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def _stderr_lines(r: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in r.stderr.splitlines() if line and not _LOG_LINE.match(line)]


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BUSBAR, *args], capture_output=True, text=True, cwd=cwd, timeout=60,
                          env={**os.environ, "BUSBAR_LOG": "error", **env})


def both(cfg: Path, env: dict[str, str] | None = None) -> list[str]:
    """Run --validate and the boot on ``cfg``; assert both refuse with the same lines; return them."""
    env = {"K": "sk-test", **(env or {})}
    v = _run(["--validate", "--config", str(cfg)], cfg.parent, env)
    b = _run(["--config", str(cfg)], cfg.parent, env)
    assert "Traceback" not in v.stderr + b.stderr
    assert (v.returncode, b.returncode) == (2, 2), (v.stderr, b.stderr)
    assert _stderr_lines(v) == _stderr_lines(b)
    return _stderr_lines(v)


POOL_HOOK = "pools:\n  p:\n    members: [ {{ model: m }} ]\n    hooks: [ {{ module: {module} }} ]\n"

Case = Callable[..., tuple[Path, list[str]]]


def case_hook_module_typo(tmp_path, plugdir, pack, keys):
    pack(plugdir / "p.tar.gz")
    cfg = _config(tmp_path, keys, POOL_HOOK.format(module="helo"))
    return cfg, ["config.yaml: pools.p.hooks[0].module: 'helo' does not resolve to a loadable plugin in plugins.dir "
                 "(plugins); install its signed tarball or fix the name (busbar --list-plugins shows what loads)"]


def case_untrusted_publisher(tmp_path, plugdir, pack, keys):
    pack(plugdir / "p.tar.gz", publisher="zeta", key="other")
    cfg = _config(tmp_path, keys, POOL_HOOK.format(module="hello"))
    return cfg, ["config.yaml: pools.p.hooks[0].module: 'hello' will not load: plugins/p.tar.gz is SKIPPED: "
                 "publisher 'zeta' is not in plugins.trust.publishers; add its key or remove the file"]


def case_below_floor(tmp_path, plugdir, pack, keys):
    pack(plugdir / "p.tar.gz")
    cfg = _config(tmp_path, keys, POOL_HOOK.format(module="hello"),
                  trust="  min_versions: { hello-order: 2.0.0 }\n")
    return cfg, ["config.yaml: pools.p.hooks[0].module: 'hello' will not load: plugins/p.tar.gz is SKIPPED: "
                 "version 1.0.0 is below the floor 2.0.0 (plugins.min_versions.hello-order); install 2.0.0 or "
                 "newer"]


def case_kind_mismatch(tmp_path, plugdir, pack, keys):
    pack(plugdir / "p.tar.gz", wheel="marker", name="import-marker", alias="marker", kind="store")
    cfg = _config(tmp_path, keys, POOL_HOOK.format(module="marker"))
    return cfg, ["config.yaml: pools.p.hooks[0].module: 'marker' is a kind: store plugin, not a kind: hook plugin; "
                 "name a kind: hook plugin"]


def case_secret_module_names_a_hook(tmp_path, plugdir, pack, keys):
    pack(plugdir / "p.tar.gz")
    cfg = _config(tmp_path, keys, "")
    cfg.write_text(cfg.read_text().replace("{ env: K }", "{ module: hello }"))
    return cfg, ["config.yaml: providers.up.api_key: 'hello' is a kind: hook plugin, not a kind: secret plugin; "
                 "name a kind: secret plugin"]


def case_store_without_its_tarball(tmp_path, plugdir, pack, keys):
    """Item 17: `store: { module: sqlite }` with no such plugin used to validate, boot and serve; now
    both name the missing tarball from the manifests."""
    cfg = _config(tmp_path, keys, "store: { module: sqlite }\n")
    return cfg, ["config.yaml: store.module: 'sqlite' does not resolve to a loadable plugin in plugins.dir "
                 "(plugins); install its signed tarball or fix the name (busbar --list-plugins shows what loads)"]


def case_unsupported_key(tmp_path, plugdir, pack, keys):
    """Item 17: a 1.5.0 key this build cannot honour (`advanced.worker_threads`) is refused by both."""
    cfg = _config(tmp_path, keys, "advanced: { worker_threads: 4 }\n")
    return cfg, ["config.yaml: advanced.worker_threads: 4: a worker thread count (run `busbar --workers N` for more "
                 "cores) is not supported in this build; see docs/unsupported-keys.md"]


def case_egress_url_setting_on_a_metadata_address(tmp_path, plugdir, pack, keys):
    """A setting the manifest's schema marks x-busbar-egress-url goes through the SSRF guard in both
    modes, for any plugin (no plugin is special-cased by name)."""
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object", "properties": {"url": {"type": "string", "x-busbar-egress-url": true}}}')
    pack(plugdir / "p.tar.gz", extra=["--settings-schema-file", str(schema)])
    cfg = _config(tmp_path, keys, "pools:\n  p:\n    members: [ { model: m } ]\n    hooks:\n"
                                  "      - { module: hello, settings: { url: \"http://169.254.169.254/rank\" } }\n")
    return cfg, [EGRESS_FAULT]


def case_secret_settings_outside_its_schema(tmp_path, plugdir, pack, keys):
    """A { module: <secret plugin>, settings } reference's settings are judged by that plugin's
    manifest settings schema in both modes, before any plugin code runs (as hook and auth settings)."""
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object", "additionalProperties": false, "required": ["path"], "properties": '
                      '{"path": {"type": "string"}, "ttl": {"type": "integer", "minimum": 1}}}')
    pack(plugdir / "p.tar.gz", wheel="marker", name="import-marker", alias="vault", kind="secret",
         extra=["--settings-schema-file", str(schema)])
    cfg = _config(tmp_path, keys, "")
    cfg.write_text(cfg.read_text().replace("{ env: K }", "{ module: vault, settings: { pth: /kv/up, ttl: 0 } }"))
    return cfg, ["config.yaml: providers.up.api_key.settings.path: required",
                 "config.yaml: providers.up.api_key.settings.pth: unknown setting for vault (it takes path, ttl)",
                 "config.yaml: providers.up.api_key.settings.ttl: must be >= 1"]


def case_invalid_tarball(tmp_path, plugdir, pack, keys):
    (plugdir / "junk.tar.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    cfg = _config(tmp_path, keys, "")
    return cfg, ["plugins/junk.tar.gz: the archive is truncated (the gzip stream ends early)"]


def case_unset_secret(tmp_path, plugdir, pack, keys):
    cfg = _config(tmp_path, keys, "")
    cfg.write_text(cfg.read_text().replace("{ env: K }", "{ env: BUSBAR_TEST_UNSET_KEY }"))
    return cfg, ["config.yaml: providers.up.api_key: environment variable BUSBAR_TEST_UNSET_KEY is not set; export "
                 "BUSBAR_TEST_UNSET_KEY (or point the reference at { file: /path })"]


CASES = [case_egress_url_setting_on_a_metadata_address, case_hook_module_typo, case_untrusted_publisher, case_below_floor, case_kind_mismatch,
         case_secret_module_names_a_hook, case_invalid_tarball, case_unset_secret, case_store_without_its_tarball,
         case_unsupported_key, case_secret_settings_outside_its_schema]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__.removeprefix("case_") for c in CASES])
def test_validate_and_boot_print_the_same_lines(case: Case, tmp_path: Path, plugdir: Path, pack, keys) -> None:
    cfg, expected = case(tmp_path, plugdir, pack, keys)
    marker = tmp_path / "imported.marker"
    lines = both(cfg, {"BUSBAR_TEST_IMPORT_MARKER": str(marker)})
    assert lines == [*expected, SUMMARY.format(n=len(expected))]
    assert not marker.exists()   # no plugin code ran, in either mode


def test_the_marker_plugin_does_mark_when_imported(tmp_path: Path, plugdir: Path, pack, keys, load) -> None:
    """Control for the kind-mismatch case: the same tarball packed as a hook is imported and marks."""
    from tests.plugins.helpers import env, make_cfg
    pack(plugdir / "p.tar.gz", wheel="marker", name="import-marker", alias="marker")
    marker = tmp_path / "imported.marker"
    with env(BUSBAR_TEST_IMPORT_MARKER=str(marker)):
        load(make_cfg(keys))
    assert marker.read_text() == "imported"
