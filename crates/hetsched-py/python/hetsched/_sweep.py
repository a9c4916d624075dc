"""Sweeps on a Dask cluster (or here). The grid, the cells, the output directory, resuming and the
table are the Rust library's (the same as ``hetsched sweep``); this module only hands batches of
cells to Dask workers and keeps what comes back.

    python -m hetsched.sweep sweep.toml --out DIR --scheduler tcp://HOST:8786
    hetsched.sweep("sweep.toml", out="DIR", client=dask.distributed.Client(...))
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, List, Optional, Union

from . import _native

#: Batches handed to each worker thread, about: enough that a slow batch does not leave the others
#: idle at the end, few enough that Dask's per-task overhead (~1 ms) stays small beside a cell's
#: simulation (tens of ms and up).
BATCHES_PER_THREAD = 4

#: Most cells in one batch (the unit of loss when a worker dies, and of progress).
MAX_BATCH = 64

#: Columns that hold text that looks like numbers (hex digests, ids): read as text.
TEXT_COLUMNS = ("cell_id", "sweep_sha256", "git_commit", "machine_sha256", "workload_sha256")

PathLike = Union[str, "os.PathLike[str]"]


def _run_batch(cells: List[str]) -> List[str]:
    """A Dask task: run the cells on the worker, return their result lines."""
    return _native.run_cells(cells)


def default_batch_size(cells: int, threads: int) -> int:
    """Cells per task for `cells` cells on `threads` worker threads."""
    return max(1, min(MAX_BATCH, cells // max(1, threads * BATCHES_PER_THREAD)))


def read_table(path: PathLike) -> Any:
    """A sweep's results.csv as a pandas DataFrame (digests and ids as text)."""
    import pandas as pd

    return pd.read_csv(path, dtype={c: "string" for c in TEXT_COLUMNS})


def _run_on_dask(
    store: Any,
    pending: List[str],
    client: Any,
    scheduler: Optional[str],
    workers: Optional[int],
    batch_size: Optional[int],
    progress: bool,
) -> None:
    from dask.distributed import Client, LocalCluster, as_completed

    owned: List[Any] = []
    if client is None:
        if scheduler:
            client = Client(scheduler)
        else:
            # Workers in this process, one thread each: a cell is one simulation on one thread,
            # and run_cells releases the GIL, so they run in parallel. In-process workers need no
            # `if __name__ == "__main__"` guard in the calling script, as spawned processes do.
            cluster = LocalCluster(
                n_workers=workers or os.cpu_count() or 1,
                threads_per_worker=1,
                processes=False,
                dashboard_address=None,
            )
            owned.append(cluster)
            client = Client(cluster)
        owned.insert(0, client)
    try:
        threads = sum(client.nthreads().values()) or 1
        size = batch_size or default_batch_size(len(pending), threads)
        batches = [pending[i : i + size] for i in range(0, len(pending), size)]
        futures = client.map(_run_batch, batches, pure=False)
        done, total = store.finished, store.total
        for future in as_completed(futures):
            lines = future.result()
            # Kept as each batch comes back, so a sweep stopped here resumes after it.
            store.record(lines)
            done += len(lines)
            if progress:
                print(f"\r{done}/{total} cells", end="", file=sys.stderr, flush=True)
        if progress:
            print(file=sys.stderr)
    finally:
        for thing in owned:
            thing.close()


def sweep(
    file: PathLike,
    out: PathLike,
    *,
    client: Any = None,
    scheduler: Optional[str] = None,
    workers: Optional[int] = None,
    batch_size: Optional[int] = None,
    local: bool = False,
    threads: Optional[int] = None,
    parquet: bool = True,
    progress: bool = False,
) -> Any:
    """Run the sweep file ``file`` into the directory ``out``; return the table (a DataFrame).

    Cells run as Dask tasks: on ``client``, or a client of ``scheduler`` (``tcp://HOST:8786``), or
    else on an embedded LocalCluster of ``workers`` single-threaded workers in this process
    (default: one per core; the simulations release the GIL). ``local=True`` runs them in this process instead, on ``threads`` threads, as
    ``hetsched sweep`` does. Cells already finished in ``out`` are not run again; ``out`` holding
    another sweep file's results raises :class:`hetsched.InputError`. The table is
    ``out/results.csv``, and ``out/results.parquet`` too when ``parquet`` and pyarrow is
    installed.
    """
    store = _native.SweepDir(os.fspath(out), os.fspath(file))
    pending = store.pending()
    if pending:
        if local:
            store.run_local(threads or os.cpu_count() or 1)
        else:
            _run_on_dask(store, pending, client, scheduler, workers, batch_size, progress)
    table = read_table(store.write_table())
    if parquet:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            pass
        else:
            table.to_parquet(os.path.join(os.fspath(out), "results.parquet"), index=False)
    return table


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m hetsched.sweep FILE --out DIR [--scheduler tcp://HOST:8786]``."""
    parser = argparse.ArgumentParser(
        prog="python -m hetsched.sweep",
        description="Run a hetsched sweep file on a Dask cluster (default: an embedded "
        "LocalCluster); run again, it resumes where it stopped.",
    )
    parser.add_argument("file", help="the sweep file (TOML; docs/python.md)")
    parser.add_argument("--out", required=True, help="the output directory")
    parser.add_argument("--scheduler", help="a Dask scheduler's address, tcp://HOST:8786")
    parser.add_argument("--workers", type=int, help="LocalCluster workers (default: one per core)")
    parser.add_argument("--batch-size", type=int, help="cells per Dask task")
    parser.add_argument("--local", action="store_true", help="run here, without Dask")
    parser.add_argument("--no-parquet", action="store_true", help="write results.csv only")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        before = _native.SweepDir(args.out, args.file).finished
        table = sweep(
            args.file,
            args.out,
            scheduler=args.scheduler,
            workers=args.workers,
            batch_size=args.batch_size,
            local=args.local,
            parquet=not args.no_parquet,
            progress=True,
        )
    except _native.InputError as e:
        print(f"hetsched: {e}", file=sys.stderr)
        return 2
    except _native.HetschedError as e:
        print(f"hetsched: {e}", file=sys.stderr)
        return 1
    wall = time.perf_counter() - started
    cells = table["cell_id"].nunique()
    print(
        f"{cells - before} cells run in {wall:.1f} s, {before} already done; "
        f"{len(table)} rows",
        file=sys.stderr,
    )
    print(os.path.join(args.out, "results.csv"))
    return 0
