"""Plugin files (issue 11 item 19, case C051): links, oversized and special files, downgrades, and
the signature checked on the very bytes that are extracted.

Every refusal names the file and the reason; nothing is written under the staging root and nothing
is registered.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import time
import tracemalloc
from pathlib import Path

import pytest
from busbar.loader import PluginBootError

from tests.plugins.helpers import decide, forge, make_cfg, manifest_of, tar_members, wheel_of, write_tar

F = "plugins/p.tar.gz"
TAMPERED = ("its signature does not verify with the key of publisher 'acme' (tampered, or signed with another "
            "key); reinstall it from the publisher")


def faults_of(load, cfg, **kw) -> list[str]:
    with pytest.raises(PluginBootError) as err:
        load(cfg, **kw)
    return err.value.faults


def nothing_written(staging) -> bool:
    return list(staging.root.iterdir()) == []


# --------------------------------------------------------------------------------- file safety

def test_symlinked_tarball_is_refused_not_followed(pack, plugdir, keys, load, staging, tmp_path) -> None:
    real = pack(tmp_path / "elsewhere.tar.gz")
    (plugdir / "p.tar.gz").symlink_to(real)
    (plugdir / "q.tar.gz").symlink_to("/etc/passwd")
    assert faults_of(load, make_cfg(keys)) == [
        f"{F}: is a symbolic link; links in plugins.dir are refused (copy the tarball into the directory)",
        "plugins/q.tar.gz: is a symbolic link; links in plugins.dir are refused (copy the tarball into the "
        "directory)"]
    assert nothing_written(staging)
    (plugdir / "p.tar.gz").unlink()
    (plugdir / "q.tar.gz").unlink()
    shutil.copy(real, plugdir / "p.tar.gz")   # the same bytes as a regular file load
    assert load(make_cfg(keys)).get("hello") is not None


def test_sparse_gigabyte_file_is_refused_from_its_size_before_any_read(plugdir, keys, load) -> None:
    with open(plugdir / "p.tar.gz", "wb") as fh:
        fh.truncate(1 << 30)                          # 1 GiB, sparse: costs nothing on disk
    tracemalloc.start()
    started = time.monotonic()
    try:
        faults = faults_of(load, make_cfg(keys))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert faults == [f"{F}: is 1073741824 bytes; the limit is 100663296 (nothing was read)"]
    assert peak < 4 << 20 and time.monotonic() - started < 5


def test_fifo_is_refused_without_blocking(plugdir, keys, load) -> None:
    os.mkfifo(plugdir / "p.tar.gz")
    assert faults_of(load, make_cfg(keys)) == [
        f"{F}: is not a regular file (a FIFO, device or socket); only regular files are read"]


# --------------------------------------------------------------------------------- downgrades

def marks(tmp_path: Path) -> dict[str, str]:
    return json.loads((tmp_path / "plugins.high-water.json").read_text())


def test_downgrade_is_refused_across_restarts_and_allowed_once_explicitly(pack, plugdir, keys, load, staging,
                                                                        tmp_path, caplog) -> None:
    """C051 (e): acme 1.3.0 installed, then 1.2.0 correctly signed by the same key."""
    pack(plugdir / "p.tar.gz", version="1.3.0")
    assert load(make_cfg(keys)).get("hello").manifest.version == "1.3.0"
    assert marks(tmp_path) == {"hello-order": "1.3.0"}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".plugins.high-water")] == []  # atomic
    (plugdir / "p.tar.gz").unlink()
    pack(plugdir / "p.tar.gz", version="1.2.0")
    reason = ("downgrade from 1.3.0 to 1.2.0 of 'hello-order' refused (1.3.0 is the highest version this gateway "
              "has loaded); install 1.3.0 or newer, or allow it for one boot with BUSBAR_ALLOW_DOWNGRADE=hello-order")
    for _ in range(2):   # a "restart": every load reads the marks afresh
        assert faults_of(load, make_cfg(keys)) == [f"{F}: {reason}"]
    # min_versions does not need to be set for this, and no opt-in bypasses it
    assert faults_of(load, make_cfg(keys, trust={"allow_unsigned": True, "allow_third_party": True})) == [
        f"{F}: {reason}"]
    with caplog.at_level(logging.WARNING, logger="busbar.plugins"):
        ps = load(make_cfg(keys), allow_downgrade=frozenset({"hello-order"}))
    assert ps.get("hello").manifest.version == "1.2.0"
    assert f"{F}: downgrade from 1.3.0 to 1.2.0 of 'hello-order' allowed by BUSBAR_ALLOW_DOWNGRADE" in caplog.messages
    assert marks(tmp_path) == {"hello-order": "1.2.0"}   # the mark follows the deliberate downgrade
    assert load(make_cfg(keys)).get("hello") is not None


def test_validate_reads_marks_but_never_writes_them(pack, plugdir, keys, load, tmp_path) -> None:
    pack(plugdir / "p.tar.gz", version="1.3.0")
    load(make_cfg(keys), import_code=False)
    assert not (tmp_path / "plugins.high-water.json").exists()
    (tmp_path / "plugins.high-water.json").write_text('{"hello-order": "2.0.0"}\n')
    (fault,) = faults_of(load, make_cfg(keys), import_code=False)
    assert fault.startswith(f"{F}: downgrade from 2.0.0 to 1.3.0 of 'hello-order' refused")


def test_an_unsigned_version_proves_nothing_and_raises_no_mark(pack, plugdir, keys, load, tmp_path) -> None:
    pack(plugdir / "p.tar.gz", version="9.0.0", key=None)
    assert load(make_cfg(keys, trust={"allow_unsigned": True})).get("hello") is not None
    assert not (tmp_path / "plugins.high-water.json").exists()


def test_a_corrupt_marks_file_is_a_fault_naming_it(pack, plugdir, keys, load, tmp_path) -> None:
    pack(plugdir / "p.tar.gz")
    (tmp_path / "plugins.high-water.json").write_text("not json")
    assert faults_of(load, make_cfg(keys)) == [
        f"{tmp_path / 'plugins.high-water.json'}: not a JSON map of plugin name -> version; restore it from a "
        f"backup (deleting it forgets every mark and with it the downgrade protection)"]


# --------------------------------------------------------------------------------- C051 signature family

def test_C051_a_unsafe_parser_payload_is_not_json_and_runs_nothing(pack, plugdir, keys, load, staging,
                                                                  tmp_path) -> None:
    marker = tmp_path / "pwned"
    good = pack(tmp_path / "good.tar.gz")
    body = f'!!python/object/apply:os.system ["touch {marker}"]\n'.encode()
    write_tar(plugdir / "p.tar.gz", [("manifest.json", body), wheel_of(good)])
    assert faults_of(load, make_cfg(keys)) == [f"{F}: manifest.json is not valid JSON: Expecting value at line 1 "
                                               f"column 1"]
    assert not marker.exists() and nothing_written(staging)


def test_C051_b_the_verified_bytes_are_the_extracted_bytes(pack, plugdir, keys, load, monkeypatch,
                                                           tmp_path) -> None:
    """The file is swapped for another (validly signed) plugin between the verify and the extract steps:
    the loader extracts the bytes it verified, read once, never the file's new content."""
    import busbar.loader.pipeline as pipeline
    pack(plugdir / "p.tar.gz")
    other = pack(tmp_path / "other.tar.gz", wheel="plain", name="plain-hook", alias="plain")
    verify = pipeline.evaluate_trust

    def verify_then_swap(*a, **kw):
        verdict = verify(*a, **kw)
        shutil.copy(other, plugdir / "p.tar.gz")
        return verdict
    monkeypatch.setattr(pipeline, "evaluate_trust", verify_then_swap)
    ps = load(make_cfg(keys))
    assert ps.get("plain") is None
    assert ps.get("hello").open({}).call(decide(3)) == {"order": [2, 1, 0]}


@pytest.mark.parametrize("variant", ["c-bad-signature", "d-unknown-key", "d-revoked-key", "f-renamed"])
def test_C051_untrusted_variants_are_refused_with_their_reason(variant, pack, plugdir, keys, load, staging,
                                                              tmp_path, caplog) -> None:
    good = pack(tmp_path / "good.tar.gz", version="1.3.0")
    cfg = make_cfg(keys)
    if variant == "c-bad-signature":
        m = manifest_of(good)
        m["signature"] = ("0" * 127) + "1"
        write_tar(plugdir / "p.tar.gz", [("manifest.json", json.dumps(m).encode()), wheel_of(good)])
        reason = TAMPERED
    elif variant == "d-unknown-key":
        pack(plugdir / "p.tar.gz", publisher="zeta", key="other")
        reason = "publisher 'zeta' is not in plugins.trust.publishers; add its key or remove the file"
    elif variant == "d-revoked-key":   # acme's key was revoked: removed from the trust store
        shutil.copy(good, plugdir / "p.tar.gz")
        cfg = make_cfg(keys, publishers=())
        reason = "publisher 'acme' is not in plugins.trust.publishers; add its key or remove the file"
    else:                               # the 1.3.0 manifest and signature reused under another name
        m = manifest_of(good) | {"name": "other", "alias": "other"}
        write_tar(plugdir / "p.tar.gz", [("manifest.json", json.dumps(m).encode()), wheel_of(good)])
        reason = TAMPERED
    with caplog.at_level(logging.WARNING, logger="busbar.plugins"):
        ps = load(cfg)
    assert len(ps) == 0 and ps.get("hello") is None and ps.get("other") is None
    (rec,) = ps.records
    assert (rec.status, rec.reason) == ("SKIPPED", reason)
    assert f"{F}: SKIPPED: {reason}" in caplog.messages
    assert nothing_written(staging)


def test_C051_g_signed_digest_not_matching_the_wheel(pack, plugdir, keys, load, staging, tmp_path) -> None:
    good = pack(tmp_path / "good.tar.gz")
    name, wheel = wheel_of(good)
    m = manifest_of(good)
    forge(plugdir / "p.tar.gz", m | {"sha256": "ab" * 32}, name, wheel, keys["acme"][0], fix_sha=False)
    digest = __import__("hashlib").sha256(wheel).hexdigest()
    assert faults_of(load, make_cfg(keys)) == [
        f"{F}: sha256 mismatch: manifest says {'ab' * 32}, wheel is {digest}; repack the plugin"]
    assert nothing_written(staging)


def test_C051_h_bytes_appended_after_the_signed_manifest(pack, plugdir, keys, load, staging, tmp_path) -> None:
    good = pack(tmp_path / "good.tar.gz")
    raw = tar_members(good)["manifest.json"]
    write_tar(plugdir / "p.tar.gz", [("manifest.json", raw + b'{"version": "9.9.9"}'), wheel_of(good)])
    (fault,) = faults_of(load, make_cfg(keys))
    assert fault.startswith(f"{F}: manifest.json is not valid JSON: Extra data at line ")
    write_tar(plugdir / "p.tar.gz", [("manifest.json", raw + b" \n\t\n"), wheel_of(good)])   # whitespace only
    assert load(make_cfg(keys)).get("hello") is not None
    (plugdir / "p.tar.gz").write_bytes(good.read_bytes() + b"trailing garbage")                  # after the gzip
    (fault,) = faults_of(load, make_cfg(keys))
    assert fault.startswith(f"{F}: not a gzip-compressed tar archive (")
    assert len(list(staging.root.iterdir())) == 1   # only the whitespace-only variant was ever extracted


def test_no_manifest_field_is_acted_on_before_the_signature_holds(pack, plugdir, keys, load, staging,
                                                                  tmp_path, caplog) -> None:
    """A manifest from an unknown publisher claiming a wrong wheel digest and an unsupported abi_version:
    judged on its signature alone (skipped), its fields never acted on; only when the operator's opt-in
    makes it loadable are they checked (and refused)."""
    good = pack(tmp_path / "good.tar.gz")
    name, wheel = wheel_of(good)
    m = manifest_of(good) | {"publisher": "zeta", "abi_version": 7, "sha256": "cd" * 32}
    forge(plugdir / "p.tar.gz", m, name, wheel, keys["other"][0], fix_sha=False)
    with caplog.at_level(logging.WARNING, logger="busbar.plugins"):
        ps = load(make_cfg(keys))
    (rec,) = ps.records
    assert (rec.status, rec.reason) == (
        "SKIPPED", "publisher 'zeta' is not in plugins.trust.publishers; add its key or remove the file")
    digest = __import__("hashlib").sha256(wheel).hexdigest()
    assert faults_of(load, make_cfg(keys, trust={"allow_third_party": True})) == [
        f"{F}: sha256 mismatch: manifest says {'cd' * 32}, wheel is {digest}; repack the plugin"]
    assert nothing_written(staging)
