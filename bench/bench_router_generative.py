"""Benchmark: the AI router's generative step through a real gateway, beside the chat call it makes.

One ``busbar`` process (no plugins: the router runs in this process, from ``plugins/``) in front of
the mock provider, whose model ``r-small`` answers a scripted ``{destinations, confidence,
reason}``. Interleaved per sample:

* **generative decide**: ``AiRouter.decide`` (``engine: generative``, cache off, 5 candidates, a
  2 KiB state) with ``gateway_url`` at that gateway: state, prompt, one Chat Completions call
  through the gateway's model ``r-small``, the answer decoded and thresholded;
* **the same call (reference)**: the very request body the router sends, POSTed by a plain httpx
  client to the same gateway: the floor the router's own work adds to.

Added = p50(decide) - p50(reference). Run: ``.venv/bin/python bench/bench_router_generative.py
[--samples N]``; writes ``bench/results/router_generative.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from busbar_mock_provider.process import MockProcess

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "plugins" / "busbar-ai-router-hook" / "src"))

from bench_hooks import _pct, write_result
from bench_router import _candidates, _payload

from tests.support.gateway import BusbarProcess

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  up: { protocol: openai, base_url: MOCK, api_key: { env: T_KEY } }
models:
  r-small: { provider: up }
pools:
  router-llms: { members: [ { model: r-small } ] }
"""


def main(argv: list[str] | None = None) -> int:
    import busbar_ai_router_hook as ai

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=1000, help="timed decisions (default 1000)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    with MockProcess() as mock, tempfile.TemporaryDirectory() as tmp:
        answer = json.dumps({"destinations": ["code"], "confidence": 0.9, "reason": "source code"})
        mock.script([{"match": {"model": "r-small"}, "times": -1, "response": {"text": answer}}])
        env = {"T_KEY": "k", "BUSBAR_LOG": "error", "BUSBAR_STATE_FILE": ""}
        with BusbarProcess(CONFIG.replace("MOCK", mock.url), Path(tmp), env=env) as gw:
            router = ai.AiRouter({"engine": "generative", "gateway_url": gw.url, "pool": "router-llms",
                                  "model": "r-small", "candidates": _candidates(True), "cache": {"size": 0},
                                  "timeout": 5000})
            state = (("I am working on a data pipeline in Python that reads CSV exports from our billing "
                      "system, normalizes currencies, and loads the result into Postgres. ") * 40)[:2048]
            payload = _payload(state)
            gen = router.c.gen
            assert gen is not None
            blob = json.dumps({"messages": [{"role": "user", "text": state}]}, ensure_ascii=False, separators=(",", ":"))
            body = gen.body("r-small", blob)
            out: dict[str, list[int]] = {"generative decide": [], "the same call (reference)": []}
            with httpx.Client(timeout=10) as client:
                for i in range(args.samples + 50):
                    t0 = time.perf_counter_ns()
                    reply = router.decide(payload)
                    t1 = time.perf_counter_ns()
                    r = client.post(gw.url + "/v1/chat/completions", json=body)
                    t2 = time.perf_counter_ns()
                    assert reply["explain"]["served_by"] == "model" and r.status_code == 200, (reply, r.text)
                    if i >= 50:
                        out["generative decide"].append(t1 - t0)
                        out["the same call (reference)"].append(t2 - t1)
            mock.clear()
    results = {k: _pct(v) for k, v in out.items()}
    added = results["generative decide"]["p50_us"] - results["the same call (reference)"]["p50_us"]
    report: dict[str, Any] = {"samples": args.samples, "state_bytes": len(state.encode()), "candidates": 5,
                              "results": results, "added_p50_us": round(added, 1),
                              "load_average_before": load_before, "load_average_after": os.getloadavg()}
    print(f"load average {', '.join(f'{x:.2f}' for x in load_before)}; {args.samples} decisions, "
          f"{report['state_bytes']} B state, 5 candidates, through busbar + the mock:")
    for k, v in results.items():
        print(f"  {k:28} p50 {v['p50_us'] / 1000:7.3f} ms  p99 {v['p99_us'] / 1000:7.3f} ms")
    print(f"  added by the router: p50 {added / 1000:.3f} ms")
    write_result("router_generative.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
