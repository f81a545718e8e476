"""Benchmark: where the rules hook's added time goes, stage by stage, inside whole requests.

The set-up of ``bench/bench_router.py`` (the real data plane called in-process, pools ``plain`` and
``rules10``, the signed first-party busbar-rules-hook, ten rules of which only the last holds), with
``time.perf_counter_ns`` wrappers around each stage of a gated request; the requests alternate
between the two pools. Printed per stage: its p50 (µs) over every request; a nested stage is also
inside its parent's figure, and each wrapper adds about 0.1-0.3 µs to its parent.

Stages: ``PoolChain.plan`` (the whole decision), in it ``HookRun()`` (the run), ``candidate_views``,
``HookRun.message`` (the shape and prompt projection; in it ``body_view``, the one walk of the
client's body), ``fire_inline`` (call and judge), in it ``run_inline`` (the metered call: clocks and
GC accounting), in that ``HookFacade.decide_now`` (the plugin call through the loader's seam plus the
reply parse ``read_decide``), in it the plugin's ``decide`` and in that ``RuleSet.decide`` (the
combined CEL program), ``req_object`` and ``reply_for``; then ``PoolChain._planned`` (the plan),
``Plan.pick`` (the ranked walk's pick) and ``HookRun.finish``.

``--trivial``: the plugin's call replaced by one that answers ``{"order": [2]}`` at once (the
kernel's share of the added time, no CEL, no plugin code).

Run: ``.venv/bin/python bench/bench_router_stages.py [--samples N] [--trivial]``.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_router as br
from busbar.hooks import chain, facade, fire, plan, run
from busbar.server.app import AppState, create_app

TIMES: dict[str, list[int]] = {}


def _wrap(owner: Any, name: str, key: str | None = None, *, is_async: bool = False) -> None:
    """Replace ``owner.name`` by a wrapper appending its wall time (ns) to ``TIMES[key]``."""
    f = getattr(owner, name)
    samples = TIMES.setdefault(key or name, [])
    clock = time.perf_counter_ns
    if is_async:
        async def aw(*a: Any, **k: Any) -> Any:
            t = clock()
            r = await f(*a, **k)
            samples.append(clock() - t)
            return r
        setattr(owner, name, aw)
    else:
        def w(*a: Any, **k: Any) -> Any:
            t = clock()
            r = f(*a, **k)
            samples.append(clock() - t)
            return r
        setattr(owner, name, w)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=4000, help="requests per pool (default 4000)")
    parser.add_argument("--trivial", action="store_true", help="the plugin answers {order: [2]} at once")
    args = parser.parse_args(argv)
    _wrap(chain.PoolChain, "plan", "plan", is_async=True)
    _wrap(chain, "HookRun", "HookRun()")
    _wrap(chain, "candidate_views")
    _wrap(run.HookRun, "message")
    _wrap(run, "body_view")
    _wrap(chain, "fire_inline")
    _wrap(fire, "run_inline")
    _wrap(facade.HookFacade, "decide_now")
    _wrap(facade, "read_decide")
    _wrap(chain.PoolChain, "_planned")
    _wrap(plan.Plan, "pick")
    _wrap(run.HookRun, "finish")
    walls: dict[str, list[int]] = {"plain": [], "rules10": []}
    with br.rules_gateway() as gw:
        assert gw.hooks is not None
        fac = gw.hooks.facades[0]
        if args.trivial:
            fac._call = lambda payload: {"order": [2]}
        else:
            import busbar_rules_hook as plugin  # the signed plugin, imported by the loader
            import busbar_sdk.rules as rules_mod
            _wrap(plugin.RulesHook, "decide", "plugin decide")
            _wrap(rules_mod.RuleSet, "decide", "RuleSet.decide (CEL)")
            _wrap(plugin, "req_object")
            _wrap(plugin, "reply_for")
        driver = br._Driver(create_app(AppState(gateway=gw)))
        gc.collect()
        gc.freeze()

        async def go() -> None:
            for _ in range(300):
                for p in walls:
                    await driver.request(p)
            for v in TIMES.values():
                v.clear()
            for _ in range(args.samples):
                for p in walls:
                    t = time.perf_counter_ns()
                    await driver.request(p)
                    walls[p].append(time.perf_counter_ns() - t)

        br.run_loop()(go())
    print(f"load average {os.getloadavg()}")
    for p, v in walls.items():
        print(f"request {p:8s} p50 {statistics.median(v) / 1e3:7.1f} us   min {min(v) / 1e3:7.1f} us")
    for k, v in TIMES.items():
        if v:
            print(f"  {k:24s} p50 {statistics.median(v) / 1e3:6.2f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
