"""``{ module: <secret-plugin>, settings: {...} }`` secret references, resolved by a loaded
``kind: secret`` plugin.

:class:`SecretModuleResolver` is the ``module_resolver`` callable ``busbar.config.secrets.
resolve_secret`` accepts: ``resolver(module, settings) -> str``. It opens one instance per
secret plugin (with that plugin's own open-time settings, if any) and sends
``{"op": "resolve", "settings": <the reference's settings>, "deadline_ms": N}``.

Source: docs/config-at-a-glance.md#providers (``api_key`` secret references), docs/config-at-a-glance.md#tls.
"""
from __future__ import annotations

import base64
import binascii
import threading
from collections.abc import Mapping
from typing import Any

from busbar.loader.errors import PluginCallError, PluginOpenError, SecretResolutionError
from busbar.loader.registry import PluginInstance, PluginSet

__all__ = ["SecretModuleResolver"]


class SecretModuleResolver:
    """Resolve module secret references through the secret plugins of a plugin set.

    Args:
        plugins: the loaded set.
        open_settings: per plugin (name or alias) the settings its instance is opened with.
        deadline_ms: the budget sent with each resolve (milliseconds).
    """

    def __init__(self, plugins: PluginSet, *, open_settings: Mapping[str, Mapping[str, Any]] | None = None,
                 deadline_ms: int = 5000) -> None:
        self.plugins, self.deadline_ms = plugins, deadline_ms
        self._open_settings = dict(open_settings or {})
        self._instances: dict[str, PluginInstance] = {}
        self._lock = threading.Lock()

    def _instance(self, module: str) -> PluginInstance:
        plugin = self.plugins.get(module)
        if plugin is None:
            raise SecretResolutionError(f"{{ module: {module} }} does not name a loaded plugin; install its tarball "
                                        f"in plugins.dir (busbar --list-plugins shows why it did not load)")
        if plugin.kind != "secret":
            raise SecretResolutionError(f"{{ module: {module} }} names a kind: {plugin.kind} plugin, not a "
                                        f"kind: secret plugin")
        with self._lock:
            inst = self._instances.get(plugin.name)
            if inst is None:
                settings = self._open_settings.get(plugin.name, self._open_settings.get(plugin.alias, {}))
                try:
                    inst = plugin.open(settings)
                except PluginOpenError as exc:
                    raise SecretResolutionError(str(exc)) from exc
                self._instances[plugin.name] = inst
            return inst

    def __call__(self, module: str, settings: dict[str, Any]) -> str:
        """Resolve one reference to its value.

        Raises:
            SecretResolutionError: unknown or wrong-kind module, the plugin failed, reported an
                error, or replied with something that is not a value.
        """
        inst = self._instance(module)
        try:
            reply = inst.call({"op": "resolve", "settings": dict(settings), "deadline_ms": self.deadline_ms})
        except PluginCallError as exc:
            raise SecretResolutionError(str(exc)) from exc
        if isinstance(reply.get("value"), str):
            return str(reply["value"])
        if isinstance(reply.get("value_b64"), str):
            try:
                return base64.b64decode(reply["value_b64"], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError) as exc:
                raise SecretResolutionError(f"secret plugin {module!r} returned a value_b64 that is not base64 "
                                            f"UTF-8 ({exc})") from None
        err = reply.get("error")
        if isinstance(err, dict):
            raise SecretResolutionError(f"secret plugin {module!r} could not resolve the reference: "
                                        f"{err.get('kind', 'error')}: {err.get('message', '')}")
        raise SecretResolutionError(f"secret plugin {module!r} replied without a value or an error")

    def close(self) -> None:
        """Close every instance opened."""
        with self._lock:
            for inst in self._instances.values():
                inst.close()
            self._instances.clear()
