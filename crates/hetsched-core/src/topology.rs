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

fn check_positive(field: &str, v: f64) -> Result<(), TopologyError> {
    if !v.is_finite() || v <= 0.0 {
        return Err(TopologyError::new(
            field,
            format!("must be a positive number, got {v}"),
        ));
    }
    Ok(())
}

impl Topology {
    /// Check a description and build the model.
    pub fn build(spec: TopologySpec) -> Result<Topology, TopologyError> {
        if spec.name.trim().is_empty() {
            return Err(TopologyError::new("name", "must not be empty"));
        }
        // Classes.
        if spec.classes.is_empty() {
            return Err(TopologyError::new(
                "classes",
                "at least one core class is needed",
            ));
        }
        let mut class_index = BTreeMap::new();
        for (i, c) in spec.classes.iter().enumerate() {
            let at = |f: &str| format!("{}.{f}", c.origin);
            if c.name.trim().is_empty() {
                return Err(TopologyError::new(at("name"), "must not be empty"));
            }
            if class_index
                .insert(c.name.clone(), ClassId(i as u32))
                .is_some()
            {
                return Err(TopologyError::new(
                    at("name"),
                    format!("class {:?} is defined twice", c.name),
                ));
            }
            if let Some(f) = c.freq_ghz {
                check_positive(&at("freq_ghz"), f)?;
            }
            if let Some(d) = c.duty {
                if !(d > 0.0 && d <= 1.0) {
                    return Err(TopologyError::new(
                        at("duty"),
                        format!("must be in (0, 1], got {d}"),
                    ));
                }
            }
            if let Some(x) = c.cpi_factor {
                check_positive(&at("cpi_factor"), x)?;
            }
            if let Some(x) = c.capacity {
                check_positive(&at("capacity"), x)?;
            }
            if c.freq_ghz.is_none() && c.capacity.is_none() {
                return Err(TopologyError::new(
                    c.origin.clone(),
                    format!("class {:?} needs freq_ghz or capacity", c.name),
                ));
            }
        }
        let all_have_freq = spec.classes.iter().all(|c| c.freq_ghz.is_some());
        // Capacity: given, or effective clock / cpi factor relative to the fastest class.
        let raw: Vec<f64> = spec
            .classes
            .iter()
            .map(|c| {
                c.capacity.unwrap_or_else(|| {
                    c.freq_ghz.unwrap_or(1.0) * c.duty.unwrap_or(1.0) / c.cpi_factor.unwrap_or(1.0)
                })
            })
            .collect();
        let any_given = spec.classes.iter().any(|c| c.capacity.is_some());
        if any_given && spec.classes.iter().any(|c| c.capacity.is_none()) {
            let c = spec
                .classes
                .iter()
                .find(|c| c.capacity.is_none())
                .map(|c| c.origin.clone());
            return Err(TopologyError::new(
                format!("{}.capacity", c.unwrap_or_default()),
                "give capacity for every class or for none",
            ));
        }
        if !any_given && !all_have_freq {
            return Err(TopologyError::new(
                "classes",
                "every class needs freq_ghz when no capacity is given",
            ));
        }
        let max_raw = raw.iter().cloned().fold(f64::MIN, f64::max);
        let classes: Vec<CoreClass> = spec
            .classes
            .iter()
            .zip(&raw)
            .map(|(c, &r)| CoreClass {
                name: c.name.clone(),
                freq_ghz: c.freq_ghz,
                duty: c.duty.unwrap_or(1.0),
                cpi_factor: c.cpi_factor.unwrap_or(1.0),
                capacity: r / max_raw,
            })
            .collect();

        // Cores: dense 0..n, each in exactly one cores entry.
        let mut class_of: BTreeMap<u32, ClassId> = BTreeMap::new();
        for c in &spec.cores {
            let class = *class_index.get(&c.class).ok_or_else(|| {
                TopologyError::new(
                    format!("{}.class", c.origin),
                    format!("unknown class {:?}", c.class),
                )
            })?;
            if c.cpus.is_empty() {
                return Err(TopologyError::new(
                    format!("{}.cpus", c.origin),
                    "names no cores",
                ));
            }
            for cpu in c.cpus.iter() {
                if class_of.insert(cpu.0, class).is_some() {
                    return Err(TopologyError::new(
                        format!("{}.cpus", c.origin),
                        format!("core {cpu} is listed in two cores entries"),
                    ));
                }
            }
        }
        let n = class_of.len();
        if n == 0 {
            return Err(TopologyError::new("cores", "the machine has no cores"));
        }
        if let Some((&last, _)) = class_of.iter().next_back() {
            if last as usize != n - 1 {
                let missing = (0..n as u32)
                    .find(|i| !class_of.contains_key(i))
                    .unwrap_or(0);
                return Err(TopologyError::new(
                    "cores",
                    format!(
                        "core ids must run 0..{} without gaps; core {missing} is missing",
                        n - 1
                    ),
                ));
            }
        }
        if let Some(os) = &spec.os_cpus {
            if os.len() != n {
                return Err(TopologyError::new(
                    "os_cpus",
                    format!("{} entries for {n} cores", os.len()),
                ));
            }
        }
        let all = CpuSet::all(n);
        let check_cpus = |field: String, cpus: &CpuSet| -> Result<(), TopologyError> {
            if cpus.is_empty() {
                return Err(TopologyError::new(field, "names no cores"));
            }
            if let Some(bad) = cpus.iter().find(|c| !all.contains(*c)) {
                return Err(TopologyError::new(
                    field,
                    format!("unknown core {bad} (the machine has cores 0-{})", n - 1),
                ));
            }
            Ok(())
        };

        // Modules.
        let mut module_of: Vec<Option<ModuleId>> = vec![None; n];
        let mut modules = Vec::new();
        for m in &spec.modules {
            let field = format!("{}.cpus", m.origin);
            check_cpus(field.clone(), &m.cpus)?;
            let id = ModuleId(modules.len() as u32);
            for c in m.cpus.iter() {
                if module_of[c.index()].is_some() {
                    return Err(TopologyError::new(
                        field,
                        format!("core {c} is in two modules"),
                    ));
                }
                module_of[c.index()] = Some(id);
            }
            modules.push(Module {
                id,
                cores: m.cpus.iter().collect(),
                shares_fpu: m.shares_fpu,
            });
        }

        // SMT siblings.
        let mut siblings: Vec<Vec<CoreId>> = vec![Vec::new(); n];
        let mut in_smt = vec![false; n];
        for g in &spec.smt {
            let field = format!("{}.cpus", g.origin);
            check_cpus(field.clone(), &g.cpus)?;
            for c in g.cpus.iter() {
                if in_smt[c.index()] {
                    return Err(TopologyError::new(
                        field,
                        format!("core {c} is in two SMT groups"),
                    ));
                }
                in_smt[c.index()] = true;
                siblings[c.index()] = g.cpus.iter().filter(|&o| o != c).collect();
            }
        }

        // Caches: a core is in at most one cache per level.
        let mut caches = Vec::new();
        let mut cache_at: BTreeMap<(u8, u32), usize> = BTreeMap::new();
        for c in &spec.caches {
            let at = |f: &str| format!("{}.{f}", c.origin);
            if c.level == 0 || c.level > 5 {
                return Err(TopologyError::new(
                    at("level"),
                    format!("must be 1..5, got {}", c.level),
                ));
            }
            if c.size_bytes == 0 {
                return Err(TopologyError::new(at("size"), "must be more than 0 bytes"));
            }
            if c.assoc == 0 {
                return Err(TopologyError::new(at("assoc"), "must be at least 1"));
            }
            if c.line_bytes == 0 || !c.line_bytes.is_power_of_two() {
                return Err(TopologyError::new(
                    at("line_bytes"),
                    format!("must be a power of two, got {}", c.line_bytes),
                ));
            }
            check_cpus(at("cpus"), &c.cpus)?;
            for cpu in c.cpus.iter() {
                if cache_at.insert((c.level, cpu.0), caches.len()).is_some() {
                    return Err(TopologyError::new(
                        at("cpus"),
                        format!("core {cpu} is in two L{} caches", c.level),
                    ));
                }
            }
            if let Some(l) = c.hit_latency_ns {
                if !(l.is_finite() && l > 0.0) {
                    return Err(TopologyError::new(
                        at("latency_ns"),
                        format!("must be a positive number, got {l}"),
                    ));
                }
            }
            caches.push(Cache {
                level: c.level,
                size_bytes: c.size_bytes,
                assoc: c.assoc,
                line_bytes: c.line_bytes,
                cpus: c.cpus.iter().collect(),
                hit_latency_ns: c.hit_latency_ns,
            });
        }
        // LLC domain of a core: its highest-level cache.
        let mut top: Vec<Option<(u8, usize)>> = vec![None; n];
        for (idx, c) in caches.iter().enumerate() {
            for cpu in &c.cpus {
                let slot = &mut top[cpu.index()];
                if slot.is_none_or(|(l, _)| c.level > l) {
                    *slot = Some((c.level, idx));
                }
            }
        }
        let mut llcs: Vec<usize> = Vec::new();
        let mut llc_of: Vec<Option<LlcId>> = vec![None; n];
        for (core, t) in top.iter().enumerate() {
            if let Some((_, idx)) = *t {
                let id = match llcs.iter().position(|&x| x == idx) {
                    Some(p) => LlcId(p as u32),
                    None => {
                        llcs.push(idx);
                        LlcId(llcs.len() as u32 - 1)
                    }
                };
                llc_of[core] = Some(id);
            }
        }
        // An LLC must not be shared with a core whose own highest cache is at another level.
        for (i, &idx) in llcs.iter().enumerate() {
            for c in &caches[idx].cpus {
                if llc_of[c.index()] != Some(LlcId(i as u32)) {
                    return Err(TopologyError::new(
                        "caches",
                        format!(
                            "core {c} shares an L{} cache but has a higher-level cache of its own",
                            caches[idx].level
                        ),
                    ));
                }
            }
        }

        // Nodes.
        let mut node_of: Vec<Option<NodeId>> = vec![None; n];
        let mut nodes = Vec::new();
        if spec.nodes.is_empty() {
            let lat = spec.memory_latency_ns.ok_or_else(|| {
                TopologyError::new("memory_latency_ns", "needed when no nodes are described")
            })?;
            check_positive("memory_latency_ns", lat)?;
            nodes.push(Node {
                id: NodeId(0),
                cpus: all.iter().collect(),
                distance: vec![10],
                latency_ns: vec![lat],
                memory_bytes: None,
                bandwidth_bytes_per_s: None,
            });
            node_of.iter_mut().for_each(|x| *x = Some(NodeId(0)));
        } else {
            let k = spec.nodes.len();
            for (i, nd) in spec.nodes.iter().enumerate() {
                let at = |f: &str| format!("{}.{f}", nd.origin);
                check_cpus(at("cpus"), &nd.cpus)?;
                for c in nd.cpus.iter() {
                    if node_of[c.index()].is_some() {
                        return Err(TopologyError::new(
                            at("cpus"),
                            format!("core {c} is in two nodes"),
                        ));
                    }
                    node_of[c.index()] = Some(NodeId(i as u32));
                }
                if nd.distance.len() != k {
                    return Err(TopologyError::new(
                        at("distance"),
                        format!(
                            "distance matrix is not square: {} entries for {k} nodes",
                            nd.distance.len()
                        ),
                    ));
                }
                if let Some(bad) = nd.distance.iter().find(|&&d| d <= 0 || d > 255) {
                    return Err(TopologyError::new(
                        at("distance"),
                        format!("distances must be 1..255, got {bad}"),
                    ));
                }
                let own = nd.distance[i];
                if let Some(j) = (0..k).find(|&j| nd.distance[j] < own) {
                    return Err(TopologyError::new(
                        at("distance"),
                        format!(
                            "node {j} is nearer ({}) than the node itself ({own})",
                            nd.distance[j]
                        ),
                    ));
                }
                let latency = match &nd.latency_ns {
                    Some(row) => {
                        if row.len() != k {
                            return Err(TopologyError::new(
                                at("latency_ns"),
                                format!("{} entries for {k} nodes", row.len()),
                            ));
                        }
                        for &v in row {
                            check_positive(&at("latency_ns"), v)?;
                        }
                        row.clone()
                    }
                    None => {
                        let local = spec.memory_latency_ns.ok_or_else(|| {
                            TopologyError::new(
                                at("latency_ns"),
                                "needed (or a top-level memory_latency_ns to scale by distance)",
                            )
                        })?;
                        check_positive("memory_latency_ns", local)?;
                        nd.distance
                            .iter()
                            .map(|&d| local * d as f64 / own as f64)
                            .collect()
                    }
                };
                if let Some(b) = nd.bandwidth_bytes_per_s {
                    check_positive(&at("bandwidth"), b)?;
                }
                nodes.push(Node {
                    id: NodeId(i as u32),
                    cpus: nd.cpus.iter().collect(),
                    distance: nd.distance.iter().map(|&d| d as u32).collect(),
                    latency_ns: latency,
                    memory_bytes: nd.memory_bytes,
                    bandwidth_bytes_per_s: nd.bandwidth_bytes_per_s,
                });
            }
            for i in 0..k {
                for j in 0..k {
                    if nodes[i].distance[j] != nodes[j].distance[i] {
                        return Err(TopologyError::new(
                            format!("{}.distance", spec.nodes[i].origin),
                            format!(
                                "distance {i}->{j} is {} but {j}->{i} is {}",
                                nodes[i].distance[j], nodes[j].distance[i]
                            ),
                        ));
                    }
                }
            }
            if let Some(c) = node_of.iter().position(|x| x.is_none()) {
                return Err(TopologyError::new(
                    "nodes",
                    format!("core {c} is in no node"),
                ));
            }
        }

        let cores = (0..n)
            .map(|i| Core {
                id: CoreId(i as u32),
                os_cpu: spec.os_cpus.as_ref().map_or(i as u32, |o| o[i]),
                class: class_of[&(i as u32)],
                module: module_of[i],
                llc: llc_of[i],
                node: node_of[i].unwrap_or(NodeId(0)),
                siblings: std::mem::take(&mut siblings[i]),
            })
            .collect();
        Ok(Topology {
            name: spec.name,
            description: spec.description,
            classes,
            cores,
            modules,
            caches,
            nodes,
            llcs,
        })
    }

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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small asymmetric test machine: 2 fast + 2 slow cores, one module pair, two LLCs, two nodes.
    pub fn make_het_test_spec() -> TopologySpec {
        TopologySpec {
            name: "test".into(),
            description: "2 fast + 2 slow".into(),
            classes: vec![
                ClassSpec {
                    origin: "classes[0]".into(),
                    name: "fast".into(),
                    freq_ghz: Some(2.0),
                    ..Default::default()
                },
                ClassSpec {
                    origin: "classes[1]".into(),
                    name: "slow".into(),
                    freq_ghz: Some(1.0),
                    ..Default::default()
                },
            ],
            cores: vec![
                CoresSpec {
                    origin: "cores[0]".into(),
                    cpus: CpuSet::parse_list("0-1").unwrap(),
                    class: "fast".into(),
                },
                CoresSpec {
                    origin: "cores[1]".into(),
                    cpus: CpuSet::parse_list("2-3").unwrap(),
                    class: "slow".into(),
                },
            ],
            modules: vec![GroupSpec {
                origin: "modules[0]".into(),
                cpus: CpuSet::parse_list("2-3").unwrap(),
                shares_fpu: true,
            }],
            caches: vec![
                CacheSpec {
                    origin: "caches[0]".into(),
                    level: 2,
                    size_bytes: 1 << 20,
                    assoc: 8,
                    line_bytes: 64,
                    cpus: CpuSet::parse_list("0").unwrap(),
                    hit_latency_ns: None,
                },
                CacheSpec {
                    origin: "caches[1]".into(),
                    level: 2,
                    size_bytes: 1 << 20,
                    assoc: 8,
                    line_bytes: 64,
                    cpus: CpuSet::parse_list("1").unwrap(),
                    hit_latency_ns: None,
                },
                CacheSpec {
                    origin: "caches[2]".into(),
                    level: 3,
                    size_bytes: 4 << 20,
                    assoc: 16,
                    line_bytes: 64,
                    cpus: CpuSet::parse_list("2-3").unwrap(),
                    hit_latency_ns: None,
                },
            ],
            nodes: vec![
                NodeSpec {
                    origin: "nodes[0]".into(),
                    cpus: CpuSet::parse_list("0-1").unwrap(),
                    distance: vec![10, 20],
                    latency_ns: Some(vec![70.0, 140.0]),
                    memory_bytes: None,
                    bandwidth_bytes_per_s: None,
                },
                NodeSpec {
                    origin: "nodes[1]".into(),
                    cpus: CpuSet::parse_list("2-3").unwrap(),
                    distance: vec![20, 10],
                    latency_ns: Some(vec![140.0, 70.0]),
                    memory_bytes: None,
                    bandwidth_bytes_per_s: None,
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn builds_and_derives() {
        let t = Topology::build(make_het_test_spec()).unwrap();
        assert_eq!(t.num_cores(), 4);
        assert_eq!(t.class_of(CoreId(0)).capacity, 1.0);
        assert_eq!(t.class_of(CoreId(3)).capacity, 0.5);
        assert_eq!(t.relative_speed(CoreId(0)), 2.0);
        assert!((t.scaled_power(CoreId(0), AMPS_SCALING_FACTOR) - 1.7).abs() < 1e-12);
        assert_eq!(t.scaled_power(CoreId(2), AMPS_SCALING_FACTOR), 1.0);
        assert_eq!(t.num_llcs(), 3);
        assert_eq!(t.llc_of(CoreId(3)).unwrap().size_bytes, 4 << 20);
        assert_eq!(t.module_mates(CoreId(2)), vec![CoreId(3)]);
        assert_eq!(t.module_pairs(), vec![(CoreId(2), CoreId(3))]);
        assert_eq!(t.latency_ns(CoreId(0), NodeId(1)), 140.0);
        assert_eq!(t.node_of(CoreId(2)), NodeId(1));
        assert_eq!(t.private_cache_bytes(CoreId(0)), 1 << 20);
        assert!(t.is_asymmetric());
        assert_eq!(t.classes_by_speed(), vec![ClassId(0), ClassId(1)]);
    }

    #[test]
    fn scaled_power_never_ranks_a_faster_core_below_the_slowest() {
        let mut spec = make_het_test_spec();
        spec.classes[0].freq_ghz = Some(1.1);
        let t = Topology::build(spec).unwrap();
        // F = 1.1, F*S = 0.935 < 1: floored at 1.
        assert_eq!(t.scaled_power(CoreId(0), AMPS_SCALING_FACTOR), 1.0);
    }

    #[test]
    fn partitions_split_large_classes_by_llc() {
        let t = Topology::build(make_het_test_spec()).unwrap();
        let p = t.partitions(16);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].cores.to_list(), "0-1");
        let p = t.partitions(1);
        assert_eq!(p.len(), 4);
        assert!(p.iter().all(|x| x.cores.len() == 1));
    }

    fn err(mut f: impl FnMut(&mut TopologySpec)) -> TopologyError {
        let mut s = make_het_test_spec();
        f(&mut s);
        Topology::build(s).expect_err("should be rejected")
    }

    #[test]
    fn rejects_each_malformed_description_naming_the_field() {
        let e = err(|s| s.modules[0].cpus = CpuSet::parse_list("3-4").unwrap());
        assert_eq!(e.field, "modules[0].cpus");
        assert!(e.message.contains("unknown core 4"), "{e}");
        let e = err(|s| s.nodes[0].distance = vec![10]);
        assert_eq!(e.field, "nodes[0].distance");
        assert!(e.message.contains("not square"));
        let e = err(|s| s.classes[1].freq_ghz = Some(-1.0));
        assert_eq!(e.field, "classes[1].freq_ghz");
        let e = err(|s| s.nodes[1].cpus = CpuSet::parse_list("1-3").unwrap());
        assert_eq!(e.field, "nodes[1].cpus");
        assert!(e.message.contains("two nodes"));
        let e = err(|s| s.cores[1].class = "huge".into());
        assert_eq!(e.field, "cores[1].class");
        let e = err(|s| s.classes[1].name = "fast".into());
        assert!(e.message.contains("defined twice"));
        let e = err(|s| s.cores[1].cpus = CpuSet::parse_list("3-4").unwrap());
        assert!(e.message.contains("core 2 is missing"), "{e}");
        let e = err(|s| s.caches[0].line_bytes = 48);
        assert_eq!(e.field, "caches[0].line_bytes");
        let e = err(|s| s.caches[1].cpus = CpuSet::parse_list("0-1").unwrap());
        assert!(e.message.contains("two L2 caches"));
        let e = err(|s| s.nodes[1].distance = vec![30, 10]);
        assert!(
            e.message.contains("distance 0->1 is 20 but 1->0 is 30"),
            "{e}"
        );
        let e = err(|s| s.nodes[0].distance = vec![20, 10]);
        assert!(e.message.contains("nearer"));
        let e = err(|s| s.classes[0].duty = Some(1.5));
        assert_eq!(e.field, "classes[0].duty");
        let e = err(|s| s.nodes[0].latency_ns = Some(vec![70.0]));
        assert_eq!(e.field, "nodes[0].latency_ns");
        let e = err(|s| {
            s.nodes[1].cpus = CpuSet::parse_list("2").unwrap();
        });
        assert!(e.message.contains("core 3 is in no node"));
        let e = err(|s| {
            s.modules.push(GroupSpec {
                origin: "modules[1]".into(),
                cpus: CpuSet::parse_list("3").unwrap(),
                shares_fpu: true,
            })
        });
        assert!(e.message.contains("two modules"));
    }
}
