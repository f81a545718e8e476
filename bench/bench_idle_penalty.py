"""Control measurement for "CPU per request" at low request rates: how much more CPU the same Python
work costs on this machine when the process sleeps between units (as a gateway does at c=1 behind a
50 ms upstream) than when it runs back to back.

Not a test and not Busbar code: a fixed unit of generic Python work (JSON encode/decode, dict and
string building, roughly one gateway request's worth of interpreter work) is timed with the process's
own CPU clock (user + system, ``resource.getrusage``), with no gap and with a gap of 50 ms between
units. The ratio is the machine's cold-cache / idle-wake penalty; `BENCHMARKS.md` (issue 2) uses it
to read the gateway's CPU per request in the 50 ms, c=1 cells.

    .venv/bin/python bench/bench_idle_penalty.py [--gap-ms 50] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import resource
import time


def cpu_s() -> float:
    """The process's CPU time so far (user + system), seconds."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def unit() -> None:
    """One unit of generic interpreter work (~0.3 ms of CPU on a 2-vCPU EPYC VM when warm)."""
    doc = {"model": "m", "messages": [{"role": "user", "content": "hello there " * 5}] * 3, "max_tokens": 16}
    for _ in range(40):
        text = json.dumps(doc)
        json.loads(text)
        {k: str(v) for k, v in doc.items()}


def cpu_per_unit_ms(gap_s: float, n: int) -> float:
    """Mean CPU milliseconds per unit with ``gap_s`` seconds of sleep after each of ``n`` units."""
    for _ in range(20):
        unit()
    start = cpu_s()
    for _ in range(n):
        unit()
        if gap_s:
            time.sleep(gap_s)
    return (cpu_s() - start) / n * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gap-ms", type=float, default=50.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for r in range(args.rounds):
        warm = cpu_per_unit_ms(0.0, 3000)
        cold = cpu_per_unit_ms(args.gap_ms / 1000, 150)
        print(f"round {r + 1}: back to back {warm:.3f} ms CPU/unit; after {args.gap_ms:g} ms idle "
              f"{cold:.3f} ms CPU/unit; penalty x{cold / warm:.2f}")


if __name__ == "__main__":
    main()
