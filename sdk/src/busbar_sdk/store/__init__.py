"""The store kind: the contract every durable backend serves, its records, and the tools to
write, export and test one.

- :class:`Store` (``busbar_sdk.store.contract``): the async operations; :data:`SCHEMA_VERSION`.
- Records (``busbar_sdk.store.records``): :class:`VirtualKey`, :class:`UsageLedger`,
  :class:`UsageDelta`, :class:`UsageItem`, :class:`TierTokens`, :class:`MeteringDelta`,
  :class:`MeteringRow`, :class:`AuditRecord`, :class:`DenyEntry`, :class:`CredentialMeta`,
  :class:`CredentialSecret`.
- Errors (``busbar_sdk.store.errors``): :class:`StoreError` and its subclasses.
- Strict counters (``busbar_sdk.store.strict``): :class:`StrictCharge`, :class:`StrictRelease`,
  :class:`StrictCounter` (``strict_admit`` / ``strict_settle`` / ``strict_get``).
- Windows (``busbar_sdk.store.windows``): civil-UTC window starts and rolls.
- :func:`export_store`: a ``Store`` subclass as a ``kind: store`` plugin; :class:`RemoteStore`:
  the kernel's client of one; :class:`MemoryStore`: the compiled-in default.
- ``busbar_sdk.store.sql``: the SQL schema and a SQLAlchemy Core implementation shared by the
  sqlite and postgres plugins (needs ``sqlalchemy``).
- ``busbar_sdk.testing.store_conformance``: the conformance suite every backend passes.

See docs/stores.md.
"""
from __future__ import annotations

from busbar_sdk.store.contract import SCHEMA_VERSION, Store, newer_schema_message
from busbar_sdk.store.errors import (
    StoreConflict,
    StoreError,
    StoreInvalid,
    StoreNotFound,
    StoreSchemaError,
    StoreUnavailable,
    StoreUnsupported,
)
from busbar_sdk.store.memory import MemoryStore
from busbar_sdk.store.plugin import StoreExport, export_store
from busbar_sdk.store.records import (
    AuditRecord,
    CredentialMeta,
    CredentialSecret,
    DenyEntry,
    MeteringDelta,
    MeteringRow,
    TierTokens,
    UsageDelta,
    UsageItem,
    UsageLedger,
    VirtualKey,
)
from busbar_sdk.store.strict import StrictCharge, StrictCounter, StrictRelease
from busbar_sdk.store.windows import WINDOWS, day_of, parse_day, window_end, window_start
from busbar_sdk.store.wire import OPS, RemoteStore, dispatch

__all__ = [
    "OPS", "SCHEMA_VERSION", "WINDOWS", "AuditRecord", "CredentialMeta", "CredentialSecret", "DenyEntry",
    "MemoryStore", "MeteringDelta", "MeteringRow", "RemoteStore", "Store", "StoreConflict", "StoreError",
    "StoreExport", "StoreInvalid", "StoreNotFound", "StoreSchemaError", "StoreUnavailable", "StoreUnsupported",
    "StrictCharge", "StrictCounter", "StrictRelease", "TierTokens", "UsageDelta", "UsageItem", "UsageLedger",
    "VirtualKey", "day_of", "dispatch", "export_store",
    "newer_schema_message", "parse_day", "window_end", "window_start",
]
