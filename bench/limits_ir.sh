#!/bin/bash
# Instructions per request added by group admission (see bench/limits_ir.py).
# usage: bench/limits_ir.sh [N] [TREE]   (N requests per phase, default 800; TREE: a source tree to
# measure instead of this one, e.g. an extracted older commit: its kernel/src and sdk/src go first on
# PYTHONPATH). Prints Ir per request for the phases plain, limited, plain, limited, and the added Ir.
set -e
HERE=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-800}
TREE=${2:-$HERE}
D=$(mktemp -d /tmp/busbar-limits-ir.XXXX)
PYTHONPATH=$TREE/kernel/src:$TREE/sdk/src valgrind --tool=callgrind --instr-atstart=no \
  --callgrind-out-file=$D/cg.out.%p "$HERE/.venv/bin/python" "$HERE/bench/limits_ir.py" "$D" "$N" > "$D/log" 2>&1 &
VG=$!
for tag in 1 2 3 4 5; do
  while [ ! -e "$D/ready$tag" ]; do
    sleep 0.2
    kill -0 $VG 2>/dev/null || { cat "$D/log"; exit 1; }
  done
  PID=$(pgrep -f "limits_ir.py $D" | head -1)
  if [ $tag = 1 ]; then callgrind_control -i on "$PID" > /dev/null; callgrind_control -z "$PID" > /dev/null
  else callgrind_control -d "$PID" > /dev/null; fi
  touch "$D/go$tag"
done
wait $VG
declare -a IR
for i in 1 2 3 4; do
  f=$(ls "$D"/cg.out.*.$i)
  IR[$i]=$(( $(grep -m1 "^summary:\|^totals:" "$f" | awk '{print $2}') / N ))
done
echo "Ir per request: plain ${IR[1]} limited ${IR[2]} plain ${IR[3]} limited ${IR[4]}"
echo "added by admission: $(( IR[2] - IR[1] )) and $(( IR[4] - IR[3] )) Ir per request"
