"""busbar-store-valkey: the store contract on Valkey or Redis (redis-py asyncio), shared by a fleet.

Settings: ``url`` (``redis://`` or ``rediss://`` for TLS), ``prefix`` (default ``busbar:``, the
namespace of every key written) and ``connect_timeout_secs`` (default 5). Multi-key writes are
atomic: additive ledger and metering flushes run as one Lua script (each counter floored at 0),
read-check-write operations (tombstones, credential slots, the audit chain) as ``WATCH`` +
``MULTI``/``EXEC``. A dropped connection is re-established by the client on the next operation;
the failing operation reports the store unavailable. Passwords never appear in errors.

Layout under ``prefix``: ``schema`` (version), ``rev`` (revision counter), ``key:<id>`` (JSON) +
``keys`` (zset by revision), ``usage:<bucket>|<window>`` (hash) + ``usage:idx:<bucket>`` (set) +
``usage:all`` (set), ``meter:<day>`` (hash) + ``meter:days`` (set), ``audit:<seq>`` (JSON) +
``audit`` (zset), ``deny:<sub>`` (JSON) + ``deny`` (zset by revision), ``cred:<id>`` (JSON with
secret), ``cred:pub:<kind>:<public id>``, ``cred:slot:<key>:<kind>:<slot>``, ``cred:of:<key>`` (set),
``creds`` (zset by revision), ``meta`` (hash), ``strict:<bucket>|<window>`` (hash: ``<metric>:used``,
``<metric>:reserved``), ``kv:<name>`` (hash: ``v`` the value, ``e`` its ``expires_at``). Only strict
counters and expiring values expire (``EXPIREAT`` at their ``expires_at``); nothing else does
(metering retention: ``busbar store prune``). ``strict_admit`` is one Lua script: every counter of
the call is checked, then all are reserved, or none. See docs/stores.md.
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis.asyncio as redis
from busbar_sdk.store import (
    SCHEMA_VERSION,
    AuditRecord,
    CredentialMeta,
    CredentialSecret,
    DenyEntry,
    MeteringDelta,
    MeteringRow,
    Store,
    StoreConflict,
    StoreError,
    StoreInvalid,
    StoreNotFound,
    StoreSchemaError,
    StoreUnavailable,
    TierTokens,
    UsageItem,
    UsageLedger,
    VirtualKey,
    export_store,
    newer_schema_message,
)
from busbar_sdk.store.kv import check_kv
from busbar_sdk.store.settings import check_settings, package_spec, redact_url
from busbar_sdk.store.strict import StrictCharge, StrictCounter, StrictRelease, check_distinct
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["ValkeyStore", "plugin"]

__version__ = "1.5.0"

_SPEC = package_spec(__name__)      # settings_schema.json: the rules the manifest declares
_TIERS = ("input", "output", "cache_read", "cache_write")
_METER = ("input", "output", "cache_read", "cache_write", "requests", "billable_requests")
_SEP = "\x1f"
T = TypeVar("T")

# KEYS: hash keys; ARGV: triples (key index, field, delta). HINCRBY then floor at 0.
_FLOOR_ADD = """
for i = 1, #ARGV, 3 do
  local k = KEYS[tonumber(ARGV[i])]
  local v = redis.call('HINCRBY', k, ARGV[i + 1], tonumber(ARGV[i + 2]))
  if v < 0 then redis.call('HSET', k, ARGV[i + 1], 0) end
end
return 1
"""

# KEYS: one hash per charge; ARGV: quadruples (metric, cap, amount, expires_at or 0). Every counter
# is checked first; only when all fit is each reserved (all or none). Returns 0, or the 1-based
# index of the first charge that does not fit.
_STRICT_ADMIT = """
for i = 1, #KEYS do
  local m = ARGV[4 * i - 3]
  local v = redis.call('HMGET', KEYS[i], m .. ':used', m .. ':reserved')
  if (tonumber(v[1]) or 0) + (tonumber(v[2]) or 0) + tonumber(ARGV[4 * i - 1]) > tonumber(ARGV[4 * i - 2]) then
    return i
  end
end
for i = 1, #KEYS do
  redis.call('HINCRBY', KEYS[i], ARGV[4 * i - 3] .. ':reserved', ARGV[4 * i - 1])
  if ARGV[4 * i] ~= '0' then redis.call('EXPIREAT', KEYS[i], ARGV[4 * i]) end
end
return 0
"""

# KEYS: one hash per release; ARGV: quadruples (metric, release, add, expires_at or 0). ``0 - x``, not
# ``-x``: Lua renders ``-0`` as "-0", which HINCRBY refuses (a release of 0).
_STRICT_SETTLE = """
for i = 1, #KEYS do
  local m = ARGV[4 * i - 3]
  local r = redis.call('HINCRBY', KEYS[i], m .. ':reserved', 0 - tonumber(ARGV[4 * i - 2]))
  if r < 0 then redis.call('HSET', KEYS[i], m .. ':reserved', 0) end
  local u = redis.call('HINCRBY', KEYS[i], m .. ':used', ARGV[4 * i - 1])
  if u < 0 then redis.call('HSET', KEYS[i], m .. ':used', 0) end
  if ARGV[4 * i] ~= '0' then redis.call('EXPIREAT', KEYS[i], ARGV[4 * i]) end
end
return 1
"""


class ValkeyStore(Store):
    """A :class:`Store` on one Valkey/Redis server; build it with :meth:`from_settings`."""

    backend = "valkey"

    def __init__(self, url: str, prefix: str, timeout: int) -> None:
        self._url, self._p = url, prefix
        self.where = redact_url(url)
        self._password = urlsplit(url).password or ""
        self._r: redis.Redis = redis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=timeout,
                                                    socket_timeout=max(timeout, 10), health_check_interval=30,
                                                    retry_on_timeout=False)
        self._floor_add = self._r.register_script(_FLOOR_ADD)
        self._strict_admit = self._r.register_script(_STRICT_ADMIT)
        self._strict_settle = self._r.register_script(_STRICT_SETTLE)

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> ValkeyStore:
        """Validate the settings and build the (unconnected) store.

        Raises:
            StoreInvalid: settings against settings_schema.json (unknown, missing, mistyped,
                out of range: :func:`check_settings`), a URL that is not ``redis://``/``rediss://``.
        """
        s = check_settings(settings, _SPEC, "valkey")
        parts = urlsplit(s["url"])
        if not parts.hostname:
            raise StoreInvalid(f"store.settings.url: {redact_url(s['url'])} needs a host (redis://host:6379/0)")
        return cls(s["url"], s["prefix"], s["connect_timeout_secs"])

    # -- plumbing ----------------------------------------------------------------------------
    def k(self, *parts: str | int) -> str:
        """A key under this store's prefix."""
        return self._p + ":".join(str(p) for p in parts)

    async def _do(self, fn: Callable[[], Awaitable[T]]) -> T:
        try:
            return await fn()
        except StoreError:
            raise
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise StoreUnavailable(f"valkey at {self.where} is unavailable: {self._clean(str(exc))}") from None
        except RedisError as exc:
            raise StoreError(f"valkey: {type(exc).__name__}: {self._clean(str(exc))}") from None

    def _clean(self, text: str) -> str:
        """A driver's error text with the URL and its password masked (that text only: see sql.py)."""
        if self._password:
            text = text.replace(self._password, "***")
        return text.replace(self._url, self.where)

    async def _watched(self, keys: list[str], body: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``body(pipe)`` under WATCH ``keys`` and retry when another writer got there first."""
        async def run() -> T:
            for _ in range(50):
                async with self._r.pipeline(transaction=True) as pipe:
                    try:
                        await pipe.watch(*keys)
                        result = await body(pipe)
                        await pipe.execute()
                        return result
                    except WatchError:
                        continue
            raise StoreUnavailable("valkey: too much contention on one record; retry")
        return await self._do(run)

    async def _rev(self) -> int:
        return int(await self._r.incr(self.k("rev")))

    # -- lifecycle ---------------------------------------------------------------------------
    async def open(self) -> None:
        async def run() -> None:
            await self._r.ping()
            await self._r.set(self.k("schema"), SCHEMA_VERSION, nx=True)
            found = int(await self._r.get(self.k("schema")) or SCHEMA_VERSION)
            if found > SCHEMA_VERSION:
                raise StoreSchemaError(newer_schema_message(found))
        await self._do(run)

    async def close(self) -> None:
        await self._r.aclose()

    async def info(self) -> dict[str, Any]:
        async def run() -> dict[str, Any]:
            days = await self._r.smembers(self.k("meter", "days"))
            rows = 0
            for day in days:
                rows += len({f.rsplit(_SEP, 1)[0] for f in await self._r.hkeys(self.k("meter", day))})
            return {"backend": self.backend, "schema_version": int(await self._r.get(self.k("schema")) or 0),
                    "counts": {"keys": await self._r.zcard(self.k("keys")),
                               "usage_windows": await self._r.scard(self.k("usage", "all")),
                               "metering_rows": rows, "audit_records": await self._r.zcard(self.k("audit")),
                               "denylist": await self._r.zcard(self.k("deny")),
                               "credentials": await self._r.zcard(self.k("creds"))}}
        return await self._do(run)

    # -- keys --------------------------------------------------------------------------------
    async def put_key(self, key: VirtualKey) -> VirtualKey:
        name = self.k("key", key.id)

        async def body(pipe: Any) -> VirtualKey:
            old = await pipe.get(name)
            if old is not None and json.loads(old).get("deleted_at") is not None and key.deleted_at is None:
                raise StoreConflict(f"key {key.id!r} is deleted; a deleted key id is never reused")
            row = VirtualKey.from_wire({**key.to_wire(), "revision": await self._rev()})
            pipe.multi()
            pipe.set(name, json.dumps(row.to_wire()))
            pipe.zadd(self.k("keys"), {key.id: row.revision})
            return row
        return await self._watched([name], body)

    async def get_key(self, key_id: str) -> VirtualKey | None:
        raw = await self._do(lambda: self._r.get(self.k("key", key_id)))
        return VirtualKey.from_wire(json.loads(raw)) if raw else None

    async def list_keys(self, since: int = 0) -> list[VirtualKey]:
        async def run() -> list[VirtualKey]:
            ids = await self._r.zrangebyscore(self.k("keys"), f"({since}", "+inf")
            raws = await self._r.mget([self.k("key", i) for i in ids]) if ids else []
            return [VirtualKey.from_wire(json.loads(r)) for r in raws if r]
        return await self._do(run)

    async def delete_key(self, key_id: str, now: int) -> VirtualKey:
        name, owned = self.k("key", key_id), self.k("cred", "of", key_id)

        async def body(pipe: Any) -> VirtualKey:
            raw = await pipe.get(name)
            if raw is None:
                raise StoreNotFound(f"no key {key_id!r}")
            row = VirtualKey.from_wire(json.loads(raw))
            if row.deleted_at is not None:
                pipe.multi()
                return row
            creds = [CredentialSecret.from_wire(json.loads(c)) for c in
                     await pipe.mget([self.k("cred", i) for i in await pipe.smembers(owned)] or [self.k("none")]) if c]
            row.enabled, row.deleted_at, row.revision = False, now, await self._rev()
            pipe.multi()
            for c in creds:
                self._drop_cred(pipe, c.meta)
            pipe.delete(owned)
            pipe.set(name, json.dumps(row.to_wire()))
            pipe.zadd(self.k("keys"), {key_id: row.revision})
            return row
        return await self._watched([name, owned], body)

    async def scrub_key(self, key_id: str) -> VirtualKey:
        name = self.k("key", key_id)

        async def body(pipe: Any) -> VirtualKey:
            raw = await pipe.get(name)
            if raw is None:
                raise StoreNotFound(f"no key {key_id!r}")
            row = VirtualKey.from_wire(json.loads(raw))
            if row.deleted_at is None:
                raise StoreConflict(f"key {key_id!r} is live; delete it before scrubbing its personal data")
            row.name, row.labels, row.revision = "", {}, await self._rev()
            pipe.multi()
            pipe.set(name, json.dumps(row.to_wire()))
            pipe.zadd(self.k("keys"), {key_id: row.revision})
            return row
        return await self._watched([name], body)

    # -- usage -------------------------------------------------------------------------------
    def _usage_key(self, bucket: str, window_start: int) -> str:
        return self.k("usage", f"{bucket}|{window_start}")

    @staticmethod
    def _ledger(h: dict[str, str]) -> UsageLedger:
        led = UsageLedger(int(h.get("requests", 0)), int(h.get("billable_requests", 0)), {})
        for field, value in h.items():
            if field.startswith("m" + _SEP):
                _, model, tier = field.split(_SEP)
                tiers = led.models.setdefault(model, TierTokens())
                setattr(tiers, tier, int(value))
        return led

    async def get_usage(self, bucket: str, window_start: int) -> UsageLedger:
        return self._ledger(await self._do(lambda: self._r.hgetall(self._usage_key(bucket, window_start))))

    async def list_usage(self, bucket: str) -> dict[int, UsageLedger]:
        async def run() -> dict[int, UsageLedger]:
            starts = sorted(int(s) for s in await self._r.smembers(self.k("usage", "idx", bucket)))
            return {s: self._ledger(await self._r.hgetall(self._usage_key(bucket, s))) for s in starts}
        return await self._do(run)

    async def put_usage(self, bucket: str, window_start: int, ledger: UsageLedger) -> None:
        name = self._usage_key(bucket, window_start)
        mapping: dict[str, int] = {"requests": ledger.requests, "billable_requests": ledger.billable_requests}
        for model, tiers in ledger.models.items():
            mapping.update({f"m{_SEP}{model}{_SEP}{t}": v for t, v in tiers.to_wire().items()})

        async def run() -> None:
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.delete(name)
                pipe.hset(name, mapping=mapping)
                pipe.sadd(self.k("usage", "idx", bucket), window_start)
                pipe.sadd(self.k("usage", "all"), f"{bucket}|{window_start}")
                await pipe.execute()
        await self._do(run)

    async def add_usage(self, items: list[UsageItem]) -> None:
        if not items:
            return
        keys: list[str] = []
        argv: list[str | int] = []
        for item in items:
            keys.append(self._usage_key(item.bucket, item.window_start))
            idx = len(keys)
            d = item.delta
            argv += [idx, "requests", d.requests, idx, "billable_requests", d.billable_requests]
            for model, tiers in d.models.items():
                for tier, value in tiers.to_wire().items():
                    argv += [idx, f"m{_SEP}{model}{_SEP}{tier}", value]

        async def run() -> None:
            async with self._r.pipeline(transaction=True) as pipe:
                await self._floor_add(keys=keys, args=argv, client=pipe)
                for item in items:
                    pipe.sadd(self.k("usage", "idx", item.bucket), item.window_start)
                    pipe.sadd(self.k("usage", "all"), f"{item.bucket}|{item.window_start}")
                await pipe.execute()
        await self._do(run)

    # -- strict counters ---------------------------------------------------------------------
    def _strict_key(self, bucket: str, window_start: int) -> str:
        return self.k("strict", f"{bucket}|{window_start}")

    async def strict_admit(self, charges: list[StrictCharge]) -> int | None:
        check_distinct(charges)
        if not charges:
            return None
        keys = [self._strict_key(c.bucket, c.window_start) for c in charges]
        argv: list[str | int] = []
        for c in charges:
            argv += [c.metric, c.cap, c.amount, c.expires_at or 0]
        over = int(await self._do(lambda: self._strict_admit(keys=keys, args=argv)))
        return None if over == 0 else over - 1

    async def strict_settle(self, releases: list[StrictRelease]) -> None:
        check_distinct(releases)
        if not releases:
            return
        keys = [self._strict_key(r.bucket, r.window_start) for r in releases]
        argv: list[str | int] = []
        for r in releases:
            argv += [r.metric, r.release, r.add, r.expires_at or 0]
        await self._do(lambda: self._strict_settle(keys=keys, args=argv))

    async def strict_get(self, bucket: str, window_start: int, metric: str) -> StrictCounter:
        used, reserved = await self._do(lambda: self._r.hmget(self._strict_key(bucket, window_start),
                                                               [f"{metric}:used", f"{metric}:reserved"]))
        return StrictCounter(int(used or 0), int(reserved or 0))

    # -- expiring values ---------------------------------------------------------------------
    async def kv_get(self, name: str, now: int) -> str | None:
        check_kv(name)
        value, expires_at = await self._do(lambda: self._r.hmget(self.k("kv", name), ["v", "e"]))
        return value if value is not None and now < int(expires_at or 0) else None

    async def kv_put(self, name: str, value: str, expires_at: int) -> None:
        check_kv(name, value, expires_at)
        key = self.k("kv", name)

        async def run() -> None:
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping={"v": value, "e": expires_at})
                pipe.expireat(key, expires_at)
                await pipe.execute()
        await self._do(run)

    # -- metering ----------------------------------------------------------------------------
    async def add_metering(self, deltas: list[MeteringDelta]) -> None:
        if not deltas:
            return

        async def run() -> None:
            async with self._r.pipeline(transaction=True) as pipe:
                for d in deltas:
                    name = self.k("meter", d.day)
                    row = _SEP.join((d.key_id, d.model, d.provider))
                    for c in _METER:
                        pipe.hincrby(name, f"{row}{_SEP}{c}", getattr(d, c))
                    if d.key_group_at_use:
                        pipe.hset(name, f"{row}{_SEP}group", d.key_group_at_use)
                    else:
                        pipe.hsetnx(name, f"{row}{_SEP}group", "")
                    pipe.sadd(self.k("meter", "days"), d.day)
                await pipe.execute()
        await self._do(run)

    async def list_metering(self, day: str) -> list[MeteringRow]:
        h = await self._do(lambda: self._r.hgetall(self.k("meter", day)))
        rows: dict[tuple[str, str, str], dict[str, Any]] = {}
        for field, value in h.items():
            key_id, model, provider, col = field.split(_SEP)
            row = rows.setdefault((key_id, model, provider), {"day": day, "key_id": key_id, "model": model,
                                                             "provider": provider})
            row["key_group_at_use" if col == "group" else col] = value if col == "group" else int(value)
        return [MeteringRow.from_wire(rows[k]) for k in sorted(rows)]

    async def purge_metering_before(self, day: str) -> int:
        async def run() -> int:
            old = sorted(d for d in await self._r.smembers(self.k("meter", "days")) if d < day)
            gone = 0
            for d in old:
                gone += len({f.rsplit(_SEP, 1)[0] for f in await self._r.hkeys(self.k("meter", d))})
                async with self._r.pipeline(transaction=True) as pipe:
                    pipe.delete(self.k("meter", d))
                    pipe.srem(self.k("meter", "days"), d)
                    await pipe.execute()
            return gone
        return await self._do(run)

    # -- audit -------------------------------------------------------------------------------
    async def append_audit(self, record: AuditRecord) -> None:
        body = json.dumps(record.to_wire(), sort_keys=True)

        async def run() -> None:
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.set(self.k("audit", record.seq), body, nx=True)
                pipe.zadd(self.k("audit"), {str(record.seq): record.seq})
                created, _ = await pipe.execute()
            if not created:
                old = await self._r.get(self.k("audit", record.seq))
                if old is not None and AuditRecord.from_wire(json.loads(old)) != record:
                    raise StoreConflict(f"audit seq {record.seq} already holds a different record")
        await self._do(run)

    async def _audit(self, seqs: list[str]) -> list[AuditRecord]:
        raws = await self._r.mget([self.k("audit", s) for s in seqs]) if seqs else []
        return [AuditRecord.from_wire(json.loads(r)) for r in raws if r]

    async def list_audit(self, after_seq: int = 0, limit: int = 1000) -> list[AuditRecord]:
        async def run() -> list[AuditRecord]:
            seqs = await self._r.zrangebyscore(self.k("audit"), f"({after_seq}", "+inf", start=0, num=max(0, limit))
            return await self._audit(seqs)
        return await self._do(run) if limit > 0 else []

    async def audit_tail(self, limit: int) -> list[AuditRecord]:
        async def run() -> list[AuditRecord]:
            return await self._audit(await self._r.zrange(self.k("audit"), -limit, -1))
        return await self._do(run) if limit > 0 else []

    # -- denylist ----------------------------------------------------------------------------
    async def add_denylist(self, sub: str, reason: str, now: int) -> DenyEntry:
        name = self.k("deny", sub)

        async def body(pipe: Any) -> DenyEntry:
            raw = await pipe.get(name)
            if raw is not None:
                pipe.multi()
                return DenyEntry.from_wire(json.loads(raw))
            entry = DenyEntry(sub, reason, now, await self._rev())
            pipe.multi()
            pipe.set(name, json.dumps(entry.to_wire()))
            pipe.zadd(self.k("deny"), {sub: entry.revision})
            return entry
        return await self._watched([name], body)

    async def list_denylist(self, since: int = 0) -> list[DenyEntry]:
        async def run() -> list[DenyEntry]:
            subs = await self._r.zrangebyscore(self.k("deny"), f"({since}", "+inf")
            raws = await self._r.mget([self.k("deny", s) for s in subs]) if subs else []
            return [DenyEntry.from_wire(json.loads(r)) for r in raws if r]
        return await self._do(run)

    # -- credentials -------------------------------------------------------------------------
    def _drop_cred(self, pipe: Any, m: CredentialMeta) -> None:
        pipe.delete(self.k("cred", m.id), self.k("cred", "pub", m.kind, m.public_id),
                    self.k("cred", "slot", m.key_id, m.kind, m.slot))
        pipe.zrem(self.k("creds"), m.id)
        pipe.srem(self.k("cred", "of", m.key_id), m.id)

    async def put_credential(self, credential: CredentialSecret) -> CredentialMeta:
        m = credential.meta
        key_name, pub = self.k("key", m.key_id), self.k("cred", "pub", m.kind, m.public_id)
        slot = self.k("cred", "slot", m.key_id, m.kind, m.slot)

        async def body(pipe: Any) -> CredentialMeta:
            raw_key = await pipe.get(key_name)
            if raw_key is None or json.loads(raw_key).get("deleted_at") is not None:
                raise StoreNotFound(f"no live key {m.key_id!r} for credential {m.id!r}")
            holder = await pipe.get(pub)
            if holder is not None and holder != m.id:
                raise StoreConflict(f"credential public id {m.public_id!r} is taken")
            occupant_id = await pipe.get(slot)
            occupant = None
            if occupant_id is not None and occupant_id != m.id:
                raw = await pipe.get(self.k("cred", occupant_id))
                occupant = CredentialSecret.from_wire(json.loads(raw)) if raw else None
                if occupant is not None and occupant.meta.revoked_at is None:
                    raise StoreConflict(f"slot {m.slot} of key {m.key_id!r} holds a live {m.kind} credential; "
                                        f"revoke it first")
            row = CredentialSecret(CredentialMeta.from_wire({**m.to_wire(), "revision": await self._rev()}),
                                   credential.secret)
            pipe.multi()
            if occupant is not None:
                self._drop_cred(pipe, occupant.meta)
            pipe.set(self.k("cred", m.id), json.dumps(row.to_wire()))
            pipe.set(pub, m.id)
            pipe.set(slot, m.id)
            pipe.sadd(self.k("cred", "of", m.key_id), m.id)
            pipe.zadd(self.k("creds"), {m.id: row.meta.revision})
            return row.meta
        return await self._watched([key_name, pub, slot], body)

    async def _creds(self, ids: list[str]) -> list[CredentialSecret]:
        raws = await self._r.mget([self.k("cred", i) for i in ids]) if ids else []
        return [CredentialSecret.from_wire(json.loads(r)) for r in raws if r]

    async def list_credentials(self, key_id: str) -> list[CredentialMeta]:
        async def run() -> list[CredentialMeta]:
            rows = await self._creds(sorted(await self._r.smembers(self.k("cred", "of", key_id))))
            return [c.meta for c in sorted(rows, key=lambda c: (c.meta.kind, c.meta.slot))]
        return await self._do(run)

    async def lookup_credential(self, kind: str, public_id: str) -> CredentialSecret | None:
        async def run() -> CredentialSecret | None:
            cid = await self._r.get(self.k("cred", "pub", kind, public_id))
            rows = await self._creds([cid]) if cid else []
            return rows[0] if rows else None
        return await self._do(run)

    async def revoke_credential(self, credential_id: str, reason: str, now: int) -> CredentialMeta:
        name = self.k("cred", credential_id)

        async def body(pipe: Any) -> CredentialMeta:
            raw = await pipe.get(name)
            if raw is None:
                raise StoreNotFound(f"no credential {credential_id!r}")
            row = CredentialSecret.from_wire(json.loads(raw))
            if row.meta.revoked_at is not None:
                pipe.multi()
                return row.meta
            row.meta.revoked_at, row.meta.revoke_reason, row.meta.revision = now, reason, await self._rev()
            pipe.multi()
            pipe.set(name, json.dumps(row.to_wire()))
            pipe.zadd(self.k("creds"), {credential_id: row.meta.revision})
            return row.meta
        return await self._watched([name], body)

    async def list_credentials_since(self, since: int = 0) -> list[CredentialSecret]:
        async def run() -> list[CredentialSecret]:
            return await self._creds(await self._r.zrangebyscore(self.k("creds"), f"({since}", "+inf"))
        return await self._do(run)

    # -- meta --------------------------------------------------------------------------------
    async def get_meta(self, name: str) -> str | None:
        value: str | None = await self._do(lambda: self._r.hget(self.k("meta"), name))
        return value

    async def put_meta(self, name: str, value: str, *, only_if_absent: bool = False) -> str:
        async def run() -> str:
            if only_if_absent:
                await self._r.hsetnx(self.k("meta"), name, value)
            else:
                await self._r.hset(self.k("meta"), name, value)
            return str(await self._r.hget(self.k("meta"), name))
        return await self._do(run)


plugin = export_store(ValkeyStore)
