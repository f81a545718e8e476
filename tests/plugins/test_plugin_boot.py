"""Boot-time validation and trust: each case refused (or admitted) with its exact reason, at boot
(``load_plugins``) and by ``--list-plugins`` (``list_plugins_lines``).

Source: docs/plugins.md, docs/configuration.md#startup-checks (plugin rows); issue 4 tests list.
"""
from __future__ import annotations

import hashlib
import logging
import sys
from pathlib import Path

import pytest
from busbar.loader import PluginBootError, PluginOpenError
from busbar.loader.inventory import list_plugins_lines

from tests.plugins.helpers import (
    decide,
    forge,
    make_cfg,
    manifest_of,
    signature_of,
    status_of,
    tar_members,
    wheel_of,
    write_tar,
)

F = "plugins/p.tar.gz"


def inventory(cfg, tmp_path: Path, keys) -> list[str]:
    return list_plugins_lines(cfg, tmp_path, release_key=bytes.fromhex(keys["release"][1]))


def boot_faults(load, cfg) -> list[str]:
    with pytest.raises(PluginBootError) as err:
        load(cfg)
    return err.value.faults


# ------------------------------------------------------------------------------------ admitted

def test_good_plugin_loads_and_answers_through_busbar_call(pack, plugdir, keys, load, tmp_path) -> None:
    pack(plugdir / "p.tar.gz")
    cfg = make_cfg(keys)
    ps = load(cfg)
    plugin = ps.get("hello-order")
    assert plugin is not None and plugin is ps.get("hello") and "hello" in ps and len(ps) == 1
    assert plugin.open({}).call(decide(4)) == {"order": [3, 2, 1, 0]}
    assert [r.status for r in ps.records] == ["loaded"]
    lines = inventory(cfg, tmp_path, keys)
    assert lines[0].split() == ["FILE", "NAME", "ALIAS", "VERSION", "KIND", "PUBLISHER", "SIGNATURE", "STATUS"]
    assert lines[1].split() == [F, "hello-order", "hello", "1.0.0", "hook", "acme", "trusted", "ready"]


def test_disabled_plugins_are_inert(plugdir, load, tmp_path, keys) -> None:
    (plugdir / "garbage.tar.gz").write_bytes(b"not even gzip")
    cfg = make_cfg(keys, enabled=False)
    ps = load(cfg)
    assert not ps.enabled and len(ps) == 0 and ps.records == ()
    assert inventory(cfg, tmp_path, keys)[1].startswith("# plugins.enabled is false")


def test_missing_plugins_dir_is_a_boot_error(tmp_path, keys, load) -> None:
    cfg = make_cfg(keys, dir="nowhere")
    assert boot_faults(load, cfg) == [
        (f"plugins.dir: {tmp_path / 'nowhere'} does not exist (plugins.enabled is true); create it or point "
        f"plugins.dir at the directory holding the plugin tarballs")]


def test_validate_imports_nothing(pack, plugdir, keys, load, staging) -> None:
    pack(plugdir / "p.tar.gz")
    sys.modules.pop("hello_order", None)
    ps = load(make_cfg(keys), import_code=False)
    assert not ps.imported and ps.get("hello") is not None
    assert "hello_order" not in sys.modules and list(staging.root.iterdir()) == []
    with pytest.raises(PluginOpenError, match="validated but not imported"):
        ps.get("hello").open({})


# ------------------------------------------------------------------------------ structural (boot error)

def test_tampered_wheel_is_a_sha256_mismatch(pack, plugdir, keys, load, tmp_path) -> None:
    good = pack(tmp_path / "good.tar.gz")
    name, wheel = wheel_of(good)
    bad_wheel = wheel[:-30] + bytes(30)  # corrupt the wheel after signing
    members = tar_members(good)
    write_tar(plugdir / "p.tar.gz", [("manifest.json", members["manifest.json"]), (name, bad_wheel)])
    said = manifest_of(good)["sha256"]
    is_ = hashlib.sha256(bad_wheel).hexdigest()
    reason = f"sha256 mismatch: manifest says {said}, wheel is {is_}; repack the plugin"
    cfg = make_cfg(keys)
    assert boot_faults(load, cfg) == [f"{F}: {reason}"]
    assert status_of(inventory(cfg, tmp_path, keys), F) == f"INVALID: {reason}"


def test_unsupported_abi_version(pack, plugdir, keys, load, tmp_path) -> None:
    good = pack(tmp_path / "good.tar.gz")
    m = manifest_of(good) | {"abi_version": 2}
    forge(plugdir / "p.tar.gz", m, *wheel_of(good), keys["acme"][0])
    reason = ("unsupported abi_version 2 for kind 'hook'; this kernel supports 1; install a build of the plugin "
              "for this kernel")
    cfg = make_cfg(keys)
    assert boot_faults(load, cfg) == [f"{F}: {reason}"]
    assert status_of(inventory(cfg, tmp_path, keys), F) == f"INVALID: {reason}"


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda m: {k: v for k, v in m.items() if k != "sha256"},
     "manifest.json is incomplete: missing field(s) sha256; repack the plugin"),
    (lambda m: m | {"homepage_url": "x"},
     "manifest.json: unknown field 'homepage_url' (unknown fields are refused); repack the plugin"),
    (lambda m: m | {"version": "v1.0"},
     "manifest.json: field 'version': 'v1.0' is not a strict semver version (MAJOR.MINOR.PATCH[-pre][+build])"),
    (lambda m: m | {"kind": "export"}, "manifest.json: field 'kind': 'export' is not one of hook, store, secret, auth"),
    (lambda m: m | {"alias": "Hello_Order"},
     ("manifest.json: field 'alias': 'Hello_Order' is not allowed; use 1-64 lowercase letters, digits and inner "
     "dashes ([a-z0-9-]+, no leading or trailing dash)")),
], ids=["incomplete", "unknown-field", "bad-semver", "bad-kind", "bad-alias"])
def test_malformed_or_incomplete_manifest(edit, reason, pack, plugdir, keys, load, tmp_path) -> None:
    good = pack(tmp_path / "good.tar.gz")
    forge(plugdir / "p.tar.gz", edit(manifest_of(good)), *wheel_of(good), keys["acme"][0], fix_sha=False)
    cfg = make_cfg(keys)
    assert boot_faults(load, cfg) == [f"{F}: {reason}"]
    assert status_of(inventory(cfg, tmp_path, keys), F) == f"INVALID: {reason}"


def test_unreadable_archive(plugdir, keys, load, tmp_path) -> None:
    (plugdir / "p.tar.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    cfg = make_cfg(keys)
    assert boot_faults(load, cfg) == [f"{F}: the archive is truncated (the gzip stream ends early)"]
    (plugdir / "p.tar.gz").write_bytes(b"plain text")
    (fault,) = boot_faults(load, cfg)
    assert fault.startswith(f"{F}: not a gzip-compressed tar archive (")


def test_every_fault_is_reported_at_once(pack, plugdir, keys, load, tmp_path) -> None:
    (plugdir / "a.tar.gz").write_bytes(b"junk")
    pack(plugdir / "b.tar.gz")
    pack(plugdir / "c.tar.gz", name="other-name")  # same alias as b
    faults = boot_faults(load, make_cfg(keys))
    assert len(faults) == 2
    assert faults[0].startswith("plugins/a.tar.gz: not a gzip-compressed tar archive")
    assert faults[1].startswith("plugins/b.tar.gz and plugins/c.tar.gz: plugin conflict: alias 'hello'")


# ----------------------------------------------------------------------------- trust (skipped)

def skipped(load, cfg, caplog) -> str:
    with caplog.at_level(logging.WARNING, logger="busbar.plugins"):
        ps = load(cfg)
    assert len(ps) == 0 and ps.get("hello") is None
    (rec,) = ps.records
    assert rec.status == "SKIPPED"
    assert f"{F}: SKIPPED: {rec.reason}" in caplog.messages
    return rec.reason


TAMPERED = ("its signature does not verify with the key of publisher 'acme' (tampered, or signed with another "
            "key); reinstall it from the publisher")


def test_tampered_manifest_is_skipped(pack, plugdir, keys, load, tmp_path, caplog) -> None:
    good = pack(tmp_path / "good.tar.gz")
    members = tar_members(good)
    raw = members["manifest.json"].replace(b'"version": "1.0.0"', b'"version": "1.0.1"')
    write_tar(plugdir / "p.tar.gz", [("manifest.json", raw), wheel_of(good)])
    cfg = make_cfg(keys)
    assert skipped(load, cfg, caplog) == TAMPERED
    lines = inventory(cfg, tmp_path, keys)
    assert signature_of(lines, F) == "tampered" and status_of(lines, F) == f"SKIPPED: {TAMPERED}"


def test_wrong_key_is_skipped(pack, plugdir, keys, load, tmp_path, caplog) -> None:
    pack(plugdir / "p.tar.gz", key="other")  # publisher acme, signed with another key
    cfg = make_cfg(keys)
    assert skipped(load, cfg, caplog) == TAMPERED
    assert status_of(inventory(cfg, tmp_path, keys), F) == f"SKIPPED: {TAMPERED}"


def test_unknown_publisher_without_and_with_allow_third_party(pack, plugdir, keys, load, tmp_path, caplog) -> None:
    pack(plugdir / "p.tar.gz", publisher="zeta", key="other")
    reason = "publisher 'zeta' is not in plugins.trust.publishers; add its key or remove the file"
    cfg = make_cfg(keys)
    assert skipped(load, cfg, caplog) == reason
    lines = inventory(cfg, tmp_path, keys)
    assert signature_of(lines, F) == "unknown-publisher" and status_of(lines, F) == f"SKIPPED: {reason}"

    opt_in = make_cfg(keys, trust={"allow_third_party": True})
    with caplog.at_level(logging.WARNING, logger="busbar.plugins"):
        ps = load(opt_in)
    assert ps.get("hello").open({}).call(decide(2)) == {"order": [1, 0]}
    assert "plugins.trust.allow_third_party is true: plugins from unknown publishers may load (UNSAFE)" in caplog.messages
    lines = inventory(opt_in, tmp_path, keys)
    assert signature_of(lines, F) == "unknown-publisher (allowed)"
    assert status_of(lines, F) == "ready (allowed by plugins.trust.allow_third_party (unsafe))"


def test_unsigned_without_and_with_allow_unsigned(pack, plugdir, keys, load, tmp_path, caplog) -> None:
    pack(plugdir / "p.tar.gz", key=None)
    reason = "it is unsigned; set plugins.trust.allow_unsigned: true to load it anyway (unsafe)"
    cfg = make_cfg(keys)
    assert skipped(load, cfg, caplog) == reason
    assert status_of(inventory(cfg, tmp_path, keys), F) == f"SKIPPED: {reason}"

    opt_in = make_cfg(keys, trust={"allow_unsigned": True})
    ps = load(opt_in)
    assert ps.get("hello").open({}).call(decide(2)) == {"order": [1, 0]}
    assert signature_of(inventory(opt_in, tmp_path, keys), F) == "unsigned (allowed)"


def test_floor_above_the_version(pack, plugdir, keys, load, tmp_path, caplog) -> None:
    pack(plugdir / "p.tar.gz")
    cfg = make_cfg(keys, min_versions={"hello-order": "2.0.0"})
    reason = "version 1.0.0 is below the floor 2.0.0 (plugins.min_versions.hello-order); install 2.0.0 or newer"
    assert skipped(load, cfg, caplog) == reason
    lines = inventory(cfg, tmp_path, keys)
    assert signature_of(lines, F) == "trusted (below floor)" and status_of(lines, F) == f"SKIPPED: {reason}"
    assert load(make_cfg(keys, min_versions={"hello-order": "1.0.0"})).get("hello") is not None


def test_no_opt_in_bypasses_a_floor(pack, plugdir, keys, load, caplog) -> None:
    pack(plugdir / "p.tar.gz", key=None)
    cfg = make_cfg(keys, min_versions={"hello-order": "0.1.0"}, trust={"allow_unsigned": True})
    assert skipped(load, cfg, caplog) == (
        "'hello-order' has a version floor 0.1.0 (plugins.min_versions.hello-order) that only a trusted signature "
        "can prove, and it is unsigned; opt-ins never bypass a floor")


def test_skipped_plugins_are_never_imported(pack, plugdir, keys, load, staging) -> None:
    pack(plugdir / "p.tar.gz", key="other")
    sys.modules.pop("hello_order", None)
    load(make_cfg(keys))
    assert "hello_order" not in sys.modules and list(staging.root.iterdir()) == []


# ------------------------------------------------------------------------------- first party

def test_first_party_verifies_with_the_embedded_key_and_zero_config(pack, plugdir, keys, load, tmp_path) -> None:
    pack(plugdir / "p.tar.gz", publisher="busbar", key="release", version="1.5.0")
    cfg = make_cfg(None)  # no publishers configured at all
    ps = load(cfg)
    assert ps.get("hello").verdict == "first-party"
    assert signature_of(inventory(cfg, tmp_path, keys), F) == "first-party"


def test_first_party_is_floored_at_the_kernel_version(pack, plugdir, keys, load, tmp_path, caplog) -> None:
    pack(plugdir / "p.tar.gz", publisher="busbar", key="release", version="1.4.9")
    cfg = make_cfg(None)
    assert skipped(load, cfg, caplog) == (
        "version 1.4.9 is below the floor 1.5.0 (first-party plugins are floored at the kernel's version); "
        "install the plugins released with this kernel")
    assert signature_of(inventory(cfg, tmp_path, keys), F) == "first-party (below floor)"


def test_first_party_without_an_embedded_release_key(pack, plugdir, keys, load, caplog) -> None:
    pack(plugdir / "p.tar.gz", publisher="busbar", key="release", version="1.5.0")
    with caplog.at_level(logging.WARNING, logger="busbar.plugins"):
        ps = load(make_cfg(None, trust={"allow_unsigned": True, "allow_third_party": True}), release_key=None)
    (rec,) = ps.records
    assert rec.status == "SKIPPED" and rec.signature == "no-release-key"
    assert rec.reason == (
        "'hello-order' has a version floor 1.5.0 (first-party plugins are floored at the kernel's version) that "
        "only a trusted signature can prove, and this kernel was built without an embedded release key, so "
        "first-party signatures cannot be verified (run tools/build-plugins; docs/releasing.md); opt-ins never "
        "bypass a floor")


def test_busbar_publisher_signed_by_someone_else(pack, plugdir, keys, load, caplog) -> None:
    pack(plugdir / "p.tar.gz", publisher="busbar", key="acme", version="9.0.0")
    assert skipped(load, make_cfg(keys, trust={"allow_unsigned": True}), caplog).endswith(
        "and its signature does not verify with the embedded busbar release key (tampered, or signed with another "
        "key); opt-ins never bypass a floor")


# -------------------------------------------------------------------------- conflicts, kind, requirements

def test_same_alias_twice_aborts_naming_both(pack, plugdir, keys, load, tmp_path) -> None:
    pack(plugdir / "a.tar.gz")
    pack(plugdir / "b.tar.gz", wheel="plain", name="plain-hook", alias="hello")
    line = ("plugins/a.tar.gz and plugins/b.tar.gz: plugin conflict: alias 'hello' is claimed by both "
            "'hello-order' and 'plain-hook'; remove one file or repack one with another --alias")
    cfg = make_cfg(keys)
    assert boot_faults(load, cfg) == [line]
    lines = inventory(cfg, tmp_path, keys)
    assert status_of(lines, "plugins/b.tar.gz") == "REJECTED: " + line.split(": ", 1)[1]


def test_name_colliding_with_an_alias_and_the_same_name_twice(pack, plugdir, keys, load) -> None:
    pack(plugdir / "a.tar.gz")
    pack(plugdir / "b.tar.gz", wheel="plain", name="hello", alias="plain")
    assert boot_faults(load, make_cfg(keys)) == [
        ("plugins/a.tar.gz and plugins/b.tar.gz: plugin conflict: 'hello' is the name of 'hello' and the alias of "
        "'hello-order'; repack one with another --name/--alias")]
    (plugdir / "b.tar.gz").unlink()
    pack(plugdir / "c.tar.gz", version="1.1.0", alias="hello2")
    assert boot_faults(load, make_cfg(keys)) == [
        ("plugins/a.tar.gz and plugins/c.tar.gz: plugin conflict: both are plugin 'hello-order' (versions 1.0.0 "
        "and 1.1.0); keep one file")]


def test_a_conflict_with_an_untrusted_plugin_is_not_a_conflict(pack, plugdir, keys, load) -> None:
    pack(plugdir / "a.tar.gz")
    pack(plugdir / "b.tar.gz", wheel="plain", name="plain-hook", alias="hello", key="other")  # skipped
    ps = load(make_cfg(keys))
    assert ps.get("hello").name == "hello-order"


def test_wrong_kind_aborts_the_boot(pack, plugdir, keys, load, tmp_path) -> None:
    pack(plugdir / "p.tar.gz", wheel="wrongkind", name="wrong-kind", alias="wk")
    cfg = make_cfg(keys)
    assert boot_faults(load, cfg) == [
        f"{F}: kind mismatch: the manifest says 'hook' but the plugin reports 'store'; repack it with --kind store"]
    # --list-plugins is manifest-only (nothing imported): the kind is checked when the code loads.
    assert status_of(inventory(cfg, tmp_path, keys), F) == "ready"
    assert "wrong_kind" not in sys.modules  # the failed import was rolled back


def test_missing_required_distribution(pack, plugdir, keys, load, tmp_path) -> None:
    pack(plugdir / "p.tar.gz", wheel="needsdist", name="needs-dist", alias="nd")
    reason = ("requires distribution 'busbar-nonexistent-dependency>=1', which is not installed in the kernel's "
              "environment; install it next to busbar (pip install 'busbar-nonexistent-dependency>=1') or remove "
              "the plugin")
    cfg = make_cfg(keys)
    assert boot_faults(load, cfg) == [f"{F}: {reason}"]
    assert boot_faults(lambda c: load(c, import_code=False), cfg) == [f"{F}: {reason}"]  # --validate too
    assert status_of(inventory(cfg, tmp_path, keys), F) == f"REJECTED: {reason}"


def test_a_module_shadowing_the_environment_is_refused(plugdir, keys, load, tmp_path) -> None:
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("json/__init__.py", "")
        zf.writestr("shadow-1.0.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: shadow\nVersion: 1.0.0\n")
        zf.writestr("shadow-1.0.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("shadow-1.0.0.dist-info/entry_points.txt", "[busbar.plugins]\nshadow = json\n")
    m = {"name": "shadow", "alias": "shadow", "kind": "hook", "version": "1.0.0", "publisher": "acme",
         "abi_version": 1, "sha256": "", "signature": ""}
    forge(plugdir / "p.tar.gz", m, "shadow.whl", buf.getvalue(), keys["acme"][0])
    (fault,) = boot_faults(load, make_cfg(keys))
    assert fault.startswith(f"{F}: its top-level module 'json' would shadow ")
    assert fault.endswith(" in the kernel's environment; rename the plugin's package")


def test_inventory_of_a_loaded_set(pack, plugdir, keys, load) -> None:
    from busbar.loader.inventory import inventory_lines
    pack(plugdir / "p.tar.gz")
    lines = inventory_lines(load(make_cfg(keys)))
    assert status_of(lines, F) == "loaded" and signature_of(lines, F) == "trusted"


def test_trace_switch_logs_redacted_calls(pack, plugdir, keys, load, monkeypatch, caplog) -> None:
    monkeypatch.setenv("BUSBAR_TRACE_PLUGINS", "1")
    pack(plugdir / "p.tar.gz")
    inst = load(make_cfg(keys)).get("hello").open({}, prompt="ro")
    with caplog.at_level(logging.DEBUG, logger="busbar.plugins.trace"):
        inst.call(decide(2, messages=[{"role": "user", "text": "my card is 4111"}]))
    (line,) = [r.getMessage() for r in caplog.records if r.name == "busbar.plugins.trace"]
    assert line.startswith("hello-order <- ") and "'order': [1, 0]" in line
    assert "4111" not in line and "<redacted" in line
