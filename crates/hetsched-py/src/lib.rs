//! `hetsched._native`: the Python package's native module. Each function calls the library behind
//! the `hetsched` command (crates/hetsched-cli), so a simulation, a reproduction, a signature or a
//! sweep cell computes exactly what the command does, with the same provenance and the same
//! one-line error messages. Documents cross as JSON text and the Python side (`hetsched`) turns
//! them into records; simulations run with the GIL released.

use hetsched_cli::simulate::{run_rows, simulate as run_simulate, SimulateArgs};
use hetsched_cli::sweep::store::SweepDir as Store;
use hetsched_cli::sweep::{load_sweep, run_cell, Cell};
use hetsched_cli::BadInput;
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::path::Path;

// Named as the package exports them (`hetsched.InputError`), which is how tracebacks show them.
create_exception!(
    hetsched,
    InputError,
    PyValueError,
    "Bad input: a machine, workload, policy, sweep file or value that cannot be used (the command's exit code 2)."
);
create_exception!(
    hetsched,
    HetschedError,
    PyRuntimeError,
    "A failure while running (the command's exit code 1)."
);

/// The Python exception of an error: the message the command prints after `hetsched: `.
fn to_py(e: anyhow::Error) -> PyErr {
    let message = format!("{e:#}");
    if e.downcast_ref::<BadInput>().is_some() {
        InputError::new_err(message)
    } else {
        HetschedError::new_err(message)
    }
}

/// A serialization failure of ours (never the user's input).
fn internal(e: impl std::fmt::Display) -> PyErr {
    HetschedError::new_err(e.to_string())
}

/// `simulate`: returns the `simulate --json` document and its rows (one per policy, app and
/// seed, as `simulate --csv` gives them), both as JSON text.
#[pyfunction]
#[pyo3(signature = (machine, workload, policies, seed, seeds, baseline, duration, quantum_ms, numa, interval_ms))]
#[allow(clippy::too_many_arguments)]
fn simulate(
    py: Python<'_>,
    machine: Option<String>,
    workload: Option<String>,
    policies: Vec<String>,
    seed: u64,
    seeds: u32,
    baseline: String,
    duration: Option<f64>,
    quantum_ms: f64,
    numa: Option<String>,
    interval_ms: Option<f64>,
) -> PyResult<(String, String)> {
    let args = SimulateArgs {
        machine,
        workload,
        policy: policies,
        baseline,
        numa,
        interval: interval_ms,
        seed,
        seeds,
        duration,
        quantum_ms,
        quiet: true,
        ..Default::default()
    };
    py.detach(|| {
        let done = run_simulate(&args)?;
        let rows = run_rows(&done.doc, done.finite);
        Ok((
            serde_json::to_string(&done.doc)?,
            serde_json::to_string(&rows)?,
        ))
    })
    .map_err(to_py)
}

/// `reproduce NAME --json` (`all` for every experiment), as JSON text.
#[pyfunction]
fn reproduce(py: Python<'_>, name: String) -> PyResult<String> {
    py.detach(|| {
        let done = hetsched_cli::reproduce::run_experiments(&name, true)?;
        hetsched_cli::reproduce::reproduce_json(&done)
    })
    .map_err(to_py)
}

/// `signature ARGS --json`: `argv` as on the command line after `signature`.
#[pyfunction]
fn signature(py: Python<'_>, argv: Vec<String>) -> PyResult<String> {
    py.detach(|| hetsched_cli::signature::signature_json(&argv))
        .map_err(to_py)
}

/// `machines --json`, as JSON text.
#[pyfunction]
fn machines() -> PyResult<String> {
    let list = hetsched_cli::topo::machine_list().map_err(to_py)?;
    serde_json::to_string(&list).map_err(internal)
}

/// `workloads --json`, as JSON text.
#[pyfunction]
fn workloads() -> PyResult<String> {
    let list = hetsched_cli::simulate::workload_list().map_err(to_py)?;
    serde_json::to_string(&list).map_err(internal)
}

/// `policies --json`, as JSON text.
#[pyfunction]
fn policies() -> PyResult<String> {
    serde_json::to_string(&hetsched_cli::policies::policy_list()).map_err(internal)
}

/// A machine or workload given as JSON (a Python dict) written as the TOML file it stands for.
#[pyfunction]
fn toml_of_json(json: &str) -> PyResult<String> {
    let value: serde_json::Value = serde_json::from_str(json).map_err(internal)?;
    toml::to_string(&value).map_err(|e| InputError::new_err(format!("not a TOML document: {e}")))
}

/// Run sweep cells (each the JSON of a `Cell`) one after the other on this thread, the GIL
/// released; returns each finished cell's JSON line. A Dask task is one call.
#[pyfunction]
fn run_cells(py: Python<'_>, cells: Vec<String>) -> PyResult<Vec<String>> {
    py.detach(|| {
        cells
            .iter()
            .map(|text| {
                let cell: Cell = serde_json::from_str(text)
                    .map_err(|e| anyhow::anyhow!("not a sweep cell: {e}"))?;
                Ok(serde_json::to_string(&run_cell(&cell)?)?)
            })
            .collect::<anyhow::Result<Vec<String>>>()
    })
    .map_err(to_py)
}

/// A sweep's output directory (the same as `hetsched sweep FILE --out DIR` keeps): which cells are
/// still to run, where finished ones are kept, and the table.
#[pyclass(module = "hetsched._native")]
struct SweepDir {
    store: Store,
}

#[pymethods]
impl SweepDir {
    /// Open `out` for the sweep file `file`: created if need be; refused if it holds another
    /// sweep's results.
    #[new]
    fn new(out: &str, file: &str) -> PyResult<Self> {
        let sweep = load_sweep(Path::new(file)).map_err(|e| InputError::new_err(e.to_string()))?;
        let store = Store::open(Path::new(out), sweep).map_err(to_py)?;
        Ok(Self { store })
    }

    /// Cells in the grid.
    #[getter]
    fn total(&self) -> usize {
        self.store.sweep().cells.len()
    }

    /// Cells finished so far.
    #[getter]
    fn finished(&self) -> usize {
        self.store.finished()
    }

    /// The cells still to run, in grid order, each as JSON text for `run_cells`.
    fn pending(&self) -> PyResult<Vec<String>> {
        self.store
            .pending()
            .iter()
            .map(|c| serde_json::to_string(c).map_err(internal))
            .collect()
    }

    /// Keep finished cells (lines `run_cells` returned), each flushed to disk as it is kept.
    fn record(&mut self, lines: Vec<String>) -> PyResult<()> {
        for line in lines {
            let result = serde_json::from_str(&line)
                .map_err(|e| HetschedError::new_err(format!("not a finished cell: {e}")))?;
            self.store.record(result).map_err(to_py)?;
        }
        Ok(())
    }

    /// Run the pending cells here, on `threads` threads (what `hetsched sweep` does); returns
    /// how many ran.
    fn run_local(&mut self, py: Python<'_>, threads: usize) -> PyResult<usize> {
        let store = &mut self.store;
        py.detach(|| store.run_pending(threads.max(1), None, &|_, _| {}))
            .map_err(to_py)
    }

    /// Write the table (results.csv) of the finished cells, in grid order; returns its path.
    fn write_table(&self) -> PyResult<String> {
        let path = self.store.write_table().map_err(to_py)?;
        Ok(path.display().to_string())
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce, m)?)?;
    m.add_function(wrap_pyfunction!(signature, m)?)?;
    m.add_function(wrap_pyfunction!(machines, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(toml_of_json, m)?)?;
    m.add_function(wrap_pyfunction!(run_cells, m)?)?;
    m.add_class::<SweepDir>()?;
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add("HetschedError", m.py().get_type::<HetschedError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
