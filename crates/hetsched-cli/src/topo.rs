//! `hetsched topo` and `hetsched machines`.

use crate::machine::{resolve_machine, this_machine};
use crate::provenance::Provenance;
use clap::Args;
use hetsched_core::presets::MACHINE_PRESETS;
use hetsched_core::topology::AMPS_SCALING_FACTOR;
use hetsched_core::{CoreId, CpuSet, Topology};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct TopoArgs {
    /// A machine preset (see `hetsched machines`) or a machine file (.toml); default: this machine.
    #[arg(long)]
    machine: Option<String>,
    /// Print one JSON document on stdout.
    #[arg(long)]
    json: bool,
    /// Root of the sysfs tree to read for this machine (for tests and containers).
    #[arg(long, default_value = "/", hide = true)]
    sysfs_root: PathBuf,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `topo --json`: what produced it, then the machine.
#[derive(Serialize)]
struct TopoDoc {
    #[serde(flatten)]
    provenance: Provenance,
    #[serde(flatten)]
    machine: TopoJson,
}

/// The machine as `topo --json` shows it, fields as in DESIGN.md.
#[derive(Serialize)]
pub struct TopoJson {
    name: String,
    description: String,
    cores: Vec<CoreJson>,
    classes: Vec<ClassJson>,
    modules: Vec<ModuleJson>,
    caches: Vec<CacheJson>,
    nodes: Vec<NodeJson>,
}

#[derive(Serialize)]
struct CoreJson {
    id: u32,
    os_cpu: u32,
    class: String,
    module: Option<u32>,
    llc: Option<u32>,
    node: u32,
    siblings: Vec<u32>,
}

#[derive(Serialize)]
struct ClassJson {
    name: String,
    freq_ghz: Option<f64>,
    duty: f64,
    effective_ghz: Option<f64>,
    cpi_factor: f64,
    capacity: f64,
    /// AMPS scaled computing power with S = 0.85.
    amps_power: f64,
    cores: usize,
}

#[derive(Serialize)]
struct ModuleJson {
    id: u32,
    cores: Vec<u32>,
    shares_fpu: bool,
}

#[derive(Serialize)]
struct CacheJson {
    level: u8,
    size_bytes: u64,
    assoc: u32,
    line_bytes: u32,
    cpus: Vec<u32>,
}

#[derive(Serialize)]
struct NodeJson {
    id: u32,
    cpus: Vec<u32>,
    distance: Vec<u32>,
    latency_ns: Vec<f64>,
    memory_bytes: Option<u64>,
}

fn ids(v: &[CoreId]) -> Vec<u32> {
    v.iter().map(|c| c.0).collect()
}

pub fn topo_json(t: &Topology) -> TopoJson {
    TopoJson {
        name: t.name().into(),
        description: t.description().into(),
        cores: t
            .cores()
            .iter()
            .map(|c| CoreJson {
                id: c.id.0,
                os_cpu: c.os_cpu,
                class: t.class(c.class).name.clone(),
                module: c.module.map(|m| m.0),
                llc: c.llc.map(|l| l.0),
                node: c.node.0,
                siblings: ids(&c.siblings),
            })
            .collect(),
        classes: t
            .classes()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let id = hetsched_core::ClassId(i as u32);
                let cores = t.class_cores(id);
                ClassJson {
                    name: c.name.clone(),
                    freq_ghz: c.freq_ghz,
                    duty: c.duty,
                    effective_ghz: c.effective_ghz(),
                    cpi_factor: c.cpi_factor,
                    capacity: c.capacity,
                    amps_power: cores
                        .first()
                        .map_or(1.0, |core| t.scaled_power(core, AMPS_SCALING_FACTOR)),
                    cores: cores.len(),
                }
            })
            .collect(),
        modules: t
            .modules()
            .iter()
            .map(|m| ModuleJson {
                id: m.id.0,
                cores: ids(&m.cores),
                shares_fpu: m.shares_fpu,
            })
            .collect(),
        caches: t
            .caches()
            .iter()
            .map(|c| CacheJson {
                level: c.level,
                size_bytes: c.size_bytes,
                assoc: c.assoc,
                line_bytes: c.line_bytes,
                cpus: ids(&c.cpus),
            })
            .collect(),
        nodes: t
            .nodes()
            .iter()
            .map(|n| NodeJson {
                id: n.id.0,
                cpus: ids(&n.cpus),
                distance: n.distance.clone(),
                latency_ns: n.latency_ns.clone(),
                memory_bytes: n.memory_bytes,
            })
            .collect(),
    }
}

/// Bytes as `16 KiB`, `2 MiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() && (v / 1024.0).fract() == 0.0 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v} {}", UNITS[u])
}

fn class_label(t: &Topology, core: CoreId) -> String {
    let c = t.class_of(core);
    match (c.freq_ghz, c.duty < 1.0) {
        (Some(f), true) => format!(
            "{} {:.2} GHz ({:.0}% duty)",
            c.name,
            f * c.duty,
            c.duty * 100.0
        ),
        (Some(f), false) => format!("{} {:.2} GHz", c.name, f),
        (None, _) => format!("{} capacity {:.2}", c.name, c.capacity),
    }
}

/// The lstopo-like tree: nodes > LLC domains > modules > cores, runs of like cores folded.
pub fn render_tree(t: &Topology) -> String {
    let mut out = String::new();
    out.push_str(&format!("{} — {}\n", t.name(), t.description()));
    out.push_str(&format!(
        "{} cores, {} classes, {} modules, {} LLC domains, {} nodes\n",
        t.num_cores(),
        t.classes().len(),
        t.modules().len(),
        t.num_llcs(),
        t.nodes().len()
    ));
    out.push_str("classes (fastest first):\n");
    for id in t.classes_by_speed() {
        let c = t.class(id);
        let cores = t.class_cores(id);
        let freq = match c.effective_ghz() {
            Some(e) if c.duty < 1.0 => format!(
                "{e:.2} GHz ({:.2} GHz at {:.0}% duty)",
                c.freq_ghz.unwrap_or(0.0),
                c.duty * 100.0
            ),
            Some(e) => format!("{e:.2} GHz"),
            None => "clock unknown".into(),
        };
        let p = cores
            .first()
            .map_or(1.0, |core| t.scaled_power(core, AMPS_SCALING_FACTOR));
        let cpi = if c.cpi_factor != 1.0 {
            format!(", CPI x{:.2}", c.cpi_factor)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {:<12} {:>3} cores  {freq}{cpi}, capacity {:.3}, AMPS P {:.2}\n",
            c.name,
            cores.len(),
            c.capacity,
            p
        ));
    }
    for node in t.nodes() {
        let mut remote: Vec<f64> = node
            .latency_ns
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != node.id.index())
            .map(|(_, &l)| l)
            .collect();
        remote.sort_by(f64::total_cmp);
        remote.dedup();
        let remote = if remote.is_empty() {
            String::new()
        } else {
            format!(
                ", remote {} ns",
                remote
                    .iter()
                    .map(|l| format!("{l:.0}"))
                    .collect::<Vec<_>>()
                    .join("/")
            )
        };
        out.push_str(&format!(
            "node {} · {} cores · memory {:.0} ns local{remote}\n",
            node.id,
            node.cpus.len(),
            node.latency_ns[node.id.index()]
        ));
        // Group the node's cores by LLC domain.
        let mut by_llc: BTreeMap<Option<u32>, Vec<CoreId>> = BTreeMap::new();
        for &c in &node.cpus {
            by_llc
                .entry(t.core(c).llc.map(|l| l.0))
                .or_default()
                .push(c);
        }
        for (llc, cores) in by_llc {
            let indent = match llc {
                Some(l) => {
                    let cache = t.llc(hetsched_core::LlcId(l));
                    out.push_str(&format!(
                        "  L{} {} {}-way · cores {}\n",
                        cache.level,
                        human_bytes(cache.size_bytes),
                        cache.assoc,
                        cores.iter().copied().collect::<CpuSet>()
                    ));
                    "    "
                }
                None => "  ",
            };
            // Modules first, then runs of cores of one class.
            let mut loose: Vec<CoreId> = Vec::new();
            let mut done_modules = Vec::new();
            for &c in &cores {
                match t.module_of(c) {
                    Some(m) if !done_modules.contains(&m.id) => {
                        done_modules.push(m.id);
                        let l2 = t.cache_of(c, 2).filter(|l2| l2.cpus == m.cores);
                        out.push_str(&format!(
                            "{indent}module {}{}{} · cores {} {}\n",
                            m.id,
                            if m.shares_fpu { " (shared FPU" } else { " (" },
                            l2.map_or(")".to_string(), |l2| format!(
                                ", L2 {})",
                                human_bytes(l2.size_bytes)
                            )),
                            m.cores.iter().copied().collect::<CpuSet>(),
                            class_label(t, c)
                        ));
                    }
                    Some(_) => {}
                    None => loose.push(c),
                }
            }
            let mut i = 0;
            while i < loose.len() {
                let class = t.core(loose[i]).class;
                let mut j = i;
                while j + 1 < loose.len() && t.core(loose[j + 1]).class == class {
                    j += 1;
                }
                let set: CpuSet = loose[i..=j].iter().copied().collect();
                let smt = loose[i..=j].iter().any(|&c| !t.core(c).siblings.is_empty());
                out.push_str(&format!(
                    "{indent}cores {set} {}{}\n",
                    class_label(t, loose[i]),
                    if smt { " (SMT)" } else { "" }
                ));
                i = j + 1;
            }
        }
    }
    out
}

pub fn run_topo(args: &TopoArgs) -> anyhow::Result<()> {
    let topology = match &args.machine {
        Some(m) => resolve_machine(m)?,
        None => this_machine(&args.sysfs_root),
    };
    if args.json {
        // The machine named on the command line is the input; this machine's sysfs is not a file
        // to hash, and the document describes what was read from it.
        let doc = TopoDoc {
            provenance: Provenance::new(args.machine.as_deref()),
            machine: topo_json(&topology),
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", render_tree(&topology));
    }
    Ok(())
}

/// A `{name, description}` entry of `machines` and `workloads`.
#[derive(Serialize)]
pub struct NamedJson {
    pub name: String,
    pub description: String,
}

/// Print a preset list: JSON, or aligned columns.
pub fn print_named(list: &[NamedJson], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(list)?);
    } else {
        let w = list.iter().map(|m| m.name.len()).max().unwrap_or(0);
        for m in list {
            println!("{:<w$}  {}", m.name, m.description);
        }
    }
    Ok(())
}

/// Every machine preset, named and described.
pub fn machine_list() -> anyhow::Result<Vec<NamedJson>> {
    let mut list = Vec::new();
    for (name, _) in MACHINE_PRESETS {
        let t = resolve_machine(name)?;
        list.push(NamedJson {
            name: name.to_string(),
            description: t.description().to_string(),
        });
    }
    Ok(list)
}

pub fn run_machines(args: &ListArgs) -> anyhow::Result<()> {
    print_named(&machine_list()?, args.json)
}
