//! What a machine description says (a machine file, a preset or sysfs discovery), before
//! [`super::Topology::build`] checks it.

use crate::cpuset::CpuSet;

/// A class as described, before checking.
#[derive(Clone, Debug, Default)]
pub struct ClassSpec {
    pub origin: String,
    pub name: String,
    pub freq_ghz: Option<f64>,
    pub duty: Option<f64>,
    pub cpi_factor: Option<f64>,
    pub capacity: Option<f64>,
}

/// A run of cores of one class.
#[derive(Clone, Debug, Default)]
pub struct CoresSpec {
    pub origin: String,
    pub cpus: CpuSet,
    pub class: String,
}

/// A group of cores: a module or an SMT core.
#[derive(Clone, Debug, Default)]
pub struct GroupSpec {
    pub origin: String,
    pub cpus: CpuSet,
    pub shares_fpu: bool,
}

/// A cache as described.
#[derive(Clone, Debug, Default)]
pub struct CacheSpec {
    pub origin: String,
    pub level: u8,
    pub size_bytes: u64,
    pub assoc: u32,
    pub line_bytes: u32,
    pub cpus: CpuSet,
    pub hit_latency_ns: Option<f64>,
}

/// A NUMA node as described.
#[derive(Clone, Debug, Default)]
pub struct NodeSpec {
    pub origin: String,
    pub cpus: CpuSet,
    pub distance: Vec<i64>,
    pub latency_ns: Option<Vec<f64>>,
    pub memory_bytes: Option<u64>,
    pub bandwidth_bytes_per_s: Option<f64>,
}

/// Everything a machine description says, unchecked. `Topology::build` checks it.
#[derive(Clone, Debug, Default)]
pub struct TopologySpec {
    pub name: String,
    pub description: String,
    pub classes: Vec<ClassSpec>,
    pub cores: Vec<CoresSpec>,
    /// OS CPU number of each dense core id, when it differs from the id (sysfs discovery).
    pub os_cpus: Option<Vec<u32>>,
    pub modules: Vec<GroupSpec>,
    pub smt: Vec<GroupSpec>,
    pub caches: Vec<CacheSpec>,
    pub nodes: Vec<NodeSpec>,
    /// Memory latency of a single-node machine, or the local latency from which the other entries
    /// of a node's latency row are scaled by distance when the row is not given.
    pub memory_latency_ns: Option<f64>,
}
