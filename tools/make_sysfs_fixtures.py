#!/usr/bin/env python3
"""Write the sysfs fixture trees that hetsched-live's discovery tests read.

Each fixture is the subset of /sys that discovery reads, with values taken from (or shaped like)
real machines. Run from the repository root; it rewrites crates/hetsched-live/tests/fixtures/sysfs/.
"""
import os, shutil

ROOT = "crates/hetsched-live/tests/fixtures/sysfs"

def put(base, rel, value):
    p = os.path.join(base, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(str(value) + "\n")

def cpulist(cpus):
    cpus = sorted(cpus); out = []; i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)

def machine(name, ncpu, caches, siblings, nodes, per_cpu=None, extra=None, online=True):
    """caches: list of (level, type, size, ways, sharing-groups: list of cpu lists)."""
    base = os.path.join(ROOT, name)
    shutil.rmtree(base, ignore_errors=True)
    cpu = "sys/devices/system/cpu"
    if online:
        put(base, f"{cpu}/online", cpulist(range(ncpu)))
    put(base, f"{cpu}/isolated", "")
    for c in range(ncpu):
        for idx, (level, typ, size, ways, groups) in enumerate(caches):
            grp = next(g for g in groups if c in g)
            d = f"{cpu}/cpu{c}/cache/index{idx}"
            put(base, f"{d}/level", level)
            put(base, f"{d}/type", typ)
            put(base, f"{d}/size", size)
            put(base, f"{d}/ways_of_associativity", ways)
            put(base, f"{d}/coherency_line_size", 64)
            put(base, f"{d}/shared_cpu_list", cpulist(grp))
        sib = next((g for g in siblings if c in g), [c])
        put(base, f"{cpu}/cpu{c}/topology/thread_siblings_list", cpulist(sib))
        for rel, values in (per_cpu or {}).items():
            put(base, f"{cpu}/cpu{c}/{rel}", values[c])
    for nid, (cpus, dist) in enumerate(nodes):
        put(base, f"sys/devices/system/node/node{nid}/cpulist", cpulist(cpus))
        put(base, f"sys/devices/system/node/node{nid}/distance", " ".join(map(str, dist)))
    for rel, value in (extra or {}).items():
        put(base, rel, value)

def each(n, k):
    return [list(range(i, i + k)) for i in range(0, n, k)]

# 1. This VM (values copied from its sysfs on 2026-11-21): 2 CPUs, cpu_capacity 1024 on both, no
#    cpufreq, private 48K L1d / 2 MB L2, a 105 MB L3 shared by both, one node.
machine("vm-2cpu", 2,
        [(1, "Data", "48K", 12, each(2, 1)), (1, "Instruction", "32K", 8, each(2, 1)),
         (2, "Unified", "2048K", 16, each(2, 1)), (3, "Unified", "107520K", 15, [[0, 1]])],
        [], [([0, 1], [10])], per_cpu={"cpu_capacity": [1024, 1024]})

# 2. Intel hybrid (13900K-like): P-cores 0-15 (SMT pairs), E-cores 16-31 in clusters of 4.
#    Two favoured P-cores reach 5.8 GHz, the rest 5.5; E-cores 4.3 GHz. No cpu_capacity.
freq = [5800000 if c in (4, 5, 6, 7) else 5500000 for c in range(16)] + [4300000] * 16
machine("intel-hybrid", 32,
        [(1, "Data", "48K", 12, each(16, 2) + each(32, 1)[16:]),
         (1, "Instruction", "32K", 8, each(16, 2) + each(32, 1)[16:]),
         (2, "Unified", "2048K", 16, each(16, 2) + [list(range(16 + 4 * i, 20 + 4 * i)) for i in range(4)]),
         (3, "Unified", "36864K", 12, [list(range(32))])],
        each(16, 2), [(list(range(32)), [10])],
        per_cpu={"cpufreq/cpuinfo_max_freq": freq},
        extra={"sys/devices/cpu_core/cpus": "0-15", "sys/devices/cpu_atom/cpus": "16-31"})

# 3. big.LITTLE phone (Pixel-like): 4 little (cap 160, 1.8 GHz), 2 mid (cap 498, 2.35 GHz),
#    2 big (cap 1024, 2.85 GHz); private L2, shared 4 MB L3.
cap = [160] * 4 + [498] * 2 + [1024] * 2
fr = [1803000] * 4 + [2348000] * 2 + [2850000] * 2
machine("big-little-phone", 8,
        [(1, "Data", "32K", 4, each(8, 1)), (2, "Unified", "256K", 8, each(8, 1)),
         (3, "Unified", "4096K", 16, [list(range(8))])],
        [], [(list(range(8)), [10])],
        per_cpu={"cpu_capacity": cap, "cpufreq/cpuinfo_max_freq": fr})

# 4. Two-socket NUMA server: 2 x 8 cores x 2 threads; siblings i and i+16; node 0 holds CPUs 0-7 and
#    16-23; an L3 per socket; a memory-only CXL node 2. Symmetric: every CPU reports the same values.
s0 = list(range(8)) + list(range(16, 24)); s1 = list(range(8, 16)) + list(range(24, 32))
machine("numa-2node", 32,
        [(1, "Data", "32K", 8, [[i, i + 16] for i in range(16)]),
         (2, "Unified", "1024K", 16, [[i, i + 16] for i in range(16)]),
         (3, "Unified", "32768K", 16, [s0, s1])],
        [[i, i + 16] for i in range(16)],
        [(s0, [10, 21, 14]), (s1, [21, 10, 24]), ([], [14, 24, 10])],
        per_cpu={"cpu_capacity": [1024] * 32, "cpufreq/cpuinfo_max_freq": [3000000] * 32})

# 5. AMD part with preferred-core ranking (7950X-like, amd_pstate): 16 cores x 2 threads. CCD0
#    ranks 236..201 in steps of 5, CCD1 186..151: the gap between CCDs (15) exceeds 5% of 236.
rank = [236 - 5 * i for i in range(8)] + [186 - 5 * i for i in range(8)]
rank = rank + rank
machine("amd-prefcore", 32,
        [(1, "Data", "32K", 8, [[i, i + 16] for i in range(16)]),
         (2, "Unified", "1024K", 8, [[i, i + 16] for i in range(16)]),
         (3, "Unified", "32768K", 16, [list(range(8)) + list(range(16, 24)), list(range(8, 16)) + list(range(24, 32))])],
        [[i, i + 16] for i in range(16)], [(list(range(32)), [10])],
        per_cpu={"cpufreq/amd_pstate_prefcore_ranking": rank,
                 "cpufreq/amd_pstate_highest_perf": [255] * 32,
                 "cpufreq/cpuinfo_max_freq": [5881000] * 32})
