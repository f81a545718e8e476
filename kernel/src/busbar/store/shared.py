"""Hook plugins' shared state: the kernel's side of ``busbar_sdk.shared_state``.

:class:`StoreBridge` (``gw.state_bridge``, one per process, made by ``attach_store``) carries a
call from a plugin's worker thread to the store on the serving event loop
(``asyncio.run_coroutine_threadsafe(...).result(timeout)``); it runs between
``busbar.store.attach.start_store`` (:meth:`StoreBridge.start`) and ``stop_store``
(:meth:`StoreBridge.stop`). :class:`StoreState` is one hook instance's
:class:`~busbar_sdk.shared_state.SharedState` over it, every name prefixed with the instance's
namespace (:func:`namespace_of`). :func:`bind_hooks` hands one to every instance of ``gw.hooks``
whose plugin implements ``busbar_bind_state``, when the bridge runs on a shared store (not
``memory``): at boot, after a plugin hot reload and after a config apply; :func:`follow_settings`
moves an instance's state to the namespace of the settings a ``PATCH`` gave it.

Mapping onto the store: ``get``/``put`` are ``kv_get``/``kv_put`` (``busbar_sdk.store.kv``);
``admit`` is one ``strict_admit`` (metric ``requests``, bucket ``<namespace>:<counter>``, the
window aligned to the epoch, expiring an hour after the window), ``add`` a ``strict_settle``
(``add``, no release), ``count`` a ``strict_get`` (``used + reserved``). Any
:class:`~busbar_sdk.store.StoreError`, a timeout, or a call before start / after stop is a
:class:`~busbar_sdk.shared_state.SharedStateError`.

Source: docs/plugins.md#shared-state.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
from busbar_sdk.shared_state import (
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    SHARED_STATE_VERSION,
    SharedStateError,
    SharedStateInvalid,
    check_counter,
    check_key,
    check_put,
)
from busbar_sdk.store import Store, StoreError, StrictCharge, StrictRelease
from busbar_sdk.store.strict import EXPIRY_GRACE_S

if TYPE_CHECKING:
    from busbar.proxy.context import GatewayContext

__all__ = ["StoreBridge", "StoreState", "bind_hooks", "follow_settings", "namespace_of"]

log = logging.getLogger("busbar.hooks")
T = TypeVar("T")


class StoreBridge:
    """The store on the serving loop, reachable from worker threads (see the module docstring).

    Args:
        store: the process's store (opened by ``start_store``).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    @property
    def shared(self) -> bool:
        """Running on a store other nodes can see (not ``memory``)."""
        return self.loop is not None and self.store.backend != "memory"

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve calls on ``loop`` (call it on that loop's thread, once the store is open)."""
        self.loop, self._loop_thread = loop, threading.get_ident()

    def stop(self) -> None:
        """Refuse later calls (:class:`SharedStateError`); calls in flight finish or time out."""
        self.loop = None

    def run(self, make: Callable[[], Awaitable[T]], timeout_s: float) -> T:
        """``await make()`` on the serving loop, waited for at most ``timeout_s`` seconds.

        Raises:
            SharedStateError: not running (stopped, or its loop closed), called on the loop's own
                thread, timed out (the operation is cancelled; it may still have reached the
                store), or a store error.
        """
        loop = self.loop
        if loop is None:
            raise SharedStateError("shared state: the store is not running")
        if threading.get_ident() == self._loop_thread:
            raise SharedStateError("shared state: called on the gateway's event loop; call it from a worker thread")

        async def call() -> T:
            return await make()
        coro = call()
        try:
            future = asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError:            # the loop closed under us (shutdown without stop())
            coro.close()
            raise SharedStateError("shared state: the gateway's event loop is closed") from None
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise SharedStateError(f"shared state: the {self.store.backend} store did not answer within "
                                   f"{timeout_s * 1000:g} ms") from None
        except StoreError as exc:
            raise SharedStateError(f"shared state: {self.store.backend}: {exc}") from None
        except concurrent.futures.CancelledError:
            raise SharedStateError("shared state: the call was cancelled (the gateway is stopping)") from None
        except Exception as exc:  # noqa: BLE001 - store plugin code: one documented error for the plugin
            raise SharedStateError(f"shared state: {self.store.backend}: {type(exc).__name__}: {exc}") from None


def namespace_of(module: str, settings: Any, prompt: str, user: str) -> str:
    """``hook:<module>:<16 hex digits>``: the module (the plugin's manifest name, not an alias) and
    a digest of the instance's settings and grants, the same on every node that configures the
    same instance."""
    blob = orjson.dumps({"settings": settings, "prompt": prompt, "user": user}, option=orjson.OPT_SORT_KEYS)
    return f"hook:{module}:{hashlib.sha256(blob).hexdigest()[:16]}"


class StoreState:
    """One hook instance's :class:`~busbar_sdk.shared_state.SharedState` (see the module docstring).

    Args:
        bridge: the process's :class:`StoreBridge`.
        namespace: the instance's prefix (:func:`namespace_of`).
        timeout_s: the bound of each call, in (0, ``MAX_TIMEOUT_S``].
        clock: Unix seconds (windows and expiry).

    Raises:
        SharedStateInvalid: a ``timeout_s`` out of range.
    """

    version = SHARED_STATE_VERSION

    def __init__(self, bridge: StoreBridge, namespace: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 clock: Callable[[], float] = time.time) -> None:
        if not 0 < timeout_s <= MAX_TIMEOUT_S:
            raise SharedStateInvalid(f"shared state: timeout_s must be in (0, {MAX_TIMEOUT_S:g}], found {timeout_s!r}")
        self.bridge, self.namespace, self.timeout_s, self.clock = bridge, namespace, timeout_s, clock
        self.backend = bridge.store.backend

    def _name(self, key: str) -> str:
        return f"{self.namespace}:{key}"

    def _window(self, window_s: int) -> tuple[int, int]:
        now = int(self.clock())
        start = now - now % window_s
        return start, start + window_s + EXPIRY_GRACE_S

    def get(self, key: str) -> str | None:
        """See :meth:`busbar_sdk.shared_state.SharedState.get`."""
        name = self._name(check_key(key))
        now = int(self.clock())
        return self.bridge.run(lambda: self.bridge.store.kv_get(name, now), self.timeout_s)

    def put(self, key: str, value: str, ttl_s: float) -> None:
        """See :meth:`busbar_sdk.shared_state.SharedState.put`."""
        ttl = check_put(key, value, ttl_s)
        name, expires_at = self._name(key), int(self.clock()) + ttl
        self.bridge.run(lambda: self.bridge.store.kv_put(name, value, expires_at), self.timeout_s)

    def admit(self, counter: str, window_s: int, cap: int, amount: int = 1) -> bool:
        """See :meth:`busbar_sdk.shared_state.SharedState.admit`."""
        check_counter(counter, window_s, cap, amount)
        start, expires = self._window(window_s)
        charge = StrictCharge(self._name(counter), start, "requests", cap, amount, expires)
        return self.bridge.run(lambda: self.bridge.store.strict_admit([charge]), self.timeout_s) is None

    def add(self, counter: str, window_s: int, amount: int) -> None:
        """See :meth:`busbar_sdk.shared_state.SharedState.add`."""
        check_counter(counter, window_s, amount)
        start, expires = self._window(window_s)
        release = StrictRelease(self._name(counter), start, "requests", 0, amount, expires)
        self.bridge.run(lambda: self.bridge.store.strict_settle([release]), self.timeout_s)

    def count(self, counter: str, window_s: int) -> int:
        """See :meth:`busbar_sdk.shared_state.SharedState.count`."""
        check_counter(counter, window_s)
        start, _ = self._window(window_s)
        got = self.bridge.run(lambda: self.bridge.store.strict_get(self._name(counter), start, "requests"),
                              self.timeout_s)
        return got.used + got.reserved

    def __repr__(self) -> str:
        return f"StoreState({self.namespace!r}, backend={self.backend!r})"


def follow_settings(facade: Any) -> bool:
    """After ``facade`` acknowledged new settings (``PATCH /hooks/{name}/settings``): move its shared
    state to the namespace of those settings, the one a node booted with them uses (so a changed
    instance starts a new cache and budget, shared with the fleet's other instances of the same
    settings). True when it had a state to move."""
    state = getattr(facade, "state", None)
    if not isinstance(state, StoreState):
        return False
    state.namespace = namespace_of(_module_of(facade), facade.settings, facade.prompt, facade.user)
    return True


def _module_of(facade: Any) -> str:
    """The plugin's manifest name (a ref may name it by its alias: one namespace for both)."""
    name = getattr(getattr(facade.instance, "plugin", None), "name", None)
    return name if isinstance(name, str) and name else str(facade.name)


def bind_hooks(gw: GatewayContext) -> int:
    """Hand a :class:`StoreState` to every not yet bound instance of ``gw.hooks`` whose plugin
    implements ``busbar_bind_state``, when ``gw.state_bridge`` runs on a shared store. Returns how
    many were bound; a plugin that raises is logged and runs without shared state."""
    bridge: StoreBridge | None = getattr(gw, "state_bridge", None)
    engine = getattr(gw, "hooks", None)
    if bridge is None or not bridge.shared or engine is None:
        return 0
    bound = 0
    for f in engine.facades:
        instance = f.instance
        binding = getattr(getattr(instance, "plugin", None), "binding", None)
        if f.state is not None or binding is None or binding.bind_state is None:
            continue
        f.state = StoreState(bridge, namespace_of(_module_of(f), f.boot_settings, f.prompt, f.user))
        try:
            binding.bind_state(instance.handle, f.state)
            bound += 1
        except Exception:  # plugin code: it runs without shared state
            log.exception("%s: busbar_bind_state raised; the instance keeps its state in this process", f.name)
    return bound
