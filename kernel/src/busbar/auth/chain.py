"""The data-plane chain: ``auth.chain`` run in order for every request (docs/auth.md#the-chain).

:meth:`FrontDoor.admit` takes the presented token (:mod:`busbar.auth.extract`) to each module in
turn. The built-in ``keys`` module identifies ``bbk_`` tokens and passes anything else; a plugin
module identifies, rejects or passes. The first Identify wins; a Reject, or the end of the chain
with no Identify, is the one native refusal (:func:`busbar.auth.refusal.unauthenticated`). An
identified caller whose grant does not cover the target is refused 403 naming the pool (an ad-hoc
route ``/{provider}/{model}/...`` counts as the pool ``{provider}`` and needs an explicit grant).
A request signed with AWS SigV4 goes to the Bedrock verifier (:mod:`busbar.auth.sigv4`) instead of the token modules.
:meth:`FrontDoor.gate` guards a non-protocol route (``/metrics``) with the same chain.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from busbar.auth.extract import presented_token, repeated_credential
from busbar.auth.identity import Identity
from busbar.auth.plugin import REJECT, PluginModule
from busbar.auth.refusal import forbidden_pool, unauthenticated
from busbar.auth.sigv4 import SignedRequest, SigV4Verifier, is_sigv4
from busbar.auth.tokens import looks_like_token
from busbar.proto.registry import get_dialect

if TYPE_CHECKING:
    from starlette.types import Scope

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
        sigv4: the Bedrock SigV4 verifier when ``keys`` is in the chain.
        clock: Unix seconds (injectable for tests).
    """

    def __init__(self, modules: Sequence[KeysVerifier | PluginModule], keyring: Keyring | None = None,
                 sigv4: SigV4Verifier | None = None, clock: Callable[[], float] = time.time) -> None:
        self.modules = tuple(modules)
        self.keyring = keyring
        self.sigv4 = sigv4
        self.clock = clock

    async def identify(self, headers: Mapping[str, str], request: SignedRequest | None = None) -> Identity | None:
        """The caller the chain identifies from lower-cased ``headers``, or ``None`` (refuse).

        ``request``: the request as received, for a SigV4-signed caller (``None``: such a caller is refused).
        ``headers`` with a ``raw`` list of byte pairs (Starlette's ``Headers``) is refused when it
        repeats a credential header; a plain mapping cannot tell, so callers holding the ASGI scope
        check it first (:meth:`admit`, :meth:`gate`).
        """
        raw = getattr(headers, "raw", None)
        if raw is not None and repeated_credential(raw):
            return None
        if is_sigv4(headers):
            if self.sigv4 is None or request is None:
                return None
            return self.sigv4.identify(request, int(self.clock()))
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
                return await module.identify(token, int(now))
        return None

    async def identify_scope(self, scope: Scope) -> Identity | None:
        """The caller of a non-protocol route (a token only: a SigV4 signature or a repeated credential
        header is refused), or ``None``."""
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if repeated_credential(scope["headers"]) or is_sigv4(headers):
            return None
        return await self.identify(headers)

    async def gate(self, scope: Scope) -> Reply | None:
        """For a non-protocol route behind the chain (``/metrics``): ``None`` when the caller is
        identified, else the refusal (OpenAI's 401 envelope). Pool grants do not apply."""
        if await self.identify_scope(scope) is None:
            return unauthenticated(get_dialect("openai"))
        return None

    async def admit(self, scope: Scope, headers: Mapping[str, str], wire: bytes,
                    dialect: Dialect) -> Identity | Reply:
        """The caller's :class:`Identity`, or the refusal to send; run before the body is parsed
        (the credential is in the headers), so an unidentified caller learns nothing from a parse
        error. The pool grant is :meth:`grant`, once the target's name is known.

        Args:
            scope: the ASGI scope (method, raw path and query for a SigV4 signature).
            headers: lower-cased request headers.
            wire: the body bytes exactly as received (a SigV4 signature covers them).
            dialect: the caller's protocol (the refusal's envelope).
        """
        if repeated_credential(scope["headers"]):     # two keys: refused, never "the last one wins"
            return unauthenticated(dialect)
        request = None
        if is_sigv4(headers):
            raw_path = scope.get("raw_path") or scope["path"].encode()
            request = SignedRequest(scope["method"], raw_path.decode("latin-1"),
                                    scope.get("query_string", b"").decode("latin-1"), headers, wire)
        identity = await self.identify(headers, request)
        if identity is None:
            return unauthenticated(dialect)
        return identity

    @staticmethod
    def grant(identity: Identity, dialect: Dialect, pool: str, adhoc: bool = False) -> Reply | None:
        """``None`` when ``identity`` may use ``pool``, else the 403 naming it in ``dialect``'s envelope.

        ``pool``: the pool or model name the request targets, or with ``adhoc`` the provider of an
        ad-hoc route (only an explicit grant covers it).
        """
        if not identity.may_use(pool, adhoc):
            return forbidden_pool(dialect, pool)
        return None
