"""Failover cost: the extra latency of one pre-first-byte hop versus a direct success (issue 7).

Runs a real mock provider and a real busbar on loopback. Pool ``hop`` = [A (always 503), B];
pool ``direct`` = [B]. Measured sequentially (concurrency 1), interleaved ABAB:

  hop cost = p50(hop) - p50(direct) - p50(A's 503 straight from the mock)

i.e. what the gateway adds beyond the failed attempt's own time (target <= 1 ms).
Also prints a short chaos-style throughput line (c=32, 20 % of A's answers 503/429).
Usage: .venv/bin/python bench/bench_failover.py [--n 400]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from busbar_mock_provider.process import MockProcess

from tests.support.gateway import BusbarProcess

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  a-fails: { provider: oa }
  b-ok: { provider: oa }
pools:
  hop:
    members: [ { model: a-fails, weight: 1000 }, { model: b-ok } ]
    breaker: { trip: { mode: consecutive, consecutive_n: 1000000 } }
  direct: { members: [ { model: b-ok } ] }
"""
BODY = {"messages": [{"role": "user", "content": "hi"}]}


def p50(xs):
    return statistics.median(xs) * 1000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    a = ap.parse_args()
    with MockProcess() as mock, tempfile.TemporaryDirectory() as tmp:
        mock.script([{"match": {"model": "a-fails"}, "times": -1, "response": {"status": 503}}])
        with BusbarProcess(CONFIG.replace("MOCK", mock.url), Path(tmp),
                           env={"T_OPENAI_KEY": "sk-x", "BUSBAR_STATE_FILE": ""}) as gw:
            c = httpx.Client(timeout=10)
            hop, direct, fail = [], [], []
            for _ in range(50):  # warm-up
                c.post(gw.url + "/v1/chat/completions", json={"model": "hop", **BODY})
                c.post(gw.url + "/v1/chat/completions", json={"model": "direct", **BODY})
            for _ in range(a.n):
                t = time.perf_counter()
                r = c.post(gw.url + "/v1/chat/completions", json={"model": "hop", **BODY})
                hop.append(time.perf_counter() - t)
                assert r.headers["x-busbar-route-target"] == "b-ok"
                t = time.perf_counter()
                c.post(gw.url + "/v1/chat/completions", json={"model": "direct", **BODY})
                direct.append(time.perf_counter() - t)
                t = time.perf_counter()
                r = c.post(mock.url + "/v1/chat/completions", json={"model": "a-fails", **BODY},
                           headers={"authorization": "Bearer x"})
                fail.append(time.perf_counter() - t)
                assert r.status_code == 503
            cost = p50(hop) - p50(direct) - p50(fail)
            print(f"failover hop: p50 hop {p50(hop):.2f} ms, direct {p50(direct):.2f} ms, "
                  f"failed attempt alone {p50(fail):.2f} ms -> hop cost beyond the failed attempt "
                  f"{cost:.2f} ms (target <= 1 ms) [n={a.n}]")
            mock.script([{"match": {"model": "a-fails"}, "times": -1, "response": {"status": 503}}])
            t0 = time.perf_counter()
            ok = asyncio.run(_burst(gw.url, 2000))
            el = time.perf_counter() - t0
            print(f"burst through the failing pool: 2000 requests at c=32 in {el:.2f} s = "
                  f"{2000 / el:.0f} req/s, {ok} ok, {2000 - ok} errors")
    return 0


async def _burst(url: str, n: int) -> int:
    sem = asyncio.Semaphore(32)
    async with httpx.AsyncClient(base_url=url, timeout=30,
                                 limits=httpx.Limits(max_connections=32)) as c:
        async def one():
            async with sem:
                r = await c.post("/v1/chat/completions", json={"model": "hop", **BODY})
                return r.status_code == 200
        return sum(await asyncio.gather(*(one() for _ in range(n))))


if __name__ == "__main__":
    sys.exit(main())
