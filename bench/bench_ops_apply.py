"""Config apply under load (issue 15): a pool's members change 10 times (SIGHUP) during a 30 s run at
concurrency 16; counts failed requests and compares latency with a same-length run without applies,
in the same session against the same mock provider and busbar process.

Usage: .venv/bin/python bench/bench_ops_apply.py [--secs 30] [--concurrency 16] [--applies 10]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from busbar_mock_provider.process import MockProcess

from tests.support.gateway import BusbarProcess

HEAD = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  a: { provider: oa }
  b: { provider: oa }
  c: { provider: oa }
pools:
  live: { members: [ %s ] }
"""
LAYOUTS = [("a", "b"), ("b",), ("b", "c"), ("c",), ("a", "c")]


def _yaml(members: tuple[str, ...]) -> str:
    return HEAD % ", ".join(f"{{ model: {m} }}" for m in members)


async def _load(url: str, secs: float, conc: int) -> tuple[list[float], list[int]]:
    lat: list[float] = []
    bad: list[int] = []
    end = time.monotonic() + secs
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        async def worker() -> None:
            while time.monotonic() < end:
                t0 = time.perf_counter()
                r = await client.post("/v1/chat/completions",
                                      json={"model": "live", "messages": [{"role": "user", "content": "x"}]})
                lat.append((time.perf_counter() - t0) * 1000)
                if r.status_code != 200:
                    bad.append(r.status_code)
        await asyncio.gather(*(worker() for _ in range(conc)))
    return lat, bad


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=float, default=30)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--applies", type=int, default=10)
    a = ap.parse_args()
    with MockProcess() as mock, tempfile.TemporaryDirectory() as tmp:
        gw = BusbarProcess(_yaml(LAYOUTS[0]).replace("MOCK", mock.url), Path(tmp),
                           env={"T_OPENAI_KEY": "sk-x", "BUSBAR_STATE_FILE": "", "BUSBAR_LOG": "info"})
        with gw:
            base_lat, base_bad = asyncio.run(_load(gw.url, a.secs, a.concurrency))
            applied = 0

            def churn() -> None:
                nonlocal applied
                gap = a.secs / (a.applies + 1)
                for i in range(a.applies):
                    time.sleep(gap)
                    gw.config_path.write_text(_yaml(LAYOUTS[(i + 1) % len(LAYOUTS)])
                                              .replace("MOCK", mock.url).replace("{port}", str(gw.port)))
                    os.kill(gw.proc.pid, signal.SIGHUP)
                    want = f"version {i + 2} now serving"
                    deadline = time.monotonic() + 10
                    while want not in gw.logs() and time.monotonic() < deadline:
                        time.sleep(0.02)
                    applied += want in gw.logs()

            t = threading.Thread(target=churn)
            t.start()
            lat, bad = asyncio.run(_load(gw.url, a.secs, a.concurrency))
            t.join()
    q = statistics.quantiles
    print(f"{a.secs:g} s at concurrency {a.concurrency}; {applied}/{a.applies} applies served")
    print("| run | requests | failed | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|")
    print(f"| no apply | {len(base_lat)} | {len(base_bad)} | {q(base_lat, n=100)[49]:.1f} | "
          f"{q(base_lat, n=100)[98]:.1f} |")
    print(f"| {a.applies} applies | {len(lat)} | {len(bad)} | {q(lat, n=100)[49]:.1f} | {q(lat, n=100)[98]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
