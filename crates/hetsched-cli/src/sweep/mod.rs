//! Parameter sweeps: a sweep file names a grid (machines, generated machine shapes, workloads,
//! policies, seeds, policy parameters); the grid expands into cells, each one `simulate` run
//! (every policy of the sweep plus the baseline, on one machine, workload, parameter setting and
//! seed). A cell's results depend only on its content, so cells run in any order, on any
//! machine: here in parallel (`hetsched sweep`), or as Dask tasks through the Python package.
//! Finished cells are kept in the output directory, which is how a sweep resumes (`store`).
//!
//! The format is documented in docs/python.md ("Sweep files").

mod file;
pub mod store;

pub use file::{load_sweep, parse_sweep, Sweep};

use crate::provenance::SCHEMA_VERSION;
use crate::simulate::{run_rows, simulate, RunRow, SimulateArgs};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A cell's identity: the first 16 hex digits of the SHA-256 of its canonical JSON, so the same
/// content has the same id in every process and on every machine.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CellId(pub String);

impl std::fmt::Display for CellId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One point of the grid: everything a `simulate` run needs, self-contained (a machine or
/// workload file is carried as its text), so a worker elsewhere needs no file of the sweep's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// The machine: a preset name, or machine-file text.
    pub machine: String,
    /// The machine as the sweep file names it: the preset, the file's path, or the generated
    /// shape's name.
    pub machine_label: String,
    /// The workload: a preset name, or workload-file text.
    pub workload: String,
    /// The workload as the sweep file names it.
    pub workload_label: String,
    /// The policies compared (the baseline `linux-default` runs as well, for the speedups).
    pub policies: Vec<String>,
    /// The simulated kernel's balancer (docs/baselines.md).
    pub kernel_baseline: String,
    /// AMPS's running-thread migration policy (`--numa`), if the sweep sets it.
    pub numa: Option<String>,
    /// Sampling period of counter-driven policies, ms (`--interval`), if the sweep sets it.
    pub interval_ms: Option<f64>,
    /// The seed.
    pub seed: u64,
    /// Simulated seconds (`--duration`); `None`: until the work is done (simulate's default).
    pub duration_s: Option<f64>,
    /// Tick and time slice, ms.
    pub quantum_ms: f64,
}

impl Cell {
    /// The cell's id (see [`CellId`]). Field order is fixed by the struct, so the JSON is
    /// canonical.
    pub fn id(&self) -> CellId {
        // Serializing plain strings and numbers cannot fail.
        let json = serde_json::to_vec(self).unwrap_or_default();
        let digest = Sha256::digest(&json);
        CellId(digest[..8].iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The `simulate` arguments of this cell: one seed, on one thread, without a progress bar.
    fn simulate_args(&self) -> SimulateArgs {
        SimulateArgs {
            machine: Some(self.machine.clone()),
            workload: Some(self.workload.clone()),
            policy: self.policies.clone(),
            baseline: self.kernel_baseline.clone(),
            numa: self.numa.clone(),
            interval: self.interval_ms,
            seed: self.seed,
            seeds: 1,
            duration: self.duration_s,
            quantum_ms: self.quantum_ms,
            threads: Some(1),
            quiet: true,
            ..Default::default()
        }
    }
}

/// A finished cell, as kept in the output directory (one JSON line) and returned by workers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// Which cell.
    pub cell_id: CellId,
    /// Provenance of the process that ran it: the document schema, hetsched's version and commit.
    pub schema_version: u32,
    pub hetsched_version: String,
    pub git_commit: Option<String>,
    /// One row per policy and app (the cell has one seed), as `simulate --csv` gives them.
    pub rows: Vec<RunRow>,
}

/// Run one cell: `simulate` on its arguments, on this thread. Errors are the one-line messages
/// `simulate` gives (a cell of a checked sweep should give none).
pub fn run_cell(cell: &Cell) -> anyhow::Result<CellResult> {
    let done = simulate(&cell.simulate_args())?;
    let provenance = &done.doc.provenance;
    Ok(CellResult {
        cell_id: cell.id(),
        schema_version: SCHEMA_VERSION,
        hetsched_version: provenance.hetsched_version.to_string(),
        git_commit: provenance.git_commit.map(str::to_string),
        rows: run_rows(&done.doc, done.finite),
    })
}

/// `hetsched sweep FILE --out DIR`.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// The sweep file (TOML; docs/python.md, "Sweep files").
    pub file: std::path::PathBuf,
    /// The output directory: the table (results.csv), the finished cells, the sweep file's copy.
    /// Running the same sweep into it again resumes where it stopped.
    #[arg(long)]
    pub out: std::path::PathBuf,
    /// Cells run at once (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Stop after this many cells have finished (tests interrupt a sweep with it).
    #[arg(long, hide = true)]
    pub stop_after: Option<usize>,
    /// Print one JSON document on stdout: where the table is, and how many cells ran, were done
    /// before and are finished (the table itself is in the directory).
    #[arg(long)]
    pub json: bool,
}

/// `sweep --json`: what a run of the sweep did.
#[derive(serde::Serialize)]
struct SweepJson {
    #[serde(flatten)]
    provenance: crate::provenance::Provenance,
    /// The output directory and the table in it.
    out: std::path::PathBuf,
    table: std::path::PathBuf,
    /// Cells in the sweep, finished now, run by this command, finished before it.
    cells: usize,
    finished: usize,
    run_now: usize,
    done_before: usize,
    /// Whether every cell is finished (else the same command resumes).
    complete: bool,
    wall_s: f64,
}

/// Run a sweep here: the cells not yet finished in `--out`, in parallel, a progress bar on
/// stderr; then the table.
pub fn run_sweep(args: &SweepArgs) -> anyhow::Result<()> {
    if args.threads == Some(0) {
        return Err(crate::bad_input("--threads 0: need at least one thread"));
    }
    let sweep = load_sweep(&args.file).map_err(|e| crate::bad_input(e.to_string()))?;
    let mut dir = store::SweepDir::open(&args.out, sweep)?;
    let total = dir.sweep().cells.len();
    let before = dir.finished();
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} cells {msg} ({eta} left)")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_position(before as u64);
    let threads = args
        .threads
        .unwrap_or_else(hetsched_sim::batch::default_threads);
    let started = std::time::Instant::now();
    let outcome = dir.run_pending(threads, args.stop_after, &|_, label| {
        bar.set_message(label.to_string());
        bar.inc(1);
    });
    bar.finish_and_clear();
    let table = dir.write_table()?;
    let now = outcome?;
    let finished = dir.finished();
    let wall_s = started.elapsed().as_secs_f64();
    eprintln!(
        "{now} cells run in {wall_s:.1} s ({:.2} cells/s), {before} already done; {finished} of {total} finished",
        now as f64 / wall_s.max(1e-9)
    );
    if finished < total {
        eprintln!("stopped before the end: run the same command again to resume");
    }
    if args.json {
        let doc = SweepJson {
            provenance: crate::provenance::Provenance::new(args.file.to_str()),
            out: args.out.clone(),
            table,
            cells: total,
            finished,
            run_now: now,
            done_before: before,
            complete: finished == total,
            wall_s,
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!("{}", table.display());
    }
    Ok(())
}
