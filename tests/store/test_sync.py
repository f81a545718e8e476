"""The in-memory mirror of keys, credentials and the denylist (busbar.store.sync.KeySync): a
revocation through one node is refused by another within the sync interval, on a real shared
PostgreSQL and Valkey; tombstones evict credentials; an outage keeps the last state."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from busbar.store.sync import KeySync
from busbar_sdk.store import (
    CredentialMeta,
    CredentialSecret,
    MemoryStore,
    Store,
    StoreUnavailable,
    VirtualKey,
)


def _key(key_id: str, **kw: object) -> VirtualKey:
    return VirtualKey(id=key_id, name="n", created_at=1, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["postgres", "valkey"])
def test_a_revocation_through_one_node_is_seen_by_another_within_the_interval(
        store_backend: Callable[[str], Callable[[], Store]], backend: str) -> None:
    factory = store_backend(backend)

    async def main() -> float:
        admin, node = factory(), factory()
        await admin.open()
        await node.open()
        try:
            await admin.put_key(_key("k1", group="bob"))
            mirror = KeySync(node, interval_s=0.05)
            runner = asyncio.create_task(mirror.run())
            for _ in range(100):
                if mirror.live_key("k1", now=100) is not None:
                    break
                await asyncio.sleep(0.01)
            assert mirror.live_key("k1", now=100) is not None
            t0 = time.monotonic()
            await admin.add_denylist("k1", "leaked", now=200)
            while mirror.live_key("k1", now=100) is not None:
                assert time.monotonic() - t0 < 1.0, "the revocation did not reach the other node within 1 s"
                await asyncio.sleep(0.005)
            seen = time.monotonic() - t0
            runner.cancel()
            return seen
        finally:
            await admin.close()
            await node.close()
    assert asyncio.run(main()) < 1.0


def test_expiry_freeze_and_tombstones_are_honoured_and_tombstones_evict_credentials() -> None:
    async def main() -> KeySync:
        store = MemoryStore()
        await store.put_key(_key("live"))
        await store.put_key(_key("frozen", enabled=False))
        await store.put_key(_key("expiring", expires_at=150))
        await store.put_key(_key("doomed"))
        await store.put_credential(CredentialSecret(CredentialMeta(
            id="c1", key_id="doomed", kind="sigv4", slot=0, public_id="AKIA1", created_at=1), "v1:plain:s"))
        mirror = KeySync(store)
        await mirror.sync()
        assert ("sigv4", "AKIA1") in mirror.credentials
        await store.delete_key("doomed", now=120)
        await mirror.sync()
        return mirror
    m = asyncio.run(main())
    assert m.live_key("live", now=100) is not None
    assert m.live_key("frozen", now=100) is None
    assert m.live_key("expiring", now=149) is not None and m.live_key("expiring", now=150) is None
    assert m.live_key("doomed", now=100) is None
    assert m.live_key("ghost", now=100) is None
    assert m.credentials == {}


class _Down(MemoryStore):
    down = False

    async def list_keys(self, since: int = 0) -> list[VirtualKey]:
        if self.down:
            raise StoreUnavailable("memory at test is unavailable: switched off")
        return await super().list_keys(since)


def test_an_outage_keeps_the_last_synced_state_and_reports_its_age(caplog: pytest.LogCaptureFixture) -> None:
    now = [10.0]

    async def main() -> KeySync:
        store = _Down()
        await store.put_key(_key("k1"))
        await store.add_denylist("k2", "x", now=1)
        mirror = KeySync(store, interval_s=0.01, clock=lambda: now[0])
        assert mirror.age_s() == float("inf")
        await mirror.sync()
        store.down = True
        now[0] = 12.5
        runner = asyncio.create_task(mirror.run())
        await asyncio.sleep(0.05)
        runner.cancel()
        return mirror
    with caplog.at_level("WARNING", logger="busbar.store"):
        mirror = asyncio.run(main())
    assert mirror.live_key("k1", now=1) is not None and mirror.is_denied("k2")
    assert mirror.age_s() == 2.5
    assert sum("key sync failed" in r.getMessage() for r in caplog.records) == 1
