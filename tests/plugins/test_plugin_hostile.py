"""Hostile archives (case C050): every kind is refused as a whole, naming the member, and nothing
is written under or outside the staging directory. The same rules hold inside the wheel, even when
the signature is valid (a compromised publisher key).

Source: cases C050 (a)-(h); docs/plugins.md (fail-closed).
"""
from __future__ import annotations

import gzip
import io
import stat
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest
from busbar.loader import PluginBootError, PluginReloader
from busbar.loader.inventory import list_plugins_lines
from busbar_sdk.artifact import HostileArchiveError, Limits, extract_wheel

from tests.plugins.helpers import forge, make_cfg, manifest_of, status_of, tar_members, wheel_of, write_tar

F = "plugins/p.tar.gz"


def _info(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size, info.mode = kind, linkname, size, 0o644
    return info


def _refused(load, cfg, staging, tmp_path: Path, keys, reason: str) -> None:
    with pytest.raises(PluginBootError) as err:
        load(cfg)
    assert err.value.faults == [f"{F}: {reason}"]
    assert status_of(list_plugins_lines(cfg, tmp_path, release_key=None), F) == f"INVALID: {reason}"
    assert list(staging.root.iterdir()) == []  # nothing unpacked, not even a partial directory


TAR_CASES = [
    ("a-dotdot", [(_info("../../evil.py", size=5), b"evil!")], "member '../../evil.py' climbs out of the archive root ('..')"),
    ("b-absolute", [(_info("/tmp/evil.py", size=5), b"evil!")], "member '/tmp/evil.py' has an absolute path"),
    ("c-symlink", [(_info("lib", tarfile.SYMTYPE, "/etc"), b""), (_info("lib/cron.d/job", size=1), b"x")],
     "member 'lib' is a symbolic link (-> /etc); links are refused"),
    ("d-hardlink", [(_info("passwd", tarfile.LNKTYPE, "/etc/passwd"), b"")],
     "member 'passwd' is a hard link (-> /etc/passwd); links are refused"),
    ("e-sibling-prefix", [(_info("../acme-evil/hook.py", size=1), b"x")],
     "member '../acme-evil/hook.py' climbs out of the archive root ('..')"),
    ("f-fifo", [(_info("fifo", tarfile.FIFOTYPE), b"")], "member 'fifo' is a FIFO; only regular files are accepted"),
    ("f-device", [(_info("sda", tarfile.BLKTYPE), b"")], "member 'sda' is a device node; only regular files are accepted"),
    ("directory", [(_info("lib", tarfile.DIRTYPE), b"")],
     "member 'lib' is a directory; the artifact holds exactly two regular files at its root"),
    ("not-at-root", [(_info("sub/file.py", size=1), b"x")], "member 'sub/file.py' is not at the archive root"),
    ("duplicate", "dup", "duplicate member 'manifest.json'"),
    ("third-file", [(_info("extra.txt", size=1), b"x")],
     "member 'extra.txt' is one too many; the artifact holds exactly two regular files: manifest.json and one wheel"),
]


@pytest.mark.parametrize(("extra", "reason"), [c[1:] for c in TAR_CASES], ids=[c[0] for c in TAR_CASES])
def test_hostile_tar_members(extra, reason, pack, plugdir, keys, load, staging, tmp_path) -> None:
    good = pack(tmp_path / "good.tar.gz")
    members = tar_members(good)
    if extra == "dup":
        extra = [("manifest.json", members["manifest.json"])]
    write_tar(plugdir / "p.tar.gz", [("manifest.json", members["manifest.json"]), wheel_of(good), *extra])
    _refused(load, make_cfg(keys), staging, tmp_path, keys, reason)
    for outside in (tmp_path / "evil.py", Path("/tmp/evil.py"), tmp_path / "acme-evil"):
        assert not outside.exists()


def test_oversized_member(pack, plugdir, keys, load, staging, tmp_path) -> None:
    good = pack(plugdir / "p.tar.gz")
    size = len(wheel_of(good)[1])
    limits = Limits(wheel_bytes=1000)
    with pytest.raises(PluginBootError) as err:
        load(make_cfg(keys), limits=limits)
    name = wheel_of(good)[0]
    assert err.value.faults == [
        f"{F}: member {name!r} is {size} bytes; the limit is 1000 (oversized, or a decompression bomb)"]


def test_decompression_bomb_stops_at_the_limit(plugdir, keys, load, staging, tmp_path) -> None:
    # (h): 16 MiB of zeros compress to ~16 KiB; the cap (manifest + wheel limits) stops inflation early.
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:") as tf:
        info = _info("manifest.json", size=16 << 20)
        tf.addfile(info, io.BytesIO(bytes(16 << 20)))
    (plugdir / "p.tar.gz").write_bytes(gzip.compress(raw.getvalue(), compresslevel=9))
    limits = Limits(manifest_bytes=1024, wheel_bytes=64 * 1024)
    with pytest.raises(PluginBootError) as err:
        load(make_cfg(keys), limits=limits)
    assert err.value.faults == [(f"{F}: the archive decompresses to more than {limits.tar_unpacked_bytes} bytes "
                                f"(oversized, or a decompression bomb)")]
    assert list(staging.root.iterdir()) == []


# ------------------------------------------------------------------------------------ inside the wheel

def _zinfo(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = mode << 16
    info.create_system = 3
    return info


WHEEL_CASES = [
    ("a-dotdot", [("../../evil.py", b"x")], "wheel member '../../evil.py' climbs out of the plugin directory ('..')"),
    ("b-absolute", [("/tmp/evil.py", b"x")], "wheel member '/tmp/evil.py' has an absolute path"),
    ("c-symlink", [(_zinfo("lib", stat.S_IFLNK | 0o777), b"/etc"), ("lib/cron.d/job", b"x")],
     "wheel member 'lib' is a symbolic link; links are refused"),
    ("e-sibling-prefix", [("../hello-order-evil/hook.py", b"x")],
     "wheel member '../hello-order-evil/hook.py' climbs out of the plugin directory ('..')"),
    ("f-fifo", [(_zinfo("fifo", stat.S_IFIFO | 0o644), b"")], "wheel member 'fifo' is not a regular file or directory"),
    ("duplicate", [("hello_order/__init__.py", b"x = 1")], "duplicate wheel member 'hello_order/__init__.py'"),
    ("data-dir", [("busbar_hello_order-0.1.0.data/scripts/run", b"#!/bin/sh")],
     ("wheel member 'busbar_hello_order-0.1.0.data/scripts/run' is in a .data directory, which installs outside the "
     "package tree; plugin wheels carry only importable code")),
    ("h-bomb", [("bomb.bin", bytes(8 << 20))], "wheel member 'bomb.bin' expands {ratio}x (limit 200x): a decompression bomb"),
]


@pytest.mark.parametrize(("extra", "reason"), [c[1:] for c in WHEEL_CASES], ids=[c[0] for c in WHEEL_CASES])
def test_hostile_wheel_members_even_when_validly_signed(extra, reason, pack, plugdir, keys, load, staging,
                                                        tmp_path) -> None:
    good = pack(tmp_path / "good.tar.gz")
    name, wheel = wheel_of(good)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name on purpose
        with zipfile.ZipFile(io.BytesIO(wheel)) as src, zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                dst.writestr(info, src.read(info))
            for info, body in extra:
                dst.writestr(info, body)
    hostile = buf.getvalue()
    if "{ratio}" in reason:
        with zipfile.ZipFile(io.BytesIO(hostile)) as zf:
            i = zf.getinfo("bomb.bin")
            reason = reason.format(ratio=i.file_size // i.compress_size)
    forge(plugdir / "p.tar.gz", manifest_of(good), name, hostile, keys["acme"][0])  # valid signature
    _refused(load, make_cfg(keys), staging, tmp_path, keys, reason)
    assert not (tmp_path / "evil.py").exists() and not (staging.root.parent / "hello-order-evil").exists()
    with pytest.raises(HostileArchiveError):  # the extractor refuses on its own too, leaving nothing
        extract_wheel(hostile, tmp_path / "direct")
    assert not (tmp_path / "direct").exists() and not list(tmp_path.glob(".direct.partial-*"))


def test_wheel_total_size_and_member_count_limits(pack, plugdir, keys, load, tmp_path) -> None:
    pack(plugdir / "p.tar.gz")
    with pytest.raises(PluginBootError) as err:
        load(make_cfg(keys), limits=Limits(wheel_unpacked_bytes=1000))
    assert err.value.faults == [f"{F}: the wheel expands to more than 1000 bytes (oversized, or a decompression bomb)"]
    with pytest.raises(PluginBootError) as err:
        load(make_cfg(keys), limits=Limits(wheel_members=2))
    assert err.value.faults[0].startswith(f"{F}: the wheel has ") and err.value.faults[0].endswith("the limit is 2")


def test_record_paths_are_never_deleted_on_uninstall_or_upgrade(pack, plugdir, keys, tmp_path, staging, wheels) -> None:
    """C050 (g): a RECORD listing a path outside; unloading and upgrading delete only what we wrote."""
    sentinel = tmp_path / "authorized_keys"
    sentinel.write_text("ssh-ed25519 AAAA keep me\n")
    good = pack(tmp_path / "good.tar.gz")
    name, wheel = wheel_of(good)
    with zipfile.ZipFile(io.BytesIO(wheel)) as zf:
        record_name = next(n for n in zf.namelist() if n.endswith("RECORD"))
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(wheel)) as src, zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == record_name:
                body += b"../../authorized_keys,,\n../../../../home/svc/.ssh/authorized_keys,,\n"
            dst.writestr(info, body)
    forge(plugdir / "p.tar.gz", manifest_of(good), name, buf.getvalue(), keys["acme"][0])
    reloader = PluginReloader(make_cfg(keys), base_dir=tmp_path, staging=staging, release_key=None)
    first = reloader.start()
    directory = first.get("hello").directory
    assert directory is not None and directory.parent == staging.root
    # upgrade: a new version replaces the file
    (plugdir / "p.tar.gz").unlink()
    pack(plugdir / "p2.tar.gz", version="1.1.0")
    assert reloader.reload() and reloader.current.get("hello").manifest.version == "1.1.0"
    # uninstall: the file is removed
    (plugdir / "p2.tar.gz").unlink()
    assert reloader.reload() and reloader.current.get("hello") is None
    reloader.close()
    assert sentinel.read_text() == "ssh-ed25519 AAAA keep me\n"
    assert not directory.exists() and list(staging.root.iterdir()) == []
