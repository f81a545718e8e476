"""The operational switches through the gwbench harness: HTTPS vs plain HTTP, the access log at info vs
off, OTLP traces on vs off (issue 15), all in one run against the harness's mock provider with the
harness's wrk load (``load.py``).

Why not ``compare.sh``: the harness's own readiness, correctness and TTFT probes speak plain HTTP
(``http.client.HTTPConnection``), so it cannot drive a gateway that serves HTTPS. This script takes the
harness's pieces that can (its ``mock_upstream.py``, its ``load.py`` wrk wrapper, wrk itself speaks
TLS, and its request body ``compare.make_body``) and runs them side by side, as compare.sh does:

- one harness mock (``mock_upstream.py``, delay 0: ``/d0``), reached directly (the reference);
- four busbar processes over it (``bench_ops``): ``plain`` (HTTP, ``--log-level warn``), ``https``
  (``tls:``, a CA and server certificate made for the run; wrk keeps its connections alive, so the
  handshake is paid once per connection and the figure is the per-request TLS record cost),
  ``access`` (``--log-level info``: one access line per request, to a file) and ``otlp``
  (``observability.otlp_url`` to a loopback OTLP/HTTP sink);
- rounds: every target once per round for ``--duration`` s at each concurrency, in a shuffled order
  per round (no target always follows another); medians over ``--reps`` rounds.

Busbar's added p50 = p50(target) - p50(direct) in the same round; each switch's cost = its added p50 -
plain's, also as a percentage of plain's added p50 (the issue's target: <= 10 %); the paired lines
take the median over rounds of (series - plain) within each round instead (p50 and CPU), which
cancels the load drift between rounds. CPU ms per request is
the busbar process's own CPU time (``/proc/<pid>/stat``) over the requests of its runs; the share
outside the main thread (``/proc/<pid>/task/*/stat``; with OTLP, the export thread) is printed too.

Usage: .venv/bin/python bench/bench_ops_gwbench.py --gwbench DIR [--duration 3 --reps 3 --conc 1,16]
[--series plain,otlp] [--ref-src DIR]
(DIR: the gwbench harness; default $GWBENCH). Needs wrk (Debian package ``wrk``).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_ops import BASE, _Sink, _start

from tests.support.certs import make_ca
from tests.support.gateway import free_port

CLK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def _thread_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid``'s threads other than its main one (for a busbar
    with ``otlp_url``: the exporter's thread, plus any executor thread that ran)."""
    total = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        if int(tid) != pid:
            try:
                fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rpartition(")")[2].split()
            except FileNotFoundError:
                continue
            total += (int(fields[11]) + int(fields[12])) / CLK
    return total


def _harness(path: str) -> tuple[Any, Any]:
    """The harness's ``load`` and ``compare`` modules from directory ``path``."""
    if not (Path(path) / "load.py").is_file():
        raise SystemExit(f"bench_ops_gwbench: {path} is not the gwbench harness (no load.py); pass --gwbench DIR")
    os.environ.setdefault("GWBENCH_ROOT", str(ROOT))
    sys.path.insert(0, path)
    return importlib.import_module("load"), importlib.import_module("compare")


def _start_mock(gwbench: str, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    venv_py = Path(os.environ.get("GWBENCH_VENVS", ROOT / ".venvs")) / "gwbench" / "bin" / "python"
    py = str(venv_py) if venv_py.exists() else sys.executable
    log = open(tmp / "mock.log", "wb")  # noqa: SIM115 - the child writes it
    proc = subprocess.Popen([py, str(Path(gwbench) / "mock_upstream.py"), "--port", str(port)], stdout=log,
                            stderr=log, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(base + "/health", timeout=0.5).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"mock did not start: {(tmp / 'mock.log').read_text()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gwbench", default=os.environ.get("GWBENCH"), help="the gwbench harness directory")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per wrk run")
    ap.add_argument("--reps", type=int, default=3, help="rounds (each runs every target once per concurrency)")
    ap.add_argument("--conc", default="1,16", help="concurrencies, comma-separated")
    ap.add_argument("--series", default="plain,https,access,otlp",
                    help="busbar series to run, comma-separated (plain is the reference and always runs)")
    ap.add_argument("--ref-src", help="also run ``otlp-ref``: the otlp series with busbar imported from this "
                    "kernel/src (another commit's, e.g. `git archive <commit> kernel/src | tar -x -C DIR`)")
    ap.add_argument("--json", help="write the raw runs here")
    a = ap.parse_args()
    if not a.gwbench:
        raise SystemExit("bench_ops_gwbench: pass --gwbench DIR (or set GWBENCH)")
    load, compare = _harness(str(Path(a.gwbench).resolve()))
    concs = [int(c) for c in a.conc.split(",")]
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    runs: list[dict[str, Any]] = []
    loadavg = [Path("/proc/loadavg").read_text().split()[:3]]
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        mock, mock_base = _start_mock(a.gwbench, tmp)
        try:
            ca = make_ca(tmp)
            leaf = ca.issue(tmp, "server")
            import ssl
            client_ctx = ssl.create_default_context(cafile=str(ca.cert_path))
            base = BASE.replace("{mock}", mock_base + "/d0").replace("{{", "{").replace("}}", "}")
            variants = {
                "plain": (base, "warn", None),
                "https": (base + f"tls: {{ cert: {{ file: {leaf.cert_path} }}, key: {{ file: {leaf.key_path} }} }}\n",
                          "warn", client_ctx),
                "access": (base, "info", None),
                "otlp": (base + f'observability: {{ otlp_url: "http://127.0.0.1:{sink.server_address[1]}'
                                f'/v1/traces" }}\n', "warn", None),
            }
            if a.ref_src:
                variants["otlp-ref"] = variants["otlp"]
            wanted = {"plain", *a.series.split(","), *(["otlp-ref"] if a.ref_src else [])}
            unknown = wanted - set(variants)
            if unknown:
                raise SystemExit(f"bench_ops_gwbench: unknown --series {', '.join(sorted(unknown))}")
            variants = {k: v for k, v in variants.items() if k in wanted}
            urls = {"direct": mock_base + "/d0/v1/chat/completions"}
            for name, (yaml, level, verify) in variants.items():
                ref = {"PYTHONPATH": str(Path(a.ref_src).resolve())} if name == "otlp-ref" else None
                proc, url = _start(name, yaml, tmp, level, verify, ref)
                procs[name] = proc
                urls[name] = url + "/v1/chat/completions"
            bodies = {"direct": json.dumps(compare.make_body("mock-d0", False)),
                      **{k: json.dumps(compare.make_body("p", False)) for k in variants}}
            for name, url in urls.items():          # warm-up (connections, first-request paths)
                load.run(url, bodies[name], ["Authorization: Bearer sk-x"], 4, 1)
            rng = random.Random(15)
            order = list(urls)
            for rep in range(a.reps):
                for conc in concs:
                    rng.shuffle(order)
                    for name in order:
                        pid = procs[name].pid if name in procs else mock.pid
                        c0, t0 = _cpu_s(pid), _thread_cpu_s(pid)
                        r = load.run(urls[name], bodies[name], ["Authorization: Bearer sk-x"], conc, a.duration)
                        r.update(target=name, conc=conc, rep=rep, cpu_s=_cpu_s(pid) - c0,
                                 threads_cpu_s=_thread_cpu_s(pid) - t0)
                        runs.append(r)
                        print(f"rep {rep} c={conc} {name}: {r['rps']:.0f} rps p50 {r['p50_ms']:.3f} ms "
                              f"errors {r['errors']}", file=sys.stderr)
        finally:
            for p in procs.values():
                p.terminate()
            for p in procs.values():
                p.wait(30)
            mock.terminate()
            mock.wait(30)
            sink.shutdown()
    loadavg.append(Path("/proc/loadavg").read_text().split()[:3])
    if a.json:
        Path(a.json).write_text(json.dumps({"loadavg": loadavg, "runs": runs}, indent=1))
    print(f"load average at start {' '.join(loadavg[0])}, at end {' '.join(loadavg[1])}; "
          f"{a.reps} rounds x {a.duration:g} s per target and concurrency; medians over rounds")
    for conc in concs:
        def cell(name: str, key: str, conc: int = conc) -> list[float]:
            return [r[key] for r in runs if r["target"] == name and r["conc"] == conc]

        def added(name: str, conc: int = conc) -> float:
            per_round = []
            for rep in range(a.reps):
                (t,) = [r for r in runs if r["target"] == name and r["conc"] == conc and r["rep"] == rep]
                (d,) = [r for r in runs if r["target"] == "direct" and r["conc"] == conc and r["rep"] == rep]
                per_round.append(t["p50_ms"] - d["p50_ms"])
            return statistics.median(per_round)

        def paired(name: str, conc: int = conc) -> tuple[float, float]:
            """Median over rounds of (name - plain) in the same round: added p50 ms, CPU ms/req."""
            lat, cpu = [], []
            for rep in range(a.reps):
                (t,) = [r for r in runs if r["target"] == name and r["conc"] == conc and r["rep"] == rep]
                (p,) = [r for r in runs if r["target"] == "plain" and r["conc"] == conc and r["rep"] == rep]
                lat.append(t["p50_ms"] - p["p50_ms"])
                cpu.append(t["cpu_s"] / max(t["requests"], 1) * 1000 - p["cpu_s"] / max(p["requests"], 1) * 1000)
            return statistics.median(lat), statistics.median(cpu)

        print()
        print(f"concurrency {conc}:")
        print()
        print("| series | rps | p50 ms | p99 ms | added p50 ms | switch cost ms | % of plain added p50 | "
              "busbar CPU ms/req | errors |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        plain = added("plain")
        for name in ["direct", *variants]:
            reqs = sum(cell(name, "requests"))
            cpu = sum(cell(name, "cpu_s")) / reqs * 1000 if reqs and name != "direct" else None
            row = [name, f"{statistics.median(cell(name, 'rps')):.0f}", f"{statistics.median(cell(name, 'p50_ms')):.3f}",
                   f"{statistics.median(cell(name, 'p99_ms')):.3f}"]
            if name == "direct":
                row += ["", "", "", "", str(sum(cell(name, "errors")))]
            else:
                add = added(name)
                cost = add - plain
                row += [f"{add:.3f}", "" if name == "plain" else f"{cost:+.3f}",
                        "" if name == "plain" else f"{100 * cost / plain:+.1f} %",
                        f"{cpu:.3f}" if cpu is not None else "", str(sum(cell(name, "errors")))]
            print("| " + " | ".join(row) + " |")
        print()
        print("CPU ms/req outside the main thread (an OTLP series: the export thread): " + ", ".join(
            f"{name} {sum(cell(name, 'threads_cpu_s')) / max(sum(cell(name, 'requests')), 1) * 1000:.3f}"
            for name in variants))
        print()
        print("paired by round (median of name - plain in the same round):")
        for name in variants:
            if name != "plain":
                lat, cpu = paired(name)
                print(f"- {name}: p50 {lat:+.3f} ms ({100 * lat / plain:+.1f} % of plain added p50), "
                      f"CPU {cpu:+.3f} ms/req")
    return 0


if __name__ == "__main__":
    sys.exit(main())
