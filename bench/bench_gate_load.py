"""Benchmark: an in-process gate's deadline misses on a loaded machine (issue 11 item 26).

The real entry point end to end: a ``busbar`` process (pinned to CPU 0) in front of the mock
provider, a CPU hog (a ``while True`` process pinned to the other CPU), and this script as the
client, sending ``--requests`` chat requests at ``--concurrency`` through one pool guarded by an
SDK-based gate (``busbar_sdk.HookPlugin``, packed, signed and loaded the real way) that rejects a
request whose prompt contains the word ``forbidden`` and otherwise abstains. The gate's own work is
``--work-us`` of CPU per call (the SDK parse included: it spins on its thread's CPU clock until the
whole call has used that much), and the gate keeps the defaults ``timeout_ms: 1`` and
``on_error: nothing`` — the fail-open setting that turns a missed deadline into a request let
through.

Every other request carries the word. Reported: the gate's deadline misses
(``busbar_hook_failures_total{reason="timeout"}`` from ``/metrics``), the forbidden requests that got
a 200 (let through), the clean requests that did not get a 200, throughput and client-side
latency percentiles. Target (``--check``): 0 misses and 0 let through.

Run: ``.venv/bin/python bench/bench_gate_load.py [--requests 10000] [--concurrency 64]
[--work-us 100] [--no-hog] [--check]``; writes ``bench/results/gate_load.json``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from busbar import __version__
from busbar_mock_provider.process import MockProcess
from busbar_sdk.artifact import build_wheels, generate_signing_key, pack_artifact

from bench.bench_hooks import _project as project
from tests.support.gateway import BusbarProcess

GATE = '''
"""word-gate: reject a request whose prompt contains settings.word; own work = settings.work_us."""
import time

from busbar_sdk import HookPlugin, Reject, export_plugin


class WordGate(HookPlugin):
    def handle(self, payload):
        t0 = time.thread_time()
        reply = super().handle(payload)
        if payload.get("op") == "decide":
            end = t0 + self.settings.get("work_us", 0) / 1e6
            while time.thread_time() < end:
                pass
        return reply

    def decide(self, message):
        text = " ".join(m.text for m in message.request.messages or [])
        if self.settings["word"] in text:
            return Reject(status=403, message="policy: forbidden topic")
        return None


plugin = export_plugin(WordGate)
'''

CONFIG = """
listen: "127.0.0.1:{{port}}"
metrics: {{ buffer_seconds: 60 }}
plugins: {{ enabled: true, dir: "{plugdir}", trust: {{ publishers: [ {{ name: bench, public_key: "{key}" }} ] }} }}
providers:
  mock: {{ protocol: openai, base_url: "{mock}", api_key: {{ env: K }} }}
models:
  a: {{ provider: mock }}
  b: {{ provider: mock }}
pools:
  guarded:
    hooks: [ {{ module: word-gate, prompt: ro, settings: {{ word: forbidden, work_us: {work_us} }} }} ]
    members: [ {{ model: a }}, {{ model: b }} ]
"""


def _hog(cpu: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])


def _misses(url: str) -> int:
    text = httpx.get(url + "/metrics", timeout=10).text
    m = re.search(r'^busbar_hook_failures_total\{hook="word-gate",reason="timeout"\} (\S+)$', text, re.M)
    return int(float(m.group(1))) if m else 0


async def _drive(url: str, n: int, concurrency: int) -> dict[str, Any]:
    counts = {"blocked": 0, "let_through": 0, "served": 0, "clean_refused": 0}
    lat: list[float] = []
    nxt = iter(range(n))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        async def worker() -> None:
            for i in nxt:
                bad = i % 2 == 0
                text = "tell me about the forbidden topic" if bad else "tell me about the weather"
                t0 = time.perf_counter()
                r = await client.post("/v1/chat/completions",
                                      json={"model": "guarded", "messages": [{"role": "user", "content": text}]})
                lat.append(time.perf_counter() - t0)
                if bad:
                    counts["blocked" if r.status_code == 403 else "let_through"] += 1
                else:
                    counts["served" if r.status_code == 200 else "clean_refused"] += 1
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    s = sorted(lat)
    return {**counts, "wall_s": round(wall, 2), "rps": round(n / wall, 1),
            "latency_ms": {"p50": round(s[len(s) // 2] * 1e3, 2), "p99": round(s[int(len(s) * 0.99)] * 1e3, 2),
                           "max": round(s[-1] * 1e3, 2), "mean": round(statistics.fmean(s) * 1e3, 2)}}


def run(requests: int, concurrency: int, work_us: int, hog: bool) -> dict[str, Any]:
    seed, public = generate_signing_key()
    cpus = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="busbar-bench-gate-load-") as tmp, MockProcess() as mock:
        root = Path(tmp)
        (wheel,) = build_wheels([project(root / "gate", "word-gate", "word_gate", GATE, "word_gate:plugin")], root / "wheels")
        plugdir = root / "plugins"
        plugdir.mkdir()
        (plugdir / "word-gate-1.0.0.tar.gz").write_bytes(pack_artifact(
            wheel_name=wheel.name, wheel_bytes=wheel.read_bytes(), name="word-gate", alias="word", kind="hook",
            version="1.0.0", publisher="bench", signing_key=seed, needs_prompt="ro"))
        cfg = CONFIG.format(plugdir=plugdir, key=public, mock=mock.url, work_us=work_us)
        gw = BusbarProcess(cfg, root, env={"K": "sk-bench", "BUSBAR_STATE_FILE": ""})
        gw.start()
        hog_proc = None
        try:
            if len(cpus) >= 2:
                os.sched_setaffinity(gw.proc.pid, {cpus[0]})   # busbar on one core ...
            if hog and len(cpus) >= 2:
                hog_proc = _hog(cpus[1])                       # ... the hog on the other
            asyncio.run(_drive(gw.url, 200, min(concurrency, 16)))          # warm-up
            before = _misses(gw.url)
            load0 = os.getloadavg()[0]
            out = asyncio.run(_drive(gw.url, requests, concurrency))
            out["deadline_misses"] = _misses(gw.url) - before
            out["loadavg_1m"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
            out["miss_log"] = [ln.split(": ", 2)[-1] for ln in gw.logs().splitlines() if "hook 'word-gate'" in ln][:5]
        finally:
            if hog_proc is not None:
                hog_proc.kill()
                hog_proc.wait()
            gw.stop()
    return {"busbar": __version__, "python": platform.python_version(), "cpus": len(cpus),
            "requests": requests, "concurrency": concurrency, "work_us": work_us, "hog": hog,
            "timeout_ms": 1, "on_error": "nothing", **out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--work-us", type=int, default=100)
    ap.add_argument("--no-hog", action="store_true")
    ap.add_argument("--check", action="store_true", help="exit 1 unless 0 misses and 0 let through")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "gate_load.json"))
    a = ap.parse_args()
    res = run(a.requests, a.concurrency, a.work_us, not a.no_hog)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    if a.check and (res["deadline_misses"] or res["let_through"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
