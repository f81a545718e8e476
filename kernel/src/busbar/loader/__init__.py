"""The plugin loader: discover, validate (structure, then trust), unpack, import, register, freeze.

Public entry points::

    load_plugins(cfg, *, base_dir, import_code=True) -> PluginSet     # boot / --validate
    PluginSet.get(name_or_alias) -> LoadedPlugin | None
    LoadedPlugin.open(settings, *, prompt="no", user="no") -> PluginInstance
    PluginInstance.call(payload) -> dict                               # the hot path
    busbar.loader.inventory.list_plugins_lines(cfg, base_dir) -> list[str]   # --list-plugins
    busbar.loader.reload.PluginReloader(cfg, base_dir=...).reload() -> bool  # SIGHUP
    busbar.loader.secrets.SecretModuleResolver(plugin_set)             # { module: <secret-plugin> }

Module map: ``discover`` (find tarballs), ``verify`` (pure trust), ``unpack`` (staging dirs),
``pipeline`` (the phases, register + freeze), ``registry`` (the frozen set, instances, grants),
``inventory``, ``reload``, ``secrets``, ``release_key``, ``abi``, ``errors``. The artifact format
itself lives once in ``busbar_sdk.artifact``.

Source: docs/plugins.md#the-abi
"""
from __future__ import annotations

from busbar.loader.errors import (
           PluginBootError,
           PluginCallError,
           PluginError,
           PluginOpenError,
           SecretResolutionError,
)
from busbar.loader.pipeline import load_plugins, unload
from busbar.loader.registry import Grant, LoadedPlugin, PluginInstance, PluginSet, Record
from busbar.loader.reload import PluginReloader

__all__ = [
           "Grant",
           "LoadedPlugin",
           "PluginBootError",
           "PluginCallError",
           "PluginError",
           "PluginInstance",
           "PluginOpenError",
           "PluginReloader",
           "PluginSet",
           "Record",
           "SecretResolutionError",
           "load_plugins",
           "unload",
]
