//! The policy matrix: every policy on every paper's scenario, over several seeds, as the mean
//! speedup over `linux-default` and its spread (`hetsched reproduce matrix`). Each paper's policy
//! wins on its own ground; the matrix shows what it does on the others', the homogeneous and the
//! over-subscribed cases included.
//!
//! The scenarios are the papers' own machines and workloads (one each, the paper's main case), plus
//! two each paper ignores: a modern hybrid part running a parallel build, and an over-subscribed
//! server. Run lengths are the shortest that let every workload finish, or, for closed loops, show
//! several completions of every program.

use super::{machine, run_grid, workload, Experiment, PolicyChoice, Row};
use crate::engine::NS_PER_S;
use crate::metrics::speedup;
use crate::SimConfig;
use hetsched_core::policies::policy_names;
use serde::Serialize;

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
pub const SEEDS: [u64; 3] = [1, 2, 3];

/// One cell: a policy on a scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// Mean over seeds of the speedup over linux-default on the same seed.
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// The matrix, scenarios by policies.
#[derive(Clone, Debug, Serialize)]
pub struct Matrix {
    pub scenarios: Vec<String>,
    pub policies: Vec<String>,
    /// `cells[scenario][policy]`.
    pub cells: Vec<Vec<Cell>>,
}

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
        .position(|n| *n == "linux-default")
        .expect("the baseline is registered");
    let mut rows = Vec::new();
    let mut cells = Vec::new();
    for sc in scenarios {
        let topo = machine(sc.machine);
        let w = workload(sc.workload, &topo);
        let finite = w.is_finite();
        let cfg = |_: &crate::Workload| SimConfig {
            duration_ns: (sc.seconds * NS_PER_S as f64) as u64,
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
                Cell {
                    mean: super::mean(&s),
                    min: s.iter().copied().fold(f64::INFINITY, f64::min),
                    max: s.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                }
            })
            .collect();
        for (p, c) in names.iter().zip(&row) {
            rows.push(Row::info(
                format!("{} / {p}", sc.label),
                None,
                c.mean,
                "x",
                format!(
                    "{}; {:.3}-{:.3} over {} seeds",
                    if sc.paper == "none" {
                        "no paper's ground".to_string()
                    } else {
                        format!("{}'s ground", sc.paper)
                    },
                    c.min,
                    c.max,
                    SEEDS.len()
                ),
            ));
        }
        cells.push(row);
    }
    let mut e = Experiment::new(
        "matrix",
        "all five",
        "Every policy on every paper's scenario: mean speedup over linux-default (same seed)",
        rows,
    );
    e.matrix = Some(Matrix {
        scenarios: scenarios.iter().map(|s| s.label.to_string()).collect(),
        policies: names.iter().map(|s| s.to_string()).collect(),
        cells,
    });
    e
}
