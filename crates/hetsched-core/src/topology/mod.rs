//! The machine model every policy and both backends share.
//!
//! ```text
//!  Topology
//!  ├── nodes      NUMA nodes: cores, distance row, memory latency row (ns) per memory node
//!  │   └── LLC domains      cores sharing a last-level cache
//!  │       └── modules      cores sharing an FPU and an L2 (Bulldozer)
//!  │           └── cores    class, SMT siblings
//!  ├── classes    core classes: clock, duty cycle, capacity, pipeline CPI factor
//!  └── caches     every data/unified cache: level, size, associativity, line, cores sharing it
//! ```
//!
//! A `Topology` is built once from a [`TopologySpec`] (what a machine file, a preset or sysfs
//! discovery says), checked, and read-only afterwards. Every check names the field it rejects, so a
//! machine file with a mistake gives one line that says where.
//!
//! Derived views the papers need:
//! - AMPS scaled computing power `P = F × S` (AMPS section 2.2 and section 3, S = 0.85);
//! - HASS processor classes and partitions (HASS section 4);
//! - modules and module pairs (BulldOver section 2);
//! - node of a core and memory latency by (node of core, node of memory) (AMPS Table 1).

mod build;
mod spec;
#[cfg(test)]
pub(crate) mod tests;

pub use spec::{CacheSpec, ClassSpec, CoresSpec, GroupSpec, NodeSpec, TopologySpec};

use crate::cpuset::CpuSet;
use crate::ids::{ClassId, CoreId, LlcId, ModuleId, NodeId};
use std::collections::BTreeMap;
use thiserror::Error;

/// AMPS's constant scaling factor S: "For simplicity, we choose S to be a constant of 0.85"
/// (AMPS section 3, "Asymmetry-Aware Load Balancing").
pub const AMPS_SCALING_FACTOR: f64 = 0.85;

/// A class of identical cores (HASS section 4: "If two cores belong to the same class, they must be
/// identical").
#[derive(Clone, Debug, PartialEq)]
pub struct CoreClass {
    pub name: String,
    /// Nominal clock in GHz, when known.
    pub freq_ghz: Option<f64>,
    /// Fraction of time the core runs (clock modulation, AMPS section 3); 1.0 for a real clock.
    pub duty: f64,
    /// Pipeline CPI factor: cycles per instruction on this class relative to a reference pipeline
    /// (1.0). An in-order little core has a factor above 1.
    pub cpi_factor: f64,
    /// Relative throughput, the fastest class being 1.0 (Linux `cpu_capacity` / 1024 style).
    pub capacity: f64,
}

impl CoreClass {
    /// Clock in GHz after duty-cycle modulation: the rate at which cycles are delivered.
    pub fn effective_ghz(&self) -> Option<f64> {
        self.freq_ghz.map(|f| f * self.duty)
    }
}

/// One core (a logical CPU).
#[derive(Clone, Debug, PartialEq)]
pub struct Core {
    pub id: CoreId,
    /// The operating system's CPU number (equal to `id` for presets and machine files).
    pub os_cpu: u32,
    pub class: ClassId,
    pub module: Option<ModuleId>,
    pub llc: Option<LlcId>,
    pub node: NodeId,
    /// SMT siblings, this core excluded.
    pub siblings: Vec<CoreId>,
}

/// Cores that share an FPU and an L2 (AMD Bulldozer "module", BulldOver section 2).
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    pub id: ModuleId,
    pub cores: Vec<CoreId>,
    pub shares_fpu: bool,
}

/// A data or unified cache.
#[derive(Clone, Debug, PartialEq)]
pub struct Cache {
    pub level: u8,
    pub size_bytes: u64,
    pub assoc: u32,
    pub line_bytes: u32,
    pub cpus: Vec<CoreId>,
    /// Load-to-use latency of a hit, ns, when described. The simulator charges it for the misses
    /// a shared cache below the LLC (a Bulldozer module's L2) suffers from its co-runners.
    pub hit_latency_ns: Option<f64>,
}

/// A NUMA node.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub id: NodeId,
    pub cpus: Vec<CoreId>,
    /// ACPI SLIT distances to every node (10 = local).
    pub distance: Vec<u32>,
    /// Unloaded memory latency in ns from a core of this node to memory of every node.
    pub latency_ns: Vec<f64>,
    pub memory_bytes: Option<u64>,
    /// Peak bandwidth of the node's memory, bytes per second, when known: the simulator queues the
    /// node's memory traffic against it (Ding et al. section 3.3.2, memory contention); without it,
    /// memory has no bandwidth limit.
    pub bandwidth_bytes_per_s: Option<f64>,
}

/// A HASS CPU partition: cores of one class, the scope of regular assignment (HASS section 4).
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    pub class: ClassId,
    pub cores: CpuSet,
}

/// The machine, read-only once built.
#[derive(Clone, Debug)]
pub struct Topology {
    name: String,
    description: String,
    classes: Vec<CoreClass>,
    cores: Vec<Core>,
    modules: Vec<Module>,
    caches: Vec<Cache>,
    nodes: Vec<Node>,
    /// Index into `caches` of each LLC domain.
    llcs: Vec<usize>,
}

/// What is wrong with a topology description: the field (a path such as `caches[2].cpus`) and why.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("{field}: {message}")]
pub struct TopologyError {
    pub field: String,
    pub message: String,
}

impl TopologyError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl Topology {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn description(&self) -> &str {
        &self.description
    }
    pub fn cores(&self) -> &[Core] {
        &self.cores
    }
    pub fn core(&self, id: CoreId) -> &Core {
        &self.cores[id.index()]
    }
    pub fn num_cores(&self) -> usize {
        self.cores.len()
    }
    pub fn classes(&self) -> &[CoreClass] {
        &self.classes
    }
    pub fn class(&self, id: ClassId) -> &CoreClass {
        &self.classes[id.index()]
    }
    /// The class of a core.
    pub fn class_of(&self, core: CoreId) -> &CoreClass {
        &self.classes[self.cores[core.index()].class.index()]
    }
    pub fn modules(&self) -> &[Module] {
        &self.modules
    }
    pub fn caches(&self) -> &[Cache] {
        &self.caches
    }
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// Every core.
    pub fn all_cores(&self) -> CpuSet {
        CpuSet::all(self.cores.len())
    }

    /// Number of LLC domains.
    pub fn num_llcs(&self) -> usize {
        self.llcs.len()
    }
    /// The cache of an LLC domain.
    pub fn llc(&self, id: LlcId) -> &Cache {
        &self.caches[self.llcs[id.index()]]
    }
    /// The last-level cache of a core, if any cache is described.
    pub fn llc_of(&self, core: CoreId) -> Option<&Cache> {
        self.cores[core.index()].llc.map(|l| self.llc(l))
    }
    /// The cache of a level that a core uses, if described.
    pub fn cache_of(&self, core: CoreId, level: u8) -> Option<&Cache> {
        self.caches
            .iter()
            .find(|c| c.level == level && c.cpus.contains(&core))
    }
    /// The largest cache that a core has to itself (its private cache capacity), in bytes.
    pub fn private_cache_bytes(&self, core: CoreId) -> u64 {
        self.caches
            .iter()
            .filter(|c| c.cpus.len() == 1 && c.cpus[0] == core)
            .map(|c| c.size_bytes)
            .max()
            .unwrap_or(0)
    }

    /// The node of a core.
    pub fn node_of(&self, core: CoreId) -> NodeId {
        self.cores[core.index()].node
    }
    /// Unloaded memory latency for a core reaching memory on `mem_node` (AMPS Table 1).
    pub fn latency_ns(&self, core: CoreId, mem_node: NodeId) -> f64 {
        self.nodes[self.node_of(core).index()].latency_ns[mem_node.index()]
    }
    /// Cores of a node as a set.
    pub fn node_cores(&self, node: NodeId) -> CpuSet {
        self.nodes[node.index()].cpus.iter().copied().collect()
    }

    /// Classes, fastest (highest capacity) first; ties by id.
    pub fn classes_by_speed(&self) -> Vec<ClassId> {
        let mut ids: Vec<ClassId> = (0..self.classes.len() as u32).map(ClassId).collect();
        ids.sort_by(|a, b| {
            self.classes[b.index()]
                .capacity
                .total_cmp(&self.classes[a.index()].capacity)
                .then(a.cmp(b))
        });
        ids
    }
    /// Cores of a class.
    pub fn class_cores(&self, class: ClassId) -> CpuSet {
        self.cores
            .iter()
            .filter(|c| c.class == class)
            .map(|c| c.id)
            .collect()
    }
    /// True when the cores are not all of one speed.
    pub fn is_asymmetric(&self) -> bool {
        let caps: Vec<f64> = self
            .cores
            .iter()
            .map(|c| self.classes[c.class.index()].capacity)
            .collect();
        caps.iter().any(|&c| (c - caps[0]).abs() > 1e-9)
    }

    /// Relative speed F of a core: its capacity over the slowest core's capacity (AMPS section 2.2).
    pub fn relative_speed(&self, core: CoreId) -> f64 {
        let min = self
            .classes
            .iter()
            .map(|c| c.capacity)
            .fold(f64::MAX, f64::min);
        self.class_of(core).capacity / min
    }

    /// AMPS scaled computing power P of a core: 1 for the slowest cores, `F × S` for a core F times
    /// faster (AMPS section 2.2; S = 0.85 in section 3). The paper applies a constant S only to its
    /// 2x configurations; for F < 1/S the product would rank a faster core below the slowest, so we
    /// floor P at 1: a slightly faster core never counts as slower, and ties still go to it.
    pub fn scaled_power(&self, core: CoreId, s: f64) -> f64 {
        let f = self.relative_speed(core);
        if f <= 1.0 + 1e-9 {
            1.0
        } else {
            (f * s).max(1.0)
        }
    }

    /// HASS CPU partitions: one per class, fastest class first; a class of more than
    /// `max_cores_per_partition` cores is split along LLC domains and then into chunks of at most
    /// that size (HASS section 4, "each class may contain one or more partitions").
    pub fn partitions(&self, max_cores_per_partition: usize) -> Vec<Partition> {
        let max = max_cores_per_partition.max(1);
        let mut out = Vec::new();
        for class in self.classes_by_speed() {
            let cores: Vec<CoreId> = self.class_cores(class).iter().collect();
            if cores.len() <= max {
                out.push(Partition {
                    class,
                    cores: cores.into_iter().collect(),
                });
                continue;
            }
            let mut by_llc: BTreeMap<Option<LlcId>, Vec<CoreId>> = BTreeMap::new();
            for c in cores {
                by_llc.entry(self.cores[c.index()].llc).or_default().push(c);
            }
            for (_, group) in by_llc {
                for chunk in group.chunks(max) {
                    out.push(Partition {
                        class,
                        cores: chunk.iter().copied().collect(),
                    });
                }
            }
        }
        out
    }

    /// The module of a core.
    pub fn module_of(&self, core: CoreId) -> Option<&Module> {
        self.cores[core.index()]
            .module
            .map(|m| &self.modules[m.index()])
    }
    /// Cores that share a module with `core`, itself excluded.
    pub fn module_mates(&self, core: CoreId) -> Vec<CoreId> {
        self.module_of(core)
            .map(|m| m.cores.iter().copied().filter(|&c| c != core).collect())
            .unwrap_or_default()
    }
    /// Pairs of cores that share an FPU.
    pub fn module_pairs(&self) -> Vec<(CoreId, CoreId)> {
        let mut out = Vec::new();
        for m in self.modules.iter().filter(|m| m.shares_fpu) {
            for (i, &a) in m.cores.iter().enumerate() {
                for &b in &m.cores[i + 1..] {
                    out.push((a, b));
                }
            }
        }
        out
    }
}
