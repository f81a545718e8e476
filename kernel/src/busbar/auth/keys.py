"""The built-in ``keys`` chain module: Busbar's signed virtual keys (docs/auth.md#virtual-keys).

A ``bbk_`` token identifies its key when (1) the signature verifies with a key of the keyring and
the token has not expired, and (2) the key's binding in the store mirror is live: it exists, is not
tombstoned, is enabled, has not expired, is not on the denylist, and its generation is the token's
(a rotation raises the generation). Step 1 is cached per token until the token's own expiry (an
ed25519 verify costs tens of microseconds); step 2 reads the in-memory mirror on every request, so
a revocation is enforced as soon as the mirror syncs it (``busbar.store.sync.KeySync``).

A validly signed token whose key the mirror has not seen yet (minted a moment ago, before the next
sync) is looked up in the store once; a miss there is remembered for :data:`MISS_TTL_S` so a
retrying client does not reach the store on every request. Only Busbar can sign such a token, so a
stranger cannot drive store reads.

A validly signed token of a revoked key is reported to ``on_revoked(key_id)`` (the audit log's
``key.refused``), at most once per key every :data:`REVOKED_NOTE_S` seconds.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from busbar_sdk.store import StoreError, VirtualKey

from busbar.auth.identity import Identity
from busbar.auth.tokens import TokenClaims, TokenInvalid, verify

if TYPE_CHECKING:
    from busbar.auth.signing import Keyring
    from busbar.store.sync import KeySync

__all__ = ["MISS_TTL_S", "MODULE", "REVOKED_NOTE_S", "KeysVerifier"]

MODULE = "keys"
MISS_TTL_S = 1
REVOKED_NOTE_S = 60
_CACHE_MAX = 65536          # distinct tokens remembered; the whole cache is dropped when full


class KeysVerifier:
    """Verify ``bbk_`` tokens against a keyring and the store mirror.

    Args:
        keyring: the signing keyring (:mod:`busbar.auth.signing`).
        keysync: the store mirror (``live_key(id, now)``).
        on_revoked: called with the key id when a revoked key's valid token is refused (or ``None``).
    """

    def __init__(self, keyring: Keyring, keysync: KeySync,
                 on_revoked: Callable[[str], None] | None = None) -> None:
        self.keyring = keyring
        self.keysync = keysync
        self.on_revoked = on_revoked
        self._noted: dict[str, int] = {}          # key id -> Unix second of the last revoked-use note
        self._verified: dict[str, TokenClaims] = {}
        self._missed: dict[str, int] = {}        # key id -> Unix second until which a store miss holds

    async def _fetch(self, key_id: str, now: int) -> VirtualKey | None:
        """The key from the store when the mirror has not synced it yet (live keys only)."""
        if self._missed.get(key_id, 0) > now:
            return None
        try:
            key = await self.keysync.store.get_key(key_id)
        except StoreError:
            key = None
        if key is None:
            if len(self._missed) >= _CACHE_MAX:
                self._missed.clear()
            self._missed[key_id] = now + MISS_TTL_S
            return None
        live = key.deleted_at is None and key.enabled and not self.keysync.is_denied(key_id)
        return key if live and (key.expires_at is None or now < key.expires_at) else None

    def _note_revoked(self, key_id: str, now: int) -> None:
        if now - self._noted.get(key_id, -REVOKED_NOTE_S) < REVOKED_NOTE_S:
            return
        if len(self._noted) >= _CACHE_MAX:
            self._noted.clear()
        self._noted[key_id] = now
        assert self.on_revoked is not None
        self.on_revoked(key_id)

    async def identify(self, token: str, now: int) -> Identity | None:
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
        if key is None:
            if claims.sub not in self.keysync.keys:
                key = await self._fetch(claims.sub, now)
            elif self.on_revoked is not None and self.keysync.is_denied(claims.sub):
                self._note_revoked(claims.sub, now)
        if key is None or key.generation != claims.g:
            return None
        pools = None if key.allowed_pools is None else frozenset(key.allowed_pools)
        return Identity(key.id, MODULE, key.group, pools, dict(key.labels), frozenset(), "key")
