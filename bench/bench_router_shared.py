"""Benchmark: what the fleet-wide cache and budget add to an AI router decision (issue 17), on SQLite,
PostgreSQL and Valkey.

The router's own guards (``busbar_ai_router_hook._guards``: :class:`Cache`, :class:`Budget`) called
from a worker thread, as the gate calls them, with the kernel's shared-state handle
(``busbar.store.shared.StoreState``) bridged to the store on an event loop in another thread, the
store behind the plugin wire codec (``RemoteStore`` -> ``dispatch``) as the kernel calls a store
plugin. Series, per backend, one sample each:

- ``miss (process)``: the in-process guards alone (no store): LRU miss, ``admit``, ``put``;
- ``miss (store)``: the same with the store: LRU miss then store miss (``kv_get``), ``admit`` (ONE
  ``strict_admit``), ``put`` (``kv_put``): what a decision that runs the model adds before and
  after the model;
- ``hit (store)``: a decision another process cached, served from the store (``kv_get``) into an
  empty LRU.

The embedding itself (p50 ~3 ms, "Routing gates" in BENCHMARKS.md) is not in any series. The stores
are the machine's PostgreSQL (127.0.0.1:5432, a fresh database), Redis/Valkey (127.0.0.1:6379, a
fresh prefix) and a SQLite file in a temporary directory.

Run: ``.venv/bin/python bench/bench_router_shared.py [--samples N]``; writes
``bench/results/router_shared.json``.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
for _name in ("busbar-store-postgres", "busbar-store-valkey", "busbar-store-sqlite", "busbar-ai-router-hook"):
    sys.path.insert(0, str(ROOT / "plugins" / _name / "src"))

from bench_hooks import _pct, write_result
from bench_strict import REDIS_URL, _pg_database, _wire
from busbar.store.shared import StoreBridge, StoreState
from busbar_ai_router_hook._generative import decode_hit, encode_hit
from busbar_ai_router_hook._guards import Budget, Cache, Shared
from busbar_sdk.store import Store

SCORES = {"code": 0.41, "math": 0.83, "chat": 0.12, "writing": 0.2, "agent": 0.05}


def _store(name: str, tmp: str) -> tuple[Store, Any]:
    if name == "postgres":
        from busbar_store_postgres import PostgresStore
        url, drop = asyncio.run(_pg_database())
        return PostgresStore.from_settings({"url": url}), drop
    if name == "valkey":
        from busbar_store_valkey import ValkeyStore
        return ValkeyStore.from_settings({"url": REDIS_URL, "prefix": f"busbar-bench:{uuid.uuid4().hex[:10]}:"}), None
    from busbar_store_sqlite import SqliteStore
    return SqliteStore.from_settings({"db_path": f"{tmp}/bench-{uuid.uuid4().hex[:8]}.db"}), None


def _guards(state: Any) -> tuple[Cache, Budget]:
    shared = Shared()
    shared.state = state
    return (Cache(10_000, 600, shared, "bench", encode_hit, decode_hit),
            Budget(10**9, None, shared))


def _backend(name: str, samples: int, tmp: str) -> dict[str, Any]:
    raw, drop = _store(name, tmp)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(raw.open(), loop).result(30)
    bridge = StoreBridge(_wire(raw))
    loop.call_soon_threadsafe(bridge.start, loop)
    time.sleep(0.05)
    state = StoreState(bridge, "hook:busbar-ai-router-hook:benchbenchbench0", timeout_s=5)
    local_cache, local_budget = _guards(None)
    cache, budget = _guards(state)
    out: dict[str, list[int]] = {"miss (process)": [], "miss (store)": [], "hit (store)": []}
    clock = time.perf_counter_ns
    for i in range(samples):
        key = f"k{i}-{uuid.uuid4().hex}"
        t0 = clock()
        assert local_cache.get(key) == (None, None) and local_budget.admit()
        local_cache.put(key, SCORES)
        t1 = clock()
        assert cache.get(key) == (None, None) and budget.admit()
        cache.put(key, SCORES)
        t2 = clock()
        other, _ = _guards(state)                      # another process: an empty LRU
        t3 = clock()
        assert other.get(key)[1] == "store"
        t4 = clock()
        out["miss (process)"].append(t1 - t0)
        out["miss (store)"].append(t2 - t1)
        out["hit (store)"].append(t4 - t3)
    asyncio.run_coroutine_threadsafe(raw.close(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    if drop is not None:
        asyncio.run(drop())
    return {k: _pct(v) for k, v in out.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=1000)
    args = p.parse_args()
    before = os.getloadavg()
    report: dict[str, Any] = {"samples": args.samples, "backends": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("sqlite", "postgres", "valkey"):
            report["backends"][name] = _backend(name, args.samples, tmp)
    report["loadavg"] = {"before": before, "after": os.getloadavg()}
    write_result("router_shared.json", report)
    print(f"load {before[0]:.2f} -> {os.getloadavg()[0]:.2f}, {args.samples} samples per series")
    for name, series in report["backends"].items():
        for s, v in series.items():
            print(f"{name:9} {s:15} p50 {v['p50_us']:8.1f} us  p90 {v['p90_us']:8.1f}  p99 {v['p99_us']:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
