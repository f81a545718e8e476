"""The Busbar release public key embedded in the kernel (first-party trust with zero config).

The key is *generated into* this package by ``tools/build-plugins`` as ``_release_pubkey.py``
(git-ignored, a Python module so every wheel of the kernel carries it): from
``BUSBAR_RELEASE_PUBKEY`` / ``BUSBAR_RELEASE_SIGN_KEY`` in release CI, or from a local key
``~/.config/busbar/release-signing.key`` on a from-source build. Its private half is never in
the repository. When the module is absent the kernel has no release key and ``publisher:
busbar`` plugins do not verify (they are skipped with a reason saying so). docs/releasing.md
has the procedure. There is deliberately no runtime override.

Source: docs/plugins.md (embedded release key).
"""
from __future__ import annotations

import functools
import importlib
import logging
import re

__all__ = ["GENERATED_MODULE", "embedded_release_key"]

GENERATED_MODULE = "busbar.loader._release_pubkey"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
log = logging.getLogger("busbar.plugins")


@functools.cache
def embedded_release_key() -> bytes | None:
    """The 32-byte release public key, or ``None`` when this kernel was built without one."""
    try:
        mod = importlib.import_module(GENERATED_MODULE)
    except ImportError:
        return None
    value = getattr(mod, "RELEASE_PUBKEY", "")
    if not isinstance(value, str) or not _HEX64.match(value):
        log.error("%s is malformed (RELEASE_PUBKEY must be 64 lowercase hex); first-party plugins will not "
                  "verify; rerun tools/build-plugins", GENERATED_MODULE)
        return None
    return bytes.fromhex(value)
