"""busbar-plugin-pack: keygen, pack (signing, refusing unsigned, self-check), verify, inspect, and
a clear one-line error for every misuse.

Source: issue 4 (tools/plugin-pack).
"""
from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from busbar_sdk.artifact import public_key_from_seed

from tests.plugins.helpers import manifest_of, run_pack, wheel_of

PROG = "busbar-plugin-pack"


def base_args(wheel: Path, out: Path, **over: str) -> list[str]:
    fields = {"name": "hello-order", "alias": "hello", "kind": "hook", "version": "1.0.0", "publisher": "acme"}
    fields.update(over)
    args = ["pack", "--wheel", str(wheel), "--out", str(out)]
    for k, v in fields.items():
        args += [f"--{k}", v]
    return args


def test_keygen_prints_a_matching_pair(capsys) -> None:
    assert run_pack(["keygen"], None) == 0
    private_line, public_line = capsys.readouterr().out.splitlines()
    assert private_line.startswith("private (BUSBAR_SIGN_KEY, keep secret): ")
    assert public_line.startswith("public (publishers allowlist / BUSBAR_RELEASE_PUBKEY): ")
    seed, public = private_line.rsplit(" ", 1)[1], public_line.rsplit(" ", 1)[1]
    assert len(seed) == len(public) == 64 and public_key_from_seed(seed) == public


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / PROG
    proc = subprocess.run([str(script), "keygen"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.count("\n") == 2


def test_pack_signs_and_verify_checks(wheels, keys, tmp_path, capsys) -> None:
    out = tmp_path / "p.tar.gz"
    assert run_pack(base_args(wheels["hello"], out, **{"needs-prompt": "read-write", "needs-user": "read"}),
                    keys["acme"][0]) == 0
    assert capsys.readouterr().out == (f"wrote {out}: hello-order (hello) hook 1.0.0 by acme, signed by "
                                       f"{keys['acme'][1]}\n")
    m = manifest_of(out)
    assert m["needs"] == {"prompt": "rw", "user": "ro"} and m["requires_dist"] == ["busbar-sdk"]
    assert m["abi_version"] == 1 and len(m["signature"]) == 128

    assert run_pack(["verify", str(out), "--publisher-key", keys["acme"][1]], None) == 0
    assert capsys.readouterr().out.endswith("structure OK; signature verifies with the given key\n")
    assert run_pack(["verify", str(out), "--publisher-key", keys["other"][1]], None) == 1
    assert "signature does NOT verify with the given key" in capsys.readouterr().out
    assert run_pack(["verify", str(out)], None) == 0
    assert "signed, signature not checked (verify it with --publisher-key)" in capsys.readouterr().out


def test_inspect_prints_manifest_and_wheel(wheels, keys, tmp_path, capsys) -> None:
    out = tmp_path / "p.tar.gz"
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object", "properties": {"url": {"type": "string"}}}')
    assert run_pack(base_args(wheels["hello"], out) + ["--settings-schema-file", str(schema)], keys["acme"][0]) == 0
    capsys.readouterr()
    assert run_pack(["inspect", str(out)], None) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["manifest"]["settings_schema"] == schema.read_text()
    assert doc["wheel"]["entry_point"] == "hello-order = hello_order:plugin"
    assert doc["wheel"]["top_level"] == ["hello_order"]


def test_unsigned_needs_the_explicit_flag(wheels, tmp_path, capsys) -> None:
    out = tmp_path / "p.tar.gz"
    assert run_pack(base_args(wheels["hello"], out), None) == 2
    assert capsys.readouterr().err == (
        f"{PROG}: error: BUSBAR_SIGN_KEY is not set: export the 64-hex private seed printed by '{PROG} keygen', "
        f"or pass --allow-unsigned to write an unsigned artifact\n")
    assert not out.exists()
    assert run_pack(base_args(wheels["hello"], out) + ["--allow-unsigned"], None) == 0
    assert "UNSIGNED" in capsys.readouterr().out and manifest_of(out)["signature"] == ""
    assert run_pack(["verify", str(out), "--publisher-key", "ab" * 32], None) == 1


@pytest.mark.parametrize(("edit", "key", "status", "message"), [
    ({"kind": "export"}, "acme", 2, "error: --kind 'export' is not one of hook, store, secret, auth"),
    ({"needs-prompt": "write"}, "acme", 2, "error: --needs-prompt 'write' is not one of no, ro, rw"),
    ({"needs-user": "rw"}, "acme", 2, "error: --needs-user 'rw' is not one of no, ro"),
    ({"out": "plugin.zip"}, "acme", 2, "error: --out 'plugin.zip' must end in .tar.gz or .tgz"),
    ({"out": "/nonexistent-dir/p.tar.gz"}, "acme", 2, "error: --out directory '/nonexistent-dir' does not exist"),
    ({"wheel": "/nonexistent.whl"}, "acme", 2, "error: --wheel '/nonexistent.whl' does not exist"),
    ({}, "badkey", 2, "error: the signing key must be 64 hex digits (32 bytes), got 6 characters"),
    ({"name": "Hello"}, "acme", 1, "invalid artifact: manifest.json: field 'name': 'Hello' is not allowed"),
    ({"version": "1.0"}, "acme", 1, "invalid artifact: manifest.json: field 'version': '1.0' is not a strict semver"),
    ({"abi-version": "2"}, "acme", 1, "invalid artifact: unsupported abi_version 2 for kind 'hook'"),
], ids=["kind", "needs-prompt", "needs-user", "out-suffix", "out-dir", "no-wheel", "bad-key", "bad-name",
        "bad-version", "abi-version"])
def test_misuse_is_one_clear_line(edit, key, status, message, wheels, keys, tmp_path, capsys) -> None:
    out = edit.pop("out", str(tmp_path / "p.tar.gz"))
    wheel = edit.pop("wheel", str(wheels["hello"]))
    args = base_args(Path(wheel), Path(out), **edit)
    seed = "abc123" if key == "badkey" else keys[key][0]
    assert run_pack(args, seed) == status
    err = capsys.readouterr().err
    assert err.startswith(f"{PROG}: {message}") and err.count("\n") == 1, err


def test_a_wheel_without_the_entry_point_is_refused(wheels, keys, tmp_path, capsys) -> None:
    src = io.BytesIO(wheels["hello"].read_bytes())
    buf = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(buf, "w") as zout:
        for info in zin.infolist():
            if not info.filename.endswith("entry_points.txt"):
                zout.writestr(info, zin.read(info))
    bare = tmp_path / "bare-1.0.0-py3-none-any.whl"
    bare.write_bytes(buf.getvalue())
    assert run_pack(base_args(bare, tmp_path / "p.tar.gz"), keys["acme"][0]) == 1
    assert capsys.readouterr().err == (
        f"{PROG}: invalid artifact: the wheel must declare exactly one entry point in group 'busbar.plugins', found "
        f"0; add [project.entry-points.\"busbar.plugins\"] <name> = \"<module>:<object>\" to its pyproject.toml\n")


def test_not_a_wheel_nor_a_project(tmp_path, keys, capsys) -> None:
    (tmp_path / "notes.txt").write_text("x")
    assert run_pack(base_args(tmp_path / "notes.txt", tmp_path / "p.tar.gz"), keys["acme"][0]) == 2
    assert "is a file but not a .whl" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_pack(base_args(empty, tmp_path / "p.tar.gz"), keys["acme"][0]) == 2
    assert "is neither a .whl file nor a project directory with a pyproject.toml" in capsys.readouterr().err


def test_verify_and_inspect_refuse_invalid_files(wheels, keys, tmp_path, capsys) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"junk")
    assert run_pack(["verify", str(junk)], None) == 1
    assert capsys.readouterr().err.startswith(f"{PROG}: invalid artifact: not a gzip-compressed tar archive")
    assert run_pack(["inspect", str(tmp_path / "missing.tar.gz")], None) == 2
    assert "cannot read" in capsys.readouterr().err
    assert run_pack([], None) == 2
    assert "required" in capsys.readouterr().err


def test_pack_output_is_deterministic(wheels, keys, tmp_path) -> None:
    a, b = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    for out in (a, b):
        assert run_pack(base_args(wheels["hello"], out), keys["acme"][0]) == 0
    assert a.read_bytes() == b.read_bytes()
    assert wheel_of(a)[1] == wheels["hello"].read_bytes()
