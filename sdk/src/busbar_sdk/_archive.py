"""The plugin artifact: a ``.tar.gz`` with exactly ``manifest.json`` and one wheel at its root.

:func:`read_artifact` is the structural validation, the same function for the kernel's loader and
for the pack tool's self-check. It works fully in memory and trusts nothing: the gzip stream is
decompressed under a hard cap, each tar member is checked *before* it is read (absolute paths,
``..``, links, devices, directories, duplicates, sizes), then ``tarfile.data_filter`` runs as a
second opinion; then the manifest is parsed strictly, the wheel's SHA-256 compared, the
``abi_version`` range checked, and the wheel inspected (:mod:`busbar_sdk._wheel`). Trust (the
signature) is *not* decided here: structure is independent of trust.

:func:`write_artifact` is the packer's writer: deterministic bytes (GNU tar, mode 0644, mtime 0,
uid/gid 0, gzip mtime 0).

Source: docs/plugins.md (fail-closed); C050.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from busbar_sdk._errors import ArtifactError, HostileArchiveError
from busbar_sdk._limits import DEFAULT_LIMITS, Limits
from busbar_sdk._manifest import Manifest, parse_manifest_bytes
from busbar_sdk._versions import SUPPORTED_ABI_VERSIONS
from busbar_sdk._wheel import WheelInfo, inspect_wheel

__all__ = ["MANIFEST_MEMBER", "Artifact", "SignedParts", "complete_artifact", "read_artifact",
           "read_signed_parts", "write_artifact"]

MANIFEST_MEMBER = "manifest.json"


@dataclass(frozen=True)
class Artifact:
    """A structurally valid artifact, in memory.

    Attributes:
        manifest: the validated :class:`Manifest`.
        manifest_obj: the raw parsed ``manifest.json`` object (what signatures cover).
        wheel_name: the wheel member's name (informational only).
        wheel_bytes: the wheel, whose SHA-256 equals ``manifest.sha256``.
        wheel: what :func:`inspect_wheel` read from it.
    """

    manifest: Manifest
    manifest_obj: Mapping[str, Any]
    wheel_name: str
    wheel_bytes: bytes
    wheel: WheelInfo

    def __repr__(self) -> str:
        return f"Artifact({self.manifest!r}, wheel={self.wheel_name!r}, {len(self.wheel_bytes)} bytes)"


def _gunzip_bounded(data: bytes, cap: int) -> bytes:
    out = bytearray()
    rest = data
    try:
        while rest:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            chunk = d.decompress(rest, cap + 1 - len(out))
            while True:
                out += chunk
                if len(out) > cap:
                    raise HostileArchiveError(f"the archive decompresses to more than {cap} bytes "
                                              f"(oversized, or a decompression bomb)")
                if not d.unconsumed_tail:
                    break
                chunk = d.decompress(d.unconsumed_tail, cap + 1 - len(out))
            if not d.eof:
                raise ArtifactError("the archive is truncated (the gzip stream ends early)")
            rest = d.unused_data
            if not rest.strip(b"\x00"):
                break
    except zlib.error as exc:
        raise ArtifactError(f"not a gzip-compressed tar archive ({exc})") from None
    return bytes(out)


def _member_fault(m: tarfile.TarInfo, limits: Limits) -> str | None:
    name = m.name
    shown = f"member {name!r}"
    if name.startswith("/") or "\\" in name or (len(name) > 1 and name[1] == ":"):
        return f"{shown} has an absolute path"
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        return f"{shown} climbs out of the archive root ('..')"
    if m.issym():
        return f"{shown} is a symbolic link (-> {m.linkname}); links are refused"
    if m.islnk():
        return f"{shown} is a hard link (-> {m.linkname}); links are refused"
    if m.ischr() or m.isblk():
        return f"{shown} is a device node; only regular files are accepted"
    if m.isfifo():
        return f"{shown} is a FIFO; only regular files are accepted"
    if m.isdir():
        return f"{shown} is a directory; the artifact holds exactly two regular files at its root"
    if not m.isreg():
        return f"{shown} is not a regular file"
    if len(parts) != 1:
        return f"{shown} is not at the archive root"
    limit = limits.manifest_bytes if parts[0] == MANIFEST_MEMBER else limits.wheel_bytes
    if m.size > limit:
        return f"{shown} is {m.size} bytes; the limit is {limit} (oversized, or a decompression bomb)"
    try:
        tarfile.data_filter(m, "/busbar-plugin-root")  # second opinion (PEP 706)
    except tarfile.FilterError as exc:
        return f"{shown} is refused by tarfile's data filter ({exc})"
    return None


def _members(data: bytes, limits: Limits) -> dict[str, bytes]:
    if len(data) > limits.archive_bytes:
        raise HostileArchiveError(f"the archive is {len(data)} bytes; the limit is {limits.archive_bytes}")
    raw = _gunzip_bounded(data, limits.tar_unpacked_bytes)
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tf:
            while (m := tf.next()) is not None:
                fault = _member_fault(m, limits)
                if fault:
                    raise HostileArchiveError(fault)
                name = m.name.split("/")[-1]
                if name in files:
                    raise HostileArchiveError(f"duplicate member {name!r}")
                if len(files) == 2:
                    raise ArtifactError(f"member {m.name!r} is one too many; the artifact holds exactly two "
                                        f"regular files: manifest.json and one wheel")
                fh = tf.extractfile(m)
                body = fh.read(m.size + 1) if fh else b""
                if len(body) != m.size:
                    raise ArtifactError(f"member {m.name!r} is truncated")
                files[name] = body
    except tarfile.TarError as exc:
        raise ArtifactError(f"not a readable tar archive ({exc})") from None
    return files


def _check_parts(manifest: Manifest, wheel_bytes: bytes, limits: Limits,
                 supported: Mapping[str, tuple[int, int]]) -> WheelInfo:
    digest = hashlib.sha256(wheel_bytes).hexdigest()
    if digest != manifest.sha256:
        raise ArtifactError(f"sha256 mismatch: manifest says {manifest.sha256}, wheel is {digest}; "
                            f"repack the plugin")
    if not manifest.supports_abi(supported):
        lo, hi = supported.get(manifest.kind, (0, 0))
        rng = f"{lo}" if lo == hi else f"{lo}..{hi}"
        raise ArtifactError(f"unsupported abi_version {manifest.abi_version} for kind {manifest.kind!r}; "
                            f"this kernel supports {rng}; install a build of the plugin for this kernel")
    wheel = inspect_wheel(wheel_bytes, limits)
    if sorted(manifest.requires_dist) != sorted(wheel.requires_dist):
        raise ArtifactError(f"manifest requires_dist {list(manifest.requires_dist)} differs from the wheel's "
                            f"Requires-Dist {list(wheel.requires_dist)}; repack the plugin")
    return wheel


@dataclass(frozen=True)
class SignedParts:
    """An artifact read as far as its signature can be judged: the archive is safe to have read and
    the manifest parsed strictly, but no manifest field has been acted on yet (the wheel's digest,
    ``abi_version``, the wheel itself are untouched). :func:`complete_artifact` does the rest, once
    the caller has decided the signature holds (or the operator's policy loads it anyway).

    Attributes:
        manifest, manifest_obj, wheel_name, wheel_bytes: as in :class:`Artifact`.
    """

    manifest: Manifest
    manifest_obj: Mapping[str, Any]
    wheel_name: str
    wheel_bytes: bytes

    def __repr__(self) -> str:
        return f"SignedParts({self.manifest!r}, wheel={self.wheel_name!r}, {len(self.wheel_bytes)} bytes)"


def read_signed_parts(data: bytes, *, limits: Limits = DEFAULT_LIMITS) -> SignedParts:
    """The first half of :func:`read_artifact`: the tar members (every member check) and the strictly
    parsed manifest, with nothing decided from a manifest field.

    Raises:
        HostileArchiveError / ArtifactError: as :func:`read_artifact`, for the archive and the manifest.
    """
    files = _members(data, limits)
    if MANIFEST_MEMBER not in files:
        raise ArtifactError("no manifest.json at the archive root; pack the plugin with busbar-plugin-pack")
    if len(files) != 2:
        raise ArtifactError(f"the archive holds {len(files)} regular file(s); expected exactly two: "
                            f"manifest.json and one wheel")
    manifest, obj = parse_manifest_bytes(files.pop(MANIFEST_MEMBER))
    wheel_name, wheel_bytes = files.popitem()
    return SignedParts(manifest, obj, wheel_name, wheel_bytes)


def complete_artifact(parts: SignedParts, *, limits: Limits = DEFAULT_LIMITS,
                      supported: Mapping[str, tuple[int, int]] = SUPPORTED_ABI_VERSIONS) -> Artifact:
    """The second half of :func:`read_artifact`: act on the (now trusted) manifest: the wheel's
    SHA-256, the ``abi_version`` range, the wheel's own checks and ``requires_dist``.

    Raises:
        ArtifactError: with ``.manifest`` set (see :func:`read_artifact`).
    """
    try:
        wheel = _check_parts(parts.manifest, parts.wheel_bytes, limits, supported)
    except ArtifactError as exc:
        exc.manifest = parts.manifest
        raise
    return Artifact(parts.manifest, parts.manifest_obj, parts.wheel_name, parts.wheel_bytes, wheel)


def read_artifact(data: bytes, *, limits: Limits = DEFAULT_LIMITS,
                  supported: Mapping[str, tuple[int, int]] = SUPPORTED_ABI_VERSIONS) -> Artifact:
    """Validate an artifact's structure and return its parts. Nothing is written or imported.

    Args:
        data: the ``.tar.gz`` bytes.
        limits: size limits (:class:`Limits`).
        supported: kind -> inclusive ``abi_version`` range the consumer speaks.

    Returns:
        The :class:`Artifact`.

    Raises:
        HostileArchiveError: an unsafe member (its name and why).
        ArtifactError: anything else structural (unreadable archive, missing or extra member,
            malformed or incomplete manifest, sha256 mismatch, unsupported ``abi_version``, a wheel
            without its single ``busbar.plugins`` entry point, ``requires_dist`` differing from the
            wheel's ``Requires-Dist``). ``str(e)`` ends with the fix.
    """
    return complete_artifact(read_signed_parts(data, limits=limits), limits=limits, supported=supported)


def write_artifact(manifest_json: bytes, wheel_name: str, wheel_bytes: bytes) -> bytes:
    """Deterministic ``.tar.gz`` bytes holding ``manifest.json`` then the wheel.

    Args:
        manifest_json: the manifest member (see :func:`manifest_json_bytes`).
        wheel_name: the wheel's file name (no directory part).
        wheel_bytes: the wheel.
    """
    if "/" in wheel_name or wheel_name in ("", MANIFEST_MEMBER, ".", ".."):
        raise ArtifactError(f"bad wheel member name {wheel_name!r}")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.GNU_FORMAT) as tf:
        for name, body in ((MANIFEST_MEMBER, manifest_json), (wheel_name, wheel_bytes)):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(body), 0o644, 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tf.addfile(info, io.BytesIO(body))
    return gzip.compress(buf.getvalue(), mtime=0)


def wheel_sha256(wheel_bytes: bytes) -> str:
    """Lowercase hex SHA-256 of the wheel (the manifest's ``sha256``)."""
    return hashlib.sha256(wheel_bytes).hexdigest()
