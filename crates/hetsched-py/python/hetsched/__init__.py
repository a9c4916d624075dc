"""hetsched from Python: the simulator of thread placement on asymmetric multicore machines, and
parameter sweeps that run here or on a Dask cluster.

Every function calls the same Rust code as the ``hetsched`` command, so results, provenance and
error messages are the command's (docs/json.md, docs/python.md)::

    import hetsched
    r = hetsched.simulate(machine="amps-smp", workload="mixed-default", policies=["amps"], seeds=3)
    df = r.to_pandas()          # one row per policy x app x seed

Machines and workloads are preset names (``hetsched.machines()``), paths of TOML files, TOML
text, or dicts shaped like those files (docs/machine-format.md, docs/workload-format.md).
Bad input raises :class:`InputError` (a ``ValueError``), a failure while running
:class:`HetschedError` (a ``RuntimeError``), with the command's one-line message.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import _native
from ._native import HetschedError, InputError
from ._results import Document, ReproduceResult, SignatureResult, SimulateResult
from ._sweep import sweep

__version__: str = _native.__version__

__all__ = [
    "Document",
    "HetschedError",
    "InputError",
    "ReproduceResult",
    "SignatureResult",
    "SimulateResult",
    "machines",
    "policies",
    "reproduce",
    "signature",
    "simulate",
    "sweep",
    "workloads",
]

#: A machine or workload: a preset name, a path to a TOML file, TOML text, or a dict shaped like
#: the file.
Spec = Union[str, "os.PathLike[str]", Mapping[str, Any]]

#: The kernel baseline every policy runs under unless told (the command's ``--baseline``).
DEFAULT_KERNEL_BASELINE = "linux-6"


def _spec(value: Optional[Spec], what: str) -> Optional[str]:
    """A machine or workload as the native module takes it: a name, a path, or TOML text."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return _native.toml_of_json(json.dumps(dict(value)))
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise InputError(f"{what}: {value!r} is not a preset name, a path, TOML text or a dict")


def _seeds(seeds: Union[int, Iterable[int]], seed: int) -> "tuple[int, int]":
    """(first seed, count) from a count or a run of consecutive seeds."""
    if isinstance(seeds, int):
        return seed, seeds
    values = sorted(int(s) for s in seeds)
    if not values or values != list(range(values[0], values[0] + len(values))):
        raise InputError(f"seeds: {values!r} is not a run of consecutive seeds")
    return values[0], len(values)


def simulate(
    machine: Optional[Spec] = None,
    workload: Optional[Spec] = None,
    policies: Optional[Sequence[str]] = None,
    seeds: Union[int, Iterable[int]] = 1,
    baseline: str = DEFAULT_KERNEL_BASELINE,
    *,
    seed: int = 1,
    duration: Optional[float] = None,
    quantum_ms: float = 4.0,
    numa: Optional[str] = None,
    interval_ms: Optional[float] = None,
) -> SimulateResult:
    """Run policies side by side on a simulated machine, as ``hetsched simulate`` does.

    ``policies``: the policies compared (default: every one); ``linux-default`` always runs, as the
    speedups' baseline. ``seeds``: how many seeds, from ``seed`` (or a range of seeds).
    ``baseline``: the simulated kernel's balancer (``linux-6`` or ``linux-cfs``). ``duration``:
    simulated seconds (default: until the work is done). ``numa``, ``interval_ms``: the policies'
    settings (``--numa``, ``--interval``). The GIL is released while simulating.
    """
    first, count = _seeds(seeds, seed)
    if count < 1:
        # The command's message for --seeds 0.
        raise InputError(f"--seeds {count}: need at least one seed")
    document, rows = _native.simulate(
        _spec(machine, "machine"),
        _spec(workload, "workload"),
        list(policies or []),
        first,
        count,
        baseline,
        duration,
        quantum_ms,
        numa,
        interval_ms,
    )
    return SimulateResult(json.loads(document), json.loads(rows))


def reproduce(name: str = "all") -> ReproduceResult:
    """One of the papers' experiments (or ``all``), as ``hetsched reproduce NAME --json``."""
    return ReproduceResult(json.loads(_native.reproduce(name)))


def signature(
    trace: Union[str, "os.PathLike[str]"],
    *,
    sample_rate: Optional[float] = None,
    sample_size: Optional[int] = None,
    line: int = 64,
    set_model: str = "indexed",
    window: Optional[int] = None,
    include_instructions: bool = False,
    name: Optional[str] = None,
    format: Optional[str] = None,
) -> SignatureResult:
    """The HASS architectural signature of a memory trace file (lackey, din or hsb; plain, gzip
    or zstd), as ``hetsched signature TRACE --json``."""
    argv: List[str] = [os.fspath(trace), "--line", str(line), "--set-model", set_model]
    if sample_rate is not None:
        argv += ["--sample-rate", repr(float(sample_rate))]
    if sample_size is not None:
        argv += ["--sample-size", str(sample_size)]
    if window is not None:
        argv += ["--window", str(window)]
    if include_instructions:
        argv.append("--include-instructions")
    if name is not None:
        argv += ["--name", name]
    if format is not None:
        argv += ["--format", format]
    return SignatureResult(json.loads(_native.signature(argv)))


def machines() -> List[Dict[str, str]]:
    """The machine presets: ``[{name, description}]``."""
    return json.loads(_native.machines())


def workloads() -> List[Dict[str, str]]:
    """The workload presets: ``[{name, description}]``."""
    return json.loads(_native.workloads())


def policies() -> List[Dict[str, Any]]:
    """The policies: ``[{name, description, citation, oracle, signals, live}]``."""
    return json.loads(_native.policies())
