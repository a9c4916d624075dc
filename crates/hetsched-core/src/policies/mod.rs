//! Every placement policy, registered in one table ([`REGISTRY`]) that the CLI, the experiments
//! and the live backend read.

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
#[cfg(test)]
mod reuse_tests;

use crate::policy::Policy;
use amps::NumaMode;

/// The papers hetsched implements, as they are cited in its output (docs/references.md has the
/// full references).
pub mod citations {
    /// Amps.
    pub const AMPS: &str = "Li, Baumberger, Koufaty, Hahn. Efficient Operating System Scheduling for Performance-Asymmetric Multi-Core Architectures. SC '07, 2007";
    /// Hass.
    pub const HASS: &str = "Shelepov, Saez, Jeffery, Fedorova, Perez, Huang, Blagodurov, Kumar. HASS: A Scheduler for Heterogeneous Multicore Systems. ACM SIGOPS OSR 43(2), 2009";
    /// Bulldover.
    pub const BULLDOVER: &str = "Peternier, Ansaloni, Bonetta, Pautasso, Binder. Hardware-aware thread scheduling: the case of asymmetric multicore processors. ICPADS 2012";
    /// Pinter.
    pub const PINTER: &str = "Pinter, Zalmanovici. Data Sharing Conscious Scheduling for Multi-threaded Applications on SMP Machines. Euro-Par 2006";
    /// Ipc Driven.
    pub const IPC_DRIVEN: &str = "Becchi, Crowley. Dynamic Thread Assignment on Heterogeneous Multiprocessor Architectures. CF '06, 2006";
    /// Ding.
    pub const DING: &str = "Ding, Chang, Guo, Li, Chung. An efficient and comprehensive scheduler on Asymmetric Multicore Architecture systems. J. Systems Architecture, 2014";
}

/// The name of the HASS paper's oracle (section 5): every static assignment of the workload's
/// single-threaded applications to core-class partitions simulated, the best kept.
pub const STATIC_BEST: &str = "static-best";

/// Builds a policy object from the user's settings.
pub type PolicyMaker = fn(&PolicyOptions) -> Box<dyn Policy>;

/// One policy as users, experiments and the CLI know it.
#[derive(Clone, Copy, Debug)]
pub struct PolicyEntry {
    /// The name users pass (`--policy`), also the policy's own `Policy::name`.
    pub name: &'static str,
    /// One line on what it does.
    pub description: &'static str,
    /// The paper it implements: authors, title, venue, year (docs/references.md).
    pub citation: &'static str,
    /// Needs the whole workload in advance (an oracle): the simulator runs it, it has no
    /// constructor here and no live backend.
    pub oracle: bool,
    /// What the policy observes to decide.
    pub signals: &'static str,
    /// Runs on the live Linux backend.
    pub live: bool,
    /// A new policy object with the user's settings; `None` for an oracle.
    pub make: Option<PolicyMaker>,
}

/// Every policy, the baseline first and the oracle last. Everything that lists, parses or builds
/// policies reads this table.
pub const REGISTRY: &[PolicyEntry] = &[
    PolicyEntry {
        name: linux_default::NAME,
        description: "baseline: no placement; the backend's balancer (the simulator's baseline, or the Linux kernel live) does everything",
        citation: "",
        oracle: false,
        signals: "none",
        live: true,
        make: Some(|_| Box::new(linux_default::LinuxDefault)),
    },
    PolicyEntry {
        name: amps::NAME,
        description: "AMPS: load proportional to core power, faster-core-first, NUMA-aware migration (--numa)",
        citation: citations::AMPS,
        oracle: false,
        signals: "run-queue lengths, core power, pages per NUMA node",
        live: true,
        make: Some(|o| {
            Box::new(amps::Amps::new(amps::AmpsConfig {
                numa: o.numa,
                ..Default::default()
            }))
        }),
    },
    PolicyEntry {
        name: hass::NAME,
        description: "HASS: partitions per core class, threads matched to classes by their architectural signatures",
        citation: citations::HASS,
        oracle: false,
        signals: "architectural signatures (LLC miss rate by cache size)",
        live: true,
        make: Some(|o| Box::new(hass::Hass::new(o.seed))),
    },
    PolicyEntry {
        name: bulldover::NAME,
        description: "BulldOver: the most FPU-intensive threads bound one per module (cores sharing an FPU)",
        citation: citations::BULLDOVER,
        oracle: false,
        signals: "FPU busy cycles over cycles (performance counters)",
        live: true,
        make: Some(|o| {
            Box::new(bulldover::Bulldover::new(bulldover::BulldoverConfig {
                period_ns: o.interval_ns.unwrap_or(bulldover::BULLDOVER_PERIOD_NS),
                ..Default::default()
            }))
        }),
    },
    PolicyEntry {
        name: data_sharing::NAME,
        description: "Data-sharing-conscious: threads of one data fragment grouped on one CPU and run in succession",
        citation: citations::PINTER,
        oracle: false,
        signals: "data-fragment hints from the application",
        live: true,
        make: Some(|_| Box::new(data_sharing::DataSharing::new())),
    },
    PolicyEntry {
        name: ipc_driven::NAME,
        description: "IPC-driven (as implemented in the HASS paper): IPC ratios from forced migrations, swaps across classes",
        citation: citations::IPC_DRIVEN,
        oracle: false,
        signals: "instructions per cycle on each core class (performance counters)",
        live: true,
        make: Some(|_| Box::new(ipc_driven::IpcDriven::new())),
    },
    PolicyEntry {
        name: numa_amp::NAME,
        description: "NUMA-aware AMP scheduler: whole processes to fast cores by an online speedup factor, contention-heavy ones scattered over NUMA domains with their pages",
        citation: citations::DING,
        oracle: false,
        signals: "IPC, LLC misses and traffic, pages per NUMA node",
        live: true,
        make: Some(|o| {
            Box::new(numa_amp::NumaAmp::new(numa_amp::NumaAmpConfig {
                period_ns: o.interval_ns.unwrap_or(numa_amp::PROFILE_PERIOD_NS),
                ..Default::default()
            }))
        }),
    },
    PolicyEntry {
        name: hetsched::NAME,
        description: "all five combined: data-fragment groups (Pinter), AMPS balance with benefit swaps (HASS, Ding), FPU spreading (BulldOver), each where it applies",
        citation: "hetsched (CITATION.cff), combining the five papers above",
        oracle: false,
        signals: "all of the above, each part its own",
        live: true,
        make: Some(|o| {
            Box::new(hetsched::Hetsched::new(hetsched::HetschedConfig {
                numa: o.numa,
                interval_ns: o.interval_ns,
            }))
        }),
    },
    PolicyEntry {
        name: STATIC_BEST,
        description: "oracle: every static assignment of the single-threaded apps to core-class partitions simulated, the best kept (HASS section 5)",
        citation: citations::HASS,
        oracle: true,
        signals: "the whole workload, in advance",
        live: false,
        make: None,
    },
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

/// Names of every policy that runs on its own (oracles excluded), the baseline first.
pub fn policy_names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().filter(|e| !e.oracle).map(|e| e.name)
}

/// The registry entry of `name`.
pub fn entry(name: &str) -> Option<&'static PolicyEntry> {
    REGISTRY.iter().find(|e| e.name == name)
}

/// A new policy object by CLI name, with default settings (`None` for unknown names and oracles).
pub fn policy_by_name(name: &str) -> Option<Box<dyn Policy>> {
    policy_with_options(name, &PolicyOptions::default())
}

/// A new policy object by CLI name (`None` for unknown names and oracles).
pub fn policy_with_options(name: &str, options: &PolicyOptions) -> Option<Box<dyn Policy>> {
    entry(name).and_then(|e| e.make).map(|make| make(options))
}
