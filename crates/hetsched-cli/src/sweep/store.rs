//! A sweep's output directory: the sweep file it belongs to, every finished cell, and the table.
//!
//! ```text
//! DIR/sweep.toml     the sweep file's text, as given (a directory belongs to one sweep file)
//! DIR/cells.jsonl    one line per finished cell (a CellResult), appended and flushed as each ends
//! DIR/results.csv    the table: one row per cell, policy and app, provenance on every row
//! ```
//!
//! A sweep that stops (killed, interrupted, `--stop-after`) leaves whole lines for the cells it
//! finished, and at most one cut line, which is dropped on the next open; running it again runs
//! only the cells without a line. The table is rebuilt from the lines, in grid order, so it does
//! not depend on which cells ran when, or where.

use super::{run_cell, Cell, CellId, CellResult, Sweep};
use crate::bad_input;
use crate::machine::is_inline;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The sweep file's copy in the directory.
pub const SWEEP_FILE: &str = "sweep.toml";
/// The finished cells, one JSON line each.
pub const CELLS_FILE: &str = "cells.jsonl";
/// The table.
pub const TABLE_FILE: &str = "results.csv";

/// An open output directory.
pub struct SweepDir {
    dir: PathBuf,
    sweep: Sweep,
    done: BTreeMap<CellId, CellResult>,
    cells_file: File,
}

/// The provenance and grid columns that come before a [`RunRow`]'s in the table.
#[derive(Serialize)]
struct RowHead<'a> {
    cell_id: &'a str,
    /// SHA-256 of the sweep file's text.
    sweep_sha256: &'a str,
    schema_version: u32,
    hetsched_version: &'a str,
    git_commit: Option<&'a str>,
    /// The machine as the sweep file names it (preset, file, generated shape).
    machine_spec: &'a str,
    /// SHA-256 of the machine file's text (empty for a preset, which the version identifies).
    machine_sha256: Option<String>,
    workload_spec: &'a str,
    workload_sha256: Option<String>,
    numa: Option<&'a str>,
    interval_ms: Option<f64>,
}

/// SHA-256 (hex) of a cell's machine or workload text; `None` for a preset name.
fn text_sha256(spec: &str) -> Option<String> {
    is_inline(spec).then(|| {
        Sha256::digest(spec.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    })
}

impl SweepDir {
    /// Open `dir` for `sweep`, creating it if need be, and read the cells already finished. A
    /// directory that holds another sweep file's results, or files that are not a sweep's, is
    /// refused (exit 2) and left as it is.
    pub fn open(dir: &Path, sweep: Sweep) -> anyhow::Result<SweepDir> {
        let d = dir.display();
        let kept = dir.join(SWEEP_FILE);
        if kept.exists() {
            let text = std::fs::read_to_string(&kept)
                .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", kept.display()))?;
            if text != sweep.text {
                return Err(bad_input(format!(
                    "--out {d}: holds the results of another sweep file ({d}/{SWEEP_FILE} differs from {}); use another directory",
                    sweep.source_name
                )));
            }
        } else if dir.is_dir() && std::fs::read_dir(dir)?.next().is_some() {
            return Err(bad_input(format!(
                "--out {d}: is not empty and holds no {SWEEP_FILE}: not a sweep's directory"
            )));
        } else {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("--out {d}: cannot create: {e}"))?;
            std::fs::write(&kept, &sweep.text)
                .map_err(|e| anyhow::anyhow!("{}: cannot write: {e}", kept.display()))?;
        }
        let cells_path = dir.join(CELLS_FILE);
        let done = read_finished(&cells_path)?;
        let cells_file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cells_path)
            .map_err(|e| anyhow::anyhow!("{}: cannot open: {e}", cells_path.display()))?;
        Ok(SweepDir {
            dir: dir.to_path_buf(),
            sweep,
            done,
            cells_file,
        })
    }

    /// The sweep.
    pub fn sweep(&self) -> &Sweep {
        &self.sweep
    }

    /// Cells finished so far.
    pub fn finished(&self) -> usize {
        self.sweep
            .cells
            .iter()
            .filter(|c| self.done.contains_key(&c.id()))
            .count()
    }

    /// The cells still to run, in grid order.
    pub fn pending(&self) -> Vec<Cell> {
        self.sweep
            .cells
            .iter()
            .filter(|c| !self.done.contains_key(&c.id()))
            .cloned()
            .collect()
    }

    /// Keep a finished cell: its line appended and flushed before this returns.
    pub fn record(&mut self, result: CellResult) -> anyhow::Result<()> {
        let mut line = serde_json::to_string(&result)?;
        line.push('\n');
        self.cells_file
            .write_all(line.as_bytes())
            .and_then(|()| self.cells_file.flush())
            .map_err(|e| {
                anyhow::anyhow!("{}/{CELLS_FILE}: cannot write: {e}", self.dir.display())
            })?;
        self.done.insert(result.cell_id.clone(), result);
        Ok(())
    }

    /// Write the table of every finished cell, in grid order; returns its path.
    pub fn write_table(&self) -> anyhow::Result<PathBuf> {
        let path = self.dir.join(TABLE_FILE);
        let partial = self.dir.join(format!("{TABLE_FILE}.partial"));
        {
            let mut w = csv::Writer::from_path(&partial)?;
            for cell in &self.sweep.cells {
                let id = cell.id();
                let Some(result) = self.done.get(&id) else {
                    continue;
                };
                let head = RowHead {
                    cell_id: &id.0,
                    sweep_sha256: &self.sweep.sha256,
                    schema_version: result.schema_version,
                    hetsched_version: &result.hetsched_version,
                    git_commit: result.git_commit.as_deref(),
                    machine_spec: &cell.machine_label,
                    machine_sha256: text_sha256(&cell.machine),
                    workload_spec: &cell.workload_label,
                    workload_sha256: text_sha256(&cell.workload),
                    numa: cell.numa.as_deref(),
                    interval_ms: cell.interval_ms,
                };
                for row in &result.rows {
                    w.serialize((&head, row))?;
                }
            }
            w.flush()?;
        }
        // Renamed into place, so a reader never sees half a table.
        std::fs::rename(&partial, &path)?;
        Ok(path)
    }

    /// Run the pending cells on `threads` threads, each result kept as it ends. Stops taking new
    /// cells after `stop_after` have finished in this call (a test's interruption), or at the
    /// first cell that fails (its error returned). `progress(finished_now, label)` is called
    /// after each cell. Returns the cells finished by this call.
    pub fn run_pending(
        &mut self,
        threads: usize,
        stop_after: Option<usize>,
        progress: &(dyn Fn(usize, &str) + Sync),
    ) -> anyhow::Result<usize> {
        let pending = self.pending();
        let next = AtomicUsize::new(0);
        let finished = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
        let store = Mutex::new(&mut *self);
        let limit = stop_after.unwrap_or(usize::MAX);
        std::thread::scope(|s| {
            for _ in 0..threads.clamp(1, pending.len().max(1)) {
                s.spawn(|| loop {
                    if failed.load(Ordering::SeqCst) {
                        break;
                    }
                    // Claim a cell only while the limit leaves room for it.
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= limit {
                        break;
                    }
                    let Some(cell) = pending.get(i) else {
                        break;
                    };
                    let outcome = run_cell(cell).and_then(|r| {
                        store
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .record(r)
                    });
                    if let Err(e) = outcome {
                        failed.store(true, Ordering::SeqCst);
                        first_error
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .get_or_insert(e.context(format!("cell {}", cell.id())));
                        break;
                    }
                    let n = finished.fetch_add(1, Ordering::SeqCst) + 1;
                    progress(n, &cell.machine_label);
                });
            }
        });
        match first_error
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            Some(e) => Err(e),
            None => Ok(finished.into_inner()),
        }
    }
}

/// The finished cells of `path` (none when it does not exist). A last line without its newline
/// (the process stopped while writing it) is cut off the file, so the next append starts clean.
fn read_finished(path: &Path) -> anyhow::Result<BTreeMap<CellId, CellResult>> {
    let mut done = BTreeMap::new();
    let Ok(bytes) = std::fs::read(path) else {
        return Ok(done);
    };
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if whole < bytes.len() {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(whole as u64)?;
    }
    for (n, line) in bytes[..whole].lines().enumerate() {
        let line = line?;
        let r: CellResult = serde_json::from_str(&line).map_err(|e| {
            anyhow::anyhow!(
                "{}: line {}: not a finished cell: {e}",
                path.display(),
                n + 1
            )
        })?;
        done.insert(r.cell_id.clone(), r);
    }
    Ok(done)
}
