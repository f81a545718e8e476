"""Export a :class:`~busbar_sdk.store.contract.Store` subclass as a ``kind: store`` plugin.

::

    class MyStore(Store):
        @classmethod
        def from_settings(cls, settings: dict) -> "MyStore": ...   # validate, no I/O
        ...

    plugin = export_store(MyStore)        # the object the "busbar.plugins" entry point names

``busbar_open(settings)`` calls ``from_settings`` (synchronously: it must only validate and
build, raising :class:`~busbar_sdk.store.errors.StoreInvalid` with one line per bad setting);
every operation, ``open`` included, then goes through the async twin
``busbar_call.busbar_acall``, served by :func:`~busbar_sdk.store.wire.dispatch`. The synchronous
``busbar_call`` answers ``unsupported``: store I/O never blocks the event loop.
"""
from __future__ import annotations

from typing import Any, Protocol

from busbar_sdk._versions import TRANSPORT_VERSION
from busbar_sdk.hookspec import hookimpl
from busbar_sdk.store.contract import Store
from busbar_sdk.store.wire import dispatch

__all__ = ["StoreExport", "export_store"]


class _StoreFactory(Protocol):
    def from_settings(self, settings: dict[str, Any]) -> Store: ...


async def _acall(handle: Store, payload: dict[str, Any]) -> dict[str, Any]:
    return await dispatch(handle, payload)


class StoreExport:
    """The ABI implementation for a store class (what :func:`export_store` returns)."""

    def __init__(self, cls: _StoreFactory) -> None:
        self.store_class = cls

    @hookimpl
    def busbar_abi(self) -> int:
        return TRANSPORT_VERSION

    @hookimpl
    def busbar_plugin_kind(self) -> str:
        return "store"

    @hookimpl
    def busbar_open(self, settings: dict[str, Any]) -> object:
        return self.store_class.from_settings(dict(settings or {}))

    @hookimpl
    def busbar_call(self, handle: Store, payload: dict[str, Any]) -> dict[str, Any]:
        return {"error": {"kind": "unsupported",
                          "message": "store operations are asynchronous: call busbar_call.busbar_acall"}}

    busbar_call.busbar_acall = _acall  # type: ignore[attr-defined]

    @hookimpl
    def busbar_free(self, handle: Store, obj: object) -> None:
        return None

    @hookimpl
    def busbar_close(self, handle: Store) -> None:
        return None     # connections are released by the "close" operation, awaited by the kernel

    def __repr__(self) -> str:
        return f"export_store({getattr(self.store_class, '__qualname__', self.store_class)!r})"


def export_store(cls: _StoreFactory) -> StoreExport:
    """Wrap a store class (with a ``from_settings`` classmethod) as a plugin's ABI object."""
    return StoreExport(cls)
