"""Size and count limits applied while reading an artifact, before anything is trusted.

Every limit is checked *before* the bytes it guards are decompressed or written, so an oversized
member or a decompression bomb is refused having cost at most the limit. The kernel passes its own
``Limits`` to the loader; the defaults fit any reasonable pure-Python plugin.

Source: cases C050 (h).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_LIMITS", "Limits", "MiB"]

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Artifact limits, all in bytes except the member count and the ratio.

    Attributes:
        archive_bytes: the ``.tar.gz`` file as stored.
        manifest_bytes: the ``manifest.json`` member.
        wheel_bytes: the wheel member (compressed zip).
        wheel_members: entries in the wheel.
        wheel_unpacked_bytes: the sum of the wheel's declared uncompressed sizes.
        wheel_ratio: the largest uncompressed/compressed ratio accepted for a wheel member
            larger than 1 MiB (a higher one is treated as a decompression bomb).
    """

    archive_bytes: int = 96 * MiB
    manifest_bytes: int = 1 * MiB
    wheel_bytes: int = 64 * MiB
    wheel_members: int = 10_000
    wheel_unpacked_bytes: int = 256 * MiB
    wheel_ratio: int = 200

    @property
    def tar_unpacked_bytes(self) -> int:
        """Cap on the decompressed tar stream: both members plus headers and padding."""
        return self.manifest_bytes + self.wheel_bytes + 64 * 1024


DEFAULT_LIMITS = Limits()
