"""Type stubs of the native module (crates/hetsched-py/src/lib.rs)."""

from typing import List, Optional, Tuple

__version__: str

class InputError(ValueError):
    """Bad input (the command's exit code 2), with the command's one-line message."""

class HetschedError(RuntimeError):
    """A failure while running (the command's exit code 1)."""

def simulate(
    machine: Optional[str],
    workload: Optional[str],
    policies: List[str],
    seed: int,
    seeds: int,
    baseline: str,
    duration: Optional[float],
    quantum_ms: float,
    numa: Optional[str],
    interval_ms: Optional[float],
) -> Tuple[str, str]:
    """The `simulate --json` document and its rows, as JSON text."""

def reproduce(name: str) -> str: ...
def signature(argv: List[str]) -> str: ...
def machines() -> str: ...
def workloads() -> str: ...
def policies() -> str: ...
def toml_of_json(json: str) -> str: ...
def run_cells(cells: List[str]) -> List[str]:
    """Run sweep cells (JSON text) on this thread, the GIL released; their result lines."""

class SweepDir:
    """A sweep's output directory (the one `hetsched sweep --out DIR` keeps)."""

    def __init__(self, out: str, file: str) -> None: ...
    @property
    def total(self) -> int: ...
    @property
    def finished(self) -> int: ...
    def pending(self) -> List[str]: ...
    def record(self, lines: List[str]) -> None: ...
    def run_local(self, threads: int) -> int: ...
    def write_table(self) -> str: ...
