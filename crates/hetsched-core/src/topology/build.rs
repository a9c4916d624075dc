//! Building a [`Topology`] from a [`TopologySpec`]: each step checks one part of the description
//! and builds it, naming the field it rejects.

use super::spec::{CacheSpec, ClassSpec, GroupSpec};
use super::{Cache, Core, CoreClass, Module, Node, Topology, TopologyError, TopologySpec};
use crate::cpuset::CpuSet;
use crate::ids::{ClassId, CoreId, LlcId, ModuleId, NodeId};
use std::collections::BTreeMap;

impl Topology {
    /// Check a description and build the model.
    pub fn build(spec: TopologySpec) -> Result<Topology, TopologyError> {
        if spec.name.trim().is_empty() {
            return Err(TopologyError::new("name", "must not be empty"));
        }
        let (classes, class_index) = build_classes(&spec.classes)?;
        let class_of = assign_classes(&spec, &class_index)?;
        let n = class_of.len();
        let all = CpuSet::all(n);
        let (modules, module_of) = build_modules(&spec.modules, &all)?;
        let mut siblings = build_siblings(&spec.smt, &all)?;
        let caches = build_caches(&spec.caches, &all)?;
        let (llcs, llc_of) = find_llcs(&caches, n)?;
        let (nodes, node_of) = build_nodes(&spec, &all)?;
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
}

/// Lowest and highest clock a class may have, GHz: real cores run between a few hundred MHz and a
/// few GHz; values far outside are typos (a clock of 1e-300 GHz makes every instruction an event
/// storm of its own).
pub const MIN_FREQ_GHZ: f64 = 0.01;
/// See [`MIN_FREQ_GHZ`].
pub const MAX_FREQ_GHZ: f64 = 100.0;

fn check_positive(field: &str, v: f64) -> Result<(), TopologyError> {
    if !v.is_finite() || v <= 0.0 {
        return Err(TopologyError::new(
            field,
            format!("must be a positive number, got {}", readable(v)),
        ));
    }
    Ok(())
}

/// A number as a person reads it in an error: plain, or in exponent form when very large or small.
fn readable(v: f64) -> String {
    if v != 0.0 && !(1e-6..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `cpus` names at least one core, and only cores of the machine (`all`).
fn check_cpus(all: &CpuSet, field: String, cpus: &CpuSet) -> Result<(), TopologyError> {
    if cpus.is_empty() {
        return Err(TopologyError::new(field, "names no cores"));
    }
    if let Some(bad) = cpus.iter().find(|c| !all.contains(*c)) {
        return Err(TopologyError::new(
            field,
            format!(
                "unknown core {bad} (the machine has cores 0-{})",
                all.len().saturating_sub(1)
            ),
        ));
    }
    Ok(())
}

/// The core classes, each checked, with capacities relative to the fastest; and each class's id by
/// name.
fn build_classes(
    specs: &[ClassSpec],
) -> Result<(Vec<CoreClass>, BTreeMap<String, ClassId>), TopologyError> {
    // Classes.
    if specs.is_empty() {
        return Err(TopologyError::new(
            "classes",
            "at least one core class is needed",
        ));
    }
    let mut class_index = BTreeMap::new();
    for (i, c) in specs.iter().enumerate() {
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
            if !(MIN_FREQ_GHZ..=MAX_FREQ_GHZ).contains(&f) {
                return Err(TopologyError::new(
                    at("freq_ghz"),
                    format!(
                        "must be between {MIN_FREQ_GHZ} and {MAX_FREQ_GHZ} GHz, got {}",
                        readable(f)
                    ),
                ));
            }
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
    let all_have_freq = specs.iter().all(|c| c.freq_ghz.is_some());
    // Capacity: given, or effective clock / cpi factor relative to the fastest class.
    let raw: Vec<f64> = specs
        .iter()
        .map(|c| {
            c.capacity.unwrap_or_else(|| {
                c.freq_ghz.unwrap_or(1.0) * c.duty.unwrap_or(1.0) / c.cpi_factor.unwrap_or(1.0)
            })
        })
        .collect();
    let any_given = specs.iter().any(|c| c.capacity.is_some());
    if any_given && specs.iter().any(|c| c.capacity.is_none()) {
        let c = specs
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
    let classes: Vec<CoreClass> = specs
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

    Ok((classes, class_index))
}

/// Each core's class: cores are dense 0..n, each in exactly one cores entry.
fn assign_classes(
    spec: &TopologySpec,
    class_index: &BTreeMap<String, ClassId>,
) -> Result<BTreeMap<u32, ClassId>, TopologyError> {
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
                    "core ids must run 0..{} without gaps ({n} cores are listed, the highest {last}); core {missing} is missing",
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
    Ok(class_of)
}

/// The modules (cores sharing an FPU and an L2), and each core's module.
fn build_modules(
    specs: &[GroupSpec],
    all: &CpuSet,
) -> Result<(Vec<Module>, Vec<Option<ModuleId>>), TopologyError> {
    let n = all.len();
    let mut module_of: Vec<Option<ModuleId>> = vec![None; n];
    let mut modules = Vec::new();
    for m in specs {
        let field = format!("{}.cpus", m.origin);
        check_cpus(all, field.clone(), &m.cpus)?;
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

    Ok((modules, module_of))
}

/// Each core's SMT siblings; a core is in at most one SMT group.
fn build_siblings(specs: &[GroupSpec], all: &CpuSet) -> Result<Vec<Vec<CoreId>>, TopologyError> {
    let n = all.len();
    let mut siblings: Vec<Vec<CoreId>> = vec![Vec::new(); n];
    let mut in_smt = vec![false; n];
    for g in specs {
        let field = format!("{}.cpus", g.origin);
        check_cpus(all, field.clone(), &g.cpus)?;
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

    Ok(siblings)
}

/// The caches, each checked; a core is in at most one cache per level.
fn build_caches(specs: &[CacheSpec], all: &CpuSet) -> Result<Vec<Cache>, TopologyError> {
    let mut caches = Vec::new();
    let mut cache_at: BTreeMap<(u8, u32), usize> = BTreeMap::new();
    for c in specs {
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
        check_cpus(all, at("cpus"), &c.cpus)?;
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
    // Caches nest: the cores that share a cache share each higher-level cache any of them has (a
    // core sharing a cache of a level below its own private higher-level cache is refused).
    for c in specs {
        // Each higher-level cache is compared with this one once, however many cores both hold.
        let mut compared = std::collections::BTreeSet::new();
        for cpu in c.cpus.iter() {
            for level in c.level + 1..=5 {
                let Some(&j) = cache_at.get(&(level, cpu.0)) else {
                    continue;
                };
                if !compared.insert(j) {
                    continue;
                }
                if let Some(other) = c.cpus.iter().find(|o| !specs[j].cpus.contains(*o)) {
                    return Err(TopologyError::new(
                        format!("{}.cpus", c.origin),
                        format!(
                            "core {cpu} shares this L{} cache with core {other}, but its L{level} cache ({}) does not hold core {other}",
                            c.level, specs[j].origin
                        ),
                    ));
                }
            }
        }
    }
    Ok(caches)
}

/// The LLC domains (a core's highest-level cache) as indexes into `caches`, and each core's LLC.
fn find_llcs(
    caches: &[Cache],
    n: usize,
) -> Result<(Vec<usize>, Vec<Option<LlcId>>), TopologyError> {
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

    Ok((llcs, llc_of))
}

/// The NUMA nodes (one for the whole machine when none are described), and each core's node.
fn build_nodes(
    spec: &TopologySpec,
    all: &CpuSet,
) -> Result<(Vec<Node>, Vec<Option<NodeId>>), TopologyError> {
    let n = all.len();
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
            check_cpus(all, at("cpus"), &nd.cpus)?;
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
        if let Some(c) = node_of.iter().position(Option::is_none) {
            return Err(TopologyError::new(
                "nodes",
                format!("core {c} is in no node"),
            ));
        }
    }

    Ok((nodes, node_of))
}
