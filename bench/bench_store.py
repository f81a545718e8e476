#!/usr/bin/env python3
"""Store figures (issue 12): ledger flush throughput per backend, and a 3-node fleet's convergence.

1. **Flush throughput**: one handle per backend (memory, sqlite, postgres, valkey; the plugins'
   own code on the machine's PostgreSQL and Redis) sends additive ``add_usage`` batches of
   ``--batch`` windows x 2 models (what one node's 100 ms flush carries under load) for
   ``--seconds``; prints rows/s and the batch latency p50/p99.
2. **Fleet convergence**: 3 processes, each a ``UsageFlusher`` (flush every ``--interval-ms``) on
   one postgres and one valkey, each adding deltas at ~``--rate``/s for ``--seconds``; the parent
   polls the store and reports how long after the last node's last delta the store held the exact
   fleet total (median of ``--reps`` runs).

    .venv/bin/python bench/bench_store.py [--seconds 3] [--batch 100] [--interval-ms 100] [--reps 3]

A benchmark, not a test: it prints figures and never fails on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for sub in ("busbar-store-sqlite", "busbar-store-postgres", "busbar-store-valkey"):
    sys.path.insert(0, str(REPO / "plugins" / sub / "src"))

from busbar_sdk.store import MemoryStore, Store, TierTokens, UsageDelta, UsageItem

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


async def _pg(sql: str) -> None:
    import asyncpg
    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _make(backend: str, tag: str, tmp: Path) -> tuple[Store, dict[str, Any], str]:
    if backend == "memory":
        return MemoryStore(), {}, ""
    if backend == "sqlite":
        from busbar_store_sqlite import SqliteStore
        s = {"db_path": str(tmp / f"{tag}.db")}
        return SqliteStore.from_settings(s), s, "busbar_store_sqlite:SqliteStore"
    if backend == "postgres":
        from busbar_store_postgres import PostgresStore
        s = {"url": f"postgres://postgres@127.0.0.1:5432/bench_{tag}"}
        return PostgresStore.from_settings(s), s, "busbar_store_postgres:PostgresStore"
    from busbar_store_valkey import ValkeyStore
    s = {"url": "redis://127.0.0.1:6379/0", "prefix": f"bench:{tag}:"}
    return ValkeyStore.from_settings(s), s, "busbar_store_valkey:ValkeyStore"


async def throughput(backend: str, seconds: float, batch: int, tmp: Path) -> dict[str, float]:
    tag = uuid.uuid4().hex[:10]
    if backend == "postgres":
        await _pg(f"CREATE DATABASE bench_{tag}")
    store, _, _ = _make(backend, tag, tmp)
    await store.open()
    lat: list[float] = []
    rows = 0
    try:
        deadline = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < deadline:
            items = [UsageItem(f"group:g{(i * batch + j) % 5000}@minute", 60,
                               UsageDelta(1, 1, {"a": TierTokens(100, 20), "b": TierTokens(5, 1, 2, 0)}))
                     for j in range(batch)]
            t0 = time.perf_counter()
            await store.add_usage(items)
            lat.append(time.perf_counter() - t0)
            rows += batch
            i += 1
    finally:
        await store.close()
        if backend == "postgres":
            await _pg(f"DROP DATABASE IF EXISTS bench_{tag} WITH (FORCE)")
        elif backend == "valkey":
            await _clear_prefix(f"bench:{tag}:")
    total = sum(lat)
    lat.sort()
    return {"rows_per_s": rows / total, "batch_p50_ms": lat[len(lat) // 2] * 1e3,
            "batch_p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3, "batches": len(lat)}


async def _clear_prefix(prefix: str) -> None:
    import redis.asyncio as r
    c = r.Redis.from_url("redis://127.0.0.1:6379/0")
    keys = [k async for k in c.scan_iter(match=prefix + "*", count=1000)]
    if keys:
        await c.delete(*keys)
    await c.aclose()


_NODE = textwrap.dedent("""
    import asyncio, json, sys, time
    from busbar_sdk.store import TierTokens, UsageDelta
    from busbar.store.flusher import UsageFlusher
    for p in sys.argv[5:]:
        sys.path.insert(0, p)
    module, _, name = sys.argv[1].partition(":")
    cls = getattr(__import__(module), name)
    settings, seconds, rate, interval = json.loads(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4].split(",")[0]), float(sys.argv[4].split(",")[1])

    async def main():
        store = cls.from_settings(settings)
        await store.open()
        f = UsageFlusher(store, interval_s=interval)
        runner = asyncio.create_task(f.run())
        n, t0 = 0, time.time()
        while time.time() - t0 < seconds:
            for _ in range(10):
                f.add_usage("group:fleet@total", 0, UsageDelta(1, 1, {"m": TierTokens(2, 3)}))
                n += 1
            await asyncio.sleep(10 / rate)
        last = time.time()
        print(json.dumps({"n": n, "last": last}), flush=True)
        await asyncio.sleep(interval * 3 + 0.5)      # keep running: the flush loop delivers the tail
        runner.cancel()
        await f.close()
        await store.close()
    asyncio.run(main())
""")


async def convergence(backend: str, seconds: float, rate: float, interval_ms: int, tmp: Path) -> float:
    tag = uuid.uuid4().hex[:10]
    if backend == "postgres":
        await _pg(f"CREATE DATABASE bench_{tag}")
    probe, settings, cls = _make(backend, tag, tmp)
    await probe.open()
    script = tmp / "node.py"
    script.write_text(_NODE)
    paths = [str(REPO / "plugins" / s / "src") for s in ("busbar-store-postgres", "busbar-store-valkey")]
    procs = [subprocess.Popen([sys.executable, str(script), cls, json.dumps(settings), str(seconds),
                               f"{rate},{interval_ms / 1000}", *paths], stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    try:
        firsts = [json.loads(p.stdout.readline()) for p in procs]   # type: ignore[union-attr]
        expected, last = sum(f["n"] for f in firsts), max(f["last"] for f in firsts)
        while True:
            led = await probe.get_usage("group:fleet@total", 0)
            if led.requests == expected:
                converged = time.time()
                break
            if time.time() - last > 30:
                raise RuntimeError(f"no convergence: {led.requests} of {expected}")
            await asyncio.sleep(0.002)
        for p in procs:
            p.wait(timeout=60)
        return max(0.0, converged - last)
    finally:
        await probe.close()
        if backend == "postgres":
            await _pg(f"DROP DATABASE IF EXISTS bench_{tag} WITH (FORCE)")
        else:
            await _clear_prefix(f"bench:{tag}:")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--interval-ms", type=int, default=100)
    ap.add_argument("--rate", type=float, default=1000.0, help="deltas/s per node in the fleet run")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("PYTHONPATH", str(REPO))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        print(f"## Flush throughput (batches of {args.batch} windows x 2 models, {args.seconds:.0f} s each)\n")
        print("| backend | rows/s | batch p50 ms | batch p99 ms | batches |\n|---|---:|---:|---:|---:|")
        for b in ("memory", "sqlite", "postgres", "valkey"):
            r = asyncio.run(throughput(b, args.seconds, args.batch, tmp))
            print(f"| {b} | {r['rows_per_s']:,.0f} | {r['batch_p50_ms']:.2f} | {r['batch_p99_ms']:.2f} | "
                  f"{r['batches']} |")
        print(f"\n## Fleet convergence (3 nodes, flush every {args.interval_ms} ms, ~{args.rate:.0f} deltas/s "
              f"per node for {args.seconds:.0f} s; median of {args.reps})\n")
        print("| backend | after the last delta: median s | runs s |\n|---|---:|---|")
        for b in ("postgres", "valkey"):
            runs = [asyncio.run(convergence(b, args.seconds, args.rate, args.interval_ms, tmp))
                    for _ in range(args.reps)]
            print(f"| {b} | {statistics.median(runs):.3f} | {', '.join(f'{x:.3f}' for x in runs)} |")


if __name__ == "__main__":
    main()
