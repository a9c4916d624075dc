"""Sweeps from Python: on a 2-worker Dask LocalCluster, the same table, cell for cell, as
`hetsched sweep` gives on this machine; resuming; provenance on every row; refusals."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import hetsched
from hetsched import _native

REPO = Path(__file__).resolve().parents[3]

#: 40 cells: 5 machines (4 generated two-class shapes and a preset) x 2 workloads x 4 seeds.
SWEEP_40 = """
machines = [
    "amps-smp",
    { generate = "two-class", fast = [1, 2], slow = [2, 4], speed_ratio = 2.5 },
]
workloads = ["mixed-default", "omp-equake-like"]
policies = ["amps", "hetsched"]
seeds = 4
"""
CELLS = 40


def hetsched_bin() -> Path:
    """The `hetsched` command to compare with: $HETSCHED_BIN (scripts/test sets it), else the
    debug build beside the sources."""
    given = os.environ.get("HETSCHED_BIN")
    if given:
        path = Path(given)
        assert path.is_file(), f"HETSCHED_BIN={given} does not exist"
        return path
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    path = target / "debug" / "hetsched"
    if not path.is_file():
        pytest.skip("no hetsched binary (build it, or set HETSCHED_BIN)")
    return path


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sweep") / "sweep.toml"
    path.write_text(SWEEP_40)
    return path


@pytest.fixture(scope="module")
def local_table(sweep_file, tmp_path_factory) -> bytes:
    """The table `hetsched sweep` writes on this machine."""
    out = tmp_path_factory.mktemp("local") / "out"
    done = subprocess.run(
        [str(hetsched_bin()), "sweep", str(sweep_file), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return (out / "results.csv").read_bytes()


def test_a_dask_localcluster_sweep_matches_the_local_sweep(sweep_file, local_table, tmp_path):
    """Two worker processes: every cell is shipped to another process and its result back."""
    from dask.distributed import Client, LocalCluster

    out = tmp_path / "dask"
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, Client(cluster) as client:
        assert len(client.nthreads()) == 2
        df = hetsched.sweep(sweep_file, out, client=client, batch_size=3)
    assert (out / "results.csv").read_bytes() == local_table
    assert df["cell_id"].nunique() == CELLS
    # The Parquet table is the same table.
    parquet = pd.read_parquet(out / "results.parquet")
    pd.testing.assert_frame_equal(parquet, df)


def test_the_embedded_localcluster_matches_the_local_sweep(sweep_file, local_table, tmp_path):
    out = tmp_path / "embedded"
    hetsched.sweep(sweep_file, out, workers=2, parquet=False)
    assert (out / "results.csv").read_bytes() == local_table


def test_every_row_carries_its_provenance(sweep_file, local_table):
    from io import BytesIO

    df = hetsched._sweep.read_table(BytesIO(local_table))
    assert (df["sweep_sha256"] == hashlib.sha256(SWEEP_40.encode()).hexdigest()).all()
    assert (df["hetsched_version"] == hetsched.__version__).all()
    assert (df["schema_version"] == 2).all()
    assert df["cell_id"].str.fullmatch(r"[0-9a-f]{16}").all()
    # Generated shapes are named by their parameters, their text hashed; presets are not hashed.
    generated = df[df["machine_spec"] != "amps-smp"]
    assert set(generated["machine"]) == {
        f"two-class-{f}f{s}s-x2.5-2ghz-1n" for f in (1, 2) for s in (2, 4)
    }
    assert generated["machine_sha256"].str.len().eq(64).all()
    assert df.loc[df["machine_spec"] == "amps-smp", "machine_sha256"].isna().all()
    # One row per cell, policy (the baseline included) and app.
    assert set(df["policy"]) == {"linux-default", "amps", "hetsched"}
    assert set(df["seed"]) == {1, 2, 3, 4}


def test_an_interrupted_sweep_resumes_where_it_stopped(sweep_file, local_table, tmp_path):
    out = tmp_path / "resumed"
    store = _native.SweepDir(str(out), str(sweep_file))
    first = store.pending()[:7]
    store.record(_native.run_cells(first))
    del store
    # A line cut short (the process killed while writing it) is dropped on the next open.
    with open(out / "cells.jsonl", "a") as cells:
        cells.write('{"cell_id": "0123')
    reopened = _native.SweepDir(str(out), str(sweep_file))
    assert (reopened.finished, reopened.total) == (7, CELLS)
    del reopened
    hetsched.sweep(sweep_file, out, local=True, threads=2, parquet=False)
    assert (out / "results.csv").read_bytes() == local_table
    # No cell ran twice.
    assert len((out / "cells.jsonl").read_text().splitlines()) == CELLS


def test_a_directory_of_another_sweep_is_refused(sweep_file, tmp_path):
    out = tmp_path / "other"
    other = tmp_path / "other.toml"
    other.write_text(SWEEP_40.replace("seeds = 4", "seeds = 1"))
    hetsched.sweep(other, out, local=True, parquet=False)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in out.iterdir())
    with pytest.raises(hetsched.InputError, match="holds the results of another sweep file"):
        hetsched.sweep(sweep_file, out, local=True)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in out.iterdir()) == before


def test_a_bad_sweep_file_is_one_line_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SWEEP_40.replace("speed_ratio = 2.5", "speed_ratio = 0.5"))
    out = tmp_path / "never"
    with pytest.raises(hetsched.InputError) as e:
        hetsched.sweep(bad, out, local=True)
    assert str(e.value) == f"{bad}: machines[1].speed_ratio: 0.5: must be above 1 (the fast cores are faster)"
    assert not out.exists()


def test_python_m_hetsched_sweep_runs_a_sweep(sweep_file, local_table, tmp_path):
    out = tmp_path / "module"
    done = subprocess.run(
        [sys.executable, "-m", "hetsched.sweep", str(sweep_file), "--out", str(out), "--local"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out / "results.csv")
    assert (out / "results.csv").read_bytes() == local_table
