"""The in-memory store: Busbar's compiled-in default and the reference implementation.

Ephemeral (everything is gone on restart) and private to one process, so a fleet of several
processes needs a shared store. Every method runs without an ``await`` between its read and its
write, so each operation is atomic on the event loop.
"""
from __future__ import annotations

import copy
import time
from typing import Any

from busbar_sdk.store.contract import SCHEMA_VERSION, Store
from busbar_sdk.store.errors import StoreConflict, StoreInvalid, StoreNotFound
from busbar_sdk.store.kv import KV_SWEEP_EVERY_S, check_kv
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
from busbar_sdk.store.strict import StrictCharge, StrictCounter, StrictRelease, check_distinct, first_over

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """A :class:`Store` held in dicts. ``from_settings({})`` takes no settings."""

    backend = "memory"

    def __init__(self) -> None:
        self._revision = 0
        self._keys: dict[str, VirtualKey] = {}
        self._usage: dict[tuple[str, int], UsageLedger] = {}
        self._metering: dict[tuple[str, str, str, str], MeteringRow] = {}
        self._audit: dict[int, AuditRecord] = {}
        self._deny: dict[str, DenyEntry] = {}
        self._creds: dict[str, CredentialSecret] = {}
        self._meta: dict[str, str] = {}
        self._strict: dict[tuple[str, int, str], list[int | None]] = {}     # key -> [used, reserved, expires_at]
        self._kv: dict[str, tuple[str, int]] = {}                            # name -> (value, expires_at)
        self._kv_swept = 0

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> MemoryStore:
        """Build one; ``settings`` must be empty.

        Raises:
            StoreInvalid: any setting is given.
        """
        if settings:
            raise StoreInvalid(f"store.settings.{sorted(settings)[0]}: unknown setting (the memory store takes none)")
        return cls()

    def _next(self) -> int:
        self._revision += 1
        return self._revision

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def info(self) -> dict[str, Any]:
        return {"backend": self.backend, "schema_version": SCHEMA_VERSION,
                "counts": {"keys": len(self._keys), "usage_windows": len(self._usage),
                           "metering_rows": len(self._metering), "audit_records": len(self._audit),
                           "denylist": len(self._deny), "credentials": len(self._creds)}}

    async def put_key(self, key: VirtualKey) -> VirtualKey:
        old = self._keys.get(key.id)
        if old is not None and old.deleted_at is not None and key.deleted_at is None:
            raise StoreConflict(f"key {key.id!r} is deleted; a deleted key id is never reused")
        row = copy.deepcopy(key)
        row.revision = self._next()
        self._keys[key.id] = row
        return copy.deepcopy(row)

    async def get_key(self, key_id: str) -> VirtualKey | None:
        row = self._keys.get(key_id)
        return copy.deepcopy(row) if row else None

    async def list_keys(self, since: int = 0) -> list[VirtualKey]:
        return [copy.deepcopy(k) for k in sorted(self._keys.values(), key=lambda k: k.revision) if k.revision > since]

    async def delete_key(self, key_id: str, now: int) -> VirtualKey:
        row = self._keys.get(key_id)
        if row is None:
            raise StoreNotFound(f"no key {key_id!r}")
        if row.deleted_at is None:
            for cid in [c for c, s in self._creds.items() if s.meta.key_id == key_id]:
                del self._creds[cid]
            row.enabled, row.deleted_at, row.revision = False, now, self._next()
        return copy.deepcopy(row)

    async def scrub_key(self, key_id: str) -> VirtualKey:
        row = self._keys.get(key_id)
        if row is None:
            raise StoreNotFound(f"no key {key_id!r}")
        if row.deleted_at is None:
            raise StoreConflict(f"key {key_id!r} is live; delete it before scrubbing its personal data")
        row.name, row.labels, row.revision = "", {}, self._next()
        return copy.deepcopy(row)

    async def get_usage(self, bucket: str, window_start: int) -> UsageLedger:
        return copy.deepcopy(self._usage.get((bucket, window_start), UsageLedger()))

    async def put_usage(self, bucket: str, window_start: int, ledger: UsageLedger) -> None:
        self._usage[(bucket, window_start)] = copy.deepcopy(ledger)

    async def add_usage(self, items: list[UsageItem]) -> None:
        for item in items:
            k = (item.bucket, item.window_start)
            self._usage[k] = self._usage.get(k, UsageLedger()).apply(item.delta)

    async def list_usage(self, bucket: str) -> dict[int, UsageLedger]:
        return {w: copy.deepcopy(led) for (b, w), led in sorted(self._usage.items()) if b == bucket}

    async def strict_admit(self, charges: list[StrictCharge]) -> int | None:
        check_distinct(charges)
        rows = self._strict
        over = first_over(charges, {c.key: (int(r[0] or 0), int(r[1] or 0)) for c in charges
                                    if (r := rows.get(c.key)) is not None})
        if over is not None:
            return over
        for c in charges:
            row = rows.get(c.key) or self._new_strict(c.key, c.window_start)
            row[1], row[2] = int(row[1] or 0) + c.amount, c.expires_at
        return None

    async def strict_settle(self, releases: list[StrictRelease]) -> None:
        check_distinct(releases)
        for r in releases:
            row = self._strict.get(r.key) or self._new_strict(r.key, r.window_start)
            row[0] = max(0, int(row[0] or 0) + r.add)
            row[1] = max(0, int(row[1] or 0) - r.release)
            row[2] = r.expires_at

    async def strict_get(self, bucket: str, window_start: int, metric: str) -> StrictCounter:
        row = self._strict.get((bucket, window_start, metric))
        return StrictCounter(int(row[0] or 0), int(row[1] or 0)) if row else StrictCounter()

    def _new_strict(self, key: tuple[str, int, str], now: int) -> list[int | None]:
        """A new counter; counters that expired before ``now`` (a window start: a lower bound of
        the clock) are dropped first."""
        for k in [k for k, row in self._strict.items() if row[2] is not None and row[2] < now]:
            del self._strict[k]
        row: list[int | None] = [0, 0, None]
        self._strict[key] = row
        return row

    async def kv_get(self, name: str, now: int) -> str | None:
        check_kv(name)
        row = self._kv.get(name)
        return row[0] if row is not None and now < row[1] else None

    async def kv_put(self, name: str, value: str, expires_at: int) -> None:
        check_kv(name, value, expires_at)
        self._kv[name] = (value, expires_at)
        now = int(time.time())
        if now >= self._kv_swept + KV_SWEEP_EVERY_S:
            self._kv_swept = now
            for k in [k for k, (_, exp) in self._kv.items() if exp <= now]:
                del self._kv[k]

    async def add_metering(self, deltas: list[MeteringDelta]) -> None:
        for d in deltas:
            old = self._metering.get(d.row_key)
            self._metering[d.row_key] = old.plus(d) if old else copy.deepcopy(d)

    async def list_metering(self, day: str) -> list[MeteringRow]:
        return [copy.deepcopy(r) for k, r in sorted(self._metering.items()) if k[0] == day]

    async def purge_metering_before(self, day: str) -> int:
        gone = [k for k in self._metering if k[0] < day]
        for k in gone:
            del self._metering[k]
        return len(gone)

    async def append_audit(self, record: AuditRecord) -> None:
        old = self._audit.get(record.seq)
        if old is not None:
            if old != record:
                raise StoreConflict(f"audit seq {record.seq} already holds a different record")
            return
        self._audit[record.seq] = copy.deepcopy(record)

    async def list_audit(self, after_seq: int = 0, limit: int = 1000) -> list[AuditRecord]:
        return [copy.deepcopy(self._audit[s]) for s in sorted(self._audit) if s > after_seq][:max(0, limit)]

    async def audit_tail(self, limit: int) -> list[AuditRecord]:
        seqs = sorted(self._audit)[-limit:] if limit > 0 else []
        return [copy.deepcopy(self._audit[s]) for s in seqs]

    async def add_denylist(self, sub: str, reason: str, now: int) -> DenyEntry:
        entry = self._deny.get(sub)
        if entry is None:
            entry = self._deny[sub] = DenyEntry(sub, reason, now, self._next())
        return copy.deepcopy(entry)

    async def list_denylist(self, since: int = 0) -> list[DenyEntry]:
        return [copy.deepcopy(e) for e in sorted(self._deny.values(), key=lambda e: e.revision) if e.revision > since]

    async def put_credential(self, credential: CredentialSecret) -> CredentialMeta:
        m = credential.meta
        key = self._keys.get(m.key_id)
        if key is None or key.deleted_at is not None:
            raise StoreNotFound(f"no live key {m.key_id!r} for credential {m.id!r}")
        for cid, s in list(self._creds.items()):
            if cid == m.id:
                continue
            if s.meta.public_id == m.public_id and s.meta.kind == m.kind:
                raise StoreConflict(f"credential public id {m.public_id!r} is taken")
            if (s.meta.key_id, s.meta.kind, s.meta.slot) == (m.key_id, m.kind, m.slot):
                if s.meta.revoked_at is None:
                    raise StoreConflict(f"slot {m.slot} of key {m.key_id!r} holds a live {m.kind} credential; "
                                        f"revoke it first")
                del self._creds[cid]
        row = copy.deepcopy(credential)
        row.meta.revision = self._next()
        self._creds[m.id] = row
        return copy.deepcopy(row.meta)

    async def list_credentials(self, key_id: str) -> list[CredentialMeta]:
        return [copy.deepcopy(s.meta) for s in sorted(self._creds.values(), key=lambda s: (s.meta.kind, s.meta.slot))
                if s.meta.key_id == key_id]

    async def lookup_credential(self, kind: str, public_id: str) -> CredentialSecret | None:
        for s in self._creds.values():
            if s.meta.kind == kind and s.meta.public_id == public_id:
                return copy.deepcopy(s)
        return None

    async def revoke_credential(self, credential_id: str, reason: str, now: int) -> CredentialMeta:
        row = self._creds.get(credential_id)
        if row is None:
            raise StoreNotFound(f"no credential {credential_id!r}")
        if row.meta.revoked_at is None:
            row.meta.revoked_at, row.meta.revoke_reason, row.meta.revision = now, reason, self._next()
        return copy.deepcopy(row.meta)

    async def list_credentials_since(self, since: int = 0) -> list[CredentialSecret]:
        return [copy.deepcopy(s) for s in sorted(self._creds.values(), key=lambda s: s.meta.revision)
                if s.meta.revision > since]

    async def get_meta(self, name: str) -> str | None:
        return self._meta.get(name)

    async def put_meta(self, name: str, value: str, *, only_if_absent: bool = False) -> str:
        if only_if_absent and name in self._meta:
            return self._meta[name]
        self._meta[name] = value
        return value
