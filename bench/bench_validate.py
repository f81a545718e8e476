"""`busbar --validate` on the full annotated example config: wall time per run, and where it goes.

Usage::

    .venv/bin/python bench/bench_validate.py [--runs 30] [--json OUT.json]

The config is ``tests/data/config_corpus/valid/001-full-annotated-example.yaml`` (the full
annotated example plus ``plugins: { enabled: true }``, which its sqlite store needs), written to a temp dir; the
env vars it names are set. Each round runs, back to back, ``python -c pass`` (the interpreter floor) and
``busbar --validate`` as separate processes, so load drift hits both alike. Bytecode is cached (in the
temp dir, ``PYTHONPYCACHEPREFIX``) as it is in a deployed install; the warm-up runs fill the cache. Per run: wall time
(``time.perf_counter`` around the process) and the child's CPU time (user + sys, ``os.wait4``).
A last child process times the phases in-process (imports, then ``load_config``), CPU and wall.

A benchmark, not a test: it prints figures and never fails. Results: BENCHMARKS.md, "Config validation
(issue 3)". Source: the issue's figure ("finishes in under 300 ms wall on this machine").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CORPUS = ROOT / "tests" / "data" / "config_corpus" / "valid" / "001-full-annotated-example.yaml"
ENV = {"BUSBAR_ADMIN_TOKEN": "bench-admin", "ANTHROPIC_KEY": "sk-ant", "OPENAI_KEY": "sk-oai", "GEMINI_KEY": "g"}
TARGET_MS = 300.0

PHASES = r"""
import json, os, sys, time
from pathlib import Path
out = []
w, c = time.perf_counter(), time.process_time()
def mark(name):
    global w, c
    w2, c2 = time.perf_counter(), time.process_time()
    out.append((name, (w2 - w) * 1e3, (c2 - c) * 1e3))
    w, c = w2, c2
import pydantic; mark("import pydantic")
import yaml; mark("import yaml")
import busbar_sdk.versions; mark("import busbar_sdk.versions (via config.schema_plugins)")
import busbar.config.schema; mark("import busbar.config.schema (build the models)")
import busbar.config.load; mark("import busbar.config.load (+ interpolate)")
import busbar_sdk.ssrf; mark("import busbar_sdk.ssrf (the SSRF policy, + httpx)")
from busbar.config import validate_auth, validate_groups, validate_hooks, validate_ops, validate_pools, validate_providers
mark("import validate_* modules")
busbar.config.load.load_config(Path(sys.argv[1]), None); mark("load_config: read, interpolate, parse, type, validate")
print(json.dumps(out))
"""


def write_config(directory: Path) -> Path:
    text = CORPUS.read_text("utf-8")
    body = "\n".join(line for line in text.split("\n") if not line.startswith("#| ") and line != "---")
    path = directory / "config.yaml"
    path.write_text(body, "utf-8")
    return path


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall ms, child CPU ms, exit status) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - start) * 1e3
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, (usage.ru_utime + usage.ru_stime) * 1e3, proc.returncode


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # A deployed install has compiled bytecode; this environment may set PYTHONDONTWRITEBYTECODE,
        # which recompiles every kernel/sdk module in every process. Cache it outside the tree.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(ENV, PYTHONPYCACHEPREFIX=str(Path(tmp) / "pycache"))
        cfg = write_config(Path(tmp))
        wall, cpu, floor_wall, floor_cpu = [], [], [], []
        for _ in range(3):  # warm the page cache
            timed([str(BIN / "busbar"), "--validate", "--config", str(cfg)], env)
        for _ in range(args.runs):
            w, c, _ = timed([sys.executable, "-c", "pass"], env)
            floor_wall.append(w)
            floor_cpu.append(c)
            w, c, rc = timed([str(BIN / "busbar"), "--validate", "--config", str(cfg)], env)
            if rc != 0:
                print(f"busbar --validate exited {rc}", file=sys.stderr)
                return 1
            wall.append(w)
            cpu.append(c)
        phases = json.loads(subprocess.run([sys.executable, "-c", PHASES, str(cfg)], env=env, check=True,
                                           capture_output=True, text=True).stdout)
    load = os.getloadavg()
    rows = [("busbar --validate", wall, cpu), ("python -c pass (floor)", floor_wall, floor_cpu)]
    print(f"runs: {args.runs}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs")
    print("| process | wall min ms | wall p50 ms | wall p90 ms | CPU p50 ms |")
    print("|---|---:|---:|---:|---:|")
    for name, w, c in rows:
        print(f"| {name} | {min(w):.0f} | {statistics.median(w):.0f} | {pct(w, 0.9):.0f} | "
              f"{statistics.median(c):.0f} |")
    verdict = "met" if statistics.median(wall) < TARGET_MS else "NOT met"
    print(f"\ntarget: p50 wall < {TARGET_MS:.0f} ms: {verdict}\n")
    print("| phase (one process) | wall ms | CPU ms |")
    print("|---|---:|---:|")
    for name, w, c in phases:
        print(f"| {name} | {w:.1f} | {c:.1f} |")
    if args.json:
        args.json.write_text(json.dumps({"wall_ms": wall, "cpu_ms": cpu, "floor_wall_ms": floor_wall,
                                         "floor_cpu_ms": floor_cpu, "phases": phases, "loadavg": load}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
