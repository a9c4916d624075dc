//! The papers' experiments, reproduced on the simulator: each prints the paper's value beside ours
//! and says whether ours holds within the tolerance the experiment states (`hetsched reproduce`).
//!
//! An experiment is a function of nothing but its name: machine presets, workload presets and
//! seeds are fixed here, and every constant comes from the simulator's shared model. A row that
//! does not hold is reported as not holding; its `note` says what the tolerance was.

pub mod amps;
pub mod bulldover;
pub mod data_sharing;
pub mod figure;
pub mod hass;
pub mod matrix;
pub mod numa_amp;
pub mod reasons;

use hetsched_core::policies::policy_with_options;
use hetsched_core::policies::PolicyOptions;
use hetsched_core::Topology;
use hetsched_sim::baseline::{baseline_by_name, BaselineEntry};
use hetsched_sim::batch::{run_jobs, Job};
use hetsched_sim::{RunResult, SimConfig, Workload};
use serde::Serialize;

pub use figure::{Bar, BarGroup, Figure};

/// One line of an experiment: the paper's figure beside ours.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub label: String,
    /// The paper's value, when it gives one.
    pub paper_value: Option<f64>,
    pub our_value: f64,
    pub unit: String,
    /// Whether ours is within the stated tolerance; `None` for a row shown for information.
    pub holds: Option<bool>,
    /// The tolerance, or why the row is informational.
    pub note: String,
}

impl Row {
    fn checked(
        label: impl Into<String>,
        paper_value: Option<f64>,
        our_value: f64,
        unit: &str,
        holds: bool,
        note: impl Into<String>,
    ) -> Row {
        Row {
            holds: Some(holds),
            ..Row::info(label, paper_value, our_value, unit, note)
        }
    }

    fn info(
        label: impl Into<String>,
        paper_value: Option<f64>,
        our_value: f64,
        unit: &str,
        note: impl Into<String>,
    ) -> Row {
        Row {
            label: label.into(),
            paper_value,
            our_value,
            unit: unit.into(),
            holds: None,
            note: note.into(),
        }
    }
}

/// A histogram to draw (the paper's distribution figures).
#[derive(Clone, Debug, Serialize)]
pub struct Histogram {
    pub title: String,
    pub x_label: String,
    /// Bin edges (one more than the counts of each series).
    pub edges: Vec<f64>,
    /// (series label, fraction of samples per bin).
    pub series: Vec<(String, Vec<f64>)>,
}

/// One reproduced experiment.
#[derive(Clone, Debug, Serialize)]
pub struct Experiment {
    pub experiment: String,
    /// The paper reproduced: authors, title, venue, year.
    pub paper: String,
    /// The simulated kernel's balancer the experiment ran under (docs/baselines.md): the paper's
    /// own era (`linux-2.6` for AMPS, HASS and Pinter, `linux-cfs` for BulldOver and Ding), and
    /// today's `linux-6` for the matrix.
    pub baseline: String,
    pub title: String,
    pub rows: Vec<Row>,
    /// Every checked row holds.
    pub holds: bool,
    /// The paper's figures and tables as bars with their spread over seeds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub figures: Vec<Figure>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub histograms: Vec<Histogram>,
    /// Policies by scenarios (`reproduce matrix`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matrix: Option<matrix::Matrix>,
}

impl Experiment {
    fn new(
        experiment: &str,
        paper: &str,
        baseline: &BaselineEntry,
        title: &str,
        rows: Vec<Row>,
    ) -> Experiment {
        let holds = rows.iter().all(|r| r.holds != Some(false));
        // A failing row says so, and why, in its own note.
        let rows = rows
            .into_iter()
            .map(|mut r| {
                if r.holds == Some(false) {
                    r.note = reasons::failing_note(experiment, &r.label, &r.note);
                }
                r
            })
            .collect();
        Experiment {
            experiment: experiment.into(),
            paper: paper.into(),
            baseline: baseline.name.into(),
            title: title.into(),
            rows,
            holds,
            figures: Vec::new(),
            histograms: Vec::new(),
            matrix: None,
        }
    }
}

/// (name, what it reproduces) of every experiment, paper by paper.
pub fn experiments() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    amps::EXPERIMENTS
        .iter()
        .chain(hass::EXPERIMENTS)
        .chain(bulldover::EXPERIMENTS)
        .chain(data_sharing::EXPERIMENTS)
        .chain(numa_amp::EXPERIMENTS)
        .chain(matrix::EXPERIMENTS)
}

/// Run one experiment by name; `progress(done, total, label)` after each simulation.
pub fn run_experiment(
    name: &str,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Option<Experiment> {
    amps::run(name, progress)
        .or_else(|| hass::run(name, progress))
        .or_else(|| bulldover::run(name, progress))
        .or_else(|| data_sharing::run(name, progress))
        .or_else(|| numa_amp::run(name, progress))
        .or_else(|| matrix::run(name, progress))
}

/// A policy by CLI name with options, and the label it is reported under.
#[derive(Clone, Debug)]
pub(crate) struct PolicyChoice {
    pub name: &'static str,
    pub options: PolicyOptions,
    pub label: String,
}

impl PolicyChoice {
    pub fn plain(name: &'static str) -> Self {
        Self {
            name,
            options: PolicyOptions::default(),
            label: name.to_string(),
        }
    }
}

/// Run every (workload, policy, seed) on one machine; results indexed `[workload][policy][seed]`.
pub(crate) fn run_grid(
    topology: &Topology,
    workloads: &[Workload],
    policies: &[PolicyChoice],
    seeds: &[u64],
    cfg_for: &dyn Fn(&Workload) -> SimConfig,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Vec<Vec<Vec<RunResult>>> {
    let mut jobs = Vec::new();
    for w in workloads {
        for p in policies {
            for &seed in seeds {
                let p = p.clone();
                jobs.push(Job {
                    topology,
                    workload: w,
                    label: format!("{} {} seed {seed}", w.name, p.label),
                    make_policy: Box::new(move || {
                        let options = PolicyOptions { seed, ..p.options };
                        policy_with_options(p.name, &options).expect("a registered policy")
                    }),
                    cfg: SimConfig { seed, ..cfg_for(w) },
                });
            }
        }
    }
    let mut runs = run_jobs(&jobs, progress).into_iter();
    workloads
        .iter()
        .map(|_| {
            policies
                .iter()
                .map(|_| seeds.iter().filter_map(|_| runs.next()).collect())
                .collect()
        })
        .collect()
}

/// A registered kernel baseline by name (experiments name only baselines that exist).
pub(crate) fn kernel(name: &str) -> &'static BaselineEntry {
    baseline_by_name(name).expect("a registered baseline")
}

/// A machine preset (experiments name only presets that exist).
pub(crate) fn machine(name: &str) -> Topology {
    hetsched_core::presets::machine_preset(name)
        .expect("a machine preset")
        .expect("presets parse")
}

/// A workload preset resolved on a machine.
pub(crate) fn workload(name: &str, topo: &Topology) -> Workload {
    hetsched_sim::presets::workload_preset(name, topo)
        .expect("a workload preset")
        .expect("presets parse")
}

/// Median of a non-empty list (mean of the middle two for an even count).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Mean of a list (NaN when empty).
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Fraction of `v` in each bin of `edges` (the last bin closed).
pub fn histogram(v: &[f64], edges: &[f64]) -> Vec<f64> {
    let bins = edges.len().saturating_sub(1);
    let mut counts = vec![0.0; bins];
    for &x in v {
        if let Some(i) = (0..bins)
            .find(|&i| x >= edges[i] && (x < edges[i + 1] || (i + 1 == bins && x <= edges[i + 1])))
        {
            counts[i] += 1.0;
        }
    }
    let n = v.len().max(1) as f64;
    counts.iter().map(|c| c / n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_histogram() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(
            histogram(&[0.0, 0.5, 1.0, 2.0], &[0.0, 1.0, 2.0]),
            vec![0.5, 0.5]
        );
    }

    #[test]
    fn an_experiment_holds_only_if_every_checked_row_does() {
        let ok = Row::checked("a", None, 1.0, "x", true, "");
        let info = Row::info("b", None, 1.0, "x", "");
        let bad = Row::checked("c", None, 1.0, "x", false, "");
        let k = kernel("linux-6");
        assert!(Experiment::new("e", "p", k, "t", vec![ok.clone(), info.clone()]).holds);
        assert!(!Experiment::new("e", "p", k, "t", vec![ok, info, bad]).holds);
    }
}
