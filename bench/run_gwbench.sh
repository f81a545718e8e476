#!/usr/bin/env bash
# Gateway overhead benchmark: Busbar side by side with the LiteLLM proxy, in one session.
#
#   bench/run_gwbench.sh                 full matrix, workers=1 (~30 min on 2 cores)
#   bench/run_gwbench.sh --quick         the same cells, 3 s x 1 rep (~8 min): a smoke run, noisy figures
#   bench/run_gwbench.sh --workers 2     both gateways with 2 worker processes (busbar --workers 2, SQLite store)
#   bench/run_gwbench.sh --workers "1 2" both worker counts, one after the other
#   bench/run_gwbench.sh --only busbar   skip LiteLLM (its numbers then come from no run at all)
#   bench/run_gwbench.sh --report DIR    re-print the tables of an earlier run (bench/results/<stamp>)
#   bench/run_gwbench.sh ... -- ARGS     extra flags for the gwbench harness's compare.py (both targets)
#
# Drives the gwbench harness (directory $GWBENCH; mock upstream, wrk load, LiteLLM set-up): for each worker
# count it runs compare.sh for LiteLLM and then for Busbar against the same mock, with the same cells,
# and prints sidebyside.py plus a Busbar-vs-LiteLLM table with the issue's targets checked. Every venv
# goes to .venvs/ and every result to bench/results/<stamp>/ (both git-ignored). A benchmark, not a
# test: it prints figures and exits 0 unless the harness itself broke.
#
# Cells (the issue's matrix): mock delay 0 and 50 ms x {JSON, SSE} x concurrency {1, 16, 64}, plus the
# harness's streaming time-to-first-token probe at c=1. Ports: gateway 14100, mock 18180 (BENCH_GW_PORT,
# BENCH_MOCK_PORT), away from the harness defaults that other work in the tree may use.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
GWBENCH="${GWBENCH:-$(cd "$ROOT/../shared/gwbench" 2>/dev/null && pwd || true)}"
export GWBENCH_ROOT="$ROOT" GWBENCH_VENVS="$ROOT/.venvs" GWBENCH_RESULTS="$ROOT/bench/results"

quick=0 only="" workers="1" report="" extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --only) only="$2"; shift ;;
    --workers) workers="$2"; shift ;;
    --report) report="$2"; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "run_gwbench.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

report() {  # report DIR: sidebyside.py per worker count, then the Busbar-vs-LiteLLM table
  local dir="$1" w
  [[ -f "$dir/tree.txt" ]] && sed 's/^/- /' "$dir/tree.txt"
  for w in $(ls "$dir" | sed -n 's/^busbar-w\([0-9]*\)$/\1/p' | sort -n); do
    local files=()
    [[ -f "$dir/litellm-w$w/results.json" ]] && files+=("$dir/litellm-w$w/results.json")
    [[ -f "$dir/busbar-w$w/results.json" ]] && files+=("$dir/busbar-w$w/results.json")
    echo
    echo "## workers=$w: sidebyside.py"
    echo
    if [[ ${#files[@]} -ge 2 ]]; then python3 "$GWBENCH/sidebyside.py" "${files[@]}"; fi
  done
  echo
  python3 - "$dir" <<'PY'
import json, os, sys

d = sys.argv[1]
def load(name):
    p = os.path.join(d, name, "results.json")
    return json.load(open(p)) if os.path.exists(p) else None

def f(x, nd=1):
    return "-" if x is None else f"{x:.{nd}f}"

def cpu_ms_per_req(res, delay, mode, conc):
    rs = [r for r in res["runs"] if r["target"] == "gateway" and r["delay_ms"] == delay
          and r["mode"] == mode and r["concurrency"] == conc]
    req = sum(r["requests"] for r in rs)
    return sum(r["gw_cpu_s"] for r in rs) / req * 1000 if req else None

ws = sorted(int(n.split("-w")[1]) for n in os.listdir(d) if n.startswith("busbar-w"))
for w in ws:
    bb, ll = load(f"busbar-w{w}"), load(f"litellm-w{w}")
    if bb is None:
        continue
    m = bb["meta"]
    print(f"## Busbar vs LiteLLM, workers={w} ({m['duration_s']} s x {m['reps']} reps per cell, medians; "
          f"py-loop calibration busbar run {m['machine']['py_loop_5e6_ms']['median']} ms"
          + (f", litellm run {ll['meta']['machine']['py_loop_5e6_ms']['median']} ms" if ll else "") + ")")
    print()
    print("| delay | mode | conc | busbar rps | litellm rps | busbar / litellm | busbar +p50 / +p99 ms | "
          "litellm +p50 / +p99 ms | busbar CPU ms/req | litellm CPU ms/req | busbar CPU cores | errors bb/ll |")
    print("|" + "---|" * 12)
    worst_ratio, checks = None, []
    for c in bb["summary"]:
        key = (c["delay_ms"], c["mode"], c["conc"])
        lc = next((x for x in (ll or {"summary": []})["summary"]
                   if (x["delay_ms"], x["mode"], x["conc"]) == key), None)
        ratio = c["g_rps"] / lc["g_rps"] if lc and lc.get("g_rps") else None
        if ratio is not None:
            worst_ratio = ratio if worst_ratio is None else min(worst_ratio, ratio)
        # CPU per request: from every run of the cell (c>1 slightly over-counts: requests cut off at
        # the end of a run cost CPU but are not counted)
        bcpu = cpu_ms_per_req(bb, *key)
        lcpu = cpu_ms_per_req(ll, *key) if ll else None
        print(f"| {key[0]} ms | {'stream' if key[1] == 's' else 'json'} | {key[2]} | {f(c['g_rps'])} | "
              f"{f(lc['g_rps']) if lc else '-'} | {f(ratio, 1) + 'x' if ratio else '-'} | "
              f"{f(c.get('add_p50_ms'), 2)} / {f(c.get('add_p99_ms'), 2)} | "
              f"{(f(lc.get('add_p50_ms'), 2) + ' / ' + f(lc.get('add_p99_ms'), 2)) if lc else '-'} | "
              f"{f(bcpu, 2)} | {f(lcpu, 2)} | {f(c.get('g_cpu_cores'), 2)} | "
              f"{c['g_errors']}/{lc['g_errors'] if lc else '-'} |")
        if key[1] == "ns" and key[2] == 1:
            checks.append((f"added p50 <= 2 ms, json c=1, delay {key[0]} ms", c.get("add_p50_ms"), 2.0))
            checks.append((f"CPU <= 1 ms per non-streaming request, c=1, delay {key[0]} ms",
                           c.get("g_cpu_ms_per_req"), 1.0))
    if bb["ttft"]:
        print()
        print("| streaming TTFT, c=1 | direct p50 | busbar p50 | busbar added | litellm added | "
              "busbar CPU ms/req | litellm CPU ms/req |")
        print("|---|---|---|---|---|---|---|")
        for i in range(0, len(bb["ttft"]) - 1, 2):
            dd, gg = bb["ttft"][i], bb["ttft"][i + 1]
            lg = ld = None
            if ll:
                lt = [t for t in ll["ttft"] if t["delay_ms"] == dd["delay_ms"]]
                ld = next((t for t in lt if t["target"] == "direct"), None)
                lg = next((t for t in lt if t["target"] == "gateway"), None)
            add = lambda g, dr: (None if not g or not dr or g["ttft_p50_ms"] is None or dr["ttft_p50_ms"] is None
                                 else g["ttft_p50_ms"] - dr["ttft_p50_ms"])
            print(f"| mock delay {dd['delay_ms']} ms (n={dd['n']}) | {f(dd['ttft_p50_ms'], 2)} | "
                  f"{f(gg['ttft_p50_ms'], 2)} | {f(add(gg, dd), 2)} | {f(add(lg, ld), 2)} | "
                  f"{f(gg.get('gw_cpu_ms_per_req'), 2)} | {f(lg.get('gw_cpu_ms_per_req') if lg else None, 2)} |")
    print()
    print(f"Targets (workers={w}):")
    for name, val, lim in checks:
        print(f"- {name}: {f(val, 2)} -> {'MET' if val is not None and val <= lim else 'NOT met'}")
    if worst_ratio is not None:
        print(f"- requests/s >= 10x LiteLLM in every cell: worst cell {worst_ratio:.1f}x -> "
              f"{'MET' if worst_ratio >= 10 else 'NOT met'}")
    else:
        print("- requests/s >= 10x LiteLLM: no LiteLLM run with this worker count in this session")
    print()
PY
}

if [[ -n "$report" ]]; then
  report "$report"
  exit 0
fi
[[ -n "$GWBENCH" && -x "$GWBENCH/compare.sh" ]] || { echo "run_gwbench.sh: the gwbench harness was not found (set GWBENCH to its directory)" >&2; exit 2; }
[[ -x .venv/bin/busbar ]] || { echo "run_gwbench.sh: .venv/bin/busbar missing: run scripts/setup first" >&2; exit 2; }

GW_PORT_B="${BENCH_GW_PORT:-14100}"
MOCK_PORT_B="${BENCH_MOCK_PORT:-18180}"
common=(--gw-port "$GW_PORT_B" --mock-port "$MOCK_PORT_B" --delays "0 50"
        --cells "ns:1,ns:16,ns:64,s:1,s:16,s:64"
        --start-timeout 600)   # LiteLLM with 2 workers took > 180 s to get healthy on a loaded machine
if [[ $quick == 1 ]]; then
  common+=(--duration 3 --reps 1 --ttft-n 10 --warmup 1 --import-reps 1)
else
  common+=(--duration 8 --reps 3 --ttft-n 30 --warmup 2 --import-reps 3)
fi

# `busbar --workers N` (N > 1) needs a shared store: bench/gwbench-config-sqlite.yaml. BENCH_BUSBAR_CONFIG
# overrides the config for every worker count (e.g. the SQLite one for 1 too, to compare like with like).
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
out="bench/results/$stamp"
mkdir -p "$out"
# what was measured: busbar runs from the working tree (editable install), which may hold uncommitted edits
{ echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "uncommitted files under kernel/: $(git status --porcelain -- kernel 2>/dev/null | wc -l)"
  echo "started $(date -u +%FT%TZ), loadavg $(cut -d' ' -f1-3 /proc/loadavg)"; } > "$out/tree.txt"
export MOCK_UPSTREAM_KEY=sk-mock-upstream      # busbar's upstream credential (the mock ignores it)
bb_version=".venv/bin/python -c \"import importlib.metadata as m; print('busbar', m.version('busbar') + ', uvicorn', m.version('uvicorn') + ', httpx', m.version('httpx') + ', aiohttp', m.version('aiohttp') + ', uvloop', m.version('uvloop') + ', orjson', m.version('orjson'))\""
rc=0
for w in $workers; do
  if [[ -z "$only" || "$only" == litellm ]]; then
    echo "=== LiteLLM, workers=$w -> $out/litellm-w$w"
    "$GWBENCH/compare.sh" --target litellm --workers "$w" "${common[@]}" --out "$out/litellm-w$w" \
        ${extra[@]+"${extra[@]}"} || rc=$?
  fi
  if [[ -z "$only" || "$only" == busbar ]]; then
    cfg="${BENCH_BUSBAR_CONFIG:-$([[ $w == 1 ]] && echo bench/gwbench-config.yaml || echo bench/gwbench-config-sqlite.yaml)}"
    start="exec .venv/bin/busbar --config $cfg --workers $w --log-level warn"
    echo "=== Busbar, workers=$w -> $out/busbar-w$w"
    "$GWBENCH/compare.sh" --target busbar --workers "$w" "${common[@]}" --out "$out/busbar-w$w" \
        --start "$start" --url "http://127.0.0.1:$GW_PORT_B" --health /healthz \
        --version-cmd "$bb_version" \
        --import-cmd ".venv/bin/python -c 'import busbar.proxy.gateway, busbar.server.app'" \
        ${extra[@]+"${extra[@]}"} || rc=$?
  fi
done
report "$out" | tee "$out/report.md"
echo
echo "results: $out (report.md, */summary.md, */results.json)"
exit $rc
