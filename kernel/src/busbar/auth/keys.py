"""The built-in ``keys`` chain module: Busbar's signed virtual keys (docs/auth.md#virtual-keys).

A ``bbk_`` token identifies its key when (1) the signature verifies with a key of the keyring and
the token has not expired, and (2) the key's binding in the store mirror is live: it exists, is not
tombstoned, is enabled, has not expired, is not on the denylist, and its generation is the token's
(a rotation raises the generation). Step 1 is cached per token until the token's own expiry (an
ed25519 verify costs tens of microseconds); step 2 reads the in-memory mirror on every request, so
a revocation is enforced as soon as the mirror syncs it (``busbar.store.sync.KeySync``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from busbar.auth.identity import Identity
from busbar.auth.tokens import TokenClaims, TokenInvalid, verify

if TYPE_CHECKING:
    from busbar.auth.signing import Keyring
    from busbar.store.sync import KeySync

__all__ = ["MODULE", "KeysVerifier"]

MODULE = "keys"
_CACHE_MAX = 65536          # distinct tokens remembered; the whole cache is dropped when full


class KeysVerifier:
    """Verify ``bbk_`` tokens against a keyring and the store mirror.

    Args:
        keyring: the signing keyring (:mod:`busbar.auth.signing`).
        keysync: the store mirror (``live_key(id, now)``).
    """

    def __init__(self, keyring: Keyring, keysync: KeySync) -> None:
        self.keyring = keyring
        self.keysync = keysync
        self._verified: dict[str, TokenClaims] = {}

    def identify(self, token: str, now: int) -> Identity | None:
        """The key's :class:`Identity`, or ``None`` when the token does not identify a live key.

        ``now`` is Unix seconds. Never raises for a bad token.
        """
        claims = self._verified.get(token)
        if claims is None:
            try:
                claims = verify(self.keyring, token, now)
            except TokenInvalid:
                return None
            if len(self._verified) >= _CACHE_MAX:
                self._verified.clear()
            self._verified[token] = claims
        elif now >= claims.exp:
            del self._verified[token]
            return None
        key = self.keysync.live_key(claims.sub, now)
        if key is None or key.generation != claims.g:
            return None
        pools = None if key.allowed_pools is None else frozenset(key.allowed_pools)
        return Identity(key.id, MODULE, key.group, pools, dict(key.labels), frozenset(), "key")
