"""The loader's exceptions. Every message is one operator-facing line, file first.

Tree::

    PluginError                 base of everything the loader raises on purpose
     ├── PluginBootError        the plugin set cannot be built; ``.faults`` is a list of lines
     │                          (``plugins/acme-1.2.0.tar.gz: sha256 mismatch: ...; repack the plugin``)
     ├── PluginOpenError        ``busbar_open`` raised or returned nothing
     ├── PluginCallError        ``busbar_call`` raised, returned a non-dict, or exceeded its grant
     └── SecretResolutionError  a ``{ module: <secret-plugin> }`` reference could not be resolved

Plugin code's own exceptions never escape the loader unwrapped (the original is chained as
``__cause__``). Source: docs/plugins.md, docs/configuration.md#startup-checks
"""
from __future__ import annotations

from collections.abc import Iterable

from busbar.faults import FaultList

__all__ = ["PluginBootError", "PluginCallError", "PluginError", "PluginOpenError", "SecretResolutionError"]


class PluginError(Exception):
    """Base class of the loader's errors."""


class PluginBootError(FaultList, PluginError):
    """One or more tarballs are invalid or conflict; the boot (or reload) must not proceed.

    Attributes:
        faults: one line per fault, each naming the file(s) and the fix.
        imported: ``False`` when every fault was found from the manifests, before any plugin code
            was imported (what ``busbar --validate`` reports too); ``True`` for an import, ABI
            binding or kind-report failure, which only a real boot can see.
    """

    def __init__(self, faults: Iterable[str], *, imported: bool = False) -> None:
        super().__init__(faults)
        self.imported = imported


class PluginOpenError(PluginError):
    """``busbar_open`` failed for an instance."""


class PluginCallError(PluginError):
    """``busbar_call`` failed; for a gate the caller applies its ``on_error``."""


class SecretResolutionError(PluginError):
    """A secret reference naming a plugin could not be resolved."""
