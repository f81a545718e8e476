"""Benchmark: hook decision overhead through the real request path (issue 5).

One process, one event loop (uvloop when installed, as the server uses), the real data plane: the
ASGI app of ``busbar.server.app`` is called with a synthetic HTTP scope, so every sample covers body
read, JSON parse, target resolution, the hook decision, the failover walk, the upstream call
(``httpx.MockTransport`` answering a canned 200 at once) and the reply write. Four pools with the
same three members, measured interleaved in rounds so machine drift hits each equally:

* ``plain``: no ``hooks:`` (the baseline; builds no projection and constructs no hook object: the
  script counts HookRun / Plan constructions and projection builds and requires zero);
* ``native``: ``hooks: [cheapest]``;
* ``gate``: one in-process ``kind: hook`` plugin (plain pluggy, dicts only: it reverses the
  candidates), packed, signed and loaded the real way, ``timeout_ms: 50``, declaring
  ``busbar_call.busbar_inline = True`` (called on the event loop);
* ``gate_thread``: the same plugin without the declaration (called on its worker thread: the
  thread hand-off is the difference);
* ``sidecar``: the first-party ``busbar-webrequest-hook`` (built from ``plugins/``) forwarding to a
  ``python -m busbar_sdk.sidecar`` process on loopback (keep-alive), ``timeout_ms: 200``; the
  forwarder's async twin is awaited on the loop (aiohttp), the sidecar serves the same gate module
  with ``busbar_inline`` declared (uvicorn calls it on its loop, no thread);
* ``sidecar floor`` (not a pool): that forwarder's async twin (``PluginInstance.acall``) awaited
  straight from this loop, no hook engine: what the HTTP round trip itself costs on this machine;
  ``floor sync``: its sync ``busbar_call`` (httpx, the path taps and management messages take).

Overhead = percentile(pool) - percentile(plain), same run. Targets: native p50 <= 10 us; gate
p50 <= 25 us and p99 <= 100 us; sidecar p50 <= 400 us. Also reported: the decision alone
(``PoolChain.plan`` timed inside whole requests, in 10 interleaved rounds of their own after the
latency rounds, so the timing wrapper never adds to a pool's latency) and a CPU calibration
(``sum(range(1000))``) with the load average, since a shared VM inflates every figure.

Run: ``.venv/bin/python bench/bench_hooks.py [--samples N] [--check]``; writes
``bench/results/hooks.json``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import timeit
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]

from busbar import __version__
from busbar.config.load import load_config_text
from busbar.config.schema_plugins import PluginsConfig
from busbar.loader import load_plugins, unload
from busbar.loader.unpack import Staging
from busbar.proxy.gateway import Gateway
from busbar.server.app import AppState, create_app
from busbar_sdk.artifact import build_wheels, generate_signing_key, pack_artifact

#: A hook module of plain pluggy functions up to ``busbar_call`` (abi 1, kind hook, a bare handle):
#: the head of every throwaway gate the in-process benches pack.
HOOK_HEAD = '''
import pluggy

hookimpl = pluggy.HookimplMarker("busbar")


@hookimpl
def busbar_abi():
    return 1


@hookimpl
def busbar_plugin_kind():
    return "hook"


@hookimpl
def busbar_open(settings):
    return object()
'''

GATE = HOOK_HEAD + '''

@hookimpl
def busbar_call(handle, payload):
    if "configure" in payload:
        return {"ack": {"settings_version": payload["configure"]["settings_version"]}}
    if payload.get("op") == "decide":
        return {"order": [c["idx"] for c in reversed(payload["candidates"])]}
    return {}
'''
INLINE = GATE + "\n\nbusbar_call.busbar_inline = True     # CPU-only, bounded: call me on the loop\n"

#: The in-process benches' config head (a ``str.format`` template: ``plugdir``, ``key``): plugins
#: trusted from the bench's own key, three members ``a``, ``b``, ``c`` at an unroutable upstream.
CONFIG_HEAD = """
listen: "127.0.0.1:0"
plugins: {{ enabled: true, dir: "{plugdir}", trust: {{ publishers: [ {{ name: bench, public_key: "{key}" }} ] }} }}
providers:
  oa: {{ protocol: openai, base_url: "http://127.0.0.1:9", api_key: {{ env: K }} }}
models:
  a: {{ provider: oa }}
  b: {{ provider: oa }}
  c: {{ provider: oa }}
"""

CONFIG = CONFIG_HEAD + """rate_card:
  a: {{ input_utok: 15.0, output_utok: 75.0 }}
  b: {{ input_utok: 3.0, output_utok: 15.0 }}
  c: {{ input_utok: 0.15, output_utok: 0.6 }}
pools:
  plain: {{ members: [ {{ model: a }}, {{ model: b }}, {{ model: c }} ] }}
  native: {{ hooks: [ cheapest ], members: [ {{ model: a }}, {{ model: b }}, {{ model: c }} ] }}
  gate:
    hooks: [ {{ module: bench-gate, timeout_ms: 50 }} ]
    members: [ {{ model: a }}, {{ model: b }}, {{ model: c }} ]
  gate_thread:
    hooks: [ {{ module: bench-gate-thread, timeout_ms: 50 }} ]
    members: [ {{ model: a }}, {{ model: b }}, {{ model: c }} ]
  sidecar:
    hooks: [ {{ module: busbar-webrequest-hook, timeout_ms: 200, settings: {{ url: "{sidecar}/rank", timeout_ms: 1000 }} }} ]
    members: [ {{ model: a }}, {{ model: b }}, {{ model: c }} ]
"""

BODY = orjson.dumps({"messages": [{"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": "Summarize the quarterly report in three bullets."}]})
REPLY = orjson.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                   "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}})


def _project(root: Path, dist: str, module: str, source: str, entry: str | None = None) -> Path:
    """A plugin project: ``module/__init__.py`` holding ``source``, entry point ``entry`` (default:
    the module itself, a module of hook functions)."""
    (root / module).mkdir(parents=True)
    (root / module / "__init__.py").write_text(textwrap.dedent(source))
    (root / "pyproject.toml").write_text(textwrap.dedent(f'''
        [build-system]
        requires = ["setuptools>=61", "wheel"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "{dist}"
        version = "1.0.0"
        [project.entry-points."busbar.plugins"]
        {dist} = "{entry or module}"
        [tool.setuptools]
        packages = ["{module}"]
    '''))
    return root


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _upstream(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, stream=httpx.ByteStream(REPLY), headers={"content-type": "application/json"})


async def post_asgi(app: Any, body: bytes, headers: list[tuple[bytes, bytes]] | None = None,
                    path: str = "/v1/chat/completions") -> tuple[int, dict[bytes, bytes]]:
    """POST ``body`` (JSON) to the ASGI ``app`` as one request; returns the status and response headers.
    Shared by the in-process benches (``bench_auth``, ``bench_limits``, ``bench_router``)."""
    scope = {"type": "http", "method": "POST", "path": path, "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                         *(headers or [])]}
    sent = False
    out: dict[str, Any] = {}
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(msg: dict[str, Any]) -> None:
        if msg["type"] == "http.response.start":
            out["status"], out["headers"] = msg["status"], dict(msg["headers"])
        elif msg["type"] == "http.response.body" and not msg.get("more_body"):
            done.set()
    await app(scope, receive, send)
    done.set()
    return out["status"], out["headers"]


class _Driver:
    """Calls the ASGI app for one request naming ``pool`` and returns its status and headers."""

    def __init__(self, app: Any):
        self.app = app

    async def request(self, pool: str) -> tuple[int, dict[bytes, bytes]]:
        return await post_asgi(self.app, BODY[:-1] + b',"model":"' + pool.encode() + b'"}')


def _pct(samples: list[int], *, p999: bool = False) -> dict[str, float]:
    """Percentiles of ``samples`` (ns) in us: p50, p90, p99 (and p99.9 with ``p999``) and the mean."""
    s = sorted(samples)

    def pick(q: float) -> float:
        return s[min(len(s) - 1, int(q * len(s)))] / 1000.0
    out = {"p50_us": pick(0.5), "p90_us": pick(0.9), "p99_us": pick(0.99)}
    if p999:
        out["p999_us"] = pick(0.999)
    return {**out, "mean_us": statistics.fmean(s) / 1000.0}


def write_result(name: str, report: dict[str, Any]) -> None:
    """Write ``report`` as indented JSON to ``bench/results/<name>`` (the folder made when absent)."""
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / name).write_text(json.dumps(report, indent=2))


class _Counters:
    """Counts hook objects and projections built while the ``plain`` pool is served.

    The counting wrappers are installed only around the ``plain`` pool's requests
    (:meth:`install` / :meth:`remove`), so they never add to the hook pools' figures.
    """

    def __init__(self) -> None:
        from busbar.hooks import chain, plan, run

        self.n = {"HookRun": 0, "Plan": 0, "shape_view": 0, "candidate_views": 0}
        self._saved: list[tuple[Any, str, Any]] = []
        self._wrapped: list[tuple[Any, str, Any]] = []
        for cls in (run.HookRun, plan.Plan):
            orig = cls.__init__

            def init(obj: Any, *a: Any, __orig: Any = orig, __name: str = cls.__name__, **k: Any) -> None:
                self.n[__name] += 1
                __orig(obj, *a, **k)
            self._saved.append((cls, "__init__", orig))
            self._wrapped.append((cls, "__init__", init))
        for mod, name in ((run, "shape_view"), (chain, "candidate_views")):
            fn = getattr(mod, name)

            def wrapped(*a: Any, __fn: Any = fn, __name: str = name, **k: Any) -> Any:
                self.n[__name] += 1
                return __fn(*a, **k)
            self._saved.append((mod, name, fn))
            self._wrapped.append((mod, name, wrapped))

    def install(self) -> None:
        for owner, name, fn in self._wrapped:
            setattr(owner, name, fn)

    def remove(self) -> None:
        for owner, name, fn in self._saved:
            setattr(owner, name, fn)


class _PlanTimer:
    """Times each ``PoolChain.plan`` (the decision itself) inside whole requests.

    The timing wrapper (an extra coroutine and two clock reads, ~1 µs in the path) is installed
    only around the decision rounds (:meth:`install` / :meth:`remove`), which run after the
    latency rounds, so it never adds to a hook pool's latency figure (before 2026-11-30 it wrapped
    every measured request of every hook pool).
    """

    def __init__(self) -> None:
        from busbar.hooks import chain

        self.samples: list[int] = []
        self._chain = chain.PoolChain
        self._orig = orig = chain.PoolChain.plan

        async def timed(chain_: Any, gw: Any, call: Any, pool: Any) -> Any:
            t0 = time.perf_counter_ns()
            plan = await orig(chain_, gw, call, pool)
            self.samples.append(time.perf_counter_ns() - t0)
            return plan
        self._timed = timed

    def install(self) -> None:
        self._chain.plan = self._timed  # type: ignore[method-assign]

    def remove(self) -> None:
        self._chain.plan = self._orig  # type: ignore[method-assign]


async def _measure(driver: _Driver, gw: Any, samples: int, rounds: int, counters: _Counters,
                   timer: _PlanTimer) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    pools = ["plain", "native", "gate", "gate_thread", "sidecar"]
    for p in pools:                                   # warm-up (and a sanity check of each decision)
        for _ in range(300):
            status, headers = await driver.request(p)
            assert status == 200, (p, status)
    expect = {"native": b"cheapest", "gate": b"bench-gate", "gate_thread": b"bench-gate-thread",
              "sidecar": b"busbar-webrequest-hook"}
    for p, policy in expect.items():
        _, headers = await driver.request(p)
        assert headers.get(b"x-busbar-route-policy") == policy, (p, headers)
        assert headers.get(b"x-busbar-route-target") == b"c", (p, headers)
    out: dict[str, list[int]] = {p: [] for p in pools}
    plans: dict[str, list[int]] = {p: [] for p in pools}
    per = max(1, samples // rounds)
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for p in pools:
            bucket = out[p]
            if p == "plain":
                counters.install()
            for _ in range(per):
                t0 = clock()
                await driver.request(p)
                bucket.append(clock() - t0)
            counters.remove()
    timer.install()                                   # the decision alone: its own rounds, after
    for _ in range(10):
        for p in pools[1:]:
            timer.samples = plans[p]
            for _ in range(max(100, samples // 100)):
                await driver.request(p)
    timer.remove()
    # the sidecar floor: the forwarder plugin called straight, in this thread, no hook engine
    forwarder = next(f for f in gw.hooks.facades if f.name == "busbar-webrequest-hook")
    payload = {"op": "decide", "request": {"request_id": "r", "pool": "sidecar", "ingress_protocol": "openai",
                                           "message_count": 1, "has_tools": False, "total_chars": 51,
                                           "stream": False},
               "candidates": [{"idx": i, "model": m, "provider": "oa", "weight": 1, "available_concurrency": 2**31 - 1}
                              for i, m in enumerate("abc")], "context": {}}
    floor = out["sidecar floor"] = []
    for _ in range(max(1000, samples // 4)):          # what the gate awaits: the async twin, on this loop
        t0 = clock()
        await forwarder.instance.acall(payload)
        floor.append(clock() - t0)
    floor = out["floor sync"] = []
    for _ in range(1000):                              # the sync path (taps, management): httpx
        t0 = clock()
        forwarder.instance.call(payload)
        floor.append(clock() - t0)
    return out, plans


def run(samples: int, rounds: int) -> dict[str, Any]:
    seed, public = generate_signing_key()
    with tempfile.TemporaryDirectory(prefix="busbar-bench-hooks-") as tmp:
        root = Path(tmp)
        gate_project = _project(root / "gate", "bench-gate", "bench_gate", INLINE)
        thread_project = _project(root / "gate-thread", "bench-gate-thread", "bench_gate_thread", GATE)
        wheels = build_wheels([gate_project, thread_project, ROOT / "plugins" / "busbar-webrequest-hook"],
                              root / "wheels")
        plugdir = root / "plugins"
        plugdir.mkdir()
        for wheel, (name, alias) in zip(wheels, [("bench-gate", "gate"), ("bench-gate-thread", "gate-thread"),
                                                 ("busbar-webrequest-hook", "busbar-webrequest")]):
            data = pack_artifact(wheel_name=wheel.name, wheel_bytes=wheel.read_bytes(), name=name, alias=alias,
                                 kind="hook", version="1.0.0", publisher="bench", signing_key=seed)
            (plugdir / f"{name}.tar.gz").write_bytes(data)
        side_dir = root / "sidecar"
        side_dir.mkdir()
        (side_dir / "bench_sidecar.py").write_text(INLINE)
        port = _free_port()
        sidecar = subprocess.Popen([sys.executable, "-m", "busbar_sdk.sidecar", "bench_sidecar", "--port", str(port)],
                                   cwd=side_dir, env={**os.environ, "PYTHONPATH": str(side_dir)},
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert sidecar.stdout is not None and "serving" in sidecar.stdout.readline()
        text = CONFIG.format(plugdir=plugdir, key=public, sidecar=f"http://127.0.0.1:{port}")
        loaded = load_config_text(text, {"K": "x"})
        ps = load_plugins(PluginsConfig.model_validate({"enabled": True, "dir": str(plugdir), "trust": {
            "publishers": [{"name": "bench", "public_key": public}]}}), base_dir=root,
            staging=Staging(root / "staging"), release_key=None)
        counters = _Counters()
        timer = _PlanTimer()
        try:
            gw = Gateway.build(loaded, {"K": "x"}, transport=httpx.MockTransport(_upstream), plugins=ps)
            assert gw.hooks is not None and "plain" not in gw.hooks.chains
            inline = {f.name: f.inline for f in gw.hooks.facades}
            assert inline == {"bench-gate": True, "bench-gate-thread": False, "busbar-webrequest-hook": False}
            bare = Gateway.build(load_config_text(text.split("  native:")[0], {"K": "x"}), {"K": "x"},
                                 transport=httpx.MockTransport(_upstream), plugins=ps)
            assert bare.hooks is None                          # no hooks anywhere: no engine at all
            driver = _Driver(create_app(AppState(gateway=gw)))
            try:
                import uvloop
                loop_name = "uvloop"
                runner = uvloop.run
            except ImportError:  # pragma: no cover
                loop_name, runner = "asyncio", asyncio.run
            raw, plans = runner(_measure(driver, gw, samples, rounds, counters, timer))
            gw.hooks.close()
        finally:
            sidecar.kill()
            sidecar.wait(5)
            unload(ps)
    results = {p: _pct(v) for p, v in raw.items()}
    decision = {p: _pct(v) for p, v in plans.items() if v}
    base = results["plain"]
    overhead = {p: {"p50_us": r["p50_us"] - base["p50_us"], "p99_us": r["p99_us"] - base["p99_us"]}
                for p, r in results.items() if p not in ("plain", "sidecar floor", "floor sync")}
    calib = min(timeit.repeat("sum(range(1000))", number=2000, repeat=5)) / 2000 * 1e6
    return {"python": sys.version.split()[0], "platform": platform.platform(), "busbar": __version__,
            "loop": loop_name, "samples_per_pool": samples, "rounds": rounds, "results": results,
            "overhead": overhead, "decision": decision, "plain_pool_hook_objects": counters.n,
            "calibration_sum_range_1000_us": calib, "load_average": os.getloadavg()}


TARGETS = {"native": {"p50_us": 10.0}, "gate": {"p50_us": 25.0, "p99_us": 100.0}, "sidecar": {"p50_us": 400.0}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=20_000, help="timed requests per pool (default 20000)")
    parser.add_argument("--rounds", type=int, default=50, help="interleaving rounds (default 50)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    report = run(args.samples, args.rounds)
    print(f"busbar {report['busbar']}, Python {report['python']}, {report['loop']}, {report['platform']}; "
          f"{report['samples_per_pool']} requests per pool in {report['rounds']} interleaved rounds; "
          f"sum(range(1000)) = {report['calibration_sum_range_1000_us']:.1f} us; load average "
          f"{', '.join(f'{x:.2f}' for x in report['load_average'])}")
    print(f"{'pool':10} {'p50 us':>9} {'p90 us':>9} {'p99 us':>9} {'mean us':>9} {'+p50 us':>9} {'+p99 us':>9}")
    for p, r in report["results"].items():
        o = report["overhead"].get(p, {"p50_us": 0.0 if p == "plain" else float("nan"),
                                       "p99_us": 0.0 if p == "plain" else float("nan")})
        print(f"{p:10} {r['p50_us']:9.1f} {r['p90_us']:9.1f} {r['p99_us']:9.1f} {r['mean_us']:9.1f} "
              f"{o['p50_us']:9.1f} {o['p99_us']:9.1f}")
    print("the decision alone (PoolChain.plan, timed inside whole requests, in rounds of their own):")
    for p, r in report["decision"].items():
        print(f"  {p:10} p50 {r['p50_us']:7.1f} us  p90 {r['p90_us']:7.1f} us  p99 {r['p99_us']:7.1f} us")
    print(f"plain pool, hook objects and projections built: {report['plain_pool_hook_objects']}")
    write_result("hooks.json", report)
    ok = all(v == 0 for v in report["plain_pool_hook_objects"].values())
    for pool, t in TARGETS.items():
        for k, limit in t.items():
            got = report["overhead"][pool][k]
            met = got <= limit
            ok = ok and met
            print(f"target {pool} overhead {k[:3]} <= {limit:g} us: {got:.1f} us {'met' if met else 'MISSED'}")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
