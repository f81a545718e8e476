"""Cost of checking that a 2xx looks like a success (issue 11 item 7) on the hot path.

A same-protocol non-stream hop used to relay the upstream bytes unparsed; it now parses the body
once (``proxy/success.py`` ``json_verdict``: content type, JSON object, no ``error``, the protocol's
envelope key) and reads it through the capped reader. Two figures:

1. in-process: ``json_verdict`` alone on each protocol's shared capture of a non-stream answer and
   on a 100 KB answer, p50 µs of thread CPU time;
2. end to end: busbar process CPU (utime + stime from /proc) per request, sequential requests
   (c=1, keep-alive) through a one-member pool whose lane is same-protocol (OpenAI -> OpenAI, the
   body relayed byte for byte), for each ``--bin`` given (e.g. a checkout before the change and
   this one), interleaved ``--reps`` times; medians.

Usage: .venv/bin/python bench/bench_success_check.py [--n 3000] [--reps 3] [--bin PATH ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from busbar.proxy.success import json_verdict
from busbar_mock_provider.fixtures import default_fixtures_dir
from busbar_mock_provider.process import MockProcess

from tests.support import gateway as support
from tests.support.gateway import BusbarProcess

CAPTURES = {
    "openai": "openai-chat/text-basic.response.json",
    "anthropic": "anthropic/text-basic.response.json",
    "responses": "openai-responses/text-basic.response.json",
    "gemini": "gemini/text-basic.response.json",
    "bedrock": "bedrock/converse-text.response.json",
    "cohere": "cohere/chat-text.response.json",
}
CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
models:
  gpt-4o: { provider: oa }
pools:
  p: { members: [ { model: gpt-4o } ] }
"""
HEADERS = {"content-type": "application/json"}


def in_process(n: int) -> None:
    root = default_fixtures_dir()
    big = b'{"id":"x","choices":[{"message":{"content":"' + b"a" * 100_000 + b'"}}]}'
    cases = [(p, (root / rel).read_bytes()) for p, rel in CAPTURES.items() if (root / rel).exists()]
    cases.append(("openai (100 KB)", big))
    print("| answer | bytes | json_verdict p50 µs |\n|---|---:|---:|")
    for name, body in cases:
        proto = name.split(" ")[0]
        samples = []
        for _ in range(n):
            t0 = time.thread_time_ns()
            json_verdict(proto, 200, HEADERS, body)
            samples.append(time.thread_time_ns() - t0)
        print(f"| {name} | {len(body)} | {statistics.median(samples) / 1000:.2f} |")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def end_to_end(bins: list[str], n: int, reps: int) -> None:
    body = {"model": "p", "messages": [{"role": "user", "content": "hello there"}]}
    results: dict[str, list[float]] = {b: [] for b in bins}
    with MockProcess() as mock:
        for _ in range(reps):
            for exe in bins:
                gw = BusbarProcess(CONFIG.replace("MOCK", mock.url), Path(tempfile.mkdtemp()),
                                   env={"T_OPENAI_KEY": "sk-test-openai"})
                support.BIN = Path(exe).parent          # which build's ``busbar`` to start
                gw.start()
                try:
                    with httpx.Client(base_url=gw.url, timeout=10) as c:
                        for _ in range(300):
                            c.post("/v1/chat/completions", json=body)
                        t0 = _cpu_s(gw.proc.pid)
                        for _ in range(n):
                            assert c.post("/v1/chat/completions", json=body).status_code == 200
                        results[exe].append((_cpu_s(gw.proc.pid) - t0) / n * 1e6)
                finally:
                    gw.stop()
    print("\n| busbar | CPU µs/request (median) | runs |\n|---|---:|---|")
    for exe, runs in results.items():
        print(f"| {exe} | {statistics.median(runs):.0f} | {', '.join(f'{r:.0f}' for r in runs)} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bin", action="append", default=[])
    args = ap.parse_args()
    in_process(args.n)
    end_to_end(args.bin or [str(Path(sys.executable).parent / "busbar")], args.n, args.reps)


if __name__ == "__main__":
    main()
