"""Sweep throughput: cells per second run here (the `hetsched sweep` code, 1 and 2 threads) and on
a Dask LocalCluster of 1 and 2 single-threaded workers, and the scaling from 1 to 2. Prints one
JSON document on stdout; checks that every way of running gives the same table.

    python crates/hetsched-py/benchmarks/sweep_throughput.py [--sweep FILE | --light] [--seeds N]
        [--repeat N] [--hetsched-bin target/release/hetsched]

Build the package with `maturin build --release` first: a debug build measures the compiler, not
the simulator. The LocalCluster is started before the clock starts (its start-up is reported
apart), each run writes into a fresh directory, so nothing is resumed, and each way runs
`--repeat` times, the median kept.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import hetsched
from hetsched import _native

#: The grid: 24 generated two-class shapes (2 to 12 cores, 1 or 2 nodes) x the workloads x
#: `--seeds` seeds, every policy but the oracle, so cells differ in size as a real sweep's do.
SWEEP = """
machines = [
    {{ generate = "two-class", fast = [2, 4], slow = [4, 8], speed_ratio = [1.5, 2.0, 3.0], numa_nodes = [1, 2] }},
]
workloads = {workloads}
policies = ["amps", "hass", "bulldover", "hetsched"]
seeds = {seeds}
"""

#: Cells of about 0.1 s of one core each (release build): a batch program mix, HASS's
#: memory-heavy mix, and a media-like workload.
WORKLOADS = ["mixed-default", "hass-mh-like", "ogg-like"]

#: `--light`: cells of about 10 ms, where Dask's per-task and per-result costs show.
LIGHT_WORKLOADS = ["mixed-default", "omp-equake-like"]


def timed(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", help="a sweep file (default: the grid above)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds of the grid")
    parser.add_argument("--light", action="store_true", help="the light grid's workloads")
    parser.add_argument("--hetsched-bin", help="also time `hetsched sweep` with this binary")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each way; the median kept")
    args = parser.parse_args()
    from dask.distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        if args.sweep:
            sweep_file = Path(args.sweep)
        else:
            sweep_file = tmp_path / "sweep.toml"
            workloads = LIGHT_WORKLOADS if args.light else WORKLOADS
            sweep_file.write_text(SWEEP.format(workloads=json.dumps(workloads), seeds=args.seeds))
        cells = _native.SweepDir(str(tmp_path / "count"), str(sweep_file)).total
        results = {}
        tables = {}

        def measure(name, run):
            walls = []
            for i in range(args.repeat):
                out = tmp_path / f"{name}-{i}"
                walls.append(timed(lambda: run(out)))
                tables[f"{name}-{i}"] = (out / "results.csv").read_bytes()
            wall = statistics.median(walls)
            results[name] = {
                "wall_s": round(wall, 3),
                "cells_per_s": round(cells / wall, 1),
                "wall_s_each": [round(w, 3) for w in walls],
            }

        for threads in (1, 2):
            measure(
                f"local_{threads}_threads",
                lambda out, t=threads: hetsched.sweep(
                    sweep_file, out, local=True, threads=t, parquet=False
                ),
            )
        if args.hetsched_bin:
            measure(
                "hetsched_sweep_command",
                lambda out: subprocess.run(
                    [args.hetsched_bin, "sweep", str(sweep_file), "--out", str(out)],
                    check=True,
                    capture_output=True,
                ),
            )
        for workers in (1, 2):
            started = time.perf_counter()
            cluster = LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
            client = Client(cluster)
            startup = time.perf_counter() - started
            try:
                measure(
                    f"dask_{workers}_workers",
                    lambda out, c=client: hetsched.sweep(sweep_file, out, client=c, parquet=False),
                )
                results[f"dask_{workers}_workers"]["cluster_startup_s"] = round(startup, 2)
            finally:
                client.close()
                cluster.close()
    first = next(iter(tables.values()))
    document = {
        "cells": cells,
        "cpus": os.cpu_count(),
        "hetsched_version": hetsched.__version__,
        **results,
        "dask_scaling_1_to_2_workers": round(
            results["dask_2_workers"]["cells_per_s"] / results["dask_1_workers"]["cells_per_s"], 2
        ),
        "local_scaling_1_to_2_threads": round(
            results["local_2_threads"]["cells_per_s"] / results["local_1_threads"]["cells_per_s"],
            2,
        ),
        "identical_tables": all(t == first for t in tables.values()),
    }
    print(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
