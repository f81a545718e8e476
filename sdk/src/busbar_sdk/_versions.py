"""Version constants of the plugin contract, shared by the kernel, the pack tool and plugins.

``TRANSPORT_VERSION`` is what ``busbar_abi()`` returns: the frozen signature contract of the six
hookspecs. ``abi_version`` in a manifest is the per-kind *payload* version; the kernel accepts a
manifest whose ``abi_version`` lies in ``SUPPORTED_ABI_VERSIONS[kind]`` (inclusive).

Source: docs/plugins.md#the-abi
"""
from __future__ import annotations

from typing import Final, Literal

__all__ = [
           "AUTH_ABI_VERSION",
           "ENTRY_POINT_GROUP",
           "HOOK_ABI_VERSION",
           "KINDS",
           "PROJECT_NAME",
           "RESERVED_PUBLISHER",
           "SECRET_ABI_VERSION",
           "STORE_ABI_VERSION",
           "SUPPORTED_ABI_VERSIONS",
           "TRANSPORT_VERSION",
           "Kind",
]

TRANSPORT_VERSION: Final = 1
HOOK_ABI_VERSION: Final = 1
STORE_ABI_VERSION: Final = 1
SECRET_ABI_VERSION: Final = 1
AUTH_ABI_VERSION: Final = 1

Kind = Literal["hook", "store", "secret", "auth"]
KINDS: Final[tuple[str, ...]] = ("hook", "store", "secret", "auth")

#: kind -> (lowest, highest) payload version this sdk (and the kernel pinned to it) speaks.
SUPPORTED_ABI_VERSIONS: Final[dict[str, tuple[int, int]]] = {
    "hook": (HOOK_ABI_VERSION, HOOK_ABI_VERSION),
    "store": (STORE_ABI_VERSION, STORE_ABI_VERSION),
    "secret": (SECRET_ABI_VERSION, SECRET_ABI_VERSION),
    "auth": (AUTH_ABI_VERSION, AUTH_ABI_VERSION),
}

#: The publisher name only the release key embedded in the kernel may sign for.
RESERVED_PUBLISHER: Final = "busbar"

#: Entry-point group a plugin wheel registers its one plugin object under.
ENTRY_POINT_GROUP: Final = "busbar.plugins"

#: The pluggy project name (``HookspecMarker("busbar")``).
PROJECT_NAME: Final = "busbar"
