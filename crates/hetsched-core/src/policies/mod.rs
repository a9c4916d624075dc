//! Every placement policy, registered in one place ([`POLICIES`], [`policy_by_name`],
//! [`policy_with_options`]).

pub mod amps;
pub mod bulldover;
pub mod data_sharing;
#[cfg(test)]
mod fixture;
pub mod hass;
pub mod hetsched;
pub mod ipc_driven;
pub mod linux_default;
pub mod numa_amp;
pub mod partitions;

use crate::policy::Policy;
use amps::NumaMode;

/// (CLI name, one-line description) of every implemented policy, baseline first.
pub const POLICIES: &[(&str, &str)] = &[
    (
        "linux-default",
        "baseline: no placement; the backend's homogeneous balancer (Linux CFS-like) does everything",
    ),
    (
        "amps",
        "AMPS (Li et al., SC'07): load proportional to core power, faster-core-first, NUMA-aware migration (--numa)",
    ),
    (
        "hass",
        "HASS (Shelepov et al.): partitions per core class, threads matched to classes by their architectural signatures",
    ),
    (
        "bulldover",
        "BulldOver (Peternier et al.): the most FPU-intensive threads bound one per module (cores sharing an FPU)",
    ),
    (
        "data-sharing",
        "Data-sharing-conscious (Pinter and Zalmanovici): threads of one data fragment grouped on one CPU and run in succession",
    ),
    (
        "ipc-driven",
        "IPC-driven (Becchi and Crowley, as implemented in the HASS paper): IPC ratios from forced migrations, swaps across classes",
    ),
    (
        "numa-amp",
        "NUMA-aware AMP scheduler (Ding et al.): whole processes to fast cores by an online speedup factor, contention-heavy ones scattered over NUMA domains with their pages",
    ),
    (
        "hetsched",
        "all five combined: data-fragment groups (Pinter), whole processes and NUMA domains (Ding), AMPS balance with benefit swaps (HASS), FPU spreading (BulldOver), each where it applies",
    ),
];

/// Settings a user may give policies on the command line; each policy reads the ones it has.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PolicyOptions {
    /// AMPS running-thread migration policy (`--numa`); `None`: the paper's default for the machine.
    pub numa: Option<NumaMode>,
    /// Seed of a policy's own random choices (HASS's partner probing); the run's seed.
    pub seed: u64,
    /// Sampling period of a counter-driven policy (`--interval`, BulldOver's 1 s), ns; `None`: the
    /// policy's default.
    pub interval_ns: Option<u64>,
}

/// Names of every implemented policy.
pub fn policy_names() -> impl Iterator<Item = &'static str> {
    POLICIES.iter().map(|(n, _)| *n)
}

/// A new policy object by CLI name, with default settings.
pub fn policy_by_name(name: &str) -> Option<Box<dyn Policy>> {
    policy_with_options(name, &PolicyOptions::default())
}

/// A new policy object by CLI name.
pub fn policy_with_options(name: &str, options: &PolicyOptions) -> Option<Box<dyn Policy>> {
    match name {
        "linux-default" => Some(Box::new(linux_default::LinuxDefault)),
        "amps" => Some(Box::new(amps::Amps::new(amps::AmpsConfig {
            numa: options.numa,
            ..Default::default()
        }))),
        "hass" => Some(Box::new(hass::Hass::new(options.seed))),
        "ipc-driven" => Some(Box::new(ipc_driven::IpcDriven::new())),
        "data-sharing" => Some(Box::new(data_sharing::DataSharing::new())),
        "numa-amp" => Some(Box::new(numa_amp::NumaAmp::new(numa_amp::NumaAmpConfig {
            period_ns: options.interval_ns.unwrap_or(numa_amp::PROFILE_PERIOD_NS),
            ..Default::default()
        }))),
        "bulldover" => Some(Box::new(bulldover::Bulldover::new(
            bulldover::BulldoverConfig {
                period_ns: options
                    .interval_ns
                    .unwrap_or(bulldover::BULLDOVER_PERIOD_NS),
                ..Default::default()
            },
        ))),
        "hetsched" => Some(Box::new(hetsched::Hetsched::new(
            hetsched::HetschedConfig {
                numa: options.numa,
                interval_ns: options.interval_ns,
            },
        ))),
        _ => None,
    }
}
