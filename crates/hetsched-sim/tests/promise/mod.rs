//! How the simulator's integration tests score the combined policy's promise: `hetsched` at least
//! [`VS_BASELINE`] times the default baseline and [`VS_BEST_OTHER`] times the best other policy,
//! by mean makespan over [`SEEDS`] seeds (a seed varies arrival jitter, placement order and
//! wake-up timing, and one run's makespan moves by more than the tolerances).

#![allow(dead_code)]

use hetsched_core::policies::policy_by_name;
use hetsched_core::Topology;
use hetsched_sim::{simulate, SimConfig, Workload};

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

/// The mean makespan of `policy` over [`SEEDS`] seeds, runs of at most 120 simulated seconds;
/// panics if a run does not finish.
pub fn mean_makespan(topo: &Topology, w: &Workload, policy: &str) -> f64 {
    let total: f64 = (1..=SEEDS)
        .map(|seed| {
            let cfg = SimConfig {
                seed,
                duration_ns: 120 * hetsched_sim::engine::NS_PER_S,
                ..SimConfig::default()
            };
            let r = simulate(topo, w, policy_by_name(policy).unwrap(), cfg);
            assert!(r.finished, "{policy} did not finish {}", w.name);
            r.makespan_s
        })
        .sum();
    total / SEEDS as f64
}
