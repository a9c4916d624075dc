#!/usr/bin/env bash
# The whole signature's cost on a real program's trace: a C program (a matrix walked by rows and
# columns, a hash table probed at random, a linked list chased) traced by valgrind lackey, then
# `hetsched signature` with the set-indexed model and with the binomial approximation (the fully
# associative engine alone), and libCacheSim's LRU at the signature's 11 sizes, one pass each, on
# the same cache-line references. RUNS runs each, interleaved; prints every CPU time and the medians.
# Needs gcc and valgrind; libCacheSim's Python bindings (pip install libcachesim numpy) for its row.
# Usage: scripts/signature-speed.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
cargo build --release -q -p hetsched-cli
H=$PWD/target/release/hetsched
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/mix.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#define N 384
static double a[N][N];
int main(void) {
    size_t tn = (6u << 20) / sizeof(long), ln = (2u << 20) / 64;
    long *table = calloc(tn, sizeof(long)), *list = malloc(ln * 64);
    for (size_t i = 0; i < ln; i++) list[i * 8] = (long)((i * 2654435761u + 1) % ln);
    unsigned x = 12345; double s = 0; long p = 0;
    for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) a[i][j] += i ^ j;
        for (int j = 0; j < N; j += 3) for (int i = 0; i < N; i++) s += a[i][j];
        for (int k = 0; k < 150000; k++) { x = x * 1103515245u + 12345u; table[x % tn] += k; }
        for (int k = 0; k < 100000; k++) p = list[p * 8];
    }
    printf("%f %ld %ld\n", s, p, table[7]);
    return 0;
}
C
gcc -O1 -o "$dir/mix" "$dir/mix.c"
valgrind --tool=lackey --trace-mem=yes --log-file="$dir/mix.lackey" "$dir/mix" > /dev/null
"$H" signature "$dir/mix.lackey" --convert "$dir/mix.hsb" >&2
cpu() { "$H" signature "$dir/mix.hsb" --set-model "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["engine"]["cpu_s"])'; }
lcs=no
if python3 -c 'import libcachesim, numpy' 2> /dev/null; then
    lcs=yes
    # libCacheSim's oracleGeneral records (time, object, size, next access): one a line reference.
    python3 - "$dir/mix.lackey" "$dir/mix.oracle" <<'PY'
import numpy as np, sys
lines = []
for l in open(sys.argv[1]):
    if len(l) > 3 and l[0] == " " and l[1] in "LSM":
        a, s = l[3:].split(",")
        a, s = int(a, 16), int(s)
        lines.extend(range(a >> 6, ((a + max(s, 1) - 1) >> 6) + 1))
rec = np.zeros(len(lines), dtype=[("t", "<u4"), ("id", "<u8"), ("sz", "<u4"), ("nx", "<i8")])
rec["t"], rec["id"], rec["sz"], rec["nx"] = np.arange(len(lines)) // 1000 + 1, lines, 1, -1
rec.tofile(sys.argv[2])
PY
fi
lru() {
    python3 - "$dir/mix.oracle" <<'PY'
import libcachesim as lcs, sys, time
t = time.process_time()
for size in [(16 << 10 << i) // 64 for i in range(11)]:
    lcs.LRU(size).process_trace(lcs.TraceReader(sys.argv[1], lcs.TraceType.ORACLE_GENERAL_TRACE))
print(time.process_time() - t)
PY
}
indexed=(); binomial=(); libcachesim=()
for _ in $(seq "$runs"); do
    indexed+=("$(cpu indexed)")
    binomial+=("$(cpu binomial)")
    if [ "$lcs" = yes ]; then libcachesim+=("$(lru)"); fi
done
python3 - "${indexed[*]}" "${binomial[*]}" "${libcachesim[*]:-}" <<'PY'
import statistics, sys
rows = [("set-indexed (whole signature)", sys.argv[1]), ("binomial (fully associative engine)", sys.argv[2]),
        ("libCacheSim LRU, 11 sizes", sys.argv[3])]
med = {}
for name, xs in rows:
    xs = [float(x) for x in xs.split()]
    if xs:
        med[name] = statistics.median(xs)
        print(f"{name:38}: {' '.join(f'{x:.3f}' for x in xs)}  median {med[name]:.3f} s CPU")
i, b = med[rows[0][0]], med[rows[1][0]]
print(f"set-indexed / fully associative engine: {i / b:.2f}x")
if rows[2][0] in med:
    print(f"libCacheSim / set-indexed: {med[rows[2][0]] / i:.1f}x less CPU")
else:
    print("libCacheSim not installed: pip install libcachesim numpy")
PY
