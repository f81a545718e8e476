"""Finding plugin tarballs: every ``*.tar.gz`` / ``*.tgz`` regular file directly in ``plugins.dir``.

File names carry no meaning (identity is the signed manifest); other files and subdirectories
are ignored. Called only when ``plugins.enabled`` is true.

Source: seeds 001 "plugins" (``dir``: relative to the working directory).
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["discover", "display_name", "plugins_dir"]

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
    return sorted(p for p in directory.iterdir() if p.name.endswith(SUFFIXES) and p.is_file())
