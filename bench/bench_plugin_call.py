"""Benchmark: a trivial ``decide`` through the kernel's plugin call path vs a direct Python call.

What is measured, in one process and one run, interleaved in rounds so drift hits both equally:

* ``direct``: the plugin's own ``busbar_call(handle, payload)`` function called straight from Python
  (the floor: what the decision costs with no kernel at all);
* ``kernel``: ``PluginInstance.call(payload)`` on a plugin loaded the real way (packed and signed
  with the sdk, verified, unpacked, imported and bound by ``busbar.loader.load_plugins``): grant
  filter, the direct call, the reply check and error mapping;
* ``kernel+sdk``: the same path into a ``busbar_sdk.HookPlugin`` subclass, which also parses the
  payload into pydantic models and serializes the typed reply (what an sdk-based plugin pays);
  beside it ``direct sdk``: ``handle.handle(payload)`` called straight.

Each sample is one call timed with ``time.perf_counter_ns``; the timer's own cost (an empty
sample) is reported so the numbers can be read net of it. Targets (issue 4): kernel p50 <= 5 us,
p99 <= 20 us.

Run: ``.venv/bin/python bench/bench_plugin_call.py [--samples N] [--check]``; results are also
written to ``bench/results/plugin_call.json``.
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_hooks import HOOK_HEAD, _pct, _project, write_result
from busbar import __version__
from busbar.config.schema_plugins import PluginsConfig
from busbar.loader import load_plugins, unload
from busbar.loader.unpack import Staging
from busbar_sdk.artifact import build_wheels, generate_signing_key, pack_artifact

TRIVIAL = HOOK_HEAD + '''
ORDER = {"order": [2, 1, 0]}


@hookimpl
def busbar_call(handle, payload):
    if payload["op"] == "decide":
        return ORDER
    return {}
'''

SDK = '''
from busbar_sdk import HookPlugin, Order, export_plugin


class Reverse(HookPlugin):
    def decide(self, message):
        return Order(order=[c.idx for c in reversed(message.candidates)])


plugin = export_plugin(Reverse)
'''

PAYLOAD: dict[str, Any] = {
    "op": "decide",
    "request": {"request_id": "r-1", "pool": "chat", "ingress_protocol": "openai", "message_count": 3,
                "has_tools": False, "total_chars": 1200, "stream": True},
    "candidates": [{"idx": i, "model": f"model-{i}", "provider": "p", "weight": 1, "available_concurrency": 8,
                    "latency_ms": 120.0 + i} for i in range(3)],
    "context": {},
}


def _measure(fns: dict[str, Callable[[], object]], samples: int, rounds: int = 100) -> dict[str, dict[str, float]]:
    per_round = max(1, samples // rounds)
    out: dict[str, list[int]] = {name: [] for name in fns}
    clock = time.perf_counter_ns
    for fn in fns.values():  # warm-up
        for _ in range(2000):
            fn()
    for _ in range(rounds):
        for name, fn in fns.items():
            bucket = out[name]
            for _ in range(per_round):
                t0 = clock()
                fn()
                bucket.append(clock() - t0)
    return {name: _pct(v, p999=True) for name, v in out.items()}


def run(samples: int) -> dict[str, Any]:
    seed, public = generate_signing_key()
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as tmp:
        root = Path(tmp)
        projects = [_project(root / "trivial", "bench-trivial", "bench_trivial", TRIVIAL, "bench_trivial"),
                    _project(root / "sdk", "bench-sdk", "bench_sdk_hook", SDK, "bench_sdk_hook:plugin")]
        wheels = build_wheels(projects, root / "wheels")
        plugins = root / "plugins"
        plugins.mkdir()
        for wheel, (name, alias) in zip(wheels, [("bench-trivial", "trivial"), ("bench-sdk", "sdk")]):
            data = pack_artifact(wheel_name=wheel.name, wheel_bytes=wheel.read_bytes(), name=name, alias=alias,
                                 kind="hook", version="1.0.0", publisher="bench", signing_key=seed)
            (plugins / f"{name}.tar.gz").write_bytes(data)
        cfg = PluginsConfig.model_validate({"enabled": True, "dir": str(plugins),
                                            "trust": {"publishers": [{"name": "bench", "public_key": public}]}})
        ps = load_plugins(cfg, base_dir=root, staging=Staging(root / "staging"), release_key=None)
        try:
            trivial, sdk = ps.get("trivial"), ps.get("sdk")
            assert trivial is not None and sdk is not None and trivial.binding and sdk.binding
            t_inst, s_inst = trivial.open({}), sdk.open({})
            t_fn, t_handle = trivial.binding.call, t_inst.handle
            s_handle = s_inst.handle
            t_call, s_call = t_inst.call, s_inst.call
            assert t_call(PAYLOAD) == t_fn(t_handle, PAYLOAD) == {"order": [2, 1, 0]}
            assert s_call(PAYLOAD) == s_handle.handle(PAYLOAD) == {"order": [2, 1, 0]}  # type: ignore[attr-defined]
            s_direct = s_handle.handle  # type: ignore[attr-defined]
            results = _measure({
                "timer (empty sample)": lambda: None,
                "direct": lambda: t_fn(t_handle, PAYLOAD),
                "kernel": lambda: t_call(PAYLOAD),
                "direct sdk": lambda: s_direct(PAYLOAD),
                "kernel+sdk": lambda: s_call(PAYLOAD),
            }, samples)
        finally:
            unload(ps)
    return {"python": sys.version.split()[0], "platform": platform.platform(), "machine": platform.machine(),
            "busbar": __version__, "samples_per_series": samples, "results": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=200_000, help="timed calls per series (default 200000)")
    parser.add_argument("--check", action="store_true", help="exit 1 unless kernel p50 <= 5 us and p99 <= 20 us")
    args = parser.parse_args(argv)
    report = run(args.samples)
    print(f"busbar {report['busbar']}, Python {report['python']}, {report['platform']}, "
          f"{report['samples_per_series']} samples per series")
    print(f"{'series':22} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8} {'p99.9 us':>9} {'mean us':>8}")
    for name, r in report["results"].items():
        print(f"{name:22} {r['p50_us']:8.2f} {r['p90_us']:8.2f} {r['p99_us']:8.2f} {r['p999_us']:9.2f} "
              f"{r['mean_us']:8.2f}")
    write_result("plugin_call.json", report)
    kernel = report["results"]["kernel"]
    ok = kernel["p50_us"] <= 5.0 and kernel["p99_us"] <= 20.0
    print(f"target kernel p50 <= 5 us, p99 <= 20 us: {'met' if ok else 'MISSED'}")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
