"""What the operational switches cost: HTTPS vs plain HTTP, the access log at info vs off, OTLP traces
on vs off (issue 15), all in the same run against the same mock provider.

Starts one mock provider and four busbar processes on loopback, each with one pool over the mock:

- ``plain``: HTTP, ``--log-level warn`` (no access log), no traces: the reference;
- ``https``: the same over ``tls:`` (a CA and a server certificate made for the run);
- ``access``: plain HTTP with ``--log-level info`` (one access line per request, to a file);
- ``otlp``: plain HTTP with ``observability.otlp_url`` pointing at a loopback OTLP/HTTP sink.

Each round sends one request to the mock directly and one to every gateway (sequential,
concurrency 1, keep-alive clients, rounds interleaved in a shuffled order so load drift and
ordering hit all alike). Busbar's added
latency = p50(gateway) - p50(direct); each switch's cost = its added p50 - plain's added p50, also as a
percentage of plain's added p50 (the issue's target: ≤ 10 %).

Usage: .venv/bin/python bench/bench_ops.py [--n 600]
"""
from __future__ import annotations

import argparse
import os
import random
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from busbar_mock_provider.process import MockProcess

from tests.support.certs import make_ca
from tests.support.gateway import BIN, free_port

BASE = """
listen: "127.0.0.1:{port}"
providers:
  oa: {{ protocol: openai, base_url: "{mock}", api_key: {{ env: T_OPENAI_KEY }} }}
models:
  m: {{ provider: oa }}
pools:
  p: {{ members: [ {{ model: m }} ] }}
"""
BODY = {"model": "p", "messages": [{"role": "user", "content": "hi"}]}


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _start(name: str, yaml: str, tmp: Path, level: str, verify: ssl.SSLContext | None,
           extra_env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(yaml.replace("{port}", str(port)))
    log = open(tmp / f"{name}.log", "wb")  # noqa: SIM115 - the child writes it
    env = {**os.environ, "T_OPENAI_KEY": "sk-x", "BUSBAR_LOG": level, "BUSBAR_STATE_FILE": "", **(extra_env or {})}
    proc = subprocess.Popen([str(BIN / "busbar"), "--config", str(cfg)], env=env, stdout=log, stderr=log,
                            start_new_session=True)
    url = f"{'https' if verify else 'http'}://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/healthz", verify=verify or True, timeout=0.5).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"{name} did not start: {(tmp / f'{name}.log').read_text()}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=600)
    a = ap.parse_args()
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    procs: list[subprocess.Popen] = []
    with MockProcess() as mock, tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        ca = make_ca(tmp)
        leaf = ca.issue(tmp, "server")
        client_ctx = ssl.create_default_context(cafile=str(ca.cert_path))
        base = BASE.replace("{mock}", mock.url).replace("{{", "{").replace("}}", "}")
        variants = {
            "plain": (base, "warn", None),
            "https": (base + f"tls: {{ cert: {{ file: {leaf.cert_path} }}, key: {{ file: {leaf.key_path} }} }}\n",
                      "warn", client_ctx),
            "access": (base, "info", None),
            "otlp": (base + f'observability: {{ otlp_url: "http://127.0.0.1:{sink.server_address[1]}/v1/traces" }}\n',
                     "warn", None),
        }
        urls: dict[str, str] = {}
        clients: dict[str, httpx.Client] = {"direct": httpx.Client(timeout=10, headers={"authorization": "Bearer sk-x"})}
        try:
            for name, (yaml, level, verify) in variants.items():
                proc, url = _start(name, yaml, tmp, level, verify)
                procs.append(proc)
                urls[name] = url
                clients[name] = httpx.Client(timeout=10, verify=verify or True)
            direct_url = mock.url + "/v1/chat/completions"
            samples: dict[str, list[float]] = {k: [] for k in clients}
            rng = random.Random(15)
            order = list(clients)
            for i in range(a.n + 50):
                rng.shuffle(order)                    # no series always follows another
                for name in order:
                    c = clients[name]
                    target = direct_url if name == "direct" else urls[name] + "/v1/chat/completions"
                    body = {**BODY, "model": "m"} if name == "direct" else BODY
                    t0 = time.perf_counter()
                    r = c.post(target, json=body)
                    dt = time.perf_counter() - t0
                    assert r.status_code == 200, (name, r.status_code, r.text)
                    if i >= 50:                       # warm-up
                        samples[name].append(dt * 1000)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(30)
            sink.shutdown()
    p50 = {k: statistics.median(v) for k, v in samples.items()}
    p99 = {k: statistics.quantiles(v, n=100)[98] for k, v in samples.items()}
    added = {k: p50[k] - p50["direct"] for k in variants}
    print(f"n={a.n} sequential requests per series (c=1), interleaved; direct p50 {p50['direct']:.3f} ms")
    print("| series | p50 ms | p99 ms | added p50 ms | switch cost ms | % of plain added p50 |")
    print("|---|---:|---:|---:|---:|---:|")
    for k in variants:
        cost = added[k] - added["plain"]
        pct = "" if k == "plain" else f"{100 * cost / added['plain']:+.1f} %"
        print(f"| {k} | {p50[k]:.3f} | {p99[k]:.3f} | {added[k]:.3f} | {'' if k == 'plain' else f'{cost:+.3f}'} "
              f"| {pct} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
