//! Topology discovery from sysfs.
//!
//! The sysfs root is a parameter (`/` on a live machine, a fixture tree in tests), never a global.
//!
//! 1. **CPUs**: `devices/system/cpu/online` (cpulist); without it, the `cpuN` directories. OS CPU
//!    numbers map to dense core ids in increasing order.
//! 2. **Capacity**: from the first source that differs across CPUs, in this order (the order mature
//!    schedulers such as sched_ext's topology code use):
//!    `cpufreq/amd_pstate_prefcore_ranking`, `cpufreq/amd_pstate_highest_perf`,
//!    `acpi_cppc/highest_perf`, `cpu_capacity`, `cpufreq/cpuinfo_max_freq`. A source is skipped
//!    when any CPU lacks it or every CPU reports the same value.
//! 3. **Classes**: on Intel hybrid parts, the core type from `devices/cpu_core/cpus` and
//!    `devices/cpu_atom/cpus`; elsewhere, capacity values clustered: sorted values start a new class
//!    where the gap to the previous one exceeds [`CLASS_GAP`] of the largest value (so a preferred-
//!    core ranking with small steps is one class, and big/LITTLE clusters are separate). A class's
//!    capacity is its largest value over the machine's largest.
//! 4. **Caches**: `cpuN/cache/index*/{level,type,size,shared_cpu_list,ways_of_associativity,
//!    coherency_line_size}`; instruction caches are skipped; a cache is one (level, sharing set).
//! 5. **SMT**: `cpuN/topology/thread_siblings_list`.
//! 6. **NUMA**: `devices/system/node/nodeN/{cpulist,distance}`. sysfs has no memory latency, so
//!    the latency row is estimated from the SLIT distance as
//!    [`ESTIMATED_LOCAL_LATENCY_NS`] × distance / 10, with a warning.
//! 7. **Modules** (cores sharing an FPU) are not described by sysfs; a machine file gives them.
//!
//! Anything missing degrades to "symmetric, unknown" with a warning; discovery never fails on a
//! machine that has at least one CPU.

use hetsched_core::machine_file::parse_size;
use hetsched_core::topology::{CacheSpec, ClassSpec, CoresSpec, GroupSpec, NodeSpec};
use hetsched_core::{CoreId, CpuSet, Topology, TopologySpec};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Capacity sources in the order they are tried.
pub const CAPACITY_SOURCES: &[&str] = &[
    "cpufreq/amd_pstate_prefcore_ranking",
    "cpufreq/amd_pstate_highest_perf",
    "acpi_cppc/highest_perf",
    "cpu_capacity",
    "cpufreq/cpuinfo_max_freq",
];

/// Relative gap between sorted capacity values that starts a new class.
pub const CLASS_GAP: f64 = 0.05;

/// Local memory latency assumed when sysfs gives none (a typical DDR4/DDR5 server figure).
pub const ESTIMATED_LOCAL_LATENCY_NS: f64 = 90.0;

/// What discovery found, and what it had to guess.
#[derive(Debug)]
pub struct Discovery {
    pub topology: Topology,
    /// The capacity source used, if any differed across CPUs.
    pub capacity_source: Option<String>,
    /// CPUs the kernel isolates (`isolcpus`/`nohz_full`), never to be managed.
    pub isolated: CpuSet,
    /// Things that were missing or guessed, one line each, to print once.
    pub warnings: Vec<String>,
}

fn read(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_num(path: &Path) -> Option<f64> {
    read(path)?.parse::<f64>().ok()
}

/// Discover the machine below `root` (a directory holding `sys/`).
pub fn discover(root: &Path) -> Discovery {
    let mut r = Reader::new(root);
    let (capacity, capacity_source) = r.capacities();
    let (classes, class_of, num_classes) = r.classes(&capacity);
    let mut spec = r.spec_with_classes(classes, &class_of, num_classes, capacity_source.as_deref());
    r.caches_and_smt(&mut spec);
    drop_inconsistent_caches(&mut spec, &mut r.warnings);
    r.nodes(&mut spec);
    let isolated = read(&r.cpu_dir.join("isolated"))
        .and_then(|t| r.to_dense(&t))
        .unwrap_or_default();
    let topology = r.build(spec);
    Discovery {
        topology,
        capacity_source,
        isolated,
        warnings: r.warnings,
    }
}

/// Reads one sysfs tree: the online CPUs and their dense ids, and the warnings gathered so far.
struct Reader {
    root: PathBuf,
    cpu_dir: PathBuf,
    /// Online CPUs by OS number; a CPU's dense id is its position here.
    os_cpus: Vec<u32>,
    dense: BTreeMap<u32, CoreId>,
    warnings: Vec<String>,
}

impl Reader {
    fn new(root: &Path) -> Self {
        let mut r = Reader {
            root: root.to_path_buf(),
            cpu_dir: root.join("sys/devices/system/cpu"),
            os_cpus: Vec::new(),
            dense: BTreeMap::new(),
            warnings: Vec::new(),
        };
        r.os_cpus = r.online_cpus();
        r.dense = r
            .os_cpus
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, CoreId(i as u32)))
            .collect();
        r
    }

    /// The online CPUs (the `online` list, else the cpuN directories, else one unknown CPU).
    fn online_cpus(&mut self) -> Vec<u32> {
        let os_cpus: Vec<u32> =
            match read(&self.cpu_dir.join("online")).map(|t| CpuSet::parse_list(&t)) {
                Some(Ok(set)) if !set.is_empty() => set.iter().map(|c| c.0).collect(),
                _ => {
                    let mut v: Vec<u32> = fs::read_dir(&self.cpu_dir)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
                        .collect();
                    v.sort_unstable();
                    if !v.is_empty() {
                        self.warnings.push(format!(
                            "{}: no online list; using the cpuN directories",
                            self.cpu_dir.display()
                        ));
                    }
                    v
                }
            };
        if os_cpus.is_empty() {
            self.warnings.push(format!(
                "{}: no CPUs found; assuming one unknown CPU",
                self.cpu_dir.display()
            ));
            vec![0]
        } else {
            os_cpus
        }
    }

    fn cpu_path(&self, c: u32) -> PathBuf {
        self.cpu_dir.join(format!("cpu{c}"))
    }

    /// An OS cpulist as dense ids, ignoring offline CPUs.
    fn to_dense(&self, text: &str) -> Option<CpuSet> {
        let set = CpuSet::parse_list(text).ok()?;
        Some(
            set.iter()
                .filter_map(|c| self.dense.get(&c.0).copied())
                .collect(),
        )
    }

    /// Each CPU's capacity from the first source whose values differ across CPUs (all 1 when
    /// none does), and that source's name.
    fn capacities(&self) -> (Vec<f64>, Option<String>) {
        let mut capacity_source = None;
        let mut capacity: Vec<f64> = vec![1.0; self.os_cpus.len()];
        for src in CAPACITY_SOURCES {
            let vals: Option<Vec<f64>> = self
                .os_cpus
                .iter()
                .map(|&c| read_num(&self.cpu_path(c).join(src)))
                .collect();
            if let Some(vals) = vals {
                if vals.iter().any(|&v| v != vals[0]) && vals.iter().all(|&v| v > 0.0) {
                    capacity = vals;
                    capacity_source = Some(src.to_string());
                    break;
                }
            }
        }

        (capacity, capacity_source)
    }

    /// The core classes (Intel hybrid's cpu_core/cpu_atom, else capacities grouped by
    /// [`CLASS_GAP`]), each with the class index it was numbered by; each CPU's class index; and
    /// the number of classes named.
    fn classes(&mut self, capacity: &[f64]) -> (Vec<(usize, ClassSpec)>, Vec<usize>, usize) {
        let max_freq_ghz: Vec<Option<f64>> = self
            .os_cpus
            .iter()
            .map(|&c| {
                read_num(&self.cpu_path(c).join("cpufreq/cpuinfo_max_freq")).map(|khz| khz / 1e6)
            })
            .collect();
        let hybrid_core =
            read(&self.root.join("sys/devices/cpu_core/cpus")).and_then(|t| self.to_dense(&t));
        let hybrid_atom =
            read(&self.root.join("sys/devices/cpu_atom/cpus")).and_then(|t| self.to_dense(&t));
        let n = self.os_cpus.len();
        let mut class_of: Vec<usize> = vec![0; n];
        let class_names: Vec<String>;
        match (hybrid_core, hybrid_atom) {
            (Some(p), Some(e)) if !p.is_empty() && !e.is_empty() => {
                class_names = vec!["p-core".into(), "e-core".into()];
                for (i, class) in class_of.iter_mut().enumerate() {
                    let id = CoreId(i as u32);
                    *class = usize::from(e.contains(id));
                    if !p.contains(id) && !e.contains(id) {
                        self.warnings.push(format!(
                            "CPU {} is in neither cpu_core nor cpu_atom; counted as p-core",
                            self.os_cpus[i]
                        ));
                    }
                }
            }
            _ => {
                let max = capacity.iter().cloned().fold(f64::MIN, f64::max);
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by(|&a, &b| capacity[b].total_cmp(&capacity[a]));
                let mut k = 0;
                for (pos, &i) in order.iter().enumerate() {
                    if pos > 0 && capacity[order[pos - 1]] - capacity[i] > CLASS_GAP * max {
                        k += 1;
                    }
                    class_of[i] = k;
                }
                class_names = class_rank_names(k + 1);
            }
        }
        let num_classes = class_names.len();
        let max_cap = capacity.iter().cloned().fold(f64::MIN, f64::max);
        let mut classes = Vec::new();
        for (k, name) in class_names.iter().enumerate() {
            let members: Vec<usize> = (0..n).filter(|&i| class_of[i] == k).collect();
            if members.is_empty() {
                continue;
            }
            let cap = members
                .iter()
                .map(|&i| capacity[i])
                .fold(f64::MIN, f64::max)
                / max_cap;
            let freq = members
                .iter()
                .filter_map(|&i| max_freq_ghz[i])
                .reduce(f64::max);
            classes.push((
                k,
                ClassSpec {
                    origin: format!("class {name}"),
                    name: name.clone(),
                    freq_ghz: freq,
                    capacity: Some(cap),
                    ..Default::default()
                },
            ));
        }
        (classes, class_of, num_classes)
    }

    /// The machine's name and description, its classes and which CPUs each has.
    fn spec_with_classes(
        &mut self,
        classes: Vec<(usize, ClassSpec)>,
        class_of: &[usize],
        num_classes: usize,
        capacity_source: Option<&str>,
    ) -> TopologySpec {
        let n = self.os_cpus.len();
        let mut spec = TopologySpec {
            name: read(&self.root.join("proc/sys/kernel/hostname"))
                .or_else(|| read(&self.root.join("etc/hostname")))
                .map(|h| format!("{h} (sysfs)"))
                .unwrap_or_else(|| "this machine (sysfs)".into()),
            description: format!(
                "discovered from sysfs: {n} CPUs, {num_classes} class(es), capacity from {}",
                capacity_source.unwrap_or("nothing (all CPUs alike)")
            ),
            os_cpus: Some(self.os_cpus.clone()),
            ..Default::default()
        };
        if capacity_source.is_none() && num_classes == 1 {
            let tried = CAPACITY_SOURCES.join(", ");
            if self.os_cpus.iter().all(|&c| {
                CAPACITY_SOURCES
                    .iter()
                    .all(|s| !self.cpu_path(c).join(s).exists())
            }) {
                self.warnings.push(format!(
                    "no capacity source ({tried}); assuming symmetric CPUs"
                ));
            }
        }
        for (k, c) in &classes {
            let cpus: CpuSet = (0..n)
                .filter(|&i| class_of[i] == *k)
                .map(|i| CoreId(i as u32))
                .collect();
            spec.cores.push(CoresSpec {
                origin: format!("cores of {}", c.name),
                cpus,
                class: c.name.clone(),
            });
        }
        spec.classes = classes.into_iter().map(|(_, c)| c).collect();

        spec
    }

    /// Data and unified caches (each once, by level and sharing CPUs) and SMT sibling groups.
    fn caches_and_smt(&mut self, spec: &mut TopologySpec) {
        let mut seen_caches: BTreeMap<(u8, Vec<u32>), ()> = BTreeMap::new();
        let mut seen_smt: BTreeMap<Vec<u32>, ()> = BTreeMap::new();
        let mut missing_cache = false;
        for (i, &c) in self.os_cpus.iter().enumerate() {
            let base = self.cpu_path(c);
            let idx_dirs: Vec<PathBuf> = fs::read_dir(base.join("cache"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|f| f.to_str())
                        .is_some_and(|f| f.starts_with("index"))
                })
                .collect();
            if idx_dirs.is_empty() {
                missing_cache = true;
            }
            for d in idx_dirs {
                if read(&d.join("type")).as_deref() == Some("Instruction") {
                    continue;
                }
                let (Some(level), Some(size), Some(shared)) = (
                    read(&d.join("level")).and_then(|l| l.parse::<u8>().ok()),
                    read(&d.join("size")).and_then(|s| parse_size(&s).ok()),
                    read(&d.join("shared_cpu_list")).and_then(|t| self.to_dense(&t)),
                ) else {
                    self.warnings.push(format!(
                        "{}: incomplete cache description; skipped",
                        d.display()
                    ));
                    continue;
                };
                let mut shared = shared;
                shared.insert(CoreId(i as u32));
                let key = (level, shared.iter().map(|c| c.0).collect::<Vec<_>>());
                if seen_caches.insert(key, ()).is_some() {
                    continue;
                }
                let assoc = read(&d.join("ways_of_associativity"))
                    .and_then(|s| s.parse::<u32>().ok())
                    .filter(|&a| a > 0);
                let line = read(&d.join("coherency_line_size"))
                    .and_then(|s| s.parse::<u32>().ok())
                    .filter(|l| l.is_power_of_two());
                spec.caches.push(CacheSpec {
                    origin: d.display().to_string(),
                    level,
                    size_bytes: size,
                    assoc: assoc.unwrap_or(1),
                    line_bytes: line.unwrap_or(64),
                    cpus: shared,
                    hit_latency_ns: None,
                });
            }
            if let Some(sib) =
                read(&base.join("topology/thread_siblings_list")).and_then(|t| self.to_dense(&t))
            {
                if sib.len() > 1 {
                    let key: Vec<u32> = sib.iter().map(|c| c.0).collect();
                    if seen_smt.insert(key, ()).is_none() {
                        spec.smt.push(GroupSpec {
                            origin: format!("cpu{c}/topology/thread_siblings_list"),
                            cpus: sib,
                            shares_fpu: true,
                        });
                    }
                }
            }
        }
        if missing_cache {
            self.warnings
                .push("some CPUs have no cache/ directory; their caches are unknown".into());
        }
    }

    /// NUMA nodes with CPUs, their distances and estimated latencies; one node when the
    /// description is missing or inconsistent.
    fn nodes(&mut self, spec: &mut TopologySpec) {
        let n = self.os_cpus.len();
        let node_dir = self.root.join("sys/devices/system/node");
        let mut node_ids: Vec<u32> = fs::read_dir(&node_dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
            .collect();
        node_ids.sort_unstable();
        let mut nodes = Vec::new();
        for &id in &node_ids {
            let d = node_dir.join(format!("node{id}"));
            let cpus = read(&d.join("cpulist"))
                .and_then(|t| self.to_dense(&t))
                .unwrap_or_default();
            let dist: Option<Vec<i64>> = read(&d.join("distance")).map(|t| {
                t.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            });
            nodes.push((id, cpus, dist));
        }
        // Memory-only nodes (no CPUs) are dropped with their distance columns.
        let keep: Vec<usize> = (0..nodes.len())
            .filter(|&i| !nodes[i].1.is_empty())
            .collect();
        let consistent = !keep.is_empty()
            && nodes
                .iter()
                .all(|(_, _, d)| d.as_ref().is_some_and(|d| d.len() == nodes.len()))
            && {
                let mut covered = CpuSet::new();
                keep.iter().all(|&i| {
                    let ok = !covered.intersects(&nodes[i].1);
                    for c in nodes[i].1.iter() {
                        covered.insert(c);
                    }
                    ok
                }) && covered.len() == n
            };
        if consistent {
            for &i in &keep {
                let (id, cpus, dist) = &nodes[i];
                let dist = dist.clone().unwrap_or_default();
                let row: Vec<i64> = keep.iter().map(|&j| dist[j]).collect();
                let own = row[keep.iter().position(|&j| j == i).unwrap_or(0)].max(1);
                spec.nodes.push(NodeSpec {
                    origin: format!("node{id}"),
                    cpus: cpus.clone(),
                    latency_ns: Some(
                        row.iter()
                            .map(|&d| ESTIMATED_LOCAL_LATENCY_NS * d as f64 / own as f64)
                            .collect(),
                    ),
                    distance: row,
                    memory_bytes: None,
                    bandwidth_bytes_per_s: None,
                });
            }
            self.warnings.push(format!(
        "memory latency is not in sysfs; estimated as {ESTIMATED_LOCAL_LATENCY_NS} ns x distance / 10"
    ));
        } else {
            if !node_ids.is_empty() {
                self.warnings.push(format!(
                    "{}: node description incomplete; assuming one node",
                    node_dir.display()
                ));
            } else {
                self.warnings.push(format!(
                    "{}: no NUMA nodes; assuming one node",
                    node_dir.display()
                ));
            }
            spec.memory_latency_ns = Some(ESTIMATED_LOCAL_LATENCY_NS);
        }
    }

    /// The model, or a symmetric one-node machine when the description does not build.
    fn build(&mut self, spec: TopologySpec) -> Topology {
        let n = self.os_cpus.len();
        match Topology::build(spec.clone()) {
            Ok(t) => t,
            Err(e) => {
                self.warnings.push(format!("sysfs description inconsistent ({e}); assuming symmetric CPUs, no caches, one node"));
                let fallback = TopologySpec {
                    name: spec.name,
                    description: "discovered from sysfs (degraded)".into(),
                    classes: vec![ClassSpec {
                        origin: "class".into(),
                        name: "cpu".into(),
                        capacity: Some(1.0),
                        ..Default::default()
                    }],
                    cores: vec![CoresSpec {
                        origin: "cores".into(),
                        cpus: CpuSet::all(n),
                        class: "cpu".into(),
                    }],
                    os_cpus: Some(self.os_cpus.clone()),
                    memory_latency_ns: Some(ESTIMATED_LOCAL_LATENCY_NS),
                    ..Default::default()
                };
                Topology::build(fallback)
                    .expect("a one-class, no-cache machine with n >= 1 CPUs always builds")
            }
        }
    }
}

/// Class names by rank, fastest first.
fn class_rank_names(k: usize) -> Vec<String> {
    match k {
        1 => vec!["cpu".into()],
        2 => vec!["big".into(), "little".into()],
        3 => vec!["prime".into(), "big".into(), "little".into()],
        _ => (0..k).map(|i| format!("class{i}")).collect(),
    }
}

/// Drop caches that would make the model inconsistent (a CPU in two caches of one level, as a
/// kernel bug or a hand-edited tree can show), with a warning for each.
fn drop_inconsistent_caches(spec: &mut TopologySpec, warnings: &mut Vec<String>) {
    let mut taken: BTreeMap<(u8, u32), ()> = BTreeMap::new();
    spec.caches.retain(|c| {
        let clash = c
            .cpus
            .iter()
            .any(|cpu| taken.contains_key(&(c.level, cpu.0)));
        if clash {
            warnings.push(format!(
                "{}: overlaps another L{} cache; skipped",
                c.origin, c.level
            ));
            return false;
        }
        for cpu in c.cpus.iter() {
            taken.insert((c.level, cpu.0), ());
        }
        true
    });
}
