"""The data-plane chain: ``auth.chain`` run in order for every request (docs/auth.md#the-chain).

:meth:`FrontDoor.admit` takes the presented token (:mod:`busbar.auth.extract`) to each module in
turn. The built-in ``keys`` module identifies ``bbk_`` tokens and passes anything else; a plugin
module identifies, rejects or passes. The first Identify wins; a Reject, or the end of the chain
with no Identify, is the one native refusal (:func:`busbar.auth.refusal.unauthenticated`). An
identified caller whose grant does not cover the target is refused 403 naming the pool (an ad-hoc
route ``/{provider}/{model}/...`` counts as the pool ``{provider}``).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from busbar.auth.extract import presented_token
from busbar.auth.identity import Identity
from busbar.auth.plugin import REJECT, PluginModule
from busbar.auth.refusal import forbidden_pool, unauthenticated
from busbar.auth.tokens import looks_like_token

if TYPE_CHECKING:
    from busbar.auth.keys import KeysVerifier
    from busbar.auth.signing import Keyring
    from busbar.proto.base import Dialect
    from busbar.proxy.relay import Reply

__all__ = ["FrontDoor"]



class FrontDoor:
    """The running chain.

    Args:
        modules: the chain's modules in order (:class:`~busbar.auth.keys.KeysVerifier` or
            :class:`~busbar.auth.plugin.PluginModule`); never empty (an empty chain is no front door).
        keyring: the signing keyring when ``keys`` is in the chain (admin mints with it).
        clock: Unix seconds (injectable for tests).
    """

    def __init__(self, modules: Sequence[KeysVerifier | PluginModule], keyring: Keyring | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.modules = tuple(modules)
        self.keyring = keyring
        self.clock = clock

    async def identify(self, headers: Mapping[str, str]) -> Identity | None:
        """The caller the chain identifies from lower-cased ``headers``, or ``None`` (refuse)."""
        token = presented_token(headers)
        if token is None:
            return None
        now = self.clock()
        for module in self.modules:
            if isinstance(module, PluginModule):
                verdict = await module.identify(token, now)
                if verdict == REJECT:
                    return None
                if isinstance(verdict, Identity):
                    return verdict
            elif looks_like_token(token):
                return module.identify(token, int(now))
        return None

    async def admit(self, headers: Mapping[str, str], dialect: Dialect, pool: str) -> Identity | Reply:
        """The caller's :class:`Identity` when it may use ``pool``; else the refusal to send.

        ``pool``: the pool or model name the request targets, or the provider of an ad-hoc route.
        """
        identity = await self.identify(headers)
        if identity is None:
            return unauthenticated(dialect)
        if not identity.may_use(pool):
            return forbidden_pool(dialect, pool)
        return identity
