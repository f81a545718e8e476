"""Benchmark: what group admission adds to a request (issue 14).

One process, one event loop (uvloop when installed, as the server uses), the real data plane: the
ASGI app of ``busbar.server.app`` is called with a synthetic HTTP scope, so every sample covers body
read, JSON parse, target resolution, admission, the walk, the upstream call (``httpx.MockTransport``
answering a canned 200 with usage at once), the reply write and the request record's finishers
(where settlement runs, beside the metering finisher every server runs). Two gateways with the same pool and rate card, measured interleaved in
alternation (plain, limited, limited, plain, ...) so machine drift hits both equally:

* ``plain``: no ``groups:`` (the baseline);
* ``limited``: every request charges through ``leaf`` -> ``team`` -> ``org`` (a 3-level chain) with
  4 limits: ``requests`` per minute on the leaf, ``tokens`` per hour on the team, ``budget`` per month
  and ``concurrent`` on the org (the budget and tokens limits take the worst-case reservation).

Added = percentile(limited) - percentile(plain), same run. Target: p50 added <= 20 us. Also
reported: ``admit+settle`` alone (``Limiter.admit`` then ``Limiter.settle`` on the same chain,
timed per call pair, no request around it).

Run: ``.venv/bin/python bench/bench_limits.py [--samples N] [--check]``; writes
``bench/results/limits.json``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hooks import _pct, post_asgi
from busbar import __version__
from busbar.config.load import load_config_text
from busbar.limits.engine import Worst
from busbar.proxy.gateway import Gateway
from busbar.server.app import AppState, create_app
from busbar.store.metering import metering_finisher
from busbar_sdk.store import TierTokens

ROOT = Path(__file__).resolve().parents[1]

CONFIG = """
listen: "127.0.0.1:0"
providers:
  oa: { protocol: openai, base_url: "http://127.0.0.1:9", api_key: { env: K } }
models:
  a: { provider: oa }
  b: { provider: oa }
rate_card:
  a: { input_utok: 3.0, output_utok: 15.0 }
  b: { input_utok: 0.15, output_utok: 0.6 }
pools:
  p: { members: [ { model: a }, { model: b } ] }
"""
GROUPS = """
groups:
  org: { limits: [ { budget: 1000000000000, per: month }, { concurrent: 1000 } ] }
  team: { parent: org, limits: [ { tokens: 1000000000000, per: hour } ] }
  leaf: { parent: team, limits: [ { requests: 1000000000, per: minute } ] }
"""
BODY = orjson.dumps({"model": "p", "max_tokens": 256,
                     "messages": [{"role": "user", "content": "Summarize the quarterly report in three bullets."}]})
REPLY = orjson.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                   "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}})


def _upstream(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, stream=httpx.ByteStream(REPLY), headers={"content-type": "application/json"})


async def _request(app: Any) -> int:
    return (await post_asgi(app, BODY))[0]


async def _measure(apps: dict[str, Any], samples: int) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {name: [] for name in apps}
    for app in apps.values():                       # warm-up
        for _ in range(300):
            assert await _request(app) == 200
    clock = time.perf_counter_ns
    order = list(apps.items())
    for i in range(samples):             # alternate request by request: drift hits both series alike
        for name, app in (order if i % 2 == 0 else order[::-1]):
            t0 = clock()
            await _request(app)
            out[name].append(clock() - t0)
    return out


def _micro(gw: Gateway, samples: int) -> list[int]:
    assert gw.limiter is not None
    lim = gw.limiter.limiter
    worst = Worst(268, 268 * 15_000_000)
    tiers = TierTokens(12, 1)
    out = []
    clock = time.perf_counter_ns
    for _ in range(samples):
        t0 = clock()
        t = lim.admit("leaf", "p", lambda pool: worst)
        lim.settle(t, True, "a", tiers)       # type: ignore[arg-type]
        out.append(clock() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    plain = Gateway.build(load_config_text(CONFIG, {"K": "x"}), {"K": "x"}, transport=httpx.MockTransport(_upstream))
    limited = Gateway.build(load_config_text(CONFIG + GROUPS, {"K": "x"}), {"K": "x"},
                            transport=httpx.MockTransport(_upstream))
    assert limited.limiter is not None and plain.limiter is not None   # the rate card alone builds one
    limited.limiter.open_group = "leaf"          # what a key bound to the leaf does (no identity in-process)
    apps = {}
    for name, gw in (("plain", plain), ("limited", limited)):
        state = AppState(gateway=gw)
        state.finishers.append(metering_finisher(gw))    # as the server runs (server/lifecycle.py)
        apps[name] = create_app(state)
    try:
        import uvloop
        loop_name, runner = "uvloop", uvloop.run
    except ImportError:  # pragma: no cover
        loop_name, runner = "asyncio", asyncio.run
    raw = runner(_measure(apps, args.samples))
    lim = limited.limiter.limiter
    charged = {b: (w.requests, w.billable) for b, w in lim.current.items()}
    assert all(r == b > 0 for r, b in charged.values()) and len(charged) == 3, charged
    assert lim.reservations == 0 and all(v == 0 for v in lim.inflight.values())
    results = {name: _pct(v) for name, v in raw.items()}
    results["admit+settle"] = _pct(_micro(limited, args.samples))
    added = {"p50_us": results["limited"]["p50_us"] - results["plain"]["p50_us"],
             "p99_us": results["limited"]["p99_us"] - results["plain"]["p99_us"]}
    report = {"busbar": __version__, "python": platform.python_version(), "loop": loop_name,
              "loadavg": os.getloadavg(), "samples": args.samples,
              "results": results, "added": added, "buckets": len(charged)}
    out = ROOT / "bench" / "results" / "limits.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"loop {loop_name}, load {os.getloadavg()[0]:.2f}, {args.samples} samples per series")
    print(f"{'series':<14}{'p50 us':>10}{'p90 us':>10}{'p99 us':>10}{'mean us':>10}")
    for name, r in results.items():
        print(f"{name:<14}{r['p50_us']:>10.2f}{r['p90_us']:>10.2f}{r['p99_us']:>10.2f}{r['mean_us']:>10.2f}")
    print(f"added by admission (limited - plain): p50 {added['p50_us']:.2f} us, p99 {added['p99_us']:.2f} us")
    if args.check and added["p50_us"] > 20.0:
        print("FAIL: p50 added > 20 us")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
