"""The Python package as a user calls it: results, provenance, errors, the GIL."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import hetsched

#: The AMPS SMP machine's preset file (crates/hetsched-core/presets/), read as text and as a dict.
REPO = Path(__file__).resolve().parents[3]
PRESETS = REPO / "crates" / "hetsched-core" / "presets"

#: A small machine as a dict shaped like a machine file (docs/machine-format.md).
TWO_BY_TWO = {
    "name": "two-by-two",
    "memory_latency_ns": 80.0,
    "classes": [{"name": "fast", "freq_ghz": 3.0}, {"name": "slow", "freq_ghz": 1.5}],
    "cores": [{"cpus": "0-1", "class": "fast"}, {"cpus": "2-3", "class": "slow"}],
}

#: The same machine as TOML text.
TWO_BY_TWO_TOML = """
name = "two-by-two"
memory_latency_ns = 80.0
[[classes]]
name = "fast"
freq_ghz = 3.0
[[classes]]
name = "slow"
freq_ghz = 1.5
[[cores]]
cpus = "0-1"
class = "fast"
[[cores]]
cpus = "2-3"
class = "slow"
"""


def test_lists_name_the_presets_and_policies():
    machines = {m["name"] for m in hetsched.machines()}
    assert {"amps-smp", "bulldover", "hass-amd-2-2"} <= machines
    policies = {p["name"]: p for p in hetsched.policies()}
    assert policies["static-best"]["oracle"] is True
    assert {"linux-default", "amps", "hass", "hetsched"} <= set(policies)
    assert "mixed-default" in {w["name"] for w in hetsched.workloads()}


def test_simulate_gives_one_row_per_policy_app_and_seed():
    r = hetsched.simulate(machine="amps-smp", workload="mixed-default", policies=["amps"], seeds=2)
    apps = [a["name"] for a in r["runs"][0]["apps"]]
    # linux-default always runs, for the speedups: 2 policies x apps x 2 seeds.
    assert len(r.rows) == 2 * len(apps) * 2
    assert {row["policy"] for row in r.rows} == {"linux-default", "amps"}
    assert {row["seed"] for row in r.rows} == {1, 2}
    for row in r.rows:
        if row["policy"] == "linux-default":
            assert row["speedup_vs_baseline"] == 1.0
    # The document is simulate --json's, provenance first.
    assert r["machine"] == "amps-smp"
    assert r.provenance["schema_version"] == 2
    assert r.provenance["hetsched_version"] == hetsched.__version__
    assert [i["name"] for i in r.provenance["inputs"]] == ["amps-smp", "mixed-default"]
    assert set(r.speedups()) == {"linux-default", "amps"}
    df = r.to_pandas()
    assert len(df) == len(r.rows)
    assert df.attrs["provenance"]["inputs"][0]["name"] == "amps-smp"
    assert list(df.columns[:5]) == ["machine", "workload", "kernel_baseline", "policy", "seed"]


def test_a_seed_fixes_the_run():
    a = hetsched.simulate(machine="amps-smp", policies=["hass"], seeds=1, seed=7)
    b = hetsched.simulate(machine="amps-smp", policies=["hass"], seeds=range(7, 8))
    assert a.rows == b.rows


def test_a_machine_as_dict_toml_text_or_file_runs_the_same(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text(TWO_BY_TWO_TOML)
    runs = [
        hetsched.simulate(machine=m, workload="mixed-default", policies=["amps"])
        for m in (TWO_BY_TWO, TWO_BY_TWO_TOML, path)
    ]
    assert runs[0]["machine"] == "two-by-two"
    assert runs[0].rows == runs[1].rows == runs[2].rows
    # Inline text is hashed as a file is, so the provenance tells the machines apart.
    inline = runs[1].provenance["inputs"][0]
    assert inline["name"] == "inline" and len(inline["sha256"]) == 64


def test_errors_are_the_commands_one_line_messages():
    with pytest.raises(hetsched.InputError) as bad_policy:
        hetsched.simulate(policies=["amp"])
    message = str(bad_policy.value)
    assert message.startswith('--policy "amp": unknown policy (implemented: linux-default, amps')
    assert "\n" not in message
    assert isinstance(bad_policy.value, ValueError)
    with pytest.raises(hetsched.InputError, match=r'^--machine "no-such": no such preset or file'):
        hetsched.simulate(machine="no-such")
    with pytest.raises(hetsched.InputError, match=r"^machine text: classes\[0\]"):
        hetsched.simulate(machine={**TWO_BY_TWO, "classes": [{"name": "fast"}], "cores": []})
    with pytest.raises(hetsched.InputError, match=r"^reproduce \"nope\": no such experiment"):
        hetsched.reproduce("nope")


def test_simulate_releases_the_gil():
    """Python keeps running while a simulation runs on another thread."""
    ticks = 0
    done = threading.Event()

    def run():
        # About 0.1 s in a release build, 2 s in a debug one.
        hetsched.simulate(machine="amps-smp", workload="ogg-like", policies=["amps", "hass"], seeds=2)
        done.set()

    worker = threading.Thread(target=run)
    started = time.perf_counter()
    worker.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    worker.join()
    elapsed = time.perf_counter() - started
    # Holding the GIL, the simulation would leave this loop at most a tick or two.
    assert elapsed > 0.05, "the simulation was too short to tell"
    assert ticks > 10


def test_reproduce_gives_the_papers_values_beside_ours():
    r = hetsched.reproduce("amps-repeatability")
    assert r.provenance["inputs"] == []
    (experiment,) = r["experiments"]
    assert experiment["experiment"] == "amps-repeatability"
    rows = r.to_pandas()
    assert len(rows) == len(experiment["rows"]) > 0
    assert set(rows.columns) >= {"label", "paper_value", "our_value", "holds"}


def test_signature_of_a_trace_file(tmp_path):
    # 64 distinct lines loaded twice: the second pass hits in any cache of 4 KiB or more.
    lines = ["I  0400,3"]
    for _ in range(2):
        lines += [f" L {0x100000 + 64 * i:x},8" for i in range(64)]
    trace = tmp_path / "t.lackey"
    trace.write_text("\n".join(lines) + "\n")
    s = hetsched.signature(trace)
    assert s["line_refs"] == 128
    assert s["inputs"][0]["name"] == str(trace) and len(s["inputs"][0]["sha256"]) == 64
    df = s.to_pandas()
    assert len(df) == len(s["assoc"]) * len(s["sizes_bytes"])
    with pytest.raises(hetsched.InputError, match="--line: 48 is not a power of two"):
        hetsched.signature(trace, line=48)
