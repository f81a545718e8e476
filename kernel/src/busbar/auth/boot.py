"""Start the front door on a built gateway (docs/auth.md).

``await start_front_door(gw, loaded, env) -> list[asyncio.Task]`` runs once in the serving event
loop, before the listener opens. It sets:

- ``gw.signing``: the :class:`~busbar.auth.signing.Keyring` (``None`` when neither ``keys`` is in
  ``auth.chain`` nor ``auth.signing_key`` is set);
- ``gw.frontdoor``: the :class:`~busbar.auth.chain.FrontDoor` (``None`` for ``auth.chain: []``, the
  open front door).

The keys verifier reads the store mirror ``gw.keysync`` when the gateway carries one; otherwise it
opens ``store.module`` itself and returns the mirror's sync task (cancel it at shutdown).

Raises:
    FrontDoorBootError: one line per fault (an unresolvable signing key, a store that does not
        open, an auth plugin that does not load or answer its name).
"""
from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from busbar.auth.chain import FrontDoor
from busbar.auth.keys import MODULE as KEYS
from busbar.auth.keys import KeysVerifier
from busbar.auth.plugin import PluginModule
from busbar.auth.signing import Keyring, SigningKeyError, load_keyring
from busbar.auth.sigv4 import SigV4Verifier
from busbar.faults import FaultList

if TYPE_CHECKING:
    from busbar_sdk.store import Store

    from busbar.config.load import LoadedConfig
    from busbar.config.schema_access import AuthModule
    from busbar.proxy.gateway import Gateway
    from busbar.store.sync import KeySync

__all__ = ["FrontDoorBootError", "start_front_door"]


class FrontDoorBootError(FaultList):
    """The front door cannot start; ``faults``: one line each."""


def _plugin_set(gw: Gateway) -> Any:
    return gw.plugins.current if gw.plugins is not None else None


def _signing_secret(gw: Gateway, loaded: LoadedConfig, env: Mapping[str, str]) -> str | None:
    ref = loaded.config.auth.signing_key
    if ref is None:
        return None
    from busbar.config.secrets import SecretError, resolve_secret
    from busbar.loader.errors import SecretResolutionError

    resolver = None
    if _plugin_set(gw) is not None:
        from busbar.loader.secrets import SecretModuleResolver
        resolver = SecretModuleResolver(_plugin_set(gw))
    try:
        return resolve_secret(ref, env, where="auth.signing_key", module_resolver=resolver)
    except (SecretError, SecretResolutionError) as e:
        raise FrontDoorBootError([str(e)]) from None


async def _mirror(gw: Gateway, loaded: LoadedConfig) -> tuple[KeySync, Store, asyncio.Task[None] | None]:
    """The gateway's store mirror, or one opened here (with its sync task)."""
    keysync: KeySync | None = getattr(gw, "keysync", None)
    if keysync is not None:
        return keysync, keysync.store, None
    from busbar.store import StoreBootError, open_store, select_store
    from busbar.store.sync import KeySync

    cfg = loaded.config.store
    try:
        store = select_store(cfg.module, cfg.settings or {}, _plugin_set(gw))
        await open_store(store)
    except StoreBootError as e:
        raise FrontDoorBootError(e.faults) from None
    keysync = KeySync(store)
    await keysync.sync()
    return keysync, store, asyncio.ensure_future(keysync.run())


def _plugin_module(gw: Gateway, loaded: LoadedConfig, mod: AuthModule, where: str) -> PluginModule:
    plugins = _plugin_set(gw)
    plugin = plugins.get(mod.name) if plugins is not None else None
    if plugin is None or plugin.kind != "auth":
        raise FrontDoorBootError([f"config.yaml: {where}: '{mod.name}' is not a loaded kind: auth plugin; set "
                                  f"plugins.enabled: true and put its signed tarball in plugins.dir"])
    from busbar.loader.errors import PluginCallError, PluginOpenError

    try:
        instance = plugin.open(mod.settings)
        reply = instance.call({"op": "name"})
    except (PluginOpenError, PluginCallError) as e:    # never start with a hole in the chain
        raise FrontDoorBootError([f"config.yaml: {where}: auth plugin '{mod.name}' did not open: {e}"]) from None
    name = reply.get("name") if isinstance(reply, dict) else None
    if not isinstance(name, str) or not name:
        raise FrontDoorBootError([f"config.yaml: {where}: auth plugin '{mod.name}' did not answer its module "
                                  f"name ({{'op': 'name'}}); fix or replace the plugin"])
    bindings = loaded.config.auth.role_bindings
    return PluginModule(name, instance, bindings.get(name) or bindings.get(mod.name) or {})


async def start_front_door(gw: Gateway, loaded: LoadedConfig, env: Mapping[str, str]) -> list[asyncio.Task[None]]:
    """Build ``gw.signing`` and ``gw.frontdoor`` (module doc); returns background tasks to cancel."""
    auth = loaded.config.auth
    chain = auth.modules("chain")
    gw.signing, gw.frontdoor = None, None
    uses_keys = any(m.name == KEYS for m in chain)
    if not chain and auth.signing_key is None:
        return []
    secret = _signing_secret(gw, loaded, env)
    tasks: list[asyncio.Task[None]] = []
    keysync: KeySync | None = None
    durable: Store | None = None
    if uses_keys:
        keysync, store, task = await _mirror(gw, loaded)
        tasks += [task] if task is not None else []
        durable = store if loaded.config.store.module != "memory" else None
    keyring: Keyring | None = None
    if uses_keys or secret is not None:
        try:
            keyring = await load_keyring(secret, config_path=loaded.config_path, store=durable)
        except SigningKeyError as e:
            raise FrontDoorBootError([f"config.yaml: {e}"]) from None
    gw.signing = keyring
    modules: list[KeysVerifier | PluginModule] = []
    for i, mod in enumerate(chain):
        if mod.name == KEYS:
            assert keyring is not None and keysync is not None
            modules.append(KeysVerifier(keyring, keysync))
        else:
            modules.append(_plugin_module(gw, loaded, mod, f"auth.chain[{i}]"))
    sigv4 = SigV4Verifier(keysync) if keysync is not None else None
    gw.frontdoor = FrontDoor(modules, keyring, sigv4) if modules else None
    return tasks
