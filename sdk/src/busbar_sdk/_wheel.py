"""The wheel inside an artifact: structural inspection (in memory) and safe extraction.

A plugin wheel is never ``pip install``-ed: the kernel unpacks it into a private per-plugin
directory and imports it from there. Inspection refuses every member that could escape that
directory, alias another file, or exhaust the disk (C050): absolute or drive paths, ``..``
components, backslashes, symlinks and other non-regular entries, duplicates, encrypted members,
``*.data/`` trees (they install outside the package tree), oversized members and bombs.
Extraction re-checks each resolved path by path-component comparison (``Path.is_relative_to``),
writes into a temporary sibling directory and renames it into place only after every member
passed, and returns the list of files it wrote: the only list anything may ever delete (a wheel's
own ``RECORD`` is never consulted).

Source: cases C050; PEP 427 (wheel layout); PyPA entry-points specification.
"""
from __future__ import annotations

import configparser
import io
import os
import re
import shutil
import stat
import zipfile
import zlib
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path, PurePosixPath

from busbar_sdk._errors import ArtifactError, HostileArchiveError
from busbar_sdk._limits import DEFAULT_LIMITS, Limits, MiB
from busbar_sdk._versions import ENTRY_POINT_GROUP

__all__ = ["WheelInfo", "extract_wheel", "inspect_wheel"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EP_VALUE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(?::\s*([A-Za-z_][\w.]*))?\s*(?:\[[^\]]*\])?\s*$")
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class WheelInfo:
    """What the loader needs to know about a wheel, read without importing or extracting it.

    Attributes:
        dist_name: ``Name`` from ``METADATA``.
        dist_version: ``Version`` from ``METADATA``.
        entry_point: ``(name, module, attr)`` of the single ``busbar.plugins`` entry point;
            ``attr`` is ``""`` when the entry point names the module itself.
        requires_dist: ``Requires-Dist`` lines in file order.
        top_level: importable top-level module/package names the wheel provides.
        files: regular-file member names, in archive order.
        unpacked_bytes: sum of the declared uncompressed sizes.
    """

    dist_name: str
    dist_version: str
    entry_point: tuple[str, str, str]
    requires_dist: tuple[str, ...]
    top_level: tuple[str, ...]
    files: tuple[str, ...]
    unpacked_bytes: int


def _member_fault(info: zipfile.ZipInfo, seen: set[str], limits: Limits) -> str | None:
    name = info.filename
    shown = f"wheel member {name!r}"
    if "\x00" in name or "\\" in name:
        return f"{shown} contains a backslash or NUL; wheel paths use '/'"
    if name.startswith("/") or _DRIVE.match(name):
        return f"{shown} has an absolute path"
    parts = PurePosixPath(name).parts
    if ".." in parts:
        return f"{shown} climbs out of the plugin directory ('..')"
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if kind == stat.S_IFLNK:
        return f"{shown} is a symbolic link; links are refused"
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return f"{shown} is not a regular file or directory"
    if info.flag_bits & 0x1:
        return f"{shown} is encrypted"
    key = name.rstrip("/")
    if key in seen:
        return f"duplicate {shown}"
    seen.add(key)
    if parts and parts[0].endswith(".data"):
        return (f"{shown} is in a .data directory, which installs outside the package tree; "
                "plugin wheels carry only importable code")
    if info.file_size > limits.wheel_unpacked_bytes:
        return f"{shown} is {info.file_size} bytes uncompressed; the limit is {limits.wheel_unpacked_bytes}"
    if info.file_size > MiB and info.file_size > limits.wheel_ratio * max(info.compress_size, 1):
        return (f"{shown} expands {info.file_size // max(info.compress_size, 1)}x "
                f"(limit {limits.wheel_ratio}x): a decompression bomb")
    return None


def _open_zip(data: bytes) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ArtifactError(f"the wheel is not a readable zip archive ({exc})") from None


def _checked_members(zf: zipfile.ZipFile, limits: Limits) -> list[zipfile.ZipInfo]:
    infos = zf.infolist()
    if len(infos) > limits.wheel_members:
        raise HostileArchiveError(f"the wheel has {len(infos)} members; the limit is {limits.wheel_members}")
    seen: set[str] = set()
    total = 0
    for info in infos:
        fault = _member_fault(info, seen, limits)
        if fault:
            raise HostileArchiveError(fault)
        total += info.file_size
        if total > limits.wheel_unpacked_bytes:
            raise HostileArchiveError(f"the wheel expands to more than {limits.wheel_unpacked_bytes} bytes "
                                      f"(oversized, or a decompression bomb)")
    return infos


def _read_small(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    if info.file_size > MiB:
        raise HostileArchiveError(f"wheel member {info.filename!r} is larger than 1 MiB")
    try:
        return zf.read(info)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ArtifactError(f"wheel member {info.filename!r} cannot be read ({exc})") from None


def _top_level(files: list[str], dist_info: str) -> tuple[str, ...]:
    names: list[str] = []
    for f in files:
        first = f.split("/", 1)[0]
        if first == dist_info or first == "__pycache__":
            continue
        if "/" in f:
            mod = first
        elif first.endswith(".py"):
            mod = first[:-3]
        elif first.endswith((".so", ".pyd")):
            mod = first.split(".", 1)[0]
        else:
            continue  # a stray data file at the root is not importable
        if not _IDENT.match(mod):
            raise ArtifactError(f"wheel member {f!r} provides {mod!r}, which is not an importable name")
        if mod not in names:
            names.append(mod)
    return tuple(names)


def inspect_wheel(data: bytes, limits: Limits = DEFAULT_LIMITS) -> WheelInfo:
    """Check a wheel's members and read its metadata, in memory.

    Raises:
        HostileArchiveError: an unsafe member (see the module docstring), with its name.
        ArtifactError: not a wheel (no single ``*.dist-info`` with ``METADATA`` and ``WHEEL``), no
            or several ``busbar.plugins`` entry points, an entry point that is not ``module:attr``.
    """
    with _open_zip(data) as zf:
        infos = _checked_members(zf, limits)
        files = [i.filename for i in infos if not i.is_dir()]
        dist_infos = {f.split("/", 1)[0] for f in files if f.split("/", 1)[0].endswith(".dist-info")}
        if len(dist_infos) != 1:
            raise ArtifactError(f"the wheel must hold exactly one *.dist-info directory, found {len(dist_infos)}")
        dist_info = dist_infos.pop()
        by_name = {i.filename: i for i in infos}
        for required in ("METADATA", "WHEEL"):
            if f"{dist_info}/{required}" not in by_name:
                raise ArtifactError(f"the wheel has no {dist_info}/{required}; build it with pip wheel")
        meta = BytesHeaderParser().parsebytes(_read_small(zf, by_name[f"{dist_info}/METADATA"]))
        ep_info = by_name.get(f"{dist_info}/entry_points.txt")
        ep_text = _read_small(zf, ep_info).decode("utf-8", "replace") if ep_info else ""
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(ep_text)
    except configparser.Error as exc:
        raise ArtifactError(f"the wheel's entry_points.txt cannot be parsed ({exc.message})") from None
    entries = list(parser.items(ENTRY_POINT_GROUP)) if parser.has_section(ENTRY_POINT_GROUP) else []
    if len(entries) != 1:
        raise ArtifactError(f"the wheel must declare exactly one entry point in group {ENTRY_POINT_GROUP!r}, "
                            f"found {len(entries)}; add [project.entry-points.\"{ENTRY_POINT_GROUP}\"] "
                            f"<name> = \"<module>:<object>\" to its pyproject.toml")
    ep_name, ep_value = entries[0]
    m = _EP_VALUE.match(ep_value)
    if m is None:
        raise ArtifactError(f"entry point {ep_name} = {ep_value!r} is not 'module' or 'module:object'")
    return WheelInfo(
        dist_name=str(meta.get("Name", "")), dist_version=str(meta.get("Version", "")),
        entry_point=(ep_name, m.group(1), m.group(2) or ""),
        requires_dist=tuple(str(r).strip() for r in meta.get_all("Requires-Dist") or ()),
        top_level=_top_level(files, dist_info), files=tuple(files),
        unpacked_bytes=sum(i.file_size for i in infos),
    )


def extract_wheel(data: bytes, dest: Path, limits: Limits = DEFAULT_LIMITS) -> tuple[Path, ...]:
    """Extract a wheel into the new directory ``dest`` (which must not exist), all or nothing.

    Members are written into a private (0700) temporary sibling of ``dest``; each resolved target
    must lie inside it by path-component comparison; files are written 0644 whatever the zip says;
    the directory is renamed to ``dest`` only after every member passed. On any failure the
    temporary directory is removed and nothing is left behind.

    Returns:
        The absolute paths of the files written: the install record.

    Raises:
        HostileArchiveError / ArtifactError: as :func:`inspect_wheel`, or a member that resolves
            outside the directory; FileExistsError when ``dest`` exists.
    """
    if dest.exists():
        raise FileExistsError(dest)
    tmp = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o700)
    root = tmp.resolve()
    written: list[str] = []
    try:
        with _open_zip(data) as zf:
            for info in _checked_members(zf, limits):
                target = (root / info.filename).resolve()
                if not target.is_relative_to(root) or (target == root and not info.is_dir()):
                    raise HostileArchiveError(f"wheel member {info.filename!r} resolves outside the plugin directory")
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                remaining = info.file_size
                with zf.open(info) as src, open(target, "xb") as out:
                    while chunk := src.read(min(remaining + 1, MiB)):
                        remaining -= len(chunk)
                        if remaining < 0:
                            raise HostileArchiveError(f"wheel member {info.filename!r} is larger than it declares")
                        out.write(chunk)
                os.chmod(target, 0o644)
                written.append(info.filename)
        os.rename(tmp, dest)
    except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise HostileArchiveError(f"wheel member collides with another member ({exc.filename})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ArtifactError(f"the wheel cannot be extracted ({exc})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tuple(dest / w for w in written)
