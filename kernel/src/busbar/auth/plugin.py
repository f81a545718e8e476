"""A ``kind: auth`` plugin as a chain module (docs/auth.md#auth-plugins).

The kernel sends ``{"op": "authenticate", "credential": <token>}``; the plugin answers
``{"identity": {"sub", "groups", "name"?, "ttl_secs"?}}`` (Identify), ``{"reject": {"message"}}``
(Reject: stop the chain, 401) or ``{"pass": true}`` (Pass: not mine, try the next module). The
asserted ``groups`` are roles, mapped through ``auth.role_bindings.<runtime name>``
(:mod:`busbar.auth.roles`). A plugin that raises, or answers anything else, rejects (fail closed)
and is logged. An Identify with ``ttl_secs`` is cached for that long (at most
:data:`MAX_CACHE_TTL_S`); rejections are never cached.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from busbar.auth.identity import Identity
from busbar.auth.roles import data_grant, listed_pools

if TYPE_CHECKING:
    from busbar.config.schema_access import RoleBinding
    from busbar.loader.registry import PluginInstance

__all__ = ["MAX_CACHE_TTL_S", "PASS", "REJECT", "PluginModule", "Verdict"]

log = logging.getLogger("busbar.auth")

MAX_CACHE_TTL_S = 300
PASS: Literal["pass"] = "pass"
REJECT: Literal["reject"] = "reject"
Verdict = Identity | Literal["pass", "reject"]
_CACHE_MAX = 65536


class PluginModule:
    """One ``kind: auth`` chain entry.

    Args:
        name: the plugin's runtime module name (``{"op": "name"}``; role bindings are keyed by it).
        instance: the opened plugin instance (its chain entry's ``settings`` at open).
        bindings: ``auth.role_bindings[name]`` (or under the chain alias), role -> binding.
    """

    def __init__(self, name: str, instance: PluginInstance, bindings: Mapping[str, RoleBinding]) -> None:
        self.name = name
        self.instance = instance
        self.bindings = bindings
        self._cache: dict[str, tuple[float, Identity]] = {}

    async def _ask(self, token: str) -> dict[str, Any]:
        payload = {"op": "authenticate", "credential": token}
        if self.instance.acall is not None:
            return await self.instance.acall(payload)
        return await asyncio.to_thread(self.instance.call, payload)

    async def identify(self, token: str, now: float) -> Verdict:
        """Identify, reject or pass ``token`` (``now``: Unix seconds, for the verdict cache)."""
        hit = self._cache.get(token)
        if hit is not None:
            if now < hit[0]:
                return hit[1]
            del self._cache[token]
        try:
            reply = await self._ask(token)
        except Exception:       # plugin code: any failure is a refusal, never an open door
            log.warning("auth module %s failed; refusing the request", self.name, exc_info=True)
            return REJECT
        if reply.get("pass") is True:
            return PASS
        ident = reply.get("identity")
        if not isinstance(ident, dict) or not isinstance(ident.get("sub"), str) or not ident["sub"]:
            if "reject" not in reply:
                log.warning("auth module %s answered neither identity, reject nor pass; refusing", self.name)
            return REJECT
        roles = [r for r in ident.get("groups") or () if isinstance(r, str)]
        group, pools = data_grant(self.bindings, roles)
        identity = Identity(ident["sub"], self.name, group, pools, {}, frozenset(roles), "plugin",
                            listed_pools(self.bindings, roles))
        ttl = ident.get("ttl_secs")
        if type(ttl) is int and ttl > 0:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[token] = (now + min(ttl, MAX_CACHE_TTL_S), identity)
        return identity
