"""The gateway's store: the compiled-in memory default or a ``kind: store`` plugin behind one contract.

``select_store(store_cfg, plugins) -> Store`` picks the backend that ``store.module`` names (an
alias ``memory``, ``sqlite``, ``postgres``, ``redis``/``valkey`` or a canonical plugin name) and
builds it with ``store.settings``; ``await open_store(store)`` connects and migrates. Both raise
:class:`StoreBootError`, whose ``faults`` are one line each, naming the key and the fix. The
contract, the records and the wire are the sdk's (:mod:`busbar_sdk.store`). See docs/stores.md.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from busbar_sdk.store import MemoryStore, RemoteStore, Store, StoreError

__all__ = ["ALIASES", "StoreBootError", "backend_name", "open_store", "select_store"]

#: ``store.module`` aliases of the first-party store plugins (``redis`` is the 1.5.0 name).
ALIASES: Mapping[str, str] = {
    "sqlite": "busbar-store-sqlite",
    "postgres": "busbar-store-postgres",
    "redis": "busbar-store-valkey",
    "valkey": "busbar-store-valkey",
}


def backend_name(plugin_name: str) -> str:
    """The backend a store plugin's faults and records name: ``busbar-store-sqlite`` -> ``sqlite``;
    a third-party plugin's manifest name unchanged."""
    return plugin_name.removeprefix("busbar-store-")


class StoreBootError(Exception):
    """The configured store cannot be built or opened; ``faults`` are the lines to print,
    ``summary`` the CLI's closing line (``busbar: <summary>; refusing to start``) and ``status``
    its exit status (1: the store is unreachable; 2: a fault the operator fixes in the files)."""

    def __init__(self, faults: list[str], *, summary: str = "the store could not be opened", status: int = 1) -> None:
        super().__init__("\n".join(faults))
        self.faults = faults
        self.summary = summary
        self.status = status


def _lines(where: str, exc: BaseException) -> list[str]:
    text = str(exc)
    return [line if line.startswith("store.") else f"{where}: {line}" for line in text.splitlines() if line]


def select_store(module: str, settings: Mapping[str, Any], plugins: Any) -> Store:
    """Build (without connecting) the store ``module`` names.

    Args:
        module: ``store.module``.
        settings: ``store.settings`` (secret references resolved).
        plugins: the loaded :class:`~busbar.loader.registry.PluginSet`, or ``None`` when plugins
            are disabled.

    Raises:
        StoreBootError: no such store plugin, one without the async twin, or settings it refuses.
    """
    if module == "memory":
        return MemoryStore.from_settings(dict(settings))
    plugin = None
    if plugins is not None:
        plugin = plugins.get(module) or plugins.get(ALIASES.get(module, module))
    if plugin is None or plugin.kind != "store":
        raise StoreBootError([f"config.yaml: store.module: '{module}' is not a loaded kind: store plugin; set "
                              f"plugins.enabled: true and put its signed tarball in plugins.dir"])
    from busbar.loader.errors import PluginOpenError

    try:
        instance = plugin.open(dict(settings))
    except PluginOpenError as exc:
        cause = exc.__cause__
        raise StoreBootError(_lines("config.yaml: store.settings", cause if isinstance(cause, StoreError)
                                    else exc)) from None
    if instance.acall is None:
        raise StoreBootError([f"config.yaml: store.module: {plugin.file} has no async twin "
                              f"(busbar_call.busbar_acall); a store plugin must serve its operations "
                              f"asynchronously (busbar_sdk.store.export_store does)"])
    return RemoteStore(instance.acall, backend=backend_name(plugin.name))


async def open_store(store: Store) -> None:
    """Connect and create or migrate the schema.

    Raises:
        StoreBootError: unreachable (the message names the target without its password) or a
            schema newer than this build.
    """
    try:
        await store.open()
    except StoreError as exc:
        raise StoreBootError([f"store ({store.backend}): {line}" for line in str(exc).splitlines()]) from None
