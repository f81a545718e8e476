"""The ABI as the kernel sees it: versions, the hookspec module, the typed facade type.

Kernel code imports these names from here (one place to look), never calls ``pm.hook.<name>``:
each loaded plugin's six hooks are resolved once into a :class:`PluginBinding` and called through
:class:`busbar.loader.registry.PluginInstance`.

Source: docs/plugins.md#the-abi
"""
from __future__ import annotations

from busbar_sdk import hookspec
from busbar_sdk.artifact import PluginBinding
from busbar_sdk.versions import (
                                  ENTRY_POINT_GROUP,
                                  HOOK_ABI_VERSION,
                                  KINDS,
                                  PROJECT_NAME,
                                  SUPPORTED_ABI_VERSIONS,
                                  TRANSPORT_VERSION,
)

__all__ = [
                                  "ENTRY_POINT_GROUP",
                                  "HOOK_ABI_VERSION",
                                  "KINDS",
                                  "PROJECT_NAME",
                                  "SUPPORTED_ABI_VERSIONS",
                                  "TRANSPORT_VERSION",
                                  "PluginBinding",
                                  "hookspec",
]
