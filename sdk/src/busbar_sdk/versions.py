"""The plugin contract's version constants and name/version grammar, for the kernel and tools.

Cheap to import (no cryptography, no wire models): the kernel's config schema reads it at every
config load. The same names are re-exported by :mod:`busbar_sdk.artifact` and :mod:`busbar_sdk`.

- ``TRANSPORT_VERSION``: what ``busbar_abi()`` returns (the frozen signature contract of the six hooks).
- ``HOOK_ABI_VERSION`` ... ``AUTH_ABI_VERSION``, ``SUPPORTED_ABI_VERSIONS``: per-kind payload versions.
- ``KINDS``, ``RESERVED_PUBLISHER``, ``ENTRY_POINT_GROUP``, ``PROJECT_NAME``.
- :func:`is_valid_name` / ``NAME_PATTERN``: plugin names, aliases and publishers (``[a-z0-9-]+``).
- :func:`parse_semver` / :class:`SemVer`: strict semantic versions.
"""
from __future__ import annotations

import re

from busbar_sdk._semver import SemVer, parse_semver
from busbar_sdk._versions import (
    AUTH_ABI_VERSION,
    ENTRY_POINT_GROUP,
    HOOK_ABI_VERSION,
    KINDS,
    PROJECT_NAME,
    RESERVED_PUBLISHER,
    SECRET_ABI_VERSION,
    STORE_ABI_VERSION,
    SUPPORTED_ABI_VERSIONS,
    TRANSPORT_VERSION,
    Kind,
)

__all__ = [
    "AUTH_ABI_VERSION",
    "ENTRY_POINT_GROUP",
    "HOOK_ABI_VERSION",
    "KINDS",
    "NAME_PATTERN",
    "PROJECT_NAME",
    "RESERVED_PUBLISHER",
    "SECRET_ABI_VERSION",
    "STORE_ABI_VERSION",
    "SUPPORTED_ABI_VERSIONS",
    "TRANSPORT_VERSION",
    "Kind",
    "SemVer",
    "is_valid_name",
    "parse_semver",
]

#: A plugin name, alias or publisher: 1-64 lowercase letters, digits and inner dashes.
NAME_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$"
_NAME = re.compile(NAME_PATTERN)


def is_valid_name(value: object) -> bool:
    """True when ``value`` is a valid plugin name, alias or publisher (``[a-z0-9-]+``, no edge dash)."""
    return isinstance(value, str) and _NAME.match(value) is not None
