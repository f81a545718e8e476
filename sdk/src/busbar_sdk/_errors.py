"""The sdk's exceptions. One base, split by what failed; every message is one operator-facing line.

Tree::

    SdkError                    base of everything the sdk raises on purpose
     ├── ArtifactError          a tarball, its manifest or its wheel is structurally invalid
     │    └── HostileArchiveError   a member that could escape, link, or exhaust (C050)
     ├── SigningError           key material is malformed (not 64 hex, wrong length)
     ├── BindingError           a plugin object does not satisfy the pluggy ABI (missing hook,
     │                          transport version, kind mismatch, import failure)
     ├── PayloadError           a wire message does not match its typed model
     └── BuildError             building a wheel from a project directory failed

One base per distribution, the tree drawn here.
"""
from __future__ import annotations

__all__ = [
    "ArtifactError",
    "BindingError",
    "BuildError",
    "HostileArchiveError",
    "PayloadError",
    "SdkError",
    "SigningError",
]


class SdkError(Exception):
    """Base class; ``str(e)`` is a complete one-line message."""


class ArtifactError(SdkError):
    """The artifact is structurally invalid. ``reason`` is the line without any file prefix."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        #: The parsed manifest when the fault came after it parsed (sha256, abi, wheel); else None.
        self.manifest: object | None = None
        super().__init__(reason)


class HostileArchiveError(ArtifactError):
    """A tar or wheel member that is absolute, climbs with ``..``, is a link or device, is
    duplicated, or is oversized / a decompression bomb. Nothing was written."""


class SigningError(SdkError):
    """Key material is malformed."""


class BindingError(SdkError):
    """The plugin's code does not satisfy the ABI."""


class PayloadError(SdkError):
    """A wire message does not match its model (missing required field, wrong type)."""


class BuildError(SdkError):
    """A wheel could not be built from a project directory."""
