//! The policy matrix: every policy on every paper's scenario, over several seeds, as the mean
//! speedup over `linux-default` and its spread (`hetsched reproduce matrix`). Each paper's policy
//! wins on its own ground; the matrix shows what it does on the others', the homogeneous and the
//! over-subscribed cases included.
//!
//! The scenarios are the papers' own machines and workloads (one each, the paper's main case), plus
//! two each paper ignores: a modern hybrid part running a parallel build, and an over-subscribed
//! server. Run lengths are the shortest that let every workload finish, or, for closed loops, show
//! several completions of every program.

use super::{kernel, machine, run_grid, workload, Experiment, PolicyChoice, Row};
use crate::static_best::{self, STATIC_BEST_MAX_ASSIGNMENTS};
use hetsched_core::policies::policy_names;
use hetsched_core::policies::{
    amps::NAME as AMPS, bulldover::NAME as BULLDOVER, data_sharing::NAME as DATA_SHARING,
    hass::NAME as HASS, hetsched::NAME as HETSCHED, ipc_driven::NAME as IPC_DRIVEN,
    linux_default::NAME as LINUX_DEFAULT, numa_amp::NAME as NUMA_AMP,
};
use hetsched_sim::engine::NS_PER_S;
use hetsched_sim::metrics::speedup;
use hetsched_sim::SimConfig;
use serde::Serialize;

/// The kernel baseline of this paper's comparisons. The matrix asks what a user gains today: today's kernel.
const BASELINE: &str = hetsched_sim::baseline::linux_6::NAME;

pub const EXPERIMENTS: &[(&str, &str)] = &[(
    "matrix",
    "every policy on every paper's scenario: mean speedup over linux-default and its spread",
)];

/// One scenario of the matrix.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    pub label: &'static str,
    /// Whose ground it is.
    pub paper: &'static str,
    pub machine: &'static str,
    pub workload: &'static str,
    /// Simulated seconds (a limit for workloads that end by themselves).
    pub seconds: f64,
}

/// The scenarios, paper by paper, then the ones no paper designed for.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        label: "AMPS SMP, OpenMP equake-like",
        paper: "AMPS",
        machine: "amps-smp",
        workload: "omp-equake-like",
        seconds: 120.0,
    },
    Scenario {
        label: "AMPS NUMA-2, OpenMP swim-like",
        paper: "AMPS",
        machine: "amps-numa-2",
        workload: "omp-swim-like",
        seconds: 120.0,
    },
    Scenario {
        label: "HASS AMD-2,2, HH mix",
        paper: "HASS",
        machine: "hass-amd-2-2",
        workload: "hass-hh-like",
        seconds: 300.0,
    },
    Scenario {
        label: "HASS AMD-2,2, HH, memory-bound first",
        paper: "HASS",
        machine: "hass-amd-2-2",
        workload: "hass-hh-memory-first-like",
        seconds: 300.0,
    },
    Scenario {
        label: "BulldOver, mcf + sphinx3",
        paper: "BulldOver",
        machine: "bulldover",
        workload: "bulldover-mcf-sphinx3-like",
        seconds: 600.0,
    },
    Scenario {
        label: "Pinter SMP, custom sharing",
        paper: "Pinter",
        machine: "pinter-smp",
        workload: "pinter-custom-like",
        seconds: 60.0,
    },
    Scenario {
        label: "Ding 4f12s, PARSEC-like",
        paper: "Ding",
        machine: "ding-4f12s",
        workload: "parsec-like",
        seconds: 60.0,
    },
    Scenario {
        label: "Intel hybrid, parallel make",
        paper: "none",
        machine: "intel-hybrid-8p16e",
        workload: "make-like",
        seconds: 120.0,
    },
    Scenario {
        label: "AMPS SMP, over-subscribed server",
        paper: "none",
        machine: "amps-smp",
        workload: "jbb-like",
        seconds: 20.0,
    },
];

/// Seeds of every cell.
pub const SEEDS: [u64; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

/// One cell: a policy on a scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// Mean over seeds of the speedup over linux-default on the same seed.
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

impl Cell {
    fn of(speedups: &[f64]) -> Cell {
        Cell {
            mean: super::mean(speedups),
            min: speedups.iter().copied().fold(f64::INFINITY, f64::min),
            max: speedups.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// The matrix, scenarios by policies.
#[derive(Clone, Debug, Serialize)]
pub struct Matrix {
    pub scenarios: Vec<String>,
    pub policies: Vec<String>,
    /// `cells[scenario][policy]`.
    pub cells: Vec<Vec<Cell>>,
    /// Per scenario: the best static assignment of its applications to the core-class partitions
    /// (HASS's oracle, [`crate::static_best`]), on each seed the best of them all; `None` where it
    /// is not computable ([`Matrix::static_best_note`] says why).
    pub static_best: Vec<Option<Cell>>,
    pub static_best_note: Vec<String>,
}

/// How far `hetsched` may trail the best other policy on a scenario: the combined policy promises
/// to at least match the best other policy on every scenario, within 1%.
pub const MATCH_TOLERANCE: f64 = 0.01;
/// How far `hetsched` may trail static-best where it is computable: within 3%.
pub const STATIC_BEST_TOLERANCE: f64 = 0.03;
/// How far `hetsched` may fall below linux-default anywhere: never by more than 1%.
pub const BASELINE_TOLERANCE: f64 = 0.01;

pub fn run(name: &str, progress: &(dyn Fn(usize, usize, &str) + Sync)) -> Option<Experiment> {
    (name == "matrix").then(|| matrix(SCENARIOS, progress))
}

/// The matrix over `scenarios` (every registered policy, [`SEEDS`]).
pub fn matrix(
    scenarios: &[Scenario],
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Experiment {
    let names: Vec<&'static str> = policy_names().collect();
    let choices: Vec<PolicyChoice> = names.iter().map(|n| PolicyChoice::plain(n)).collect();
    let base = names
        .iter()
        .position(|n| *n == LINUX_DEFAULT)
        .expect("the baseline is registered");
    let mut rows = Vec::new();
    let mut cells = Vec::new();
    let mut static_bests = Vec::new();
    let mut notes = Vec::new();
    for sc in scenarios {
        let topo = machine(sc.machine);
        let w = workload(sc.workload, &topo);
        let finite = w.is_finite();
        let cfg = |_: &hetsched_sim::Workload| SimConfig {
            duration_ns: (sc.seconds * NS_PER_S as f64) as u64,
            baseline: kernel(BASELINE),
            ..Default::default()
        };
        let grid = run_grid(
            &topo,
            std::slice::from_ref(&w),
            &choices,
            &SEEDS,
            &cfg,
            progress,
        );
        let runs = &grid[0];
        let row: Vec<Cell> = runs
            .iter()
            .map(|seeds| {
                let s: Vec<f64> = seeds
                    .iter()
                    .zip(&runs[base])
                    .map(|(r, b)| speedup(b, r, finite))
                    .collect();
                Cell::of(&s)
            })
            .collect();
        let (best, note) = match static_best::assignments(&topo, &w, STATIC_BEST_MAX_ASSIGNMENTS) {
            Ok(list) => {
                let n = list.len();
                let s: Vec<f64> = SEEDS
                    .iter()
                    .zip(&runs[base])
                    .map(|(&seed, b)| {
                        let cfg = SimConfig { seed, ..cfg(&w) };
                        let st =
                            static_best::run_assignments(&topo, &w, list.clone(), &cfg, progress);
                        st.best_against(b, finite)
                            .map_or(f64::NEG_INFINITY, |r| speedup(b, r, finite))
                    })
                    .collect();
                (
                    Some(Cell::of(&s)),
                    format!("best of {n} static assignments on each seed"),
                )
            }
            Err(e) => (None, e.to_string()),
        };
        if let Some(c) = &best {
            rows.push(cell_row(format!("{} / static-best", sc.label), c, &note));
        }
        rows.extend(target_rows(sc, &names, &row, best.as_ref()));
        static_bests.push(best);
        notes.push(note);
        for (p, c) in names.iter().zip(&row) {
            let ground = if sc.paper == "none" {
                "no paper's ground".to_string()
            } else {
                format!("{}'s ground", sc.paper)
            };
            rows.push(cell_row(format!("{} / {p}", sc.label), c, &ground));
        }
        cells.push(row);
    }
    rows.extend(beats_rows(scenarios, &names, &cells));
    let mut e = Experiment::new(
        "matrix",
        "all five",
        kernel(BASELINE),
        "Every policy on every paper's scenario: mean speedup over linux-default (same seed)",
        rows,
    );
    e.matrix = Some(Matrix {
        scenarios: scenarios.iter().map(|s| s.label.to_string()).collect(),
        policies: names.iter().map(ToString::to_string).collect(),
        cells,
        static_best: static_bests,
        static_best_note: notes,
    });
    e
}

/// An informational row of one cell: its mean, and `what` beside its spread over the seeds.
fn cell_row(label: String, c: &Cell, what: &str) -> Row {
    Row::info(
        label,
        None,
        c.mean,
        "x",
        format!(
            "{what}; {:.3}-{:.3} over {} seeds",
            c.min,
            c.max,
            SEEDS.len()
        ),
    )
}

/// Which paper each policy comes from (the scenarios' `paper`); the IPC-driven algorithm is the
/// HASS paper's comparison.
fn paper_of(policy: &str) -> Option<&'static str> {
    Some(match policy {
        AMPS => "AMPS",
        HASS | IPC_DRIVEN => "HASS",
        BULLDOVER => "BulldOver",
        DATA_SHARING => "Pinter",
        NUMA_AMP => "Ding",
        _ => return None,
    })
}

/// The second target, as checked rows: `hetsched` beats each paper's policy, by more than
/// [`MATCH_TOLERANCE`], on at least one scenario that paper did not design for (its best such
/// scenario is shown).
fn beats_rows(scenarios: &[Scenario], names: &[&str], cells: &[Vec<Cell>]) -> Vec<Row> {
    let Some(h) = names.iter().position(|n| *n == HETSCHED) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (p, name) in names.iter().enumerate() {
        let Some(paper) = paper_of(name) else {
            continue;
        };
        let best = scenarios
            .iter()
            .zip(cells)
            .filter(|(sc, _)| sc.paper != paper)
            .map(|(sc, row)| {
                (
                    row[h].mean / row[p].mean,
                    sc.label,
                    row[p].mean,
                    row[h].mean,
                )
            })
            .fold(None, |a: Option<(f64, &str, f64, f64)>, b| match a {
                Some(x) if x.0 >= b.0 => Some(x),
                _ => Some(b),
            });
        if let Some((ratio, label, theirs, ours)) = best {
            out.push(Row::checked(
                format!("hetsched beats {name} off {paper}'s ground"),
                Some(theirs),
                ours,
                "x",
                ratio > 1.0 + MATCH_TOLERANCE,
                format!(
                    "paper column: {name}; its largest loss to hetsched off its ground: {label} ({:+.1}%)",
                    (ratio - 1.0) * 100.0
                ),
            ));
        }
    }
    out
}

/// The targets for `hetsched` on one scenario, as checked rows: within
/// [`MATCH_TOLERANCE`] of the best other policy, within [`STATIC_BEST_TOLERANCE`] of static-best
/// where computable, no more than [`BASELINE_TOLERANCE`] below linux-default. None when `hetsched`
/// is not among the policies.
fn target_rows(sc: &Scenario, names: &[&str], row: &[Cell], best: Option<&Cell>) -> Vec<Row> {
    let Some(h) = names.iter().position(|n| *n == HETSCHED) else {
        return Vec::new();
    };
    let ours = row[h].mean;
    let (best_other, best_name) = names
        .iter()
        .zip(row)
        .filter(|(n, _)| **n != HETSCHED)
        .map(|(n, c)| (c.mean, *n))
        .fold(
            (f64::NEG_INFINITY, ""),
            |a, b| if b.0 > a.0 { b } else { a },
        );
    let mut out = vec![
        Row::checked(
            format!("{} / hetsched vs best other", sc.label),
            Some(best_other),
            ours,
            "x",
            ours >= best_other * (1.0 - MATCH_TOLERANCE),
            format!(
                "paper column: the best other policy ({best_name}); hetsched within {:.0}% of it",
                MATCH_TOLERANCE * 100.0
            ),
        ),
        Row::checked(
            format!("{} / hetsched vs linux-default", sc.label),
            Some(1.0),
            ours,
            "x",
            ours >= 1.0 - BASELINE_TOLERANCE,
            format!(
                "no more than {:.0}% below linux-default",
                BASELINE_TOLERANCE * 100.0
            ),
        ),
    ];
    if let Some(b) = best {
        out.push(Row::checked(
            format!("{} / hetsched vs static-best", sc.label),
            Some(b.mean),
            ours,
            "x",
            ours >= b.mean * (1.0 - STATIC_BEST_TOLERANCE),
            format!(
                "paper column: static-best; hetsched within {:.0}% of it (gap {:+.1}%)",
                STATIC_BEST_TOLERANCE * 100.0,
                (ours / b.mean - 1.0) * 100.0
            ),
        ));
    }
    out
}
