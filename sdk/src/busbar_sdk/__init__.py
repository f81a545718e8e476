"""Busbar plugin SDK: write a hook, store, secret or auth plugin against the pluggy ABI.

Public surface (pinned by a test): the base classes and :func:`export_plugin`, the reply arms
most plugins return, the errors, and the version constants. Submodules: :mod:`busbar_sdk.hookspec`
(the ABI), :mod:`busbar_sdk.models` (every wire message and reply), :mod:`busbar_sdk.artifact`
(the signed tarball format, for tools), :mod:`busbar_sdk.testing` (load a packed plugin as the
kernel does), :mod:`busbar_sdk.sidecar` (serve the same class over HTTP).

Importing the sdk does no I/O. Source: docs/plugins.md#the-abi
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Lazy public surface (PEP 562): importing a submodule (``busbar_sdk._semver`` for the kernel's
# config checks, say) must not pay for every wire model. Each name resolves on first access.
_EXPORTS = {
    "AuthPlugin": "_base", "DictHookPlugin": "_base", "HookPlugin": "_base", "Plugin": "_base", "PluginExport": "_base",
    "SecretPlugin": "_base", "StorePlugin": "_base", "export_plugin": "_base",
    "PluginBinding": "_binding",
    "ArtifactError": "_errors", "BindingError": "_errors", "BuildError": "_errors",
    "HostileArchiveError": "_errors", "PayloadError": "_errors", "SdkError": "_errors",
    "SigningError": "_errors",
    "Abstain": "_models_hook", "Order": "_models_hook", "Reject": "_models_hook",
    "Restrict": "_models_hook", "Rewrite": "_models_hook",
    "AUTH_ABI_VERSION": "_versions", "HOOK_ABI_VERSION": "_versions", "SECRET_ABI_VERSION": "_versions",
    "STORE_ABI_VERSION": "_versions", "TRANSPORT_VERSION": "_versions",
    "hookimpl": "hookspec",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'busbar_sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"busbar_sdk.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # static checkers see the eager imports
    from busbar_sdk._base import (
        AuthPlugin,
        DictHookPlugin,
        HookPlugin,
        Plugin,
        PluginExport,
        SecretPlugin,
        StorePlugin,
        export_plugin,
    )
    from busbar_sdk._binding import PluginBinding
    from busbar_sdk._errors import (
        ArtifactError,
        BindingError,
        BuildError,
        HostileArchiveError,
        PayloadError,
        SdkError,
        SigningError,
    )
    from busbar_sdk._models_hook import Abstain, Order, Reject, Restrict, Rewrite
    from busbar_sdk._versions import (
        AUTH_ABI_VERSION,
        HOOK_ABI_VERSION,
        SECRET_ABI_VERSION,
        STORE_ABI_VERSION,
        TRANSPORT_VERSION,
    )
    from busbar_sdk.hookspec import hookimpl

__version__ = "1.5.0"

__all__ = [
                                "AUTH_ABI_VERSION",
                                "HOOK_ABI_VERSION",
                                "SECRET_ABI_VERSION",
                                "STORE_ABI_VERSION",
                                "TRANSPORT_VERSION",
                                "Abstain",
                                "ArtifactError",
                                "AuthPlugin",
                                "BindingError",
                                "BuildError",
                                "DictHookPlugin",
                                "HookPlugin",
                                "HostileArchiveError",
                                "Order",
                                "PayloadError",
                                "Plugin",
                                "PluginBinding",
                                "PluginExport",
                                "Reject",
                                "Restrict",
                                "Rewrite",
                                "SdkError",
                                "SecretPlugin",
                                "SigningError",
                                "StorePlugin",
                                "export_plugin",
                                "hookimpl",
]
