"""Keys, credentials and the revocation denylist, mirrored from the store into memory.

The request path verifies a caller from memory only; :class:`KeySync` keeps that memory in step
with the store by revision: every ``interval_s`` (default 0.25 s, so a key revoked through one node
is refused by every node within about that long) it fetches what changed since the last revision
it saw (``list_keys(since)``, ``list_denylist(since)``, ``list_credentials_since(since)``).

The cache is conservative when the store is unreachable: it keeps serving what it last saw (a
revocation already synced stays in force) and reports its age in ``busbar_store_sync_age_seconds``
so an operator can alert on a node that has stopped syncing.

A tombstoned key's credentials are evicted when the key's tombstone is seen, not when their own
rows change: a deleted row produces no delta, so waiting for one would keep a deleted key's SigV4
secret usable for ever. Likewise a credential row that takes a slot (``(key_id, kind, slot)``) evicts
the mirror's previous occupant: the store deletes a revoked occupant it replaces, so its revocation
may never arrive as a delta of its own.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from busbar_sdk.store import CredentialSecret, Store, StoreError, VirtualKey
from prometheus_client import CollectorRegistry, Gauge

__all__ = ["KeySync"]

log = logging.getLogger("busbar.store")


class KeySync:
    """An in-memory mirror of the store's keys, credentials and denylist.

    Args:
        store: an opened :class:`~busbar_sdk.store.Store`.
        interval_s: seconds between incremental syncs.
        registry: a Prometheus registry for ``busbar_store_sync_age_seconds``, or ``None``.
        clock: monotonic seconds (injectable for tests).

    Attributes:
        keys: key id -> :class:`VirtualKey` (tombstones included).
        denied: subjects on the revocation denylist.
        credentials: ``(kind, public_id)`` -> :class:`CredentialSecret`.
    """

    def __init__(self, store: Store, *, interval_s: float = 0.25, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.interval_s = interval_s
        self._clock = clock
        self.keys: dict[str, VirtualKey] = {}
        self.denied: set[str] = set()
        self.credentials: dict[tuple[str, str], CredentialSecret] = {}
        self._rev_keys = self._rev_deny = self._rev_creds = 0
        self._synced_at: float | None = None
        self._failing = False
        if registry is not None:
            Gauge("busbar_store_sync_age_seconds", "Seconds since keys and the denylist were last synced from "
                  "the store", registry=registry).set_function(self.age_s)

    def age_s(self) -> float:
        """Seconds since the last successful sync (``inf`` before the first)."""
        return float("inf") if self._synced_at is None else self._clock() - self._synced_at

    def is_denied(self, sub: str) -> bool:
        """Whether ``sub`` is on the denylist (as of the last sync)."""
        return sub in self.denied

    def live_key(self, key_id: str, now: int) -> VirtualKey | None:
        """The key if it exists, is not tombstoned, is enabled, is not expired at ``now`` and is not denied."""
        key = self.keys.get(key_id)
        if key is None or key.deleted_at is not None or not key.enabled or key_id in self.denied:
            return None
        if key.expires_at is not None and now >= key.expires_at:
            return None
        return key

    async def sync(self) -> None:
        """Fetch every change since the last sync.

        Raises:
            StoreError: the store failed; the mirror keeps what it had.
        """
        keys = await self.store.list_keys(since=self._rev_keys)
        deny = await self.store.list_denylist(since=self._rev_deny)
        creds = await self.store.list_credentials_since(since=self._rev_creds)
        for entry in deny:
            self.denied.add(entry.sub)
            self._rev_deny = max(self._rev_deny, entry.revision)
        for c in creds:
            slot = (c.meta.key_id, c.meta.kind, c.meta.slot)
            for ref in [r for r, old in self.credentials.items()
                        if old.meta.id != c.meta.id and (old.meta.key_id, old.meta.kind, old.meta.slot) == slot]:
                del self.credentials[ref]
            self.credentials[(c.meta.kind, c.meta.public_id)] = c
            self._rev_creds = max(self._rev_creds, c.meta.revision)
        for key in keys:
            self.keys[key.id] = key
            self._rev_keys = max(self._rev_keys, key.revision)
            if key.deleted_at is not None:
                for ref in [r for r, c in self.credentials.items() if c.meta.key_id == key.id]:
                    del self.credentials[ref]
        self._synced_at = self._clock()

    async def run(self) -> None:
        """Sync every ``interval_s`` until cancelled; failures are logged once per outage."""
        while True:
            try:
                await self.sync()
                if self._failing:
                    log.warning("store (%s): key sync recovered", self.store.backend)
                    self._failing = False
            except StoreError as exc:
                if not self._failing:
                    log.warning("store (%s): key sync failed; serving the last synced keys and denylist: %s",
                                self.store.backend, exc)
                    self._failing = True
            await asyncio.sleep(self.interval_s)
