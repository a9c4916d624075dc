//! The sweep file (TOML): parsing, checking and expansion into cells. Every error is one line
//! naming the file and the key (`sweep.toml: machines[2].fast: ...`), found before anything runs
//! or is written.

use super::Cell;
use crate::machine::resolve_machine;
use crate::simulate::{check_args, implemented_policies, resolve_workload};
use hetsched_core::input::InputError;
use hetsched_core::policies::amps::NumaMode;
use hetsched_core::policies::{entry, policy_names};
use hetsched_core::shapes::MachineShape;
use hetsched_sim::baseline::{baseline_by_name, linux_6, BASELINES};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::Path;

/// Clock of the slow class of a generated two-class machine, GHz, unless the sweep sets
/// `slow_ghz`; the fast class runs `speed_ratio` times faster. 2 GHz is a typical efficiency-core
/// clock (an Intel E-core's base is 1.8-2.2 GHz).
pub const DEFAULT_SLOW_GHZ: f64 = 2.0;

/// The scheduler tick and time slice when the sweep does not set `quantum_ms` (simulate's
/// default, `--quantum-ms`).
pub const DEFAULT_QUANTUM_MS: f64 = 4.0;

/// Most cells one sweep file may expand to: a guard against a typo multiplying the grid (a
/// million cells is days of simulation on one machine).
pub const MAX_CELLS: usize = 1_000_000;

/// The sweep file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    /// Presets, machine files (relative to the sweep file) or `{ generate = ... }` tables.
    machines: Vec<toml::Value>,
    /// Presets or workload files (relative to the sweep file).
    workloads: Vec<String>,
    /// Policies compared (default: every policy that runs on its own).
    policies: Option<Vec<String>>,
    /// A count (seeds 1..=n) or a list of seeds.
    seeds: toml::Value,
    /// The simulated kernel's balancer (default linux-6).
    kernel_baseline: Option<String>,
    /// Simulated seconds per run (default: until the work is done).
    duration: Option<f64>,
    /// Tick and time slice, ms.
    quantum_ms: Option<f64>,
    /// Policy parameters, each a value or a list; the grid takes their product.
    #[serde(default)]
    params: Params,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    numa: Option<toml::Value>,
    interval_ms: Option<toml::Value>,
}

/// `{ generate = "two-class", ... }`: a family of machine shapes, the product of its lists.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Generate {
    generate: String,
    fast: toml::Value,
    slow: toml::Value,
    speed_ratio: toml::Value,
    slow_ghz: Option<toml::Value>,
    numa_nodes: Option<toml::Value>,
    shared_llc: Option<toml::Value>,
    fpu_modules: Option<toml::Value>,
}

/// The only generator so far: fast and slow cores, the fast ones `speed_ratio` times faster.
pub const TWO_CLASS: &str = "two-class";

/// A checked sweep: its text (kept beside the results, to recognise it on resume), and its cells
/// in grid order (machine-major, then workload, parameters, seed).
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The file's path as given, naming it in errors.
    pub source_name: String,
    /// The file's text.
    pub text: String,
    /// SHA-256 (hex) of the text: every row of the table carries it.
    pub sha256: String,
    /// The grid.
    pub cells: Vec<Cell>,
}

/// Read and check a sweep file; relative paths in it are relative to its directory.
pub fn load_sweep(path: &Path) -> Result<Sweep, InputError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| InputError::unreadable(&name, &e))?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse_sweep(&text, &name, base)
}

/// One value or a list of them, as a list; `what` names the expected element in errors.
fn list<T: DeserializeOwned>(
    v: &toml::Value,
    src: &str,
    field: &str,
    what: &str,
) -> Result<Vec<T>, InputError> {
    let items = match v {
        toml::Value::Array(a) => a.clone(),
        one => vec![one.clone()],
    };
    if items.is_empty() {
        return Err(InputError::at(src, field, "an empty list sweeps nothing"));
    }
    items
        .into_iter()
        .map(|item| {
            item.clone()
                .try_into()
                .map_err(|_| InputError::at(src, field, format!("{item} is not {what}")))
        })
        .collect()
}

/// Like [`list`], for an optional key with a default.
fn list_or<T: DeserializeOwned>(
    v: Option<&toml::Value>,
    default: T,
    src: &str,
    field: &str,
    what: &str,
) -> Result<Vec<T>, InputError> {
    v.map_or(Ok(vec![default]), |v| list(v, src, field, what))
}

/// A machine of the grid: what a cell carries, and its label.
struct GridMachine {
    spec: String,
    label: String,
}

/// The machines of one `machines` entry.
fn machines_of(
    v: &toml::Value,
    src: &str,
    field: &str,
    base: &Path,
) -> Result<Vec<GridMachine>, InputError> {
    match v {
        toml::Value::String(name) => {
            let spec = file_or_preset(name, base, src, field)?;
            Ok(vec![GridMachine {
                spec,
                label: name.clone(),
            }])
        }
        toml::Value::Table(_) => {
            let g: Generate = v
                .clone()
                .try_into()
                .map_err(|e: toml::de::Error| InputError::at(src, field, e.message().trim()))?;
            generate(&g, src, field)
        }
        other => Err(InputError::at(
            src,
            field,
            format!(
                "{other} is neither a machine (preset or file) nor a {{ generate = ... }} table"
            ),
        )),
    }
}

/// Every shape of a `generate` table (fast-major, then slow, speed ratio, slow clock, nodes,
/// cache layout, modules).
fn generate(g: &Generate, src: &str, field: &str) -> Result<Vec<GridMachine>, InputError> {
    if g.generate != TWO_CLASS {
        return Err(InputError::at(
            src,
            &format!("{field}.generate"),
            format!(
                "{:?}: unknown generator (generators: {TWO_CLASS})",
                g.generate
            ),
        ));
    }
    let at = |k: &str| format!("{field}.{k}");
    let fast: Vec<u32> = list(&g.fast, src, &at("fast"), "a core count")?;
    let slow: Vec<u32> = list(&g.slow, src, &at("slow"), "a core count")?;
    let ratios: Vec<f64> = list(&g.speed_ratio, src, &at("speed_ratio"), "a number")?;
    let slow_ghz: Vec<f64> = list_or(
        g.slow_ghz.as_ref(),
        DEFAULT_SLOW_GHZ,
        src,
        &at("slow_ghz"),
        "a number",
    )?;
    let nodes: Vec<u32> = list_or(
        g.numa_nodes.as_ref(),
        1,
        src,
        &at("numa_nodes"),
        "a node count",
    )?;
    let llcs: Vec<bool> = list_or(
        g.shared_llc.as_ref(),
        true,
        src,
        &at("shared_llc"),
        "true or false",
    )?;
    let fpus: Vec<bool> = list_or(
        g.fpu_modules.as_ref(),
        false,
        src,
        &at("fpu_modules"),
        "true or false",
    )?;
    for &r in &ratios {
        if !(r.is_finite() && r > 1.0) {
            return Err(InputError::at(
                src,
                &at("speed_ratio"),
                format!("{r}: must be above 1 (the fast cores are faster)"),
            ));
        }
    }
    let mut out = Vec::new();
    for &f in &fast {
        for &s in &slow {
            for &r in &ratios {
                for &ghz in &slow_ghz {
                    for &n in &nodes {
                        for &llc in &llcs {
                            for &fpu in &fpus {
                                let mut name = format!("two-class-{f}f{s}s-x{r}-{ghz}ghz-{n}n");
                                if !llc {
                                    name.push_str("-private-llc");
                                }
                                if fpu {
                                    name.push_str("-fpu-modules");
                                }
                                let shape = MachineShape {
                                    name: name.clone(),
                                    ghz: vec![ghz * r, ghz],
                                    cores: vec![f, s],
                                    nodes: n,
                                    shared_llc: llc,
                                    fpu_modules: fpu,
                                };
                                if f == 0 || s == 0 || n == 0 || n > f + s {
                                    return Err(InputError::at(
                                        src,
                                        field,
                                        format!("{name}: needs at least one fast and one slow core, and 1 to {} nodes", f + s),
                                    ));
                                }
                                shape
                                    .topology()
                                    .map_err(|e| InputError::at(src, field, e.to_string()))?;
                                out.push(GridMachine {
                                    spec: shape.toml(),
                                    label: name,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A preset name as it is, or a file's text (read relative to the sweep file), so the cell
/// carries what it runs.
fn file_or_preset(name: &str, base: &Path, src: &str, field: &str) -> Result<String, InputError> {
    if !name.ends_with(".toml") {
        return Ok(name.to_string());
    }
    let path = base.join(name);
    std::fs::read_to_string(&path)
        .map_err(|e| InputError::at(src, field, format!("{}: cannot read: {e}", path.display())))
}

/// Check a sweep and expand it into cells. `base`: the directory relative paths start from.
pub fn parse_sweep(text: &str, source_name: &str, base: &Path) -> Result<Sweep, InputError> {
    let src = source_name;
    let file: SweepFile = toml::from_str(text).map_err(|e| InputError::from_toml(src, text, &e))?;
    if file.machines.is_empty() {
        return Err(InputError::at(src, "machines", "names no machine"));
    }
    if file.workloads.is_empty() {
        return Err(InputError::at(src, "workloads", "names no workload"));
    }
    let mut machines = Vec::new();
    for (i, m) in file.machines.iter().enumerate() {
        machines.extend(machines_of(m, src, &format!("machines[{i}]"), base)?);
    }
    let mut workloads = Vec::new();
    for (i, w) in file.workloads.iter().enumerate() {
        workloads.push((
            file_or_preset(w, base, src, &format!("workloads[{i}]"))?,
            w.clone(),
        ));
    }
    let policies: Vec<String> = match file.policies {
        None => policy_names().map(String::from).collect(),
        Some(p) if p.is_empty() => {
            return Err(InputError::at(src, "policies", "names no policy"));
        }
        Some(p) => p,
    };
    for (i, p) in policies.iter().enumerate() {
        if entry(p).is_none() {
            return Err(InputError::at(
                src,
                &format!("policies[{i}]"),
                format!(
                    "{p:?}: unknown policy (implemented: {})",
                    implemented_policies()
                ),
            ));
        }
    }
    let seeds: Vec<u64> = match &file.seeds {
        toml::Value::Integer(n) if *n > MAX_CELLS as i64 => {
            return Err(InputError::at(
                src,
                "seeds",
                format!("{n}: more than the {MAX_CELLS} cells a grid may have"),
            ))
        }
        toml::Value::Integer(n) if *n >= 1 => (1..=*n as u64).collect(),
        toml::Value::Integer(n) => {
            return Err(InputError::at(
                src,
                "seeds",
                format!("{n}: need at least one seed"),
            ))
        }
        v => list(v, src, "seeds", "a seed (a whole number from 0)")?,
    };
    let kernel_baseline = file
        .kernel_baseline
        .unwrap_or_else(|| linux_6::NAME.to_string());
    if baseline_by_name(&kernel_baseline).is_none() {
        return Err(InputError::at(
            src,
            "kernel_baseline",
            format!(
                "{kernel_baseline:?}: unknown (baselines: {})",
                BASELINES
                    .iter()
                    .map(|b| b.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let numas: Vec<Option<String>> = match &file.params.numa {
        None => vec![None],
        Some(v) => {
            let names: Vec<String> = list(v, src, "params.numa", "a NUMA mode")?;
            for n in &names {
                n.parse::<NumaMode>()
                    .map_err(|e| InputError::at(src, "params.numa", e))?;
            }
            names.into_iter().map(Some).collect()
        }
    };
    let intervals: Vec<Option<f64>> = match &file.params.interval_ms {
        None => vec![None],
        Some(v) => list(v, src, "params.interval_ms", "a number of ms")?
            .into_iter()
            .map(Some)
            .collect(),
    };
    let quantum_ms = file.quantum_ms.unwrap_or(DEFAULT_QUANTUM_MS);
    let count = machines.len() * workloads.len() * numas.len() * intervals.len() * seeds.len();
    if count > MAX_CELLS {
        return Err(InputError::at(
            src,
            "machines",
            format!("the grid has {count} cells, more than {MAX_CELLS}"),
        ));
    }
    let mut cells = Vec::with_capacity(count);
    for m in &machines {
        for (w, w_label) in &workloads {
            for numa in &numas {
                for &interval_ms in &intervals {
                    for &seed in &seeds {
                        cells.push(Cell {
                            machine: m.spec.clone(),
                            machine_label: m.label.clone(),
                            workload: w.clone(),
                            workload_label: w_label.clone(),
                            policies: policies.clone(),
                            kernel_baseline: kernel_baseline.clone(),
                            numa: numa.clone(),
                            interval_ms,
                            seed,
                            duration_s: file.duration,
                            quantum_ms,
                        });
                    }
                }
            }
        }
    }
    check_cells(&cells, &machines, &workloads, src)?;
    Ok(Sweep {
        source_name: source_name.to_string(),
        text: text.to_string(),
        sha256: Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        cells,
    })
}

/// Everything `simulate` checks, before any cell runs: each machine resolves, each workload
/// resolves against each machine, and the first cell of each parameter setting passes
/// simulate's argument checks (numbers in range).
fn check_cells(
    cells: &[Cell],
    machines: &[GridMachine],
    workloads: &[(String, String)],
    src: &str,
) -> Result<(), InputError> {
    let at = |field: &str, e: anyhow::Error| InputError::at(src, field, format!("{e:#}"));
    for (i, m) in machines.iter().enumerate() {
        let topo = resolve_machine(&m.spec).map_err(|e| at(&format!("machines[{i}]"), e))?;
        for (j, (w, _)) in workloads.iter().enumerate() {
            resolve_workload(w, &topo).map_err(|e| at(&format!("workloads[{j}]"), e))?;
        }
    }
    // The parameters' ranges (interval, duration, quantum) are simulate's to check: plan the
    // first cell of each parameter setting, as simulate would.
    let mut seen = Vec::new();
    for c in cells {
        let key = (c.numa.clone(), c.interval_ms.map(f64::to_bits));
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        check_args(&c.simulate_args()).map_err(|e| at("params", e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Sweep, InputError> {
        parse_sweep(text, "s.toml", Path::new("."))
    }

    #[test]
    fn the_grid_is_the_product_of_its_lists() {
        let s = parse(
            r#"
            machines = ["amps-smp", { generate = "two-class", fast = [2, 4], slow = [4, 8], speed_ratio = [1.5, 2.0, 3.0], numa_nodes = [1, 2] }]
            workloads = ["mixed-default"]
            policies = ["amps"]
            seeds = 3
            [params]
            numa = ["always", "rss"]
            interval_ms = [250, 1000]
            "#,
        )
        .unwrap();
        // (1 preset + 2 x 2 x 3 x 2 shapes) x 1 workload x 2 x 2 parameters x 3 seeds.
        assert_eq!(s.cells.len(), (1 + 24) * 2 * 2 * 3);
        let ids: std::collections::BTreeSet<_> = s.cells.iter().map(Cell::id).collect();
        assert_eq!(ids.len(), s.cells.len(), "every cell has its own id");
        let first = &s.cells[0];
        assert_eq!(
            (
                first.machine.as_str(),
                first.seed,
                first.numa.as_deref(),
                first.interval_ms
            ),
            ("amps-smp", 1, Some("always"), Some(250.0))
        );
        let shape = &s.cells[2 * 2 * 3];
        assert_eq!(shape.machine_label, "two-class-2f4s-x1.5-2ghz-1n");
        assert!(
            shape.machine.contains("freq_ghz = 3.0"),
            "{}",
            shape.machine
        );
    }

    #[test]
    fn a_cells_id_depends_on_its_content_not_on_its_grid() {
        let grid = |seeds: &str| {
            parse(&format!(
                "machines = [\"amps-smp\", \"bulldover\"]\nworkloads = [\"mixed-default\"]\nseeds = {seeds}\n"
            ))
            .unwrap()
        };
        let both = grid("[1, 2]");
        let two = grid("[2]");
        let of = |s: &Sweep, machine: &str, seed: u64| {
            s.cells
                .iter()
                .find(|c| c.machine == machine && c.seed == seed)
                .map(Cell::id)
                .unwrap()
        };
        assert_eq!(of(&both, "bulldover", 2), of(&two, "bulldover", 2));
        assert_ne!(of(&both, "bulldover", 1), of(&both, "bulldover", 2));
        assert_ne!(of(&both, "amps-smp", 2), of(&both, "bulldover", 2));
        // Every policy by default, the baseline's kernel linux-6, simulate's quantum.
        let c = &two.cells[0];
        assert!(c.policies.iter().any(|p| p == "hetsched"));
        assert_eq!((c.kernel_baseline.as_str(), c.quantum_ms), ("linux-6", 4.0));
    }

    #[test]
    fn a_seed_count_past_the_cell_limit_is_refused_before_it_is_expanded() {
        let e = parse(
            "machines = [\"amps-smp\"]\nworkloads = [\"mixed-default\"]\nseeds = 1000000000000\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.toml: seeds: 1000000000000: more than the 1000000 cells a grid may have"
        );
    }

    #[test]
    fn shapes_need_a_fast_and_a_slow_core() {
        let e = parse(
            "machines = [{ generate = \"two-class\", fast = 0, slow = 2, speed_ratio = 2.0 }]\nworkloads = [\"mixed-default\"]\nseeds = 1\n",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("s.toml: machines[0]: two-class-0f2s-x2-2ghz-1n: needs at least one fast and one slow core"),
            "{e}"
        );
        let e = parse(
            "machines = [{ generate = \"three-class\", fast = 1, slow = 2, speed_ratio = 2.0 }]\nworkloads = [\"mixed-default\"]\nseeds = 1\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.toml: machines[0].generate: \"three-class\": unknown generator (generators: two-class)"
        );
    }
}
