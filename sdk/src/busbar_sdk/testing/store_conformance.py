"""The store conformance suite: every backend (first-party or yours) passes the same tests.

Subclass :class:`StoreConformance` in a pytest module and give it a ``store_factory`` fixture: a
callable that returns a new, unopened :class:`~busbar_sdk.store.Store` handle on one empty,
isolated backend (every call within a test reaches the same data, as two nodes of a fleet
would)::

    import pytest
    from busbar_sdk.testing.store_conformance import StoreConformance

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store_factory(self, tmp_path):
            return lambda: MyStore.from_settings({"path": str(tmp_path / "db")})

Each test runs its own event loop (``asyncio.run``), so no async pytest plugin is needed. A
backend that cannot produce a second handle on the same data (an in-memory store) sets
``shared_handles = False``: the two-writer tests then use one handle twice.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import pytest

from busbar_sdk.store import (
    SCHEMA_VERSION,
    AuditRecord,
    CredentialMeta,
    CredentialSecret,
    MeteringDelta,
    Store,
    StoreConflict,
    StoreInvalid,
    StoreNotFound,
    StrictCharge,
    StrictCounter,
    StrictRelease,
    TierTokens,
    UsageDelta,
    UsageItem,
    UsageLedger,
    VirtualKey,
)

__all__ = ["StoreConformance"]

Factory = Callable[[], Store]


def _run(factory: Factory, body: Callable[[Store], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        store = factory()
        await store.open()
        try:
            return await body(store)
        finally:
            await store.close()
    return asyncio.run(main())


def _run_two(factory: Factory, shared: bool, body: Callable[[Store, Store], Awaitable[Any]]) -> Any:
    """``body(a, b)`` on two open handles on the same data (one handle twice when not ``shared``)."""
    async def main() -> Any:
        a = factory()
        b = factory() if shared else a
        await a.open()
        if b is not a:
            await b.open()
        try:
            return await body(a, b)
        finally:
            await a.close()
            if b is not a:
                await b.close()
    return asyncio.run(main())


def _key(key_id: str = "k1", **kw: Any) -> VirtualKey:
    return VirtualKey(id=key_id, name=kw.pop("name", "bob-laptop"), created_at=kw.pop("created_at", 1_700_000_000),
                      **kw)


def _cred(cid: str, key_id: str = "k1", slot: int = 0, public_id: str = "AKIAEXAMPLE0") -> CredentialSecret:
    return CredentialSecret(CredentialMeta(id=cid, key_id=key_id, kind="sigv4", slot=slot, public_id=public_id,
                                           created_at=1_700_000_000), "v1:plain:s3cr3t")


class StoreConformance:
    """The operations of the store contract, each with exact expected values."""

    shared_handles: ClassVar[bool] = True

    @pytest.fixture
    def store_factory(self) -> Factory:   # pragma: no cover - overridden by every subclass
        raise NotImplementedError("define a store_factory fixture")

    # -- lifecycle ---------------------------------------------------------------------------
    def test_open_is_idempotent_and_info_counts_start_at_zero(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            await s.open()
            info = await s.info()
            assert info["schema_version"] == SCHEMA_VERSION
            assert info["counts"] == {"keys": 0, "usage_windows": 0, "metering_rows": 0, "audit_records": 0,
                                      "denylist": 0, "credentials": 0}
            assert isinstance(info["backend"], str) and info["backend"]
        _run(store_factory, body)

    # -- keys --------------------------------------------------------------------------------
    def test_key_round_trip_and_revisions(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            a = await s.put_key(_key("k1", group="bob", allowed_pools=[], labels={"team": "growth"}, expires_at=9))
            b = await s.put_key(_key("k2", allowed_pools=None))
            assert b.revision > a.revision > 0
            got = await s.get_key("k1")
            assert got == a
            assert got is not None and got.allowed_pools == [] and got.labels == {"team": "growth"}
            assert (await s.get_key("k2")) is not None and (await s.get_key("k2")).allowed_pools is None  # type: ignore[union-attr]
            assert await s.get_key("nope") is None
            a2 = await s.put_key(_key("k1", name="renamed", generation=1))
            assert a2.revision > b.revision
            assert [k.id for k in await s.list_keys()] == ["k2", "k1"]
            assert [k.id for k in await s.list_keys(since=b.revision)] == ["k1"]
            assert (await s.info())["counts"]["keys"] == 2
        _run(store_factory, body)

    def test_delete_is_a_permanent_tombstone_that_destroys_credentials(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            await s.put_key(_key("k1"))
            await s.put_credential(_cred("c1"))
            dead = await s.delete_key("k1", now=1_700_000_500)
            assert (dead.enabled, dead.deleted_at) == (False, 1_700_000_500)
            assert await s.list_credentials("k1") == []
            assert await s.lookup_credential("sigv4", "AKIAEXAMPLE0") is None
            again = await s.delete_key("k1", now=1_800_000_000)
            assert again.deleted_at == 1_700_000_500                     # idempotent
            with pytest.raises(StoreConflict):
                await s.put_key(_key("k1"))                              # never resurrected
            with pytest.raises(StoreNotFound):
                await s.delete_key("ghost", now=1)
            assert [k.id for k in await s.list_keys(since=dead.revision - 1)] == ["k1"]   # tombstones listed
        _run(store_factory, body)

    def test_scrub_erases_personal_data_of_tombstones_only(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            await s.put_key(_key("k1", labels={"email": "bob@example.com"}, group="bob"))
            with pytest.raises(StoreConflict):
                await s.scrub_key("k1")
            await s.delete_key("k1", now=5)
            scrubbed = await s.scrub_key("k1")
            assert (scrubbed.name, scrubbed.labels, scrubbed.group) == ("", {}, "bob")
            with pytest.raises(StoreNotFound):
                await s.scrub_key("ghost")
        _run(store_factory, body)

    # -- usage -------------------------------------------------------------------------------
    def test_usage_put_get_and_additive_flushes(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            assert await s.get_usage("group:bob@minute", 60) == UsageLedger()
            await s.put_usage("group:bob@minute", 60, UsageLedger(3, 2, {"gpt": TierTokens(10, 20, 1, 2)}))
            await s.add_usage([
                UsageItem("group:bob@minute", 60, UsageDelta(1, 1, {"gpt": TierTokens(5, 5), "claude": TierTokens(7)})),
                UsageItem("group:bob@day", 0, UsageDelta(1, 0)),
            ])
            assert await s.get_usage("group:bob@minute", 60) == UsageLedger(
                4, 3, {"gpt": TierTokens(15, 25, 1, 2), "claude": TierTokens(7, 0, 0, 0)})
            await s.add_usage([UsageItem("group:bob@minute", 60,
                                         UsageDelta(-10, -1, {"gpt": TierTokens(-100, -5, 0, 0)}))])
            assert await s.get_usage("group:bob@minute", 60) == UsageLedger(
                0, 2, {"gpt": TierTokens(0, 20, 1, 2), "claude": TierTokens(7, 0, 0, 0)})   # floored at 0
            await s.add_usage([UsageItem("group:bob@minute", 120, UsageDelta(2))])
            assert sorted((await s.list_usage("group:bob@minute")).keys()) == [60, 120]
            assert (await s.list_usage("group:bob@day")) == {0: UsageLedger(1, 0, {})}
        _run(store_factory, body)

    def test_two_writers_converge_on_the_exact_sum(self, store_factory: Factory) -> None:
        async def body(a: Store, b: Store) -> None:
            async def writer(s: Store, n: int) -> None:
                for _ in range(n):
                    await s.add_usage([UsageItem("group:fleet@total", 0, UsageDelta(
                        1, 1, {"m": TierTokens(3, 4, 1, 0)})), UsageItem("group:root@total", 0, UsageDelta(1))])
            await asyncio.gather(writer(a, 25), writer(b, 25), writer(a, 25), writer(b, 25))
            assert await a.get_usage("group:fleet@total", 0) == UsageLedger(100, 100, {"m": TierTokens(300, 400,
                                                                                                  100, 0)})
            assert (await b.get_usage("group:root@total", 0)).requests == 100
        _run_two(store_factory, self.shared_handles, body)

    # -- strict counters ---------------------------------------------------------------------
    def test_strict_admit_checks_every_counter_and_charges_all_or_none(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            later = 4_000_000_000                                     # expires_at: far in the future
            req = StrictCharge("group:bob@minute", 60, "requests", cap=2, amount=1, expires_at=later)
            bud = StrictCharge("group:acme@month", 0, "budget", cap=1000, amount=600, expires_at=later)
            assert await s.strict_get("group:bob@minute", 60, "requests") == StrictCounter(0, 0)
            assert await s.strict_admit([req, bud]) is None
            assert await s.strict_get("group:bob@minute", 60, "requests") == StrictCounter(0, 1)
            assert await s.strict_get("group:acme@month", 0, "budget") == StrictCounter(0, 600)
            assert await s.strict_admit([req, bud]) == 1                       # 600 + 600 > 1000: nothing moves
            assert await s.strict_get("group:bob@minute", 60, "requests") == StrictCounter(0, 1)
            await s.strict_settle([StrictRelease("group:bob@minute", 60, "requests", 1, 1, later),
                                   StrictRelease("group:acme@month", 0, "budget", release=600, add=450)])
            assert await s.strict_get("group:bob@minute", 60, "requests") == StrictCounter(1, 0)
            assert await s.strict_get("group:acme@month", 0, "budget") == StrictCounter(450, 0)
            exact = StrictCharge("group:acme@month", 0, "budget", cap=1000, amount=550)
            assert await s.strict_admit([req, exact]) is None                  # 1 + 1 <= 2 and 450 + 550 <= 1000
            assert await s.strict_admit([exact]) == 0
            assert await s.strict_admit([StrictCharge("group:acme@month", 0, "budget", cap=1000, amount=0)]) is None
            assert await s.strict_admit([req]) == 0                            # 1 used + 1 reserved = the cap
            # the same bucket, another metric: its own counter; a new window starts at zero
            assert await s.strict_admit([StrictCharge("group:bob@minute", 60, "budget", cap=5, amount=5)]) is None
            assert await s.strict_admit([StrictCharge("group:bob@minute", 120, "requests", cap=2, amount=1)]) is None
            assert await s.strict_get("group:bob@minute", 120, "requests") == StrictCounter(0, 1)
            # a non-2xx outcome: released, nothing added; floors at 0
            await s.strict_settle([StrictRelease("group:bob@minute", 60, "requests", release=5, add=0)])
            assert await s.strict_get("group:bob@minute", 60, "requests") == StrictCounter(1, 0)
            # a settlement for a counter that is gone re-creates it with what it adds
            await s.strict_settle([StrictRelease("group:gone@hour", 3600, "budget", release=10, add=7)])
            assert await s.strict_get("group:gone@hour", 3600, "budget") == StrictCounter(7, 0)
            # an addition after the fact (no reservation to release)
            await s.strict_settle([StrictRelease("group:gone@hour", 3600, "budget", release=0, add=3)])
            assert await s.strict_get("group:gone@hour", 3600, "budget") == StrictCounter(10, 0)
            for bad in ([StrictCharge("group:bob@minute", 60, "tokens", cap=9, amount=1)],
                        [StrictCharge("group:x@total", 0, "budget", cap=9, amount=-1)],
                        [StrictCharge("group:x@total", 0, "budget", cap=9, amount=1)] * 2):
                with pytest.raises(StoreInvalid):
                    await s.strict_admit(bad)
            assert await s.strict_get("group:x@total", 0, "budget") == StrictCounter(0, 0)
            with pytest.raises(StoreInvalid):
                await s.strict_settle([StrictRelease("group:x@total", 0, "budget", release=-1, add=0)])
            assert await s.strict_admit([]) is None
        _run(store_factory, body)

    def test_strict_counters_expire(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            old = StrictCharge("group:bob@minute", 0, "requests", cap=5, amount=1, expires_at=100)
            assert await s.strict_admit([old]) is None
            kept = StrictCharge("group:bob@total", 0, "requests", cap=5, amount=1)      # never expires
            assert await s.strict_admit([kept]) is None
            hour = int(time.time()) // 3600 * 3600       # real time: a backend may expire on its own clock
            assert await s.strict_admit([StrictCharge("group:bob@hour", hour, "requests", cap=5, amount=1,
                                                      expires_at=hour + 7200)]) is None
            assert await s.strict_get("group:bob@minute", 0, "requests") == StrictCounter(0, 0)
            assert await s.strict_get("group:bob@total", 0, "requests") == StrictCounter(0, 1)
            assert await s.strict_get("group:bob@hour", hour, "requests") == StrictCounter(0, 1)
        _run(store_factory, body)

    def test_strict_admit_is_exact_under_concurrency(self, store_factory: Factory) -> None:
        async def body(a: Store, b: Store) -> None:
            one = [StrictCharge("group:fleet@hour", 3600, "requests", cap=10, amount=1)]
            verdicts = await asyncio.gather(*(h.strict_admit(one) for h in (a, b) * 32))
            assert (verdicts.count(None), verdicts.count(0)) == (10, 54)
            assert await b.strict_get("group:fleet@hour", 3600, "requests") == StrictCounter(0, 10)
            # two counters, the second tighter: the first never moves for a refused admission
            two = [StrictCharge("group:team@day", 0, "requests", cap=100, amount=1),
                   StrictCharge("group:org@month", 0, "budget", cap=25, amount=3)]
            verdicts = await asyncio.gather(*(h.strict_admit(two) for h in (a, b) * 32))
            assert (verdicts.count(None), verdicts.count(1)) == (8, 56)
            assert await a.strict_get("group:team@day", 0, "requests") == StrictCounter(0, 8)
            assert await a.strict_get("group:org@month", 0, "budget") == StrictCounter(0, 24)
            await asyncio.gather(*(h.strict_settle([StrictRelease("group:org@month", 0, "budget", release=3,
                                                                  add=2)]) for h in (a, b) * 4))
            assert await b.strict_get("group:org@month", 0, "budget") == StrictCounter(16, 0)
        _run_two(store_factory, self.shared_handles, body)

    # -- metering ----------------------------------------------------------------------------
    def test_metering_adds_lists_by_day_and_purges(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            d = MeteringDelta(day="2026-11-30", key_id="k1", model="gpt", provider="openai", input=10, output=5,
                              requests=1, billable_requests=1, key_group_at_use="bob")
            await s.add_metering([d, d, MeteringDelta(day="2026-12-01", key_id="k1", model="gpt", provider="openai",
                                                      cache_read=3, requests=1)])
            rows = await s.list_metering("2026-11-30")
            assert [r.to_wire() for r in rows] == [{
                "day": "2026-11-30", "key_id": "k1", "model": "gpt", "provider": "openai", "input": 20, "output": 10,
                "cache_read": 0, "cache_write": 0, "requests": 2, "billable_requests": 2, "key_group_at_use": "bob"}]
            assert await s.list_metering("2026-11-29") == []
            assert await s.purge_metering_before("2026-12-01") == 1
            assert await s.list_metering("2026-11-30") == []
            assert [r.cache_read for r in await s.list_metering("2026-12-01")] == [3]
        _run(store_factory, body)

    # -- audit -------------------------------------------------------------------------------
    def test_audit_append_list_tail_and_forks(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            recs = [AuditRecord(seq=i, ts=100 + i, action="key.mint", resource=f"key:k{i}", outcome="applied",
                                principal="admin", prev_hash=f"h{i - 1}", hash=f"h{i}") for i in range(1, 6)]
            for r in recs:
                await s.append_audit(r)
            await s.append_audit(recs[2])                       # a retried write: no-op
            with pytest.raises(StoreConflict):
                await s.append_audit(AuditRecord(**{**recs[2].to_wire(), "outcome": "rejected"}))
            assert await s.list_audit() == recs
            assert [r.seq for r in await s.list_audit(after_seq=2, limit=2)] == [3, 4]
            assert [r.seq for r in await s.audit_tail(2)] == [4, 5]
        _run(store_factory, body)

    # -- denylist ----------------------------------------------------------------------------
    def test_denylist_is_idempotent_and_incremental(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            first = await s.add_denylist("k1", "leaked", now=10)
            again = await s.add_denylist("k1", "other reason", now=20)
            assert (again.sub, again.reason, again.ts, again.revision) == ("k1", "leaked", 10, first.revision)
            second = await s.add_denylist("k2", "offboarded", now=30)
            assert [e.sub for e in await s.list_denylist()] == ["k1", "k2"]
            assert [e.sub for e in await s.list_denylist(since=first.revision)] == ["k2"]
            assert await s.list_denylist(since=second.revision) == []
        _run(store_factory, body)

    # -- credentials -------------------------------------------------------------------------
    def test_credentials_slots_lookup_and_revocation(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            with pytest.raises(StoreNotFound):
                await s.put_credential(_cred("c0", key_id="ghost"))
            await s.put_key(_key("k1"))
            m1 = await s.put_credential(_cred("c1"))
            assert (m1.slot, m1.public_id, m1.revoked_at) == (0, "AKIAEXAMPLE0", None) and m1.revision > 0
            with pytest.raises(StoreConflict):
                await s.put_credential(_cred("c2", slot=0, public_id="AKIAEXAMPLE1"))   # live slot
            with pytest.raises(StoreConflict):
                await s.put_credential(_cred("c2", slot=1, public_id="AKIAEXAMPLE0"))   # public id taken
            m2 = await s.put_credential(_cred("c2", slot=1, public_id="AKIAEXAMPLE1"))
            assert [m.id for m in await s.list_credentials("k1")] == ["c1", "c2"]
            found = await s.lookup_credential("sigv4", "AKIAEXAMPLE1")
            assert found is not None and found.secret == "v1:plain:s3cr3t" and found.meta.id == "c2"
            assert "s3cr3t" not in repr(found)
            assert await s.lookup_credential("sigv4", "AKIAUNKNOWN") is None
            revoked = await s.revoke_credential("c1", "rotated", now=50)
            assert (revoked.revoked_at, revoked.revoke_reason) == (50, "rotated")
            assert (await s.revoke_credential("c1", "again", now=60)).revoked_at == 50
            with pytest.raises(StoreNotFound):
                await s.revoke_credential("ghost", "x", now=1)
            m3 = await s.put_credential(_cred("c3", slot=0, public_id="AKIAEXAMPLE3"))   # replaces revoked c1
            assert [m.id for m in await s.list_credentials("k1")] == ["c3", "c2"]
            assert [c.meta.id for c in await s.list_credentials_since(m2.revision)] == ["c3"]
            assert m3.revision > m2.revision
        _run(store_factory, body)

    # -- expiring values ---------------------------------------------------------------------
    def test_kv_values_expire_and_last_writer_wins(self, store_factory: Factory) -> None:
        async def body(a: Store, b: Store) -> None:
            now = int(time.time())
            assert await a.kv_get("hook:x:1:k", now) is None
            await a.kv_put("hook:x:1:k", '{"order":[1]}', now + 60)
            assert await b.kv_get("hook:x:1:k", now) == '{"order":[1]}'              # another node reads it
            assert await b.kv_get("hook:x:1:k", now + 59) == '{"order":[1]}'
            assert await b.kv_get("hook:x:1:k", now + 60) is None                    # expired at expires_at
            await b.kv_put("hook:x:1:k", "second", now + 120)
            assert await a.kv_get("hook:x:1:k", now + 60) == "second"
            await a.kv_put("hook:x:1:gone", "v", now - 5)                            # already expired
            assert await a.kv_get("hook:x:1:gone", now) is None
            big = "é" * (65536 // 2)
            await a.kv_put("hook:x:1:big", big, now + 60)                            # exactly 64 KiB of UTF-8
            assert await b.kv_get("hook:x:1:big", now) == big
            with pytest.raises(StoreInvalid, match="kv value must be at most 65536 bytes of UTF-8"):
                await a.kv_put("hook:x:1:big", big + "x", now + 60)
            with pytest.raises(StoreInvalid, match=r"kv name must be 1\.\.512 characters, found 513"):
                await a.kv_put("n" * 513, "v", now + 60)
            with pytest.raises(StoreInvalid, match=r"kv name must be 1\.\.512 characters, found 0"):
                await a.kv_get("", now)
            with pytest.raises(StoreInvalid, match="kv expires_at must be a positive integer"):
                await a.kv_put("hook:x:1:k", "v", 0)
            assert await a.kv_get("hook:x:1:k", now) == "second"                     # refusals moved nothing
        _run_two(store_factory, self.shared_handles, body)

    # -- meta --------------------------------------------------------------------------------
    def test_meta_values_and_first_writer_wins(self, store_factory: Factory) -> None:
        async def body(s: Store) -> None:
            assert await s.get_meta("plugin:busbar-x") is None
            assert await s.put_meta("plugin:busbar-x", "1.5.0") == "1.5.0"
            assert await s.put_meta("plugin:busbar-x", "1.6.0") == "1.6.0"
            assert await s.put_meta("signing_key", "A", only_if_absent=True) == "A"
            assert await s.put_meta("signing_key", "B", only_if_absent=True) == "A"
            assert await s.get_meta("signing_key") == "A"
        _run(store_factory, body)
