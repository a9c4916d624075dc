//! How the simulator's integration tests score the combined policy's promise: `hetsched` at least
//! [`VS_BASELINE`] times the default baseline and [`VS_BEST_OTHER`] times the best other policy,
//! by mean makespan over [`SEEDS`] seeds (a seed varies arrival jitter, placement order and
//! wake-up timing, and one run's makespan moves by more than the tolerances); and per application
//! ([`per_app_speedup`]) where a promise is about each program's gain.

#![allow(dead_code)]

use hetsched_core::policies::policy_by_name;
use hetsched_core::Topology;
use hetsched_sim::{simulate, RunResult, SimConfig, Workload};

/// Seeds whose mean makespan a ratio compares.
pub const SEEDS: u64 = 5;

/// `hetsched`'s makespan speedup over the default baseline must be at least this ...
pub const VS_BASELINE: f64 = 0.99;
/// ... and at least this times the best other policy's.
pub const VS_BEST_OTHER: f64 = 0.97;

/// The policies `hetsched` is compared with (every non-oracle policy but the baseline).
pub const OTHERS: &[&str] = &[
    "amps",
    "hass",
    "bulldover",
    "data-sharing",
    "ipc-driven",
    "numa-amp",
];

/// The runs of `policy` with seeds 1 to [`SEEDS`], each of at most 120 simulated seconds; panics
/// if a run does not finish.
fn finished_runs(topo: &Topology, w: &Workload, policy: &str) -> Vec<RunResult> {
    (1..=SEEDS)
        .map(|seed| {
            let cfg = SimConfig {
                seed,
                duration_ns: 120 * hetsched_sim::engine::NS_PER_S,
                ..SimConfig::default()
            };
            let r = simulate(topo, w, policy_by_name(policy).unwrap(), cfg);
            assert!(r.finished, "{policy} did not finish {}", w.name);
            r
        })
        .collect()
}

/// The mean makespan of `policy` over [`SEEDS`] seeds, runs of at most 120 simulated seconds;
/// panics if a run does not finish.
pub fn mean_makespan(topo: &Topology, w: &Workload, policy: &str) -> f64 {
    let runs = finished_runs(topo, w, policy);
    runs.iter().map(|r| r.makespan_s).sum::<f64>() / runs.len() as f64
}

/// Each app's completion time under `policy` (an app of several copies: the mean over its
/// copies), averaged over [`SEEDS`] seeds; panics if a run does not finish.
pub fn mean_completions(topo: &Topology, w: &Workload, policy: &str) -> Vec<f64> {
    let runs = finished_runs(topo, w, policy);
    let mut sums = vec![0.0; w.apps.len()];
    for r in &runs {
        for (sum, app) in sums.iter_mut().zip(&r.apps) {
            *sum += app
                .completion_s
                .expect("a finished run completes every app");
        }
    }
    sums.iter().map(|s| s / runs.len() as f64).collect()
}

/// The per-application speedup of `policy` over the default baseline: the geometric mean over
/// apps of each app's mean completion time under the baseline over its mean under `policy` (as
/// the HASS paper's Figure 2 compares each benchmark's completion time with the default
/// scheduler's; `simulate` scores a workload that ends by itself by its makespan instead).
pub fn per_app_speedup(topo: &Topology, w: &Workload, policy: &str) -> f64 {
    let base = mean_completions(topo, w, "linux-default");
    let ours = mean_completions(topo, w, policy);
    let logs: f64 = base.iter().zip(&ours).map(|(b, o)| (b / o).ln()).sum();
    (logs / base.len() as f64).exp()
}
