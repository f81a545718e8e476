"""Strict semantic versions (semver.org 2.0.0): parse and precedence, nothing else.

``MAJOR.MINOR.PATCH`` with optional ``-prerelease`` and ``+build``; no leading zeros, no ``v``
prefix. Build metadata is ignored for precedence. Used for manifest ``version`` and for
``plugins.min_versions`` floors.

Source: https://semver.org/#spec-item-11.
"""
from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["SemVer", "parse_semver"]

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


class SemVer(NamedTuple):
    """A parsed version; compare with :meth:`key` (tuple order is not semver precedence)."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...]
    build: str

    def key(self) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
        """Sort key implementing semver precedence (a pre-release sorts before its release)."""
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.prerelease)
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, pre)

    def __str__(self) -> str:
        s = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            s += "-" + ".".join(self.prerelease)
        if self.build:
            s += "+" + self.build
        return s


def parse_semver(text: str) -> SemVer | None:
    """Parse a strict semver string; ``None`` when it is not one (``v1.2.3``, ``1.2``, ``01.2.3``)."""
    m = _SEMVER.match(text) if isinstance(text, str) else None
    if m is None:
        return None
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    return SemVer(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, m.group(5) or "")
