"""Downgrade protection: the highest version of each plugin this gateway has loaded, kept on disk.

A validly signed *older* release of a plugin must not silently replace a newer one (it may bring
back a fixed vulnerability). After every successful load the loader records, per manifest name, the
highest version it loaded with a trusted signature (``first-party`` or ``trusted``); a later scan
refuses a plugin whose version is below its mark with ``downgrade from X to Y``. The operator allows
one deliberate downgrade by naming the plugin in ``BUSBAR_ALLOW_DOWNGRADE`` (comma-separated manifest
names) for that boot; the mark then follows the version actually loaded
(docs/plugins.md#downgrade-protection).

The marks live in one small JSON object, ``{"<name>": "<version>", ...}``, in the file
``<plugins.dir>.high-water.json`` beside the plugin directory (never inside it: the directory may be
a read-only mount). It is written atomically (a temporary file in the same directory, fsync, rename).
Reading never writes; ``busbar --validate`` and ``--list-plugins`` only read it.

With a shared store (anything but ``memory``) the marks are fleet-wide too: :func:`check_fleet_marks`
runs when the store opens at boot, refuses a plugin below the mark another node recorded in the
store, and raises the store's marks to the versions loaded (the file is still kept).
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from busbar_sdk.artifact import parse_semver

if TYPE_CHECKING:
    from busbar_sdk.store import Store

__all__ = ["ALLOW_ENV", "STORE_PREFIX", "HighWaterError", "allowed_downgrades", "below_mark", "check_fleet_marks",
           "high_water_path", "read_marks", "record_marks"]

log = logging.getLogger("busbar.plugins")

#: The environment variable naming the plugins allowed to load below their mark on this boot.
ALLOW_ENV = "BUSBAR_ALLOW_DOWNGRADE"
_RECORDED = ("first-party", "trusted")


class HighWaterError(Exception):
    """The marks file exists but cannot be read as marks; ``str(e)`` is one fault line."""


def high_water_path(directory: Path) -> Path:
    """The marks file of the plugin directory ``directory`` (``plugins`` -> ``plugins.high-water.json``)."""
    return directory.parent / f"{directory.name}.high-water.json"


def allowed_downgrades(env: Mapping[str, str]) -> frozenset[str]:
    """The manifest names listed in ``BUSBAR_ALLOW_DOWNGRADE`` (comma- or space-separated)."""
    return frozenset(n for n in env.get(ALLOW_ENV, "").replace(",", " ").split() if n)


def read_marks(path: Path) -> dict[str, str]:
    """The recorded marks; ``{}`` when the file does not exist.

    Raises:
        HighWaterError: the file is unreadable, not JSON, or not a map of name -> semver.
    """
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise HighWaterError(f"{path}: cannot read the plugin version marks ({exc}); fix its "
                             f"permissions") from None
    try:
        marks = json.loads(text)
    except ValueError:
        marks = None
    if not isinstance(marks, dict) or not all(isinstance(k, str) and isinstance(v, str) and parse_semver(v)
                                              for k, v in marks.items()):
        raise HighWaterError(f"{path}: not a JSON map of plugin name -> version; restore it from a backup "
                             f"(deleting it forgets every mark and with it the downgrade protection)")
    return marks


def below_mark(version: str, mark: str | None) -> bool:
    """True when ``version`` is older than the recorded ``mark`` (semver precedence)."""
    if mark is None:
        return False
    v, m = parse_semver(version), parse_semver(mark)
    return v is not None and m is not None and v.key() < m.key()


def record_marks(path: Path, loaded: Iterable[tuple[str, str, str]],
                 allowed: frozenset[str] = frozenset()) -> None:
    """Raise the marks to the versions just loaded and write the file atomically.

    Args:
        path: the marks file.
        loaded: ``(name, version, signature verdict)`` of every plugin loaded; only ``first-party`` and
            ``trusted`` versions are recorded (an unsigned plugin proves no version).
        allowed: names loaded under ``BUSBAR_ALLOW_DOWNGRADE``: their mark becomes the loaded version.

    A write failure is logged (the load already succeeded) and never raised.
    """
    try:
        marks = read_marks(path)
    except HighWaterError:
        return                   # the scan reported it; never overwrite a file we could not read
    changed = False
    for name, version, verdict in loaded:
        if verdict not in _RECORDED:
            continue
        raise_it = name in allowed or name not in marks or below_mark(marks[name], version)
        if raise_it and marks.get(name) != version:
            marks[name] = version
            changed = True
    if not changed:
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(marks, fh, sort_keys=True, indent=2)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.error("%s: cannot record the plugin version marks (%s); downgrade protection falls back to "
                  "plugins.min_versions until it can", path, exc.strerror or exc)


#: Store meta name prefix of the fleet-wide marks (``plugins.high_water.<manifest name>`` -> version).
STORE_PREFIX = "plugins.high_water."


async def check_fleet_marks(store: Store, loaded: Iterable[tuple[str, str, str, str]],
                            allowed: frozenset[str] = frozenset()) -> list[str]:
    """Downgrade protection across a fleet: the marks kept in a shared store, beside the file's.

    Every node of a fleet loads its plugins from its own ``plugins.dir``, so one node's file cannot
    stop another from loading an older release. With a shared store the marks also live in the
    store (meta ``plugins.high_water.<name>``): a plugin below the fleet's mark is refused exactly
    as below the file's, and once every plugin passes the marks rise to the versions loaded.

    Args:
        store: the opened shared store.
        loaded: ``(file, name, version, signature verdict)`` of every loaded plugin; only
            ``first-party`` and ``trusted`` ones are checked and recorded.
        allowed: names loaded under ``BUSBAR_ALLOW_DOWNGRADE`` (below the mark: logged, and the
            mark follows the loaded version).

    Returns:
        one fault line per refused plugin (nothing is written then), or ``[]``.

    Raises:
        busbar_sdk.store.StoreError: the store failed.
    """
    todo: list[tuple[str, str]] = []
    faults: list[str] = []
    for file, name, version, verdict in loaded:
        if verdict not in _RECORDED:
            continue
        mark = await store.get_meta(STORE_PREFIX + name)
        if below_mark(version, mark):
            if name not in allowed:
                faults.append(f"{file}: downgrade from {mark} to {version} of {name!r} refused ({mark} is the highest "
                              f"version this fleet has loaded, recorded in the store); install {mark} or newer, or "
                              f"allow it for one boot with {ALLOW_ENV}={name}")
                continue
            log.warning("%s: downgrade from %s to %s of %r allowed by %s (the fleet's mark in the store)", file,
                        mark, version, name, ALLOW_ENV)
            todo.append((name, version))
        elif mark != version:
            todo.append((name, version))
    if faults:
        return faults
    for name, version in todo:
        stored = await store.put_meta(STORE_PREFIX + name, version, only_if_absent=True)
        if stored != version and (below_mark(stored, version) or name in allowed):
            await store.put_meta(STORE_PREFIX + name, version)
    return []
