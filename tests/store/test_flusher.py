"""The usage write-behind (busbar.store.flusher): exact additive flushes, retry through an outage,
a bounded backlog whose losses are counted, a final flush on close, and a fleet of three processes
converging on one PostgreSQL and one Valkey."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from busbar.store.flusher import UsageFlusher
from busbar_sdk.store import (
    MemoryStore,
    MeteringDelta,
    Store,
    StoreInvalid,
    StoreUnavailable,
    TierTokens,
    UsageDelta,
    UsageItem,
    UsageLedger,
)
from prometheus_client import CollectorRegistry

REPO = Path(__file__).resolve().parents[2]


class Flaky(MemoryStore):
    """The memory store with a switch: ``down`` -> StoreUnavailable, ``reject`` -> StoreInvalid."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.reject = False
        self.calls = 0

    def _gate(self) -> None:
        self.calls += 1
        if self.down:
            raise StoreUnavailable("memory at test is unavailable: switched off")
        if self.reject:
            raise StoreInvalid("add_usage: rejected by the test")

    async def add_usage(self, items: list[UsageItem]) -> None:
        self._gate()
        await super().add_usage(items)

    async def add_metering(self, deltas: list[MeteringDelta]) -> None:
        self._gate()
        await super().add_metering(deltas)


def _metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


def test_deltas_merge_in_memory_and_flush_additively() -> None:
    async def main() -> None:
        store, now = Flaky(), [100.0]
        f = UsageFlusher(store, clock=lambda: now[0])
        for _ in range(3):
            f.add_usage("group:bob@minute", 60, UsageDelta(1, 1, {"gpt": TierTokens(10, 2)}))
        f.add_usage("group:bob@minute", 60, UsageDelta(0, -1))            # a refund
        f.add_metering(MeteringDelta(day="2026-12-01", key_id="k1", model="gpt", provider="openai", input=7,
                                     requests=1))
        f.add_metering(MeteringDelta(day="2026-12-01", key_id="k1", model="gpt", provider="openai", input=3,
                                     requests=1))
        now[0] = 100.25
        assert (f.pending, f.lag_s()) == (2, 0.25)
        assert await f.flush() is True
        assert store.calls == 2 and (f.pending, f.lag_s()) == (0, 0.0)
        assert await store.get_usage("group:bob@minute", 60) == UsageLedger(3, 2, {"gpt": TierTokens(30, 6)})
        assert [(r.input, r.requests) for r in await store.list_metering("2026-12-01")] == [(10, 2)]
        assert await f.flush() is True and store.calls == 2                # nothing pending: no call
        assert f.flushed == {"usage": 1, "metering": 1}
    asyncio.run(main())


def test_an_outage_keeps_every_delta_and_the_store_converges_when_it_returns(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        store, registry = Flaky(), CollectorRegistry()
        f = UsageFlusher(store, interval_s=0.01, registry=registry)
        runner = asyncio.create_task(f.run())
        store.down = True
        for _ in range(50):
            f.add_usage("group:bob@day", 0, UsageDelta(1, 1, {"m": TierTokens(1)}))
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.05)
        assert await store.get_usage("group:bob@day", 0) == UsageLedger()
        assert _metric(registry, "busbar_store_flush_failures_total") >= 2
        assert _metric(registry, "busbar_store_flush_pending_rows") == 1.0
        store.down = False
        for _ in range(400):
            if f.pending == 0:
                break
            await asyncio.sleep(0.01)
        runner.cancel()
        assert await store.get_usage("group:bob@day", 0) == UsageLedger(50, 50, {"m": TierTokens(50)})
        assert f.lost == {"usage": 0, "metering": 0}
        assert _metric(registry, "busbar_store_flushed_rows_total", kind="usage") >= 1
    with caplog.at_level("WARNING", logger="busbar.store"):
        asyncio.run(main())
    messages = [r.getMessage() for r in caplog.records]
    assert sum("flush failed, retrying with backoff" in m for m in messages) == 1       # once per outage
    assert sum("reachable again" in m for m in messages) == 1


def test_a_long_outage_drops_the_oldest_rows_and_counts_them(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> tuple[UsageFlusher, Flaky, CollectorRegistry]:
        store, registry = Flaky(), CollectorRegistry()
        f = UsageFlusher(store, max_pending=3, registry=registry)
        store.down = True
        for w in range(5):
            f.add_usage("group:bob@minute", w * 60, UsageDelta(1))
        assert await f.flush() is False
        store.down = False
        assert await f.flush() is True
        return f, store, registry
    with caplog.at_level("ERROR", logger="busbar.store"):
        f, store, registry = asyncio.run(main())
    assert f.lost == {"usage": 2, "metering": 0}
    assert _metric(registry, "busbar_store_flush_lost_total", kind="usage") == 2.0
    windows = asyncio.run(store.list_usage("group:bob@minute"))
    assert sorted(windows) == [120, 180, 240]                              # the two oldest went
    assert any("dropped 1 pending usage row(s)" in r.getMessage() for r in caplog.records)


def test_a_rejected_batch_is_dropped_and_counted_not_retried_for_ever() -> None:
    async def main() -> tuple[UsageFlusher, Flaky]:
        store = Flaky()
        store.reject = True
        f = UsageFlusher(store)
        f.add_usage("group:bob@total", 0, UsageDelta(1))
        assert await f.flush() is False
        assert f.pending == 0
        store.reject = False
        return f, store
    f, store = asyncio.run(main())
    assert f.lost == {"usage": 1, "metering": 0}
    assert asyncio.run(store.get_usage("group:bob@total", 0)) == UsageLedger()


def test_close_flushes_once_more_and_counts_what_could_not_be_sent() -> None:
    async def main() -> tuple[UsageFlusher, UsageFlusher, Flaky]:
        up = Flaky()
        a = UsageFlusher(up)
        a.add_usage("b", 0, UsageDelta(2))
        await a.close()
        down = Flaky()
        down.down = True
        b = UsageFlusher(down)
        b.add_usage("b", 0, UsageDelta(2))
        b.add_metering(MeteringDelta(day="2026-12-01", key_id="k", model="m", provider="p", requests=1))
        await b.close(shutdown_timeout_s=0.5)
        return a, b, up
    a, b, up = asyncio.run(main())
    assert asyncio.run(up.get_usage("b", 0)).requests == 2 and a.lost == {"usage": 0, "metering": 0}
    assert b.lost == {"usage": 1, "metering": 1} and b.pending == 0



class Hanging(MemoryStore):
    """A store whose writes hang until ``release`` is set (a store that accepts and never answers)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.entered = asyncio.Event()

    async def add_metering(self, deltas: list[MeteringDelta]) -> None:
        self.entered.set()
        await self.release.wait()
        await super().add_metering(deltas)


def test_a_batch_on_the_wire_still_counts_as_pending_and_a_hung_close_counts_it_lost(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> tuple[list[float], UsageFlusher]:
        registry = CollectorRegistry()
        store = Hanging()
        f = UsageFlusher(store, registry=registry)
        f.add_metering(MeteringDelta(day="2026-12-01", key_id="k", model="m", provider="p", requests=1))
        flushing = asyncio.create_task(f.flush())
        await store.entered.wait()
        seen = [float(f.pending), _metric(registry, "busbar_store_flush_pending_rows")]
        store.release.set()
        assert await flushing is True
        seen += [float(f.pending), _metric(registry, "busbar_store_flush_pending_rows")]
        hung = Hanging()
        g = UsageFlusher(hung)
        g.add_metering(MeteringDelta(day="2026-12-01", key_id="k", model="m", provider="p", requests=1))
        await g.close(shutdown_timeout_s=0.05)
        return seen, g
    seen, g = asyncio.run(main())
    assert seen == [1.0, 1.0, 0.0, 0.0]
    assert g.lost == {"usage": 0, "metering": 1} and g.pending == 0
    assert "store (memory): dropped 1 pending metering row(s); the store copy of the ledger is short by them" \
        in caplog.text


_NODE = textwrap.dedent("""
    import asyncio, json, sys, time
    sys.path.insert(0, sys.argv[1])
    from busbar_sdk.store import TierTokens, UsageDelta
    from busbar.store.flusher import UsageFlusher
    cls_path, settings, n = sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
    module, _, name = cls_path.partition(":")
    cls = getattr(__import__(module), name)

    async def main():
        store = cls.from_settings(settings)
        await store.open()
        f = UsageFlusher(store, interval_s=0.01)
        runner = asyncio.create_task(f.run())
        for i in range(n):
            f.add_usage("group:fleet@total", 0, UsageDelta(1, 1, {"m": TierTokens(2, 3)}))
            f.add_usage("group:root@total", 0, UsageDelta(1))
            if i % 10 == 0:
                await asyncio.sleep(0.001)
        await f.close()
        runner.cancel()
        await store.close()
        print(json.dumps({"lost": f.lost, "done": time.time()}))
    asyncio.run(main())
""")


@pytest.mark.parametrize("backend", ["postgres", "valkey"])
def test_three_nodes_flushing_to_one_store_converge_on_the_exact_fleet_total(
        store_backend: Callable[[str], Callable[[], Store]], backend: str, tmp_path: Path) -> None:
    factory = store_backend(backend)
    probe = factory()
    from tests.store.test_backends import _handle_of
    handle = _handle_of(probe)
    if backend == "postgres":
        src, cls = "busbar-store-postgres", "busbar_store_postgres:PostgresStore"
        settings: dict[str, Any] = {"url": str(handle.engine.url.set(drivername="postgresql")
                                               .render_as_string(hide_password=False))}
    else:
        src, cls = "busbar-store-valkey", "busbar_store_valkey:ValkeyStore"
        settings = {"url": "redis://127.0.0.1:6379/0", "prefix": handle._p}
    script = tmp_path / "node.py"
    script.write_text(_NODE)
    procs = [subprocess.Popen([sys.executable, str(script), str(REPO / "plugins" / src / "src"), cls,
                               json.dumps(settings), "300"], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)}) for _ in range(3)]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert [o["lost"] for o in outs] == [{"usage": 0, "metering": 0}] * 3

    async def read() -> tuple[UsageLedger, UsageLedger]:
        await probe.open()
        try:
            return (await probe.get_usage("group:fleet@total", 0), await probe.get_usage("group:root@total", 0))
        finally:
            await probe.close()
    fleet, root = asyncio.run(read())
    assert fleet == UsageLedger(900, 900, {"m": TierTokens(1800, 2700)})
    assert root.requests == 900
