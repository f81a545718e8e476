"""Binding a plugin object to the ABI: one ``PluginManager`` per plugin, resolved once.

:func:`bind_plugin` registers the object a wheel's ``busbar.plugins`` entry point names, runs
``check_pending()`` (a misspelled ``busbar_*`` hookimpl fails here), requires the four mandatory
hooks, checks the transport version and the reported kind, and returns a
:class:`PluginBinding`: the typed facade, one attribute per hook, holding the implementation
functions themselves so the hot path pays one Python call, not pluggy's dispatch loop.

Source: docs/plugins.md#the-abi (typed facade, ``check_pending``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

from busbar_sdk import hookspec as _spec
from busbar_sdk._errors import BindingError
from busbar_sdk._versions import KINDS, PROJECT_NAME, TRANSPORT_VERSION

__all__ = ["PluginBinding", "bind_plugin"]


def _noop_free(handle: object, obj: object) -> None:
    return None


def _noop_close(handle: object) -> None:
    return None


class PluginBinding:
    """The six ABI functions of one plugin, called directly (typed facade).

    Attributes:
        name: the plugin's manifest name (pluggy registration name).
        kind: what ``busbar_plugin_kind()`` reported.
        open: ``busbar_open(settings) -> handle``.
        call: ``busbar_call(handle, payload) -> dict``: the hot path.
        free: ``busbar_free(handle, obj)`` (no-op when not implemented).
        close: ``busbar_close(handle)`` (no-op when not implemented).
        bind_state: ``busbar_bind_state(handle, state)``, or ``None`` when not implemented.
        plugin_manager: the plugin's own ``pluggy.PluginManager`` (for introspection only).
    """

    __slots__ = ("bind_state", "call", "close", "free", "kind", "name", "open", "plugin_manager")

    def __init__(self, name: str, kind: str, pm: pluggy.PluginManager, funcs: dict[str, Callable[..., Any]]):
        self.name = name
        self.kind = kind
        self.plugin_manager = pm
        self.open: Callable[..., object] = funcs["busbar_open"]
        self.call: Callable[[object, dict[str, Any]], dict[str, Any]] = funcs["busbar_call"]
        self.free: Callable[[object, object], None] = funcs.get("busbar_free", _noop_free)
        self.close: Callable[[object], None] = funcs.get("busbar_close", _noop_close)
        self.bind_state: Callable[[object, Any], None] | None = funcs.get("busbar_bind_state")

    def __repr__(self) -> str:
        return f"PluginBinding({self.name!r}, kind={self.kind!r})"


def _impls(pm: pluggy.PluginManager) -> dict[str, list[pluggy.HookImpl]]:
    relay = pm.hook
    return {
        "busbar_abi": relay.busbar_abi.get_hookimpls(),
        "busbar_plugin_kind": relay.busbar_plugin_kind.get_hookimpls(),
        "busbar_open": relay.busbar_open.get_hookimpls(),
        "busbar_bind_state": relay.busbar_bind_state.get_hookimpls(),
        "busbar_call": relay.busbar_call.get_hookimpls(),
        "busbar_free": relay.busbar_free.get_hookimpls(),
        "busbar_close": relay.busbar_close.get_hookimpls(),
    }


def bind_plugin(obj: object, *, name: str, expected_kind: str | None = None) -> PluginBinding:
    """Register ``obj`` in a fresh ``PluginManager("busbar")`` and resolve the ABI.

    Args:
        obj: a module, class instance or any namespace carrying ``@hookimpl`` functions.
        name: the manifest name (used in messages and as the pluggy registration name).
        expected_kind: the manifest ``kind`` to cross-check, or ``None``.

    Raises:
        BindingError: pluggy refused the object (bad hookimpl signature, unknown ``busbar_*``
            hook), a required hook is missing, a wrapper or duplicate implementation is present,
            ``busbar_abi()`` is not the transport version, ``busbar_plugin_kind()`` is not a known
            kind or differs from ``expected_kind``, or either raised.
    """
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(_spec)
    try:
        pm.register(obj, name=name)
        pm.check_pending()
    except (pluggy.PluginValidationError, ValueError) as exc:
        raise BindingError(f"the plugin object does not fit the ABI: {exc}") from None
    funcs: dict[str, Callable[..., Any]] = {}
    for hook, impls in _impls(pm).items():
        if any(i.hookwrapper or i.wrapper for i in impls):
            raise BindingError(f"{hook} is implemented as a wrapper; the ABI takes plain implementations")
        if len(impls) > 1:
            raise BindingError(f"{hook} is implemented {len(impls)} times; implement it once")
        if impls:
            funcs[hook] = impls[0].function
    missing = [h for h in _spec.REQUIRED_HOOKS if h not in funcs]
    if len(missing) == len(_spec.REQUIRED_HOOKS):
        raise BindingError(f"the entry point's object ({type(obj).__name__}) implements none of the ABI hooks; point "
                           f"the busbar.plugins entry point at the object export_plugin() returned (my_module:plugin) "
                           f"or at a module of @hookimpl functions")
    if missing:
        raise BindingError(f"the plugin does not implement {', '.join(missing)} (required by the ABI)")
    try:
        transport = funcs["busbar_abi"]()
        kind = funcs["busbar_plugin_kind"]()
    except Exception as exc:  # plugin code: map to our error at the seam
        raise BindingError(f"the plugin raised while reporting its identity: {type(exc).__name__}: {exc}") from exc
    if type(transport) is not int or transport != TRANSPORT_VERSION:
        raise BindingError(f"busbar_abi() returned {transport!r}; this kernel speaks transport version "
                           f"{TRANSPORT_VERSION}")
    if kind not in KINDS:
        raise BindingError(f"busbar_plugin_kind() returned {kind!r}, not one of {', '.join(KINDS)}")
    if expected_kind is not None and kind != expected_kind:
        raise BindingError(f"kind mismatch: the manifest says {expected_kind!r} but the plugin reports "
                           f"{kind!r}; repack it with --kind {kind}")
    return PluginBinding(name, kind, pm, funcs)
