"""The SQL schema (SQLAlchemy Core metadata) and one store over it, for SQLite and PostgreSQL.

The ``busbar-store-sqlite`` and ``busbar-store-postgres`` plugins are this class with their own
engine settings: the schema, the additive upserts and the migrations exist once. Needs
``sqlalchemy`` (asyncio) and the driver (``aiosqlite`` / ``asyncpg``).

Tables (schema version :data:`~busbar_sdk.store.contract.SCHEMA_VERSION`):

============================  ===============================================================
``busbar_schema``             one row: the schema version
``busbar_counters``           ``revision``: the store-global revision counter
``busbar_meta``               named small values (``put_meta``)
``busbar_keys``               virtual keys (tombstones kept)
``busbar_usage_windows``      ``(bucket, window_start)`` -> requests, billable_requests
``busbar_usage_tokens``       ``(bucket, window_start, model)`` -> four token tiers
``busbar_metering``           ``(day, key_id, model, provider)`` -> tokens, requests
``busbar_audit``              audit records by ``seq``
``busbar_denylist``           revoked subjects
``busbar_credentials``        row-looked-up credentials (unique ``(kind, public_id)``, ``(key_id, kind, slot)``)
``busbar_strict``             ``(bucket, window_start, metric)`` -> used, reserved, expires_at (strict counters)
``busbar_kv``                 ``name`` -> value, expires_at (expiring values: ``kv_get`` / ``kv_put``;
                              on PostgreSQL one statement each on the driver's pool)
============================  ===============================================================

Every additive write is ``INSERT ... ON CONFLICT DO UPDATE SET x = max(0, x + excluded.x)`` in one
transaction, so writers on several nodes converge on the exact sum.

Strict counters (``busbar_sdk.store.strict``): on PostgreSQL ``strict_admit`` is ONE statement in
autocommit (one round trip): a CTE locks every counter of the call in key order (``FOR UPDATE``,
so concurrent admissions queue instead of deadlocking), decides, and updates all or none. A
counter that does not exist yet is created (zeros) by a second statement and the decision is
taken again, once per counter and window. ``strict_settle`` is one statement too. Both commit with
``synchronous_commit`` off for their own transaction only: the write is visible to every node at
once (exactness holds), and reaches the disk a fraction of a second later, so only a crash of the
PostgreSQL server itself may forget the last moment of strict counter updates (a disk sync per
admission would add an fsync, milliseconds, to every request). On SQLite it is one ``BEGIN
IMMEDIATE`` transaction (the write lock first: every process sharing the file sees a single order
of admissions).
"""
from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from busbar_sdk.store.contract import SCHEMA_VERSION, Store, newer_schema_message
from busbar_sdk.store.errors import (
    StoreConflict,
    StoreError,
    StoreNotFound,
    StoreSchemaError,
    StoreUnavailable,
)
from busbar_sdk.store.kv import KV_SWEEP_BATCH, KV_SWEEP_EVERY_S, check_kv
from busbar_sdk.store.records import (
    AuditRecord,
    CredentialMeta,
    CredentialSecret,
    DenyEntry,
    MeteringDelta,
    MeteringRow,
    TierTokens,
    UsageItem,
    UsageLedger,
    VirtualKey,
)
from busbar_sdk.store.strict import StrictCharge, StrictCounter, StrictRelease, check_distinct, first_over

__all__ = ["METADATA", "SqlStore"]

METADATA = sa.MetaData()
_BIG = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

SCHEMA = sa.Table("busbar_schema", METADATA, sa.Column("id", sa.Integer, primary_key=True),
                  sa.Column("version", sa.Integer, nullable=False))
COUNTERS = sa.Table("busbar_counters", METADATA, sa.Column("name", sa.String(64), primary_key=True),
                    sa.Column("value", _BIG, nullable=False))
META = sa.Table("busbar_meta", METADATA, sa.Column("name", sa.String(255), primary_key=True),
                sa.Column("value", sa.Text, nullable=False))
KEYS = sa.Table(
    "busbar_keys", METADATA,
    sa.Column("id", sa.String(255), primary_key=True), sa.Column("name", sa.Text, nullable=False),
    sa.Column("generation", sa.Integer, nullable=False), sa.Column("allowed_pools", sa.Text),
    sa.Column("enabled", sa.Boolean, nullable=False), sa.Column("created_at", _BIG, nullable=False),
    sa.Column("grp", sa.String(255)), sa.Column("labels", sa.Text, nullable=False),
    sa.Column("expires_at", _BIG), sa.Column("deleted_at", _BIG),
    sa.Column("revision", _BIG, nullable=False, index=True),
)
WINDOWS = sa.Table(
    "busbar_usage_windows", METADATA,
    sa.Column("bucket", sa.String(255), primary_key=True), sa.Column("window_start", _BIG, primary_key=True),
    sa.Column("requests", _BIG, nullable=False), sa.Column("billable_requests", _BIG, nullable=False),
)
_TIERS = ("input", "output", "cache_read", "cache_write")
TOKENS = sa.Table(
    "busbar_usage_tokens", METADATA,
    sa.Column("bucket", sa.String(255), primary_key=True), sa.Column("window_start", _BIG, primary_key=True),
    sa.Column("model", sa.String(255), primary_key=True),
    *(sa.Column(t, _BIG, nullable=False) for t in _TIERS),
)
_METER_COUNTS = ("input", "output", "cache_read", "cache_write", "requests", "billable_requests")
METERING = sa.Table(
    "busbar_metering", METADATA,
    sa.Column("day", sa.String(10), primary_key=True), sa.Column("key_id", sa.String(255), primary_key=True),
    sa.Column("model", sa.String(255), primary_key=True), sa.Column("provider", sa.String(255), primary_key=True),
    *(sa.Column(c, _BIG, nullable=False) for c in _METER_COUNTS),
    sa.Column("key_group_at_use", sa.String(255), nullable=False),
)
AUDIT = sa.Table(
    "busbar_audit", METADATA,
    sa.Column("seq", _BIG, primary_key=True, autoincrement=False), sa.Column("ts", _BIG, nullable=False),
    *(sa.Column(c, sa.Text, nullable=False) for c in ("action", "resource", "outcome", "principal",
                                                     "prev_hash", "hash")),
)
DENY = sa.Table(
    "busbar_denylist", METADATA,
    sa.Column("sub", sa.String(255), primary_key=True), sa.Column("reason", sa.Text, nullable=False),
    sa.Column("ts", _BIG, nullable=False), sa.Column("revision", _BIG, nullable=False, index=True),
)
CREDS = sa.Table(
    "busbar_credentials", METADATA,
    sa.Column("id", sa.String(255), primary_key=True), sa.Column("key_id", sa.String(255), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False), sa.Column("slot", sa.Integer, nullable=False),
    sa.Column("public_id", sa.String(255), nullable=False), sa.Column("secret", sa.Text, nullable=False),
    sa.Column("created_at", _BIG, nullable=False), sa.Column("expires_at", _BIG),
    sa.Column("revoked_at", _BIG), sa.Column("revoke_reason", sa.Text),
    sa.Column("revision", _BIG, nullable=False, index=True),
    sa.UniqueConstraint("kind", "public_id", name="busbar_credentials_public_id"),
    sa.UniqueConstraint("key_id", "kind", "slot", name="busbar_credentials_slot"),
)

STRICT = sa.Table(
    "busbar_strict", METADATA,
    sa.Column("bucket", sa.String(255), primary_key=True), sa.Column("window_start", _BIG, primary_key=True),
    sa.Column("metric", sa.String(16), primary_key=True),
    sa.Column("used", _BIG, nullable=False), sa.Column("reserved", _BIG, nullable=False),
    sa.Column("expires_at", _BIG),
)

KV = sa.Table(
    "busbar_kv", METADATA,
    sa.Column("name", sa.String(512), primary_key=True), sa.Column("value", sa.Text, nullable=False),
    sa.Column("expires_at", _BIG, nullable=False, index=True),
)

# One atomic check-and-reserve over every counter of the call (see the module docstring). ``found``
# < the call's size: some counter does not exist yet (nothing moved); ``first``: the 1-based
# ordinal of the first charge that does not fit (nothing moved); ``charged`` = size: admitted.
# ``cfg`` (joined into ``want``, which every path reads, so it always runs): the statement's own
# transaction commits without waiting for the WAL flush (module docstring), so a reservation costs
# one round trip, not a disk sync.
_NO_FSYNC = "cfg AS (SELECT set_config('synchronous_commit', 'off', true) AS v)"
_PG_ADMIT = sa.text(f"""
WITH {_NO_FSYNC}, want AS (
  SELECT * FROM unnest(CAST(:buckets AS text[]), CAST(:starts AS bigint[]), CAST(:metrics AS text[]),
                       CAST(:caps AS bigint[]), CAST(:amounts AS bigint[]), CAST(:expires AS bigint[]))
    WITH ORDINALITY AS w(bucket, window_start, metric, cap, amount, expires_at, idx), cfg
), cur AS (
  SELECT w.idx, s.used + s.reserved + w.amount > w.cap AS over
  FROM busbar_strict AS s JOIN want AS w
    ON s.bucket = w.bucket AND s.window_start = w.window_start AND s.metric = w.metric
  ORDER BY s.bucket, s.window_start, s.metric
  FOR UPDATE OF s
), verdict AS (
  SELECT count(*) AS found, min(idx) FILTER (WHERE over) AS first FROM cur
), upd AS (
  UPDATE busbar_strict AS s SET reserved = s.reserved + w.amount, expires_at = w.expires_at
  FROM want AS w, verdict AS v
  WHERE s.bucket = w.bucket AND s.window_start = w.window_start AND s.metric = w.metric
    AND v.found = :n AND v.first IS NULL
  RETURNING 1
)
SELECT v.found, v.first, (SELECT count(*) FROM upd) AS charged FROM verdict AS v
""")

# Settle in one statement: update the counters that exist, re-create (used = add) those that expired.
_PG_SETTLE = sa.text(f"""
WITH {_NO_FSYNC}, want AS (
  SELECT * FROM unnest(CAST(:buckets AS text[]), CAST(:starts AS bigint[]), CAST(:metrics AS text[]),
                       CAST(:releases AS bigint[]), CAST(:adds AS bigint[]), CAST(:expires AS bigint[]))
    AS w(bucket, window_start, metric, release, add, expires_at), cfg
), upd AS (
  UPDATE busbar_strict AS s SET used = greatest(0, s.used + w.add), reserved = greatest(0, s.reserved - w.release),
                                expires_at = w.expires_at
  FROM want AS w WHERE s.bucket = w.bucket AND s.window_start = w.window_start AND s.metric = w.metric
  RETURNING s.bucket, s.window_start, s.metric
)
INSERT INTO busbar_strict AS s (bucket, window_start, metric, used, reserved, expires_at)
SELECT w.bucket, w.window_start, w.metric, greatest(0, w.add), 0, w.expires_at FROM want AS w
WHERE NOT EXISTS (SELECT 1 FROM upd AS u
                  WHERE u.bucket = w.bucket AND u.window_start = w.window_start AND u.metric = w.metric)
ON CONFLICT (bucket, window_start, metric) DO UPDATE SET used = greatest(0, s.used + excluded.used),
                                                          expires_at = excluded.expires_at
""")

_ADMIT_ARGS = ("buckets", "starts", "metrics", "caps", "amounts", "expires", "n")
_SETTLE_ARGS = ("buckets", "starts", "metrics", "releases", "adds", "expires")


def _positional(stmt: sa.TextClause, names: tuple[str, ...]) -> str:
    """``stmt``'s SQL with ``:name`` parameters as asyncpg's ``$1 ..`` in ``names`` order."""
    text = stmt.text
    for i, name in sorted(enumerate(names, 1), key=lambda p: -len(p[1])):
        text = re.sub(rf":{name}\b", f"${i}", text)
    return text


_PG_ADMIT_SQL = _positional(_PG_ADMIT, _ADMIT_ARGS)
_PG_SETTLE_SQL = _positional(_PG_SETTLE, _SETTLE_ARGS)

# Expiring values on PostgreSQL: one statement each, one round trip on the driver's pool (a hook's
# shared state runs them inside a routing decision). The write skips the WAL flush like the strict
# statements: a cache entry a crash of the server forgets is recomputed.
_PG_KV_GET_SQL = "SELECT value FROM busbar_kv WHERE name = $1 AND expires_at > $2"
_PG_KV_PUT_SQL = f"""
WITH {_NO_FSYNC}
INSERT INTO busbar_kv (name, value, expires_at) SELECT $1, $2, $3 FROM cfg
ON CONFLICT (name) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
"""

#: Migrations from version N to N+1 (none yet: version 1 is the first schema).
MIGRATIONS: dict[int, Callable[[AsyncConnection], Any]] = {}


def _floor_add(col: sa.ColumnElement[Any], delta: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    total = col + delta
    return sa.case((total < 0, 0), else_=total)


class SqlStore(Store):
    """A :class:`Store` over an async SQLAlchemy engine (``sqlite+aiosqlite`` or ``postgresql+asyncpg``).

    Args:
        engine: the engine (not connected until :meth:`open`).
        backend: ``"sqlite"`` or ``"postgres"`` (``info()`` and messages).
        where: the target as shown in errors, without a password.
        scrub: extra strings (a password) to blank out of every error message.
    """

    def __init__(self, engine: AsyncEngine, *, backend: str, where: str, scrub: tuple[str, ...] = (),
                 driver_pool: Callable[[], Awaitable[Any]] | None = None) -> None:
        self.engine = engine
        self.backend = backend
        self.where = where
        self._scrub = tuple(s for s in scrub if s)
        self._insert: Any = None
        self._driver_pool = driver_pool
        self._pool: Any = None
        self._pool_lock = asyncio.Lock()
        self._kv_swept = self._strict_swept = 0

    # -- plumbing ----------------------------------------------------------------------------
    def _clean(self, text: str) -> str:
        """A driver's error text with every secret (the URL's password) masked; applied to that text
        only, never to the message around it (a password that is a substring of the backend or the
        redacted URL would otherwise mask those and give itself away)."""
        for secret in self._scrub:
            text = text.replace(secret, "***")
        return text

    def _ins(self, table: sa.Table) -> Any:
        if self._insert is None:
            from sqlalchemy.dialects import postgresql, sqlite
            self._insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        return self._insert(table)

    @asynccontextmanager
    async def _tx(self, autocommit: bool = False) -> AsyncIterator[AsyncConnection]:
        """One transaction (``autocommit``: none, each statement commits on its own: no BEGIN or
        COMMIT round trip); a failure to connect (refused, timed out, rejected by the server's
        authentication or TLS rules) is :class:`StoreUnavailable` naming the target."""
        try:
            conn = await self.engine.connect()
            if autocommit:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
        except (TimeoutError, SQLAlchemyError, OSError, ConnectionError) as exc:
            raise StoreUnavailable(f"{self.backend} at {self.where} is unavailable: "
                                   f"{self._clean(_reason(exc))}") from None
        try:
            async with conn.begin():
                yield conn
        except StoreError:
            raise
        except (TimeoutError, OperationalError, OSError, ConnectionError) as exc:
            raise StoreUnavailable(f"{self.backend} at {self.where} is unavailable: "
                                   f"{self._clean(_reason(exc))}") from None
        except DBAPIError as exc:
            if exc.connection_invalidated:
                raise StoreUnavailable(f"{self.backend} at {self.where}: connection lost: "
                                       f"{self._clean(_reason(exc))}") from None
            raise StoreError(f"{self.backend}: {self._clean(_reason(exc))}") from None
        except SQLAlchemyError as exc:
            raise StoreError(f"{self.backend}: {self._clean(_reason(exc))}") from None
        finally:
            await conn.close()

    async def _bump(self, conn: AsyncConnection) -> int:
        row = (await conn.execute(sa.update(COUNTERS).where(COUNTERS.c.name == "revision")
                                  .values(value=COUNTERS.c.value + 1).returning(COUNTERS.c.value))).one()
        return int(row[0])

    # -- lifecycle ---------------------------------------------------------------------------
    async def open(self) -> None:
        for attempt in range(5):
            try:
                async with self._tx() as conn:
                    await conn.run_sync(METADATA.create_all)
                    found = (await conn.execute(sa.select(SCHEMA.c.version).where(SCHEMA.c.id == 1))).scalar()
                    if found is None:
                        await conn.execute(self._ins(SCHEMA).values(id=1, version=SCHEMA_VERSION)
                                           .on_conflict_do_nothing())
                        await conn.execute(self._ins(COUNTERS).values(name="revision", value=0)
                                           .on_conflict_do_nothing())
                        found = SCHEMA_VERSION
                    if found > SCHEMA_VERSION:
                        raise StoreSchemaError(newer_schema_message(int(found)))
                    for version in range(int(found), SCHEMA_VERSION):
                        await MIGRATIONS[version](conn)
                        await conn.execute(sa.update(SCHEMA).where(SCHEMA.c.id == 1).values(version=version + 1))
                return
            except StoreError as exc:
                # Two nodes creating the schema at once: one loses the race on the catalog; retry.
                if isinstance(exc, StoreUnavailable | StoreSchemaError) or attempt == 4:
                    raise
                await asyncio.sleep(0.05 * (attempt + 1))

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
        await self.engine.dispose()

    async def info(self) -> dict[str, Any]:
        tables = {"keys": KEYS, "usage_windows": WINDOWS, "metering_rows": METERING, "audit_records": AUDIT,
                  "denylist": DENY, "credentials": CREDS}
        async with self._tx() as conn:
            version = (await conn.execute(sa.select(SCHEMA.c.version))).scalar()
            counts = {name: int((await conn.execute(sa.select(sa.func.count()).select_from(t))).scalar() or 0)
                      for name, t in tables.items()}
        return {"backend": self.backend, "schema_version": version, "counts": counts}

    # -- keys --------------------------------------------------------------------------------
    async def put_key(self, key: VirtualKey) -> VirtualKey:
        async with self._tx() as conn:
            old = (await conn.execute(sa.select(KEYS.c.deleted_at).where(KEYS.c.id == key.id)
                                      .with_for_update())).first()
            if old is not None and old[0] is not None and key.deleted_at is None:
                raise StoreConflict(f"key {key.id!r} is deleted; a deleted key id is never reused")
            revision = await self._bump(conn)
            values = _key_row(key, revision)
            stmt = self._ins(KEYS).values(**values)
            await conn.execute(stmt.on_conflict_do_update(index_elements=[KEYS.c.id],
                                                          set_={k: stmt.excluded[k] for k in values if k != "id"}))
        return _key(values)

    async def get_key(self, key_id: str) -> VirtualKey | None:
        async with self._tx() as conn:
            row = (await conn.execute(sa.select(KEYS).where(KEYS.c.id == key_id))).mappings().first()
        return _key(dict(row)) if row else None

    async def list_keys(self, since: int = 0) -> list[VirtualKey]:
        async with self._tx() as conn:
            rows = (await conn.execute(sa.select(KEYS).where(KEYS.c.revision > since)
                                       .order_by(KEYS.c.revision))).mappings().all()
        return [_key(dict(r)) for r in rows]

    async def delete_key(self, key_id: str, now: int) -> VirtualKey:
        async with self._tx() as conn:
            row = (await conn.execute(sa.select(KEYS).where(KEYS.c.id == key_id).with_for_update())).mappings().first()
            if row is None:
                raise StoreNotFound(f"no key {key_id!r}")
            values = dict(row)
            if values["deleted_at"] is None:
                await conn.execute(sa.delete(CREDS).where(CREDS.c.key_id == key_id))
                values.update(enabled=False, deleted_at=now, revision=await self._bump(conn))
                await conn.execute(sa.update(KEYS).where(KEYS.c.id == key_id).values(
                    enabled=False, deleted_at=now, revision=values["revision"]))
        return _key(values)

    async def scrub_key(self, key_id: str) -> VirtualKey:
        async with self._tx() as conn:
            row = (await conn.execute(sa.select(KEYS).where(KEYS.c.id == key_id).with_for_update())).mappings().first()
            if row is None:
                raise StoreNotFound(f"no key {key_id!r}")
            if row["deleted_at"] is None:
                raise StoreConflict(f"key {key_id!r} is live; delete it before scrubbing its personal data")
            values = dict(row)
            values.update(name="", labels="{}", revision=await self._bump(conn))
            await conn.execute(sa.update(KEYS).where(KEYS.c.id == key_id).values(
                name="", labels="{}", revision=values["revision"]))
        return _key(values)

    # -- usage -------------------------------------------------------------------------------
    async def get_usage(self, bucket: str, window_start: int) -> UsageLedger:
        return (await self._windows(bucket, window_start)).get(window_start, UsageLedger())

    async def list_usage(self, bucket: str) -> dict[int, UsageLedger]:
        return await self._windows(bucket, None)

    async def _windows(self, bucket: str, window_start: int | None) -> dict[int, UsageLedger]:
        w_where = WINDOWS.c.bucket == bucket
        t_where = TOKENS.c.bucket == bucket
        if window_start is not None:
            w_where &= WINDOWS.c.window_start == window_start
            t_where &= TOKENS.c.window_start == window_start
        async with self._tx() as conn:
            windows = (await conn.execute(sa.select(WINDOWS).where(w_where))).mappings().all()
            tokens = (await conn.execute(sa.select(TOKENS).where(t_where))).mappings().all()
        out = {int(w["window_start"]): UsageLedger(int(w["requests"]), int(w["billable_requests"]), {})
               for w in windows}
        for t in tokens:
            led = out.setdefault(int(t["window_start"]), UsageLedger())
            led.models[t["model"]] = TierTokens(*(int(t[c]) for c in _TIERS))
        return dict(sorted(out.items()))

    async def put_usage(self, bucket: str, window_start: int, ledger: UsageLedger) -> None:
        async with self._tx() as conn:
            await conn.execute(sa.delete(TOKENS).where((TOKENS.c.bucket == bucket)
                                                       & (TOKENS.c.window_start == window_start)))
            stmt = self._ins(WINDOWS).values(bucket=bucket, window_start=window_start, requests=ledger.requests,
                                             billable_requests=ledger.billable_requests)
            await conn.execute(stmt.on_conflict_do_update(
                index_elements=[WINDOWS.c.bucket, WINDOWS.c.window_start],
                set_={"requests": stmt.excluded.requests, "billable_requests": stmt.excluded.billable_requests}))
            for model, tiers in ledger.models.items():
                await conn.execute(self._ins(TOKENS).values(bucket=bucket, window_start=window_start, model=model,
                                                            **tiers.to_wire()))

    async def add_usage(self, items: list[UsageItem]) -> None:
        if not items:
            return
        windows: list[dict[str, Any]] = []
        tokens: list[dict[str, Any]] = []
        for item in sorted(items, key=lambda i: (i.bucket, i.window_start)):   # one lock order: no deadlock
            d = item.delta
            windows.append({"bucket": item.bucket, "window_start": item.window_start,
                            "i_requests": max(0, d.requests), "d_requests": d.requests,
                            "i_billable": max(0, d.billable_requests), "d_billable": d.billable_requests})
            for model, tiers in sorted(d.models.items()):
                row: dict[str, Any] = {"bucket": item.bucket, "window_start": item.window_start, "model": model}
                for t, v in tiers.to_wire().items():
                    row[f"i_{t}"], row[f"d_{t}"] = max(0, v), v
                tokens.append(row)
        async with self._tx() as conn:
            await conn.execute(self._add_windows(), windows)          # one executemany per table
            if tokens:
                await conn.execute(self._add_tokens(), tokens)

    def _add_windows(self) -> Any:
        stmt = self._ins(WINDOWS).values(bucket=sa.bindparam("bucket"), window_start=sa.bindparam("window_start"),
                                         requests=sa.bindparam("i_requests"),
                                         billable_requests=sa.bindparam("i_billable"))
        return stmt.on_conflict_do_update(
            index_elements=[WINDOWS.c.bucket, WINDOWS.c.window_start],
            set_={"requests": _floor_add(WINDOWS.c.requests, sa.bindparam("d_requests")),
                  "billable_requests": _floor_add(WINDOWS.c.billable_requests, sa.bindparam("d_billable"))})

    def _add_tokens(self) -> Any:
        stmt = self._ins(TOKENS).values(bucket=sa.bindparam("bucket"), window_start=sa.bindparam("window_start"),
                                        model=sa.bindparam("model"), **{t: sa.bindparam(f"i_{t}") for t in _TIERS})
        return stmt.on_conflict_do_update(
            index_elements=[TOKENS.c.bucket, TOKENS.c.window_start, TOKENS.c.model],
            set_={t: _floor_add(TOKENS.c[t], sa.bindparam(f"d_{t}")) for t in _TIERS})

    # -- strict counters ---------------------------------------------------------------------
    async def strict_admit(self, charges: list[StrictCharge]) -> int | None:
        check_distinct(charges)
        if not charges:
            return None
        if self.engine.dialect.name != "postgresql":
            return await self._strict_admit_tx(charges)
        args = ([c.bucket for c in charges], [c.window_start for c in charges], [c.metric for c in charges],
                [c.cap for c in charges], [c.amount for c in charges], [c.expires_at for c in charges], len(charges))
        for _ in range(3):
            _found, first, charged = await self._pg_row(_PG_ADMIT_SQL, args)
            if charged == len(charges):
                return None
            if first is not None:
                return int(first) - 1
            async with self._tx() as conn:            # a counter is new: create it (zeros), decide again
                await self._create_strict(conn, charges)
        raise StoreUnavailable(f"{self.backend}: strict counters were dropped while being created; retry")

    async def _pg_row(self, sql: str, args: tuple[Any, ...]) -> Any:
        """One statement in autocommit, one round trip, on the driver's own pool when the store
        was given one (``driver_pool``: no SQLAlchemy checkout, pre-ping or per-statement work; the
        strict operations are on the request path), else on a connection of the engine's pool."""
        import asyncpg  # type: ignore[import-untyped]

        try:
            if self._driver_pool is None:
                async with self._tx(autocommit=True) as conn:
                    raw: Any = (await conn.get_raw_connection()).driver_connection
                    return await raw.fetchrow(sql, *args)
            pool = self._pool or await self._open_pool()
            async with pool.acquire() as raw:
                return await raw.fetchrow(sql, *args)
        except StoreError:
            raise
        except (asyncpg.InterfaceError, asyncpg.PostgresConnectionError, OSError, TimeoutError) as exc:
            if self._pool is not None:
                await self._pool.expire_connections()  # a server restart cut them all: replace each
            raise StoreUnavailable(f"{self.backend} at {self.where} is unavailable: "
                                   f"{self._clean(f'{type(exc).__name__}: {exc}')}") from None
        except asyncpg.PostgresError as exc:
            raise StoreError(f"{self.backend}: {self._clean(f'{type(exc).__name__}: {exc}')}") from None

    async def _open_pool(self) -> Any:
        async with self._pool_lock:
            if self._pool is None and self._driver_pool is not None:
                self._pool = await self._driver_pool()
        return self._pool

    async def _strict_admit_tx(self, charges: list[StrictCharge]) -> int | None:
        keys = [c.key for c in charges]
        async with self._tx() as conn:
            rows = (await conn.execute(sa.select(STRICT).where(
                sa.tuple_(STRICT.c.bucket, STRICT.c.window_start, STRICT.c.metric).in_(keys)))).mappings().all()
            current = {(r["bucket"], int(r["window_start"]), r["metric"]): (int(r["used"]), int(r["reserved"]))
                       for r in rows}
            over = first_over(charges, current)
            if over is not None:
                return over
            if len(current) < len(charges):
                await self._create_strict(conn, charges)
            stmt = sa.update(STRICT).where(
                (STRICT.c.bucket == sa.bindparam("b")) & (STRICT.c.window_start == sa.bindparam("w"))
                & (STRICT.c.metric == sa.bindparam("m"))).values(
                reserved=STRICT.c.reserved + sa.bindparam("amount", type_=_BIG),
                expires_at=sa.bindparam("exp", type_=_BIG))
            await conn.execute(stmt, [{"b": c.bucket, "w": c.window_start, "m": c.metric, "amount": c.amount,
                                       "exp": c.expires_at} for c in charges])
        return None

    async def _create_strict(self, conn: AsyncConnection, charges: list[StrictCharge]) -> None:
        """Create the call's missing counters (zeros), after dropping the expired ones (expired
        before the call's latest window start: a lower bound of the clock)."""
        now = max(c.window_start for c in charges)
        await conn.execute(sa.delete(STRICT).where(STRICT.c.expires_at < now))
        rows = [{"bucket": c.bucket, "window_start": c.window_start, "metric": c.metric, "used": 0, "reserved": 0,
                 "expires_at": c.expires_at} for c in sorted(charges, key=lambda c: c.key)]
        await conn.execute(self._ins(STRICT).on_conflict_do_nothing(), rows)

    async def strict_settle(self, releases: list[StrictRelease]) -> None:
        check_distinct(releases)
        if not releases:
            return
        rows = [r.to_wire() for r in sorted(releases, key=lambda r: r.key)]        # one lock order: no deadlock
        sweep, now = self._strict_sweep_due(releases)
        if self.engine.dialect.name == "postgresql":
            await self._pg_row(_PG_SETTLE_SQL, tuple([r[k] for r in rows] for k in (
                "bucket", "window_start", "metric", "release", "add", "expires_at")))
            if sweep:
                async with self._tx() as conn:
                    await conn.execute(sa.delete(STRICT).where(STRICT.c.expires_at < now))
            return
        stmt = self._ins(STRICT).values(bucket=sa.bindparam("bucket"), window_start=sa.bindparam("window_start"),
                                        metric=sa.bindparam("metric"), used=sa.bindparam("add"), reserved=0,
                                        expires_at=sa.bindparam("expires_at"))
        stmt = stmt.on_conflict_do_update(
            index_elements=[STRICT.c.bucket, STRICT.c.window_start, STRICT.c.metric],
            set_={"used": _floor_add(STRICT.c.used, sa.bindparam("add")),
                  "reserved": _floor_add(STRICT.c.reserved, -sa.bindparam("release", type_=_BIG)),
                  "expires_at": stmt.excluded.expires_at})
        async with self._tx() as conn:
            await conn.execute(stmt, rows)
            if sweep:
                await conn.execute(sa.delete(STRICT).where(STRICT.c.expires_at < now))

    def _strict_sweep_due(self, releases: list[StrictRelease]) -> tuple[bool, int]:
        """``(due, now)``: a settle drops the expired counters at most once a minute per handle
        (``now``: the latest window start of the call, a lower bound of the clock). Counters only
        ever settled (a hook's ``add``) are never created by ``strict_admit``, whose creation sweeps."""
        now = max(r.window_start for r in releases)
        if now < self._strict_swept + KV_SWEEP_EVERY_S:
            return False, now
        self._strict_swept = now
        return True, now

    async def strict_get(self, bucket: str, window_start: int, metric: str) -> StrictCounter:
        async with self._tx() as conn:
            row = (await conn.execute(sa.select(STRICT.c.used, STRICT.c.reserved).where(
                (STRICT.c.bucket == bucket) & (STRICT.c.window_start == window_start)
                & (STRICT.c.metric == metric)))).first()
        return StrictCounter(int(row[0]), int(row[1])) if row else StrictCounter()

    # -- expiring values ---------------------------------------------------------------------
    async def kv_get(self, name: str, now: int) -> str | None:
        check_kv(name)
        if self.engine.dialect.name == "postgresql":
            row = await self._pg_row(_PG_KV_GET_SQL, (name, now))
            return None if row is None else str(row[0])
        async with self._tx() as conn:
            value = (await conn.execute(sa.select(KV.c.value).where((KV.c.name == name)
                                                                    & (KV.c.expires_at > now)))).scalar()
        return None if value is None else str(value)

    async def kv_put(self, name: str, value: str, expires_at: int) -> None:
        check_kv(name, value, expires_at)
        now = int(time.time())
        sweep = now >= self._kv_swept + KV_SWEEP_EVERY_S
        if sweep:
            self._kv_swept = now
        if self.engine.dialect.name == "postgresql":
            await self._pg_row(_PG_KV_PUT_SQL, (name, value, expires_at))
            if sweep:
                async with self._tx() as conn:
                    await self._kv_sweep(conn, now)
            return
        stmt = self._ins(KV).values(name=name, value=value, expires_at=expires_at)
        async with self._tx() as conn:
            await conn.execute(stmt.on_conflict_do_update(index_elements=[KV.c.name], set_={
                "value": stmt.excluded.value, "expires_at": stmt.excluded.expires_at}))
            if sweep:
                await self._kv_sweep(conn, now)

    async def _kv_sweep(self, conn: AsyncConnection, now: int) -> None:
        """Drop at most ``KV_SWEEP_BATCH`` expired values (a backlog is never one long statement
        inside a write someone waits for); a full batch leaves the next write to sweep again."""
        stale = sa.select(KV.c.name).where(KV.c.expires_at <= now).limit(KV_SWEEP_BATCH)
        done = await conn.execute(sa.delete(KV).where(KV.c.name.in_(stale.scalar_subquery())))
        if done.rowcount >= KV_SWEEP_BATCH:
            self._kv_swept = 0

    # -- metering ----------------------------------------------------------------------------
    async def add_metering(self, deltas: list[MeteringDelta]) -> None:
        if not deltas:
            return
        rows = [d.to_wire() for d in sorted(deltas, key=lambda d: d.row_key)]
        for row in rows:
            row["keep_group"] = row["key_group_at_use"] == ""
        stmt = self._ins(METERING).values(**{c.name: sa.bindparam(c.name) for c in METERING.columns})
        set_: dict[str, Any] = {c: METERING.c[c] + stmt.excluded[c] for c in _METER_COUNTS}
        set_["key_group_at_use"] = sa.case((sa.bindparam("keep_group", type_=sa.Boolean),
                                            METERING.c.key_group_at_use), else_=stmt.excluded.key_group_at_use)
        async with self._tx() as conn:
            await conn.execute(stmt.on_conflict_do_update(
                index_elements=[METERING.c.day, METERING.c.key_id, METERING.c.model, METERING.c.provider],
                set_=set_), rows)

    async def list_metering(self, day: str) -> list[MeteringRow]:
        async with self._tx() as conn:
            rows = (await conn.execute(sa.select(METERING).where(METERING.c.day == day).order_by(
                METERING.c.key_id, METERING.c.model, METERING.c.provider))).mappings().all()
        return [MeteringRow.from_wire(dict(r)) for r in rows]

    async def purge_metering_before(self, day: str) -> int:
        async with self._tx() as conn:
            result = await conn.execute(sa.delete(METERING).where(METERING.c.day < day))
        return int(result.rowcount or 0)

    # -- audit -------------------------------------------------------------------------------
    async def append_audit(self, record: AuditRecord) -> None:
        values = record.to_wire()
        async with self._tx() as conn:
            result = await conn.execute(self._ins(AUDIT).values(**values).on_conflict_do_nothing())
            if not result.rowcount:
                old = (await conn.execute(sa.select(AUDIT).where(AUDIT.c.seq == record.seq))).mappings().first()
                if old is not None and AuditRecord.from_wire(dict(old)) != record:
                    raise StoreConflict(f"audit seq {record.seq} already holds a different record")

    async def list_audit(self, after_seq: int = 0, limit: int = 1000) -> list[AuditRecord]:
        async with self._tx() as conn:
            rows = (await conn.execute(sa.select(AUDIT).where(AUDIT.c.seq > after_seq).order_by(AUDIT.c.seq)
                                       .limit(max(0, limit)))).mappings().all()
        return [AuditRecord.from_wire(dict(r)) for r in rows]

    async def audit_tail(self, limit: int) -> list[AuditRecord]:
        async with self._tx() as conn:
            rows = (await conn.execute(sa.select(AUDIT).order_by(AUDIT.c.seq.desc())
                                       .limit(max(0, limit)))).mappings().all()
        return [AuditRecord.from_wire(dict(r)) for r in reversed(rows)]

    # -- denylist ----------------------------------------------------------------------------
    async def add_denylist(self, sub: str, reason: str, now: int) -> DenyEntry:
        async with self._tx() as conn:
            old = (await conn.execute(sa.select(DENY).where(DENY.c.sub == sub))).mappings().first()
            if old is None:
                revision = await self._bump(conn)
                result = await conn.execute(self._ins(DENY).values(sub=sub, reason=reason, ts=now, revision=revision)
                                            .on_conflict_do_nothing())
                if result.rowcount:
                    return DenyEntry(sub, reason, now, revision)
                old = (await conn.execute(sa.select(DENY).where(DENY.c.sub == sub))).mappings().first()
        return DenyEntry.from_wire(dict(old or {}))

    async def list_denylist(self, since: int = 0) -> list[DenyEntry]:
        async with self._tx() as conn:
            rows = (await conn.execute(sa.select(DENY).where(DENY.c.revision > since)
                                       .order_by(DENY.c.revision))).mappings().all()
        return [DenyEntry.from_wire(dict(r)) for r in rows]

    # -- credentials -------------------------------------------------------------------------
    async def put_credential(self, credential: CredentialSecret) -> CredentialMeta:
        m = credential.meta
        async with self._tx() as conn:
            key = (await conn.execute(sa.select(KEYS.c.deleted_at).where(KEYS.c.id == m.key_id)
                                      .with_for_update())).first()
            if key is None or key[0] is not None:
                raise StoreNotFound(f"no live key {m.key_id!r} for credential {m.id!r}")
            taken = (await conn.execute(sa.select(CREDS.c.id).where(
                (CREDS.c.kind == m.kind) & (CREDS.c.public_id == m.public_id) & (CREDS.c.id != m.id)))).first()
            if taken is not None:
                raise StoreConflict(f"credential public id {m.public_id!r} is taken")
            occupant = (await conn.execute(sa.select(CREDS.c.id, CREDS.c.revoked_at).where(
                (CREDS.c.key_id == m.key_id) & (CREDS.c.kind == m.kind) & (CREDS.c.slot == m.slot)
                & (CREDS.c.id != m.id)))).first()
            if occupant is not None:
                if occupant[1] is None:
                    raise StoreConflict(f"slot {m.slot} of key {m.key_id!r} holds a live {m.kind} credential; "
                                        f"revoke it first")
                await conn.execute(sa.delete(CREDS).where(CREDS.c.id == occupant[0]))
            revision = await self._bump(conn)
            values = {**m.to_wire(), "revision": revision, "secret": credential.secret}
            stmt = self._ins(CREDS).values(**values)
            try:
                await conn.execute(stmt.on_conflict_do_update(index_elements=[CREDS.c.id],
                                                              set_={k: stmt.excluded[k] for k in values if k != "id"}))
            except IntegrityError:
                raise StoreConflict(f"credential {m.id!r} collides with a concurrent write; retry") from None
        return CredentialMeta.from_wire({k: v for k, v in values.items() if k != "secret"})

    async def list_credentials(self, key_id: str) -> list[CredentialMeta]:
        async with self._tx() as conn:
            rows = (await conn.execute(sa.select(CREDS).where(CREDS.c.key_id == key_id)
                                       .order_by(CREDS.c.kind, CREDS.c.slot))).mappings().all()
        return [CredentialMeta.from_wire({k: v for k, v in r.items() if k != "secret"}) for r in rows]

    async def lookup_credential(self, kind: str, public_id: str) -> CredentialSecret | None:
        async with self._tx() as conn:
            row = (await conn.execute(sa.select(CREDS).where((CREDS.c.kind == kind)
                                                             & (CREDS.c.public_id == public_id)))).mappings().first()
        return _cred(dict(row)) if row else None

    async def revoke_credential(self, credential_id: str, reason: str, now: int) -> CredentialMeta:
        async with self._tx() as conn:
            row = (await conn.execute(sa.select(CREDS).where(CREDS.c.id == credential_id)
                                      .with_for_update())).mappings().first()
            if row is None:
                raise StoreNotFound(f"no credential {credential_id!r}")
            values = dict(row)
            if values["revoked_at"] is None:
                values.update(revoked_at=now, revoke_reason=reason, revision=await self._bump(conn))
                await conn.execute(sa.update(CREDS).where(CREDS.c.id == credential_id).values(
                    revoked_at=now, revoke_reason=reason, revision=values["revision"]))
        return _cred(values).meta

    async def list_credentials_since(self, since: int = 0) -> list[CredentialSecret]:
        async with self._tx() as conn:
            rows = (await conn.execute(sa.select(CREDS).where(CREDS.c.revision > since)
                                       .order_by(CREDS.c.revision))).mappings().all()
        return [_cred(dict(r)) for r in rows]

    # -- meta --------------------------------------------------------------------------------
    async def get_meta(self, name: str) -> str | None:
        async with self._tx() as conn:
            value = (await conn.execute(sa.select(META.c.value).where(META.c.name == name))).scalar()
        return None if value is None else str(value)

    async def put_meta(self, name: str, value: str, *, only_if_absent: bool = False) -> str:
        async with self._tx() as conn:
            stmt = self._ins(META).values(name=name, value=value)
            if only_if_absent:
                await conn.execute(stmt.on_conflict_do_nothing())
            else:
                await conn.execute(stmt.on_conflict_do_update(index_elements=[META.c.name],
                                                              set_={"value": stmt.excluded.value}))
            stored = (await conn.execute(sa.select(META.c.value).where(META.c.name == name))).scalar()
        return str(stored)


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return f"{type(orig).__name__}: {text[0] if text else ''}".rstrip(": ")


def _key_row(key: VirtualKey, revision: int) -> dict[str, Any]:
    return {"id": key.id, "name": key.name, "generation": key.generation,
            "allowed_pools": None if key.allowed_pools is None else json.dumps(key.allowed_pools),
            "enabled": key.enabled, "created_at": key.created_at, "grp": key.group,
            "labels": json.dumps(key.labels, sort_keys=True), "expires_at": key.expires_at,
            "deleted_at": key.deleted_at, "revision": revision}


def _key(row: dict[str, Any]) -> VirtualKey:
    pools = row["allowed_pools"]
    return VirtualKey(id=row["id"], name=row["name"], created_at=int(row["created_at"]),
                      generation=int(row["generation"]), allowed_pools=None if pools is None else json.loads(pools),
                      enabled=bool(row["enabled"]), group=row["grp"], labels=json.loads(row["labels"]),
                      expires_at=row["expires_at"], deleted_at=row["deleted_at"], revision=int(row["revision"]))


def _cred(row: dict[str, Any]) -> CredentialSecret:
    secret = row.pop("secret")
    return CredentialSecret(CredentialMeta.from_wire(row), secret)
