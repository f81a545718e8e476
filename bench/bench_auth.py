"""Benchmark: virtual-key verification on the real request path (issue 13).

One process, one event loop (uvloop when installed, as the server uses), the real data plane: the
ASGI app of ``busbar.server.app`` is called with a synthetic HTTP scope, so every sample covers body
read, JSON parse, the front door, target resolution, the upstream call (``httpx.MockTransport``
answering a canned 200 at once) and the reply write. Two gateways built from the same config, the
same pool, measured interleaved in rounds so machine drift hits both equally:

* ``open``: ``auth.chain: []`` (the reference);
* ``keys``: ``auth.chain: [keys]``, one minted key presented as ``Authorization: Bearer`` on every
  request (the steady state: the token's signature verdict is cached until its expiry; the key's
  binding, expiry and the denylist are read from the store mirror on every request);
* ``keys cold``: the same, with a distinct token of the same key on every request (every request
  pays the ed25519 verify: the first request of each token).

Also reported: ``busbar.auth.tokens.verify`` alone (ed25519 verify + JSON) and a CPU calibration.
Overhead = percentile(series) - percentile(open), same run. Target: ``keys`` overhead p50 <= 30 us.

Run: ``.venv/bin/python bench/bench_auth.py [--samples N] [--check]``; writes
``bench/results/auth.json``.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_hooks import _pct, post_asgi, write_result
from busbar import __version__
from busbar.auth.boot import start_front_door
from busbar.auth.tokens import mint, verify
from busbar.config.load import load_config_text
from busbar.proxy.gateway import Gateway
from busbar.server.app import AppState, create_app
from busbar.store.attach import start_store
from busbar_sdk.store import VirtualKey

CONFIG = """
listen: "127.0.0.1:0"
auth: {{ chain: {chain} }}
providers:
  oa: {{ protocol: openai, base_url: "http://127.0.0.1:9", api_key: {{ env: K }} }}
models:
  a: {{ provider: oa }}
pools:
  chat: {{ members: [ {{ model: a }} ] }}
"""
BODY = orjson.dumps({"model": "chat", "messages": [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Summarize the quarterly report in three bullets."}]})
REPLY = orjson.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                   "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}})


def _upstream(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, stream=httpx.ByteStream(REPLY), headers={"content-type": "application/json"})


async def _request(app: Any, token: str | None) -> int:
    headers = [(b"authorization", b"Bearer " + token.encode())] if token is not None else []
    return (await post_asgi(app, BODY, headers))[0]


async def keyed_gateway(config_text: str, env: dict[str, str], tmp: Path, transport: httpx.BaseTransport,
                        group: str | None = None) -> tuple[Gateway, str, list[asyncio.Task[None]]]:
    """A gateway from ``config_text`` (``auth.chain`` holds ``keys``) with its store and front door
    started, one key bound to ``group`` (``None``: no group) put in its store and synced; returns
    the gateway, a token of that key (valid a day) and the store's tasks (cancel them at the end).
    Shared by the benches that need a caller with a key (``bench_limits``)."""
    loaded = load_config_text(config_text, env, config_path=tmp / "config.yaml")
    gw = Gateway.build(loaded, env, transport=transport)
    tasks = await start_store(gw)
    await start_front_door(gw, loaded, env)
    assert gw.frontdoor is not None and gw.signing is not None
    keysync = gw.frontdoor.modules[0].keysync         # type: ignore[attr-defined]
    now = int(time.time())
    await keysync.store.put_key(VirtualKey(id="vk_bench", name="bench", created_at=now, group=group))
    await keysync.sync()
    return gw, mint(gw.signing, "vk_bench", now + 86400), tasks


async def _measure(tmp: Path, samples: int, rounds: int) -> dict[str, list[int]]:
    env = {"K": "x"}
    transport = httpx.MockTransport(_upstream)
    loaded = load_config_text(CONFIG.format(chain="[]"), env, config_path=tmp / "config.yaml")
    gws = {"open": Gateway.build(loaded, env, transport=transport)}
    tasks = await start_store(gws["open"])
    await start_front_door(gws["open"], loaded, env)
    keyed, token, more = await keyed_gateway(CONFIG.format(chain="[keys]"), env, tmp, transport)
    gws["keys"] = keyed
    tasks += more
    now = int(time.time())
    assert gws["open"].frontdoor is None and keyed.signing is not None
    cold = (mint(keyed.signing, "vk_bench", now + 86400 + i) for i in range(10**9))
    apps = {"open": create_app(AppState(gateway=gws["open"])), "keys": create_app(AppState(gateway=keyed))}
    series = {"open": (apps["open"], lambda: None), "keys": (apps["keys"], lambda: token),
              "keys cold": (apps["keys"], lambda: next(cold))}
    for name, (app, tok) in series.items():                  # warm-up and a sanity check
        for _ in range(300):
            assert await _request(app, tok()) == 200, name
    assert await _request(apps["keys"], None) == 401 and await _request(apps["keys"], "bbk_x.y") == 401
    out: dict[str, list[int]] = {p: [] for p in series}
    per = max(1, samples // rounds)
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for name, (app, tok) in series.items():
            bucket = out[name]
            for _ in range(per):
                t = tok()
                t0 = clock()
                await _request(app, t)
                bucket.append(clock() - t0)
    alone = out["verify alone"] = []
    for _ in range(max(2000, samples // 4)):
        t0 = clock()
        verify(keyed.signing, token, now)
        alone.append(clock() - t0)
    for t in tasks:
        t.cancel()
    for gw in gws.values():
        await gw.aclose()
    return out


def run(samples: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="busbar-bench-auth-") as tmp:
        try:
            import uvloop
            loop_name, runner = "uvloop", uvloop.run
        except ImportError:  # pragma: no cover
            loop_name, runner = "asyncio", asyncio.run
        raw = runner(_measure(Path(tmp), samples, rounds))
    results = {p: _pct(v) for p, v in raw.items()}
    base = results["open"]
    overhead = {p: {"p50_us": results[p]["p50_us"] - base["p50_us"], "p99_us": results[p]["p99_us"] - base["p99_us"]}
                for p in ("keys", "keys cold")}
    calib = min(timeit.repeat("sum(range(1000))", number=2000, repeat=5)) / 2000 * 1e6
    return {"python": sys.version.split()[0], "platform": platform.platform(), "busbar": __version__,
            "loop": loop_name, "samples_per_series": samples, "rounds": rounds, "results": results,
            "overhead": overhead, "calibration_sum_range_1000_us": calib, "load_average": os.getloadavg()}


TARGET_P50_US = 30.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=20_000, help="timed requests per series (default 20000)")
    parser.add_argument("--rounds", type=int, default=50, help="interleaving rounds (default 50)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args(argv)
    report = run(args.samples, args.rounds)
    print(f"busbar {report['busbar']}, Python {report['python']}, {report['loop']}, {report['platform']}; "
          f"{report['samples_per_series']} requests per series in {report['rounds']} interleaved rounds; "
          f"sum(range(1000)) = {report['calibration_sum_range_1000_us']:.1f} us; load average "
          f"{', '.join(f'{x:.2f}' for x in report['load_average'])}")
    print(f"{'series':12} {'p50 us':>9} {'p90 us':>9} {'p99 us':>9} {'mean us':>9} {'+p50 us':>9} {'+p99 us':>9}")
    for p, r in report["results"].items():
        o = report["overhead"].get(p, {"p50_us": float("nan"), "p99_us": float("nan")})
        print(f"{p:12} {r['p50_us']:9.1f} {r['p90_us']:9.1f} {r['p99_us']:9.1f} {r['mean_us']:9.1f} "
              f"{o['p50_us']:9.1f} {o['p99_us']:9.1f}")
    write_result("auth.json", report)
    got = report["overhead"]["keys"]["p50_us"]
    met = got <= TARGET_P50_US
    print(f"target keys overhead p50 <= {TARGET_P50_US:g} us: {got:.1f} us {'met' if met else 'MISSED'}")
    return 0 if met or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
