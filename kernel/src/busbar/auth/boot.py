"""Start the front door on a built gateway (docs/auth.md).

``await start_front_door(gw, loaded, env) -> list[asyncio.Task]`` runs once in the serving event
loop, before the listener opens. It sets:

- ``gw.signing``: the :class:`~busbar.auth.signing.Keyring` (``None`` when neither ``keys`` is in
  ``auth.chain`` nor ``auth.signing_key`` is set);
- ``gw.frontdoor``: the :class:`~busbar.auth.chain.FrontDoor` (``None`` for ``auth.chain: []``, the
  open front door).

The keys verifier reads the gateway's store mirror ``gw.keysync`` (opened and synced by
``busbar.store.attach.start_store``, which runs first); a fleet's generated signing key lives in
``gw.store``. Returns no background task today (the list is kept for the lifecycle's shape).

Raises:
    FrontDoorBootError: one line per fault (an unresolvable or unusable signing key, an auth plugin
        that does not load or answer its name).
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from busbar_sdk.store import StoreError

from busbar.auth.chain import FrontDoor
from busbar.auth.keys import MODULE as KEYS
from busbar.auth.keys import KeysVerifier
from busbar.auth.plugin import PluginModule
from busbar.auth.signing import STORE_META, Keyring, SigningKeyError, load_keyring
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
    """The front door cannot start; ``faults``: one line each. ``status``: the exit status, 2 (the
    config is refused, as every other start-up refusal)."""

    status = 2


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


def _plugin_module(gw: Gateway, loaded: LoadedConfig, mod: AuthModule, where: str) -> PluginModule:
    src = loaded.config_path.name       # the label busbar --validate gives the config file's lines
    plugins = _plugin_set(gw)
    plugin = plugins.get(mod.name) if plugins is not None else None
    if plugin is None or plugin.kind != "auth":
        raise FrontDoorBootError([f"{src}: {where}: '{mod.name}' is not a loaded kind: auth plugin; set "
                                  f"plugins.enabled: true and put its signed tarball in plugins.dir"])
    from busbar.loader.errors import PluginCallError, PluginOpenError

    try:
        instance = plugin.open(mod.settings)
        reply = instance.call({"op": "name"})
    except (PluginOpenError, PluginCallError) as e:    # never start with a hole in the chain
        raise FrontDoorBootError([f"{src}: {where}: auth plugin '{mod.name}' did not open: {e}"]) from None
    name = reply.get("name") if isinstance(reply, dict) else None
    if not isinstance(name, str) or not name:
        raise FrontDoorBootError([f"{src}: {where}: auth plugin '{mod.name}' did not answer its module "
                                  f"name ({{'op': 'name'}}); fix or replace the plugin"])
    bindings = loaded.config.auth.role_bindings
    return PluginModule(name, instance, bindings.get(name) or bindings.get(mod.name) or {})


def _audit_revoked(gw: Gateway) -> Callable[[str], None]:
    """``on_revoked`` for the keys verifier: the audit log's ``key.refused`` (when the admin plane runs)."""
    def note(key_id: str) -> None:
        if gw.audit is not None:
            gw.audit.note("key.refused", f"key/{key_id}", "revoked", key_id)
    return note


async def start_front_door(gw: Gateway, loaded: LoadedConfig, env: Mapping[str, str]) -> list[asyncio.Task[None]]:
    """Build ``gw.signing`` and ``gw.frontdoor`` (module doc); returns background tasks to cancel."""
    auth = loaded.config.auth
    chain = auth.modules("chain")
    gw.signing, gw.frontdoor = None, None
    uses_keys = any(m.name == KEYS for m in chain)
    if not chain and auth.signing_key is None:
        return []
    secret = _signing_secret(gw, loaded, env)
    keysync: KeySync | None = gw.keysync if uses_keys else None
    durable: Store | None = gw.store if uses_keys and loaded.config.store.module != "memory" else None
    keyring: Keyring | None = None
    if uses_keys or secret is not None:
        try:
            keyring = await load_keyring(secret, config_path=loaded.config_path, store=durable)
        except SigningKeyError as e:
            raise FrontDoorBootError([f"{loaded.config_path.name}: {e}"]) from None
        except StoreError as e:
            raise FrontDoorBootError([f"store ({gw.store.backend}): the signing key (store meta "
                                      f"{STORE_META}) could not be read or created: {e}"]) from None
    gw.signing = keyring
    modules: list[KeysVerifier | PluginModule] = []
    for i, mod in enumerate(chain):
        if mod.name == KEYS:
            assert keyring is not None and keysync is not None
            modules.append(KeysVerifier(keyring, keysync, _audit_revoked(gw)))
        else:
            modules.append(_plugin_module(gw, loaded, mod, f"auth.chain[{i}]"))
    sigv4 = SigV4Verifier(keysync) if keysync is not None else None
    gw.frontdoor = FrontDoor(modules, keyring, sigv4) if modules else None
    return []
