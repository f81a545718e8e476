"""Finding plugin tarballs: every ``*.tar.gz`` / ``*.tgz`` entry directly in ``plugins.dir``.

File names carry no meaning (identity is the signed manifest); other names and subdirectories are
ignored. An entry with a tarball name that is a symbolic link, a FIFO or anything but a regular file
is still returned: the reader (:func:`read_tarball`) refuses it as a fault, it is never followed or
silently skipped. Called only when ``plugins.enabled`` is true.

:func:`read_tarball` reads one tarball once, safely: opened without following a symbolic link and
without blocking on a FIFO, checked to be a regular file, its size taken from ``fstat`` *before* a
byte is read, then read with a bounded read; those very bytes are hashed, verified and extracted
(docs/plugins.md#what-aborts-the-boot).

Source: docs/plugins.md (``dir``: relative to the working directory).
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["TarballRefused", "discover", "display_name", "plugins_dir", "read_tarball"]

SUFFIXES = (".tar.gz", ".tgz")


def plugins_dir(configured: str, base_dir: Path) -> Path:
    """``plugins.dir`` resolved against ``base_dir`` (the working directory) when relative."""
    p = Path(configured).expanduser()
    return p if p.is_absolute() else Path(base_dir) / p


def display_name(configured: str, path: Path) -> str:
    """How messages name a tarball: ``plugins.dir`` as configured, then the file name."""
    return str(Path(configured) / path.name)


def discover(directory: Path) -> list[Path]:
    """Sorted tarball paths in ``directory``.

    Raises:
        FileNotFoundError: the directory does not exist; NotADirectoryError: it is a file.
    """
    if not directory.exists():
        raise FileNotFoundError(directory)
    if not directory.is_dir():
        raise NotADirectoryError(directory)
    return sorted(p for p in directory.iterdir() if p.name.endswith(SUFFIXES) and not _is_real_dir(p))


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


class TarballRefused(Exception):
    """The entry is not a tarball this loader will read; ``str(e)`` is the reason (no file prefix)."""


def read_tarball(path: Path, max_bytes: int) -> bytes:
    """The bytes of the tarball at ``path``, read once.

    Args:
        path: the entry in ``plugins.dir``.
        max_bytes: the largest tarball accepted (``Limits.archive_bytes``).

    Raises:
        TarballRefused: a symbolic link, not a regular file (FIFO, device, socket), larger than
            ``max_bytes`` (known from ``fstat`` before any read), or unreadable.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise TarballRefused("is a symbolic link; links in plugins.dir are refused (copy the tarball "
                                 "into the directory)") from None
        raise TarballRefused(f"cannot read the file: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TarballRefused("is not a regular file (a FIFO, device or socket); only regular files are "
                                 "read")
        if st.st_size > max_bytes:
            raise TarballRefused(f"is {st.st_size} bytes; the limit is {max_bytes} (nothing was read)")
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise TarballRefused(f"cannot read the file: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:   # it grew after the fstat
        raise TarballRefused(f"is more than {max_bytes} bytes; the limit is {max_bytes}")
    return data
