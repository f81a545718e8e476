"""Benchmark: what strict mode adds to a request's admission (issue 14), on PostgreSQL and Valkey.

One process, one event loop (uvloop when installed). The same group chain twice: ``node`` has
``requests: 10^9, per: minute`` and ``budget: 10^12, per: month`` enforced per node; ``strict`` has
the same two limits with ``strict: true``. One sample is what the request path runs before it may
forward: ``Limiter.admit`` (the node's counters) and, for ``strict``, the awaited
``StrictLimits.admit`` (ONE ``strict_admit`` on the store, through the plugin wire codec as the kernel
calls a store plugin: ``RemoteStore`` -> ``dispatch``). Settlement runs after the sample (the
gateway runs it in the background once the reply is sent), awaited before the next one, so every
sample starts from a quiet store. The two series alternate sample by sample (drift hits both alike).

Added = percentile(strict) - percentile(node), same run, per backend. Also reported: the
settlement's own round trip (``strict_settle``, off the request path).

The stores are the machine's PostgreSQL (127.0.0.1:5432, a fresh database) and Redis/Valkey
(127.0.0.1:6379, a fresh key prefix); the plugin packages are imported from ``plugins/*/src``.

Run: ``.venv/bin/python bench/bench_strict.py [--samples N]``; writes ``bench/results/strict.json``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
for _name in ("busbar-store-postgres", "busbar-store-valkey"):
    sys.path.insert(0, str(ROOT / "plugins" / _name / "src"))

from bench_hooks import _pct
from busbar import __version__
from busbar.config.load import load_config_text
from busbar.limits.cost import RateCard
from busbar.limits.engine import Limiter, Ticket, Worst
from busbar.limits.metrics import LimitMetrics
from busbar.limits.strict import StrictLimits
from busbar.limits.tree import GroupTree
from busbar.proto.registry import get_dialect
from busbar_sdk.store import RemoteStore, Store, TierTokens, dispatch

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/0"
CONFIG = """
providers:
  oa: { protocol: openai, base_url: "http://127.0.0.1:9", api_key: { env: K } }
models:
  a: { provider: oa }
rate_card:
  a: { input_utok: 3.0, output_utok: 15.0 }
groups:
  org:  { limits: [ { budget: 1000000000000, per: month } ] }
  leaf: { parent: org, limits: [ { requests: 1000000000, per: minute } ] }
  sorg:  { limits: [ { budget: 1000000000000, per: month, strict: true } ] }
  sleaf: { parent: sorg, limits: [ { requests: 1000000000, per: minute, strict: true } ] }
"""
WORST = Worst(268, 268 * 15_000_000, 12, 256)
TIERS = TierTokens(12, 1)


async def _pg_database() -> tuple[str, Any]:
    import asyncpg

    db = f"busbar_bench_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(PG_ADMIN)
    await conn.execute(f"CREATE DATABASE {db}")
    await conn.close()

    async def drop() -> None:
        c = await asyncpg.connect(PG_ADMIN)
        await c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        await c.close()
    return f"postgres://postgres@127.0.0.1:5432/{db}", drop


def _wire(store: Store) -> RemoteStore:
    """``store`` behind the plugin wire, as the kernel calls a store plugin."""
    async def call(payload: dict[str, Any]) -> dict[str, Any]:
        return await dispatch(store, payload)
    return RemoteStore(call, store.backend)


async def _backend(name: str, samples: int) -> dict[str, Any]:
    drop = None
    if name == "postgres":
        from busbar_store_postgres import PostgresStore
        url, drop = await _pg_database()
        raw: Store = PostgresStore.from_settings({"url": url})
    else:
        from busbar_store_valkey import ValkeyStore
        raw = ValkeyStore.from_settings({"url": REDIS_URL, "prefix": f"busbar-bench:{uuid.uuid4().hex[:10]}:"})
    await raw.open()
    store = _wire(raw)
    cfg = load_config_text(CONFIG, {"K": "x"}).config
    card = RateCard(cfg.rate_card, cfg.per_request_fee)
    limiter = Limiter(GroupTree(cfg.groups), card)
    strict = StrictLimits(card, LimitMetrics(None))
    gw = type("Gw", (), {"store": store})()
    dialect = get_dialect("openai")
    clock = time.perf_counter_ns
    out: dict[str, list[int]] = {"node": [], "strict": [], "settle": []}

    async def one(group: str, timed: bool) -> None:
        t0 = clock()
        ticket = limiter.admit(group, None, lambda pool: WORST)
        assert isinstance(ticket, Ticket)
        hold = None
        if group == "sleaf":
            reply, hold = await strict.admit(gw, dialect, limiter, ticket)
            assert reply is None and hold is not None
        t1 = clock()
        limiter.settle(ticket, True, "a", TIERS)
        if hold is not None:
            strict.settle(gw, hold, True, "a", TIERS)
            await strict.close()
        if timed:
            out["strict" if hold is not None else "node"].append(t1 - t0)
            if hold is not None:
                out["settle"].append(clock() - t1)

    try:
        for _ in range(200):                     # warm-up: connections, prepared statements, the script
            await one("leaf", False)
            await one("sleaf", False)
        for i in range(samples):
            for group in (("leaf", "sleaf") if i % 2 == 0 else ("sleaf", "leaf")):
                await one(group, True)
    finally:
        await raw.close()
        if drop is not None:
            await drop()
    results = {k: _pct(v) for k, v in out.items()}
    return {"results": results,
            "added": {q: results["strict"][q] - results["node"][q] for q in ("p50_us", "p90_us", "p99_us")}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=2000)
    args = ap.parse_args()
    try:
        import uvloop
        loop_name, runner = "uvloop", uvloop.run
    except ImportError:  # pragma: no cover
        loop_name, runner = "asyncio", asyncio.run
    before = os.getloadavg()
    report: dict[str, Any] = {"busbar": __version__, "python": platform.python_version(), "loop": loop_name,
                              "samples": args.samples, "backends": {}}
    for name in ("postgres", "valkey"):
        report["backends"][name] = runner(_backend(name, args.samples))
    report["loadavg"] = {"before": before, "after": os.getloadavg()}
    out = ROOT / "bench" / "results" / "strict.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"loop {loop_name}, load {before[0]:.2f} -> {os.getloadavg()[0]:.2f}, {args.samples} samples per series")
    print(f"{'backend':<10}{'series':<9}{'p50 us':>10}{'p90 us':>10}{'p99 us':>10}{'mean us':>10}")
    for name, r in report["backends"].items():
        for series, v in r["results"].items():
            print(f"{name:<10}{series:<9}{v['p50_us']:>10.1f}{v['p90_us']:>10.1f}{v['p99_us']:>10.1f}"
                  f"{v['mean_us']:>10.1f}")
        a = r["added"]
        print(f"{name:<10}added by strict (strict - node): p50 {a['p50_us']:.1f} us, p90 {a['p90_us']:.1f} us, "
              f"p99 {a['p99_us']:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
