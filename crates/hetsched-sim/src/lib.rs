//! hetsched-sim: a fast, deterministic simulator of asymmetric multicore machines on which every
//! hetsched policy runs side by side against a Linux-like baseline.

#![warn(missing_docs)]

pub mod baseline;
pub mod batch;
pub mod engine;
pub mod metrics;
pub mod perf;
pub mod presets;
pub mod runqueue;
pub mod splits;
pub mod workload;

pub use engine::{SimConfig, Simulation};
pub use metrics::RunResult;
pub use workload::Workload;

use hetsched_core::{Policy, Topology};

/// Run one policy on a machine and workload.
pub fn simulate(
    topo: &Topology,
    workload: &Workload,
    policy: Box<dyn Policy>,
    cfg: SimConfig,
) -> RunResult {
    Simulation::new(topo, workload, policy, cfg).run()
}
