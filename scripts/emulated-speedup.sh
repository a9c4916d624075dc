#!/usr/bin/env bash
# Issue 10's measured check: on a machine with CPU 1 slowed by duty-cycle emulation (duty 0.5), a
# two-thread OpenMP-like program with sequential phases, plain launch vs `hetsched run --policy P`,
# RUNS runs each, interleaved; prints every wall time and the median speedup (plain / policy).
# Needs root (SCHED_FIFO). Usage: scripts/emulated-speedup.sh [POLICY] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
policy=${1:-amps}
runs=${2:-5}
cargo build --release -q -p hetsched-cli
H=target/release/hetsched
W=target/release/hetsched-work
prog=("$W" omp --threads 2 --phases 10 --parallel-work 20 --serial-work 40)
wall() { python3 -c 'import json,sys; print([json.loads(l)["wall_s"] for l in sys.stdin if l.startswith("{\"program\"")][-1])'; }
plain=(); managed=()
for i in $(seq "$runs"); do
    plain+=("$("$H" emulate --slow 1 --duty 0.5 -- "${prog[@]}" 2>/dev/null | wall)")
    managed+=("$("$H" emulate --slow 1 --duty 0.5 -- "$H" run --policy "$policy" -- "${prog[@]}" 2>/dev/null | wall)")
done
python3 - "$policy" "${plain[*]}" "${managed[*]}" <<'PY'
import statistics, sys
policy, plain, managed = sys.argv[1], list(map(float, sys.argv[2].split())), list(map(float, sys.argv[3].split()))
mp, mm = statistics.median(plain), statistics.median(managed)
print(f"plain launch      : {' '.join(f'{x:.3f}' for x in plain)}  median {mp:.3f} s")
print(f"run --policy {policy:5}: {' '.join(f'{x:.3f}' for x in managed)}  median {mm:.3f} s")
print(f"median speedup {mp / mm:.3f}x")
PY
