"""Where plugin wheels are unpacked: a private staging root, one directory per plugin.

The wheel is never ``pip install``-ed into the kernel's environment. Each verified wheel is
extracted (all or nothing, C050 checks, :func:`busbar_sdk.artifact.extract_wheel`) into
``<root>/<name>-<version>-<sha256[:12]>/``. The root is a fresh ``0700`` directory under the
system temp dir (``busbar-plugins-<pid>-*``), never inside ``plugins.dir`` (which may be a
read-only mount); stale roots of dead processes are swept when a new one is created; the root is
removed at exit. Removing a plugin deletes only the directory this module created.

Source: docs/plugins.md; cases C050.
"""
from __future__ import annotations

import atexit
import functools
import logging
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

from busbar_sdk.artifact import Artifact, Limits, extract_wheel

__all__ = ["Staging", "default_staging"]

log = logging.getLogger("busbar.plugins")
_PREFIX = "busbar-plugins-"
_STALE = re.compile(rf"^{_PREFIX}(\d+)-")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Staging:
    """A staging root and the plugin directories unpacked into it.

    Args:
        root: use this directory (created if missing; the caller owns it) instead of a fresh
            private one under the temp dir.
    """

    def __init__(self, root: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._owned_root = root is None
        if root is None:
            _sweep_stale()
            root = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
            atexit.register(self.remove_all)
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.root = root

    def unpack(self, artifact: Artifact, limits: Limits) -> Path:
        """Extract the artifact's wheel into its own new directory; returns the directory.

        Raises:
            ArtifactError / HostileArchiveError: a member failed the checks (nothing is left).
        """
        m = artifact.manifest
        with self._lock:
            base = f"{m.name}-{m.version}-{m.sha256[:12]}"
            dest, n = self.root / base, 1
            while dest.exists():
                n += 1
                dest = self.root / f"{base}.{n}"
            extract_wheel(artifact.wheel_bytes, dest, limits)
        return dest

    def remove(self, directory: Path) -> None:
        """Delete one plugin directory this staging created (never anything else)."""
        if directory.parent != self.root:
            raise ValueError(f"{directory} is not a plugin directory of {self.root}")
        shutil.rmtree(directory, ignore_errors=True)

    def remove_all(self) -> None:
        """Delete the whole root when this object created it; else only the plugin directories."""
        if self._owned_root:
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            for child in self.root.iterdir() if self.root.exists() else ():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)


def _sweep_stale() -> None:
    tmp = Path(tempfile.gettempdir())
    try:
        entries = list(tmp.iterdir())
    except OSError:
        return
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in entries:
        m = _STALE.match(entry.name)
        if not m or int(m.group(1)) == os.getpid() or _pid_alive(int(m.group(1))):
            continue
        try:
            st = entry.lstat()
        except OSError:
            continue
        if entry.is_symlink() or not entry.is_dir() or (uid is not None and st.st_uid != uid):
            continue
        log.info("removing stale plugin staging directory %s", entry)
        shutil.rmtree(entry, ignore_errors=True)


@functools.cache
def default_staging() -> Staging:
    """The process-wide staging root, created on first use."""
    return Staging()
