#!/usr/bin/env python3
"""Store figures through the real gateway (issue 12): what a store costs the request path, what
``--workers 2`` buys, and how fast a 3-node fleet's metering converges.

Every figure is measured side by side in one run, interleaved (A B B A per repetition, medians),
with the gwbench harness's ``wrk`` load (``$GWBENCH/load.py``, default ``../shared/gwbench``) and
its lean mock upstream (``mock_upstream.py``):

1. **Store cost**: three targets at once, the mock directly, ``busbar`` with ``store: memory``
   and ``busbar`` with ``store: postgres`` (the machine's PostgreSQL, a fresh database), OpenAI
   JSON at c=1 and c=16, mock delay 0. Prints rps and p50, and the p50 each gateway adds over the
   mock.
2. **Workers**: ``busbar --workers 1`` vs ``--workers 2`` on one SQLite store, c=16 and c=64, mock
   delays 0 and 50 ms; rps and p50.
3. **Fleet convergence**: 3 ``busbar`` processes on one postgres and one valkey; ``--fleet-n``
   requests through each node (httpx, 8 in flight per node); reports the time from the last reply
   until the store's metering row holds exactly 3 x n requests (median of ``--reps``).

    .venv/bin/python bench/bench_store_gw.py [--duration 5] [--reps 3] [--only cost,workers,fleet]

A benchmark, not a test: it prints markdown tables and never fails on timing. Needs ``wrk``, the
first-party store tarballs in ``dist/plugins`` (``scripts/setup``), PostgreSQL and Redis on
127.0.0.1.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
GWBENCH = Path(os.environ.get("GWBENCH", REPO.parent / "shared" / "gwbench")).resolve()
BIN = Path(sys.executable).parent
for sub in ("busbar-store-postgres", "busbar-store-valkey"):
    sys.path.insert(0, str(REPO / "plugins" / sub / "src"))
sys.path.insert(0, str(GWBENCH))

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
BODY = json.dumps({"model": "mock", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pg(sql: str) -> None:
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(PG_ADMIN)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()
    asyncio.run(run())


class Proc:
    """A process in its own group, stopped with SIGTERM (SIGKILL after 10 s)."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = open(log, "wb")  # noqa: SIM115 - the child writes it until stop()
        self.p = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                  env={**os.environ, **(env or {})}, cwd=log.parent)

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
        self.log.close()


def wait_healthy(url: str, proc: Proc, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.p.poll() is not None:
            raise SystemExit(f"{url}: exited {proc.p.returncode}; see {proc.log.name}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url}: not healthy after {timeout} s")


class Bench:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: list[Proc] = []
        self.cleanups: list[Any] = []
        self.plugins = work / "plugins"
        self.plugins.mkdir()
        for name in ("sqlite", "postgres", "valkey"):
            shutil.copy(REPO / "dist" / "plugins" / f"busbar-store-{name}-1.5.0.tar.gz", self.plugins)
        self.mock_port = free_port()
        self.mock = f"http://127.0.0.1:{self.mock_port}"
        mock = Proc([sys.executable, str(GWBENCH / "mock_upstream.py"), "--port", str(self.mock_port)],
                    work / "mock.log")
        self.procs.append(mock)
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.post(self.mock + "/d0/v1/chat/completions", content=BODY, timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise SystemExit("the gwbench mock did not start") from None
                time.sleep(0.1)

    def store(self, backend: str) -> tuple[str, dict[str, Any]]:
        tag = uuid.uuid4().hex[:10]
        if backend == "memory":
            return "memory", {}
        if backend == "sqlite":
            return "sqlite", {"db_path": str(self.work / f"bench-{tag}.db")}
        if backend == "postgres":
            pg(f"CREATE DATABASE bench_gw_{tag}")
            self.cleanups.append(lambda: pg(f"DROP DATABASE IF EXISTS bench_gw_{tag} WITH (FORCE)"))
            return "postgres", {"url": f"postgres://postgres@127.0.0.1:5432/bench_gw_{tag}"}
        prefix = f"bench-gw:{tag}:"
        self.cleanups.append(lambda: _redis_clear(prefix))
        return "valkey", {"url": "redis://127.0.0.1:6379/0", "prefix": prefix}

    def gateway(self, module: str, settings: dict[str, Any], workers: int = 1) -> str:
        port = free_port()
        store = "" if module == "memory" else (f"plugins: {{ enabled: true, dir: {self.plugins} }}\n"
                                                 f"store: {{ module: {module}, settings: {json.dumps(settings)} }}\n")
        cfg = self.work / f"config-{port}.yaml"
        cfg.write_text(f'listen: "127.0.0.1:{port}"\n{store}'
                       f"providers:\n"
                       f"  d0: {{ protocol: openai, base_url: \"{self.mock}/d0\", api_key: {{ env: BENCH_KEY }} }}\n"
                       f"  d50: {{ protocol: openai, base_url: \"{self.mock}/d50\", api_key: {{ env: BENCH_KEY }} }}\n"
                       f"models:\n  mock: {{ provider: d0 }}\n  mock-d50: {{ provider: d50, upstream_model: mock }}\n"
                       f"limits: {{ pool_max_idle_per_host: 1024 }}\n")
        proc = Proc([str(BIN / "busbar"), "--config", str(cfg), "--log-level", "info", "--workers", str(workers)],
                    self.work / f"busbar-{port}.log", env={"BENCH_KEY": "sk-bench"})
        self.procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc)
        if workers > 1:                       # /healthz answers once worker 0 serves; wait for all
            deadline = time.monotonic() + 120
            while f"{workers} workers serving" not in (self.work / f"busbar-{port}.log").read_text():
                if time.monotonic() > deadline:
                    raise SystemExit(f"{url}: not all {workers} workers started")
                time.sleep(0.2)
        return url

    def close(self) -> None:
        for p in reversed(self.procs):
            p.stop()
        for c in self.cleanups:
            c()


def _redis_clear(prefix: str) -> None:
    import redis
    r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    keys = list(r.scan_iter(match=prefix + "*", count=1000))
    if keys:
        r.delete(*keys)
    r.close()


def load(url: str, conns: int, duration: float, model: str = "mock") -> dict[str, Any]:
    import load as gwload  # the gwbench harness's wrk wrapper
    return dict(gwload.run(url + "/v1/chat/completions", BODY.replace('"mock"', f'"{model}"'),
                           ["Authorization: Bearer sk-bench"], conns, duration))


def interleave(targets: dict[str, tuple[str, str]], conns: int, duration: float, reps: int) -> dict[str, list[dict]]:
    """Each rep runs the targets in order then reversed (A B B A); every run's result per target."""
    names = list(targets)
    out: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(reps):
        for name in names + names[::-1]:
            url, model = targets[name]
            r = load(url, conns, duration, model)
            if r["errors"]:
                print(f"  ({name} c={conns}: {r['errors']} errors {r['err_detail']})", file=sys.stderr)
            out[name].append(r)
    return out


def med(runs: list[dict], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def store_cost(b: Bench, duration: float, reps: int) -> None:
    direct = b.mock + "/d0"
    memory = b.gateway(*b.store("memory"))
    _, pg_settings = b.store("postgres")
    postgres = b.gateway("postgres", pg_settings)
    print("\n### Store cost on the request path (mock delay 0, OpenAI JSON)\n")
    print("| conc | direct rps | memory rps | postgres rps | direct p50 ms | memory p50 ms | postgres p50 ms "
          "| memory +p50 ms | postgres +p50 ms | postgres - memory p50 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for conns in (1, 16):
        runs = interleave({"direct": (direct, "mock"), "memory": (memory, "mock"), "postgres": (postgres, "mock")},
                          conns, duration, reps)
        d, m, p = (med(runs[n], "p50_ms") for n in ("direct", "memory", "postgres"))
        print(f"| {conns} | {med(runs['direct'], 'rps'):.0f} | {med(runs['memory'], 'rps'):.0f} | "
              f"{med(runs['postgres'], 'rps'):.0f} | {d:.3f} | {m:.3f} | {p:.3f} | {m - d:+.3f} | {p - d:+.3f} | "
              f"{p - m:+.3f} |", flush=True)
    time.sleep(0.5)
    counts = asyncio.run(_metering_requests("postgres", pg_settings))
    print(f"\n(the postgres gateway's metering after the run: {counts} requests recorded)")


def workers(b: Bench, duration: float, reps: int) -> None:
    w1 = b.gateway(*b.store("sqlite"), workers=1)
    w2 = b.gateway(*b.store("sqlite"), workers=2)
    print("\n### busbar --workers 1 vs --workers 2 (one SQLite store each, OpenAI JSON)\n")
    print("| mock delay | conc | w1 rps | w2 rps | w2 / w1 | w1 p50 ms | w2 p50 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for model, delay in (("mock", 0), ("mock-d50", 50)):
        for conns in (16, 64):
            runs = interleave({"w1": (w1, model), "w2": (w2, model)}, conns, duration, reps)
            r1, r2 = med(runs["w1"], "rps"), med(runs["w2"], "rps")
            print(f"| {delay} ms | {conns} | {r1:.0f} | {r2:.0f} | {r2 / r1:.2f}x | {med(runs['w1'], 'p50_ms'):.2f} | "
                  f"{med(runs['w2'], 'p50_ms'):.2f} |", flush=True)


async def _drive(urls: list[str], n: int) -> float:
    """``n`` requests through each url (8 in flight per url); the perf_counter of the last reply."""
    async def node(url: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            sem = asyncio.Semaphore(8)

            async def one() -> None:
                async with sem:
                    r = await c.post("/v1/chat/completions", content=BODY,
                                     headers={"content-type": "application/json"})
                    r.raise_for_status()
            await asyncio.gather(*(one() for _ in range(n)))
    await asyncio.gather(*(node(u) for u in urls))
    return time.perf_counter()


async def _metering_requests(module: str, settings: dict[str, Any]) -> int:
    if module == "postgres":
        from busbar_store_postgres import PostgresStore as cls
    else:
        from busbar_store_valkey import ValkeyStore as cls  # type: ignore[assignment]
    s = cls.from_settings(settings)
    await s.open()
    try:
        return sum(r.requests for r in await s.list_metering(datetime.now(UTC).date().isoformat()))
    finally:
        await s.close()


def fleet(b: Bench, n: int, reps: int) -> None:
    print(f"\n### Fleet convergence: 3 busbar nodes, {n} requests through each, flush every 100 ms\n")
    print("| store | converged after the last reply (median) | runs | exact total |")
    print("|---|---:|---|---|")
    for backend in ("postgres", "valkey"):
        module, settings = b.store(backend)
        urls = [b.gateway(module, settings) for _ in range(3)]
        times, total = [], 0
        for _ in range(reps):
            total += 3 * n
            last = asyncio.run(_drive(urls, n))
            while True:
                got = asyncio.run(_metering_requests(module, settings))
                if got >= total:
                    times.append(time.perf_counter() - last)
                    break
                if time.perf_counter() - last > 30:
                    times.append(float("nan"))
                    break
                time.sleep(0.005)
        exact = asyncio.run(_metering_requests(module, settings)) == total
        print(f"| {backend} | {statistics.median(times):.3f} s | {', '.join(f'{t:.3f}' for t in times)} s | "
              f"{'yes' if exact else 'NO'} ({total} requests) |", flush=True)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--fleet-n", type=int, default=200, help="requests through each fleet node per rep")
    ap.add_argument("--only", default="cost,workers,fleet")
    a = ap.parse_args()
    if not shutil.which("wrk") or not (GWBENCH / "load.py").exists():
        raise SystemExit(f"needs wrk and the gwbench harness at {GWBENCH} (set GWBENCH)")
    parts = a.only.split(",")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    print(f"commit {commit}, {os.cpu_count()} CPUs, loadavg at start {loadavg()}; wrk {a.duration:g} s x {a.reps} "
          f"reps (A B B A), medians")
    with tempfile.TemporaryDirectory(prefix="bench-store-gw-") as tmp:
        b = Bench(Path(tmp))
        try:
            if "cost" in parts:
                store_cost(b, a.duration, a.reps)
            if "workers" in parts:
                workers(b, a.duration, a.reps)
            if "fleet" in parts:
                fleet(b, a.fleet_n, a.reps)
        finally:
            b.close()
    print(f"\nloadavg at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
