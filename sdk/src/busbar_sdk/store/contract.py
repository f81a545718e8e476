"""The store contract: what every backend (memory, sqlite, postgres, valkey, a third party's) serves.

A :class:`Store` is async throughout and is never awaited on the request path, except for one
``strict_admit`` per request whose group chain has a strict limit: the gateway admits
from in-memory state, flushes ledger deltas additively every ``advanced.usage_flush_interval_ms``
and syncs keys and the denylist into memory (docs/stores.md). Every method may raise
:class:`~busbar_sdk.store.errors.StoreUnavailable` when the backend cannot be reached; the other
errors are listed per method.

Revisions: keys, credentials and denylist entries carry a store-global, strictly increasing
``revision`` assigned on every write, so a node can fetch only what changed (``*_since``).

Schema: :data:`SCHEMA_VERSION` is what this build writes. :meth:`Store.open` creates or migrates
the schema and refuses (:class:`~busbar_sdk.store.errors.StoreSchemaError`) a store written by a
newer build.
"""
from __future__ import annotations

import abc
from typing import Any

from busbar_sdk.store.errors import StoreUnsupported
from busbar_sdk.store.records import (
    AuditRecord,
    CredentialMeta,
    CredentialSecret,
    DenyEntry,
    MeteringDelta,
    MeteringRow,
    UsageItem,
    UsageLedger,
    VirtualKey,
)
from busbar_sdk.store.strict import StrictCharge, StrictCounter, StrictRelease

__all__ = ["SCHEMA_VERSION", "Store", "newer_schema_message"]

#: The schema version this build writes and reads (older ones are migrated at open).
SCHEMA_VERSION = 1


def newer_schema_message(found: int) -> str:
    """The one-line refusal for a store written by a newer Busbar."""
    return (f"the store holds schema version {found}, written by a newer Busbar (this build reads up to "
            f"{SCHEMA_VERSION}); upgrade Busbar, or point store.settings at another database")


class Store(abc.ABC):
    """One store backend. Subclasses implement every abstract method; see each for its errors."""

    #: Short backend name shown by ``busbar store info`` (``memory``, ``sqlite``, ...).
    backend: str = "store"

    # -- lifecycle ---------------------------------------------------------------------------
    @abc.abstractmethod
    async def open(self) -> None:
        """Connect and create or migrate the schema (idempotent).

        Raises:
            StoreUnavailable: the backend cannot be reached (message without credentials).
            StoreSchemaError: the schema is newer than :data:`SCHEMA_VERSION`.
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections; later calls are no-ops."""

    @abc.abstractmethod
    async def info(self) -> dict[str, Any]:
        """``{"backend": str, "schema_version": int, "counts": {"keys", "usage_windows",
        "metering_rows", "audit_records", "denylist", "credentials": int}}``."""

    # -- keys --------------------------------------------------------------------------------
    @abc.abstractmethod
    async def put_key(self, key: VirtualKey) -> VirtualKey:
        """Upsert by ``key.id``; returns the row as stored (with its new ``revision``).

        Raises:
            StoreConflict: the stored row is tombstoned and ``key`` is not (a deleted id never
                comes back).
        """

    @abc.abstractmethod
    async def get_key(self, key_id: str) -> VirtualKey | None:
        """The row (live or tombstoned), or ``None``."""

    @abc.abstractmethod
    async def list_keys(self, since: int = 0) -> list[VirtualKey]:
        """Every key with ``revision > since``, tombstones included, by ascending revision."""

    @abc.abstractmethod
    async def delete_key(self, key_id: str, now: int) -> VirtualKey:
        """Tombstone: ``enabled = False``, ``deleted_at = now``, every credential of the key
        destroyed, atomically. Idempotent for an already-tombstoned key.

        Raises:
            StoreNotFound: no such key.
        """

    @abc.abstractmethod
    async def scrub_key(self, key_id: str) -> VirtualKey:
        """Erase personal data (``name`` -> ``""``, ``labels`` -> ``{}``) of a tombstoned key.

        Raises:
            StoreNotFound: no such key.
            StoreConflict: the key is live (delete it first).
        """

    # -- usage ledger ------------------------------------------------------------------------
    @abc.abstractmethod
    async def get_usage(self, bucket: str, window_start: int) -> UsageLedger:
        """The ledger of one bucket window (empty when never written)."""

    @abc.abstractmethod
    async def put_usage(self, bucket: str, window_start: int, ledger: UsageLedger) -> None:
        """Replace one window's ledger (single-writer maintenance; fleets flush with :meth:`add_usage`)."""

    @abc.abstractmethod
    async def add_usage(self, items: list[UsageItem]) -> None:
        """Add every delta to its window, all or nothing; counters are floored at 0. Two writers
        adding concurrently converge on the exact sum."""

    @abc.abstractmethod
    async def list_usage(self, bucket: str) -> dict[int, UsageLedger]:
        """Every window of ``bucket``: ``{window_start: ledger}``."""

    # -- strict counters (busbar_sdk.store.strict) ----------------------------------------------
    # Not abstract: a store that predates them answers StoreUnsupported, and a config with a
    # strict limit on it is refused at boot.
    async def strict_admit(self, charges: list[StrictCharge]) -> int | None:
        """ONE atomic check-and-reserve over every charge: when each counter has ``used + reserved
        + amount <= cap``, each ``reserved`` grows by its ``amount`` and the answer is ``None``;
        otherwise nothing moves and the answer is the index of the first charge that does not fit.
        A missing counter starts at 0; ``expires_at`` is (re)set on every counter
        charged. Concurrent callers on every node see a single order of admissions.

        Raises:
            StoreInvalid: an unknown metric, a negative amount, a counter named twice.
            StoreUnsupported: this backend has no strict counters.
        """
        raise StoreUnsupported(f"the {self.backend} store does not implement strict counters (strict_admit)")

    async def strict_settle(self, releases: list[StrictRelease]) -> None:
        """Atomically, for every item: ``reserved -= release`` and ``used += add``, each floored at 0
        (a counter dropped meanwhile is re-created with ``used = add``).

        Raises:
            StoreInvalid: an unknown metric, a negative amount, a counter named twice.
            StoreUnsupported: this backend has no strict counters.
        """
        raise StoreUnsupported(f"the {self.backend} store does not implement strict counters (strict_settle)")

    async def strict_get(self, bucket: str, window_start: int, metric: str) -> StrictCounter:
        """One counter (zeros when never charged, or dropped after ``expires_at``).

        Raises:
            StoreUnsupported: this backend has no strict counters.
        """
        raise StoreUnsupported(f"the {self.backend} store does not implement strict counters (strict_get)")

    # -- expiring values (busbar_sdk.store.kv) -------------------------------------------------
    # Not abstract: a store that predates them answers StoreUnsupported, and a hook's shared state
    # on it stays in its own process (docs/stores.md#expiring-values).
    async def kv_get(self, name: str, now: int) -> str | None:
        """The value stored under ``name``, or ``None`` when absent or expired (``now >= expires_at``;
        ``now``: Unix seconds).

        Raises:
            StoreInvalid: an empty name or one over ``KV_MAX_NAME_CHARS``.
            StoreUnsupported: this backend has no expiring values.
        """
        raise StoreUnsupported(f"the {self.backend} store does not implement expiring values (kv_get)")

    async def kv_put(self, name: str, value: str, expires_at: int) -> None:
        """Store ``value`` under ``name`` until ``expires_at`` (Unix seconds); last writer wins.

        Raises:
            StoreInvalid: a bad name, a value over ``KV_MAX_VALUE_BYTES``, a non-positive ``expires_at``.
            StoreUnsupported: this backend has no expiring values.
        """
        raise StoreUnsupported(f"the {self.backend} store does not implement expiring values (kv_put)")

    # -- metering ----------------------------------------------------------------------------
    @abc.abstractmethod
    async def add_metering(self, deltas: list[MeteringDelta]) -> None:
        """Add each delta to its ``(day, key_id, model, provider)`` row, all or nothing."""

    @abc.abstractmethod
    async def list_metering(self, day: str) -> list[MeteringRow]:
        """Every row of one UTC day, ordered by ``(key_id, model, provider)``."""

    @abc.abstractmethod
    async def purge_metering_before(self, day: str) -> int:
        """Delete every row of a day strictly before ``day``; returns how many rows went."""

    # -- audit -------------------------------------------------------------------------------
    @abc.abstractmethod
    async def append_audit(self, record: AuditRecord) -> None:
        """Append one record. The same record again at its ``seq`` is a no-op (a retried write).

        Raises:
            StoreConflict: a *different* record already holds ``record.seq``.
        """

    @abc.abstractmethod
    async def list_audit(self, after_seq: int = 0, limit: int = 1000) -> list[AuditRecord]:
        """Up to ``limit`` records with ``seq > after_seq``, ascending."""

    @abc.abstractmethod
    async def audit_tail(self, limit: int) -> list[AuditRecord]:
        """The last ``limit`` records, ascending."""

    # -- denylist ----------------------------------------------------------------------------
    @abc.abstractmethod
    async def add_denylist(self, sub: str, reason: str, now: int) -> DenyEntry:
        """Deny every token of ``sub`` (idempotent: an existing entry is returned unchanged)."""

    @abc.abstractmethod
    async def list_denylist(self, since: int = 0) -> list[DenyEntry]:
        """Entries with ``revision > since``, ascending."""

    # -- credentials -------------------------------------------------------------------------
    @abc.abstractmethod
    async def put_credential(self, credential: CredentialSecret) -> CredentialMeta:
        """Insert into ``(key_id, kind, slot)``; a revoked occupant is replaced.

        Raises:
            StoreConflict: the slot holds a live credential, or ``public_id`` is taken.
            StoreNotFound: the key does not exist or is tombstoned.
        """

    @abc.abstractmethod
    async def list_credentials(self, key_id: str) -> list[CredentialMeta]:
        """The key's credentials, metadata only, by slot."""

    @abc.abstractmethod
    async def lookup_credential(self, kind: str, public_id: str) -> CredentialSecret | None:
        """The credential with that public id (live or not), or ``None``."""

    @abc.abstractmethod
    async def revoke_credential(self, credential_id: str, reason: str, now: int) -> CredentialMeta:
        """Revoke one credential (idempotent for an already revoked one).

        Raises:
            StoreNotFound: no such credential.
        """

    @abc.abstractmethod
    async def list_credentials_since(self, since: int = 0) -> list[CredentialSecret]:
        """Every credential with ``revision > since``, secrets included (the verify-path cache)."""

    # -- meta --------------------------------------------------------------------------------
    @abc.abstractmethod
    async def get_meta(self, name: str) -> str | None:
        """A small named value (e.g. a plugin's high-water version), or ``None``."""

    @abc.abstractmethod
    async def put_meta(self, name: str, value: str, *, only_if_absent: bool = False) -> str:
        """Set ``name``; with ``only_if_absent`` an existing value is kept. Returns the stored value
        (so N nodes racing to create a fleet-wide value all end with the same one)."""
