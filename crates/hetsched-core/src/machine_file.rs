//! The machine file: a TOML description of any machine (format documented in
//! `docs/machine-format.md`). Presets are machine files embedded in the binary.
//!
//! ```toml
//! name = "two-by-two"
//! description = "2 fast + 2 slow cores"
//! memory_latency_ns = 80          # single node: its latency; else the local latency rows scale from
//!
//! [[classes]]
//! name = "fast"
//! freq_ghz = 3.0                  # or capacity = 1.0; duty = 0.5 and cpi_factor = 1.3 optional
//!
//! [[cores]]
//! cpus = "0-3"                    # kernel cpulist syntax
//! class = "fast"
//!
//! [[caches]]
//! level = 2
//! size = "1 MiB"                  # or a number of bytes
//! assoc = 8
//! line_bytes = 64
//! cpus = "0-3"
//! shared_by = 1                   # one cache per group of 1 consecutive cores (default: all)
//! latency_ns = 25                 # optional: load-to-use latency of a hit
//! ```

use crate::cpuset::CpuSet;
use crate::input::InputError;
use crate::topology::{
    CacheSpec, ClassSpec, CoresSpec, GroupSpec, NodeSpec, Topology, TopologySpec,
};
use serde::Deserialize;
use std::path::Path;

/// A machine file that cannot be used (one line: file, field or line, problem).
pub type MachineFileError = InputError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMachine {
    name: String,
    #[serde(default)]
    description: String,
    memory_latency_ns: Option<f64>,
    classes: Vec<FileClass>,
    cores: Vec<FileCores>,
    #[serde(default)]
    modules: Vec<FileGroup>,
    #[serde(default)]
    smt: Vec<FileGroup>,
    #[serde(default)]
    caches: Vec<FileCache>,
    #[serde(default)]
    nodes: Vec<FileNode>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileClass {
    name: String,
    freq_ghz: Option<f64>,
    duty: Option<f64>,
    cpi_factor: Option<f64>,
    capacity: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCores {
    cpus: String,
    class: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGroup {
    cpus: String,
    shared_by: Option<u32>,
    #[serde(default = "yes")]
    shares_fpu: bool,
}

fn yes() -> bool {
    true
}

/// A size in an input file: a number of bytes or text such as `"16 KiB"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum SizeField {
    Bytes(i64),
    Text(String),
}

impl SizeField {
    /// The size in bytes, or what is wrong with it.
    pub fn bytes(&self) -> Result<u64, String> {
        match self {
            SizeField::Bytes(b) if *b >= 0 => Ok(*b as u64),
            SizeField::Bytes(b) => Err(format!("must not be negative, got {b}")),
            SizeField::Text(t) => parse_size(t),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCache {
    level: i64,
    size: SizeField,
    assoc: i64,
    #[serde(default = "default_line")]
    line_bytes: i64,
    cpus: String,
    shared_by: Option<u32>,
    /// Load-to-use latency of a hit, ns.
    latency_ns: Option<f64>,
}

fn default_line() -> i64 {
    64
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileNode {
    cpus: String,
    distance: Vec<i64>,
    latency_ns: Option<Vec<f64>>,
    memory: Option<SizeField>,
    /// Peak memory bandwidth, GB/s (10^9 bytes per second, as datasheets give it).
    bandwidth_gbs: Option<f64>,
}

/// Parse a byte size: a number of bytes, or text such as `16 KiB`, `48K`, `2MB`, `1 GiB` (binary
/// multiples throughout, as sysfs and cache datasheets mean them).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("{text:?} is not a size"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    let bytes = value * mult as f64;
    if !(bytes.is_finite() && bytes >= 0.0 && bytes.fract() == 0.0) {
        return Err(format!("{text:?} is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

fn size_bytes(field: &str, s: &SizeField) -> Result<u64, (String, String)> {
    s.bytes().map_err(|m| (field.into(), m))
}

fn cpus(field: &str, text: &str) -> Result<CpuSet, (String, String)> {
    CpuSet::parse_list(text).map_err(|m| (field.to_string(), format!("bad cpulist {text:?}: {m}")))
}

/// Split a set into consecutive groups of `shared_by` cores (all of them when `None`).
fn groups(
    field: &str,
    set: &CpuSet,
    shared_by: Option<u32>,
) -> Result<Vec<CpuSet>, (String, String)> {
    match shared_by {
        None => Ok(vec![set.clone()]),
        Some(0) => Err((format!("{field}.shared_by"), "must be at least 1".into())),
        Some(k) => {
            let v: Vec<_> = set.iter().collect();
            if v.len() % k as usize != 0 {
                return Err((
                    format!("{field}.shared_by"),
                    format!("{} cores do not split into groups of {k}", v.len()),
                ));
            }
            Ok(v.chunks(k as usize)
                .map(|c| c.iter().copied().collect())
                .collect())
        }
    }
}

fn int_in<T: TryFrom<i64>>(field: String, v: i64, what: &str) -> Result<T, (String, String)> {
    T::try_from(v).map_err(|_| (field, format!("must be {what}, got {v}")))
}

fn to_spec(m: FileMachine) -> Result<TopologySpec, (String, String)> {
    let mut spec = TopologySpec {
        name: m.name,
        description: m.description,
        memory_latency_ns: m.memory_latency_ns,
        ..Default::default()
    };
    for (i, c) in m.classes.into_iter().enumerate() {
        spec.classes.push(ClassSpec {
            origin: format!("classes[{i}]"),
            name: c.name,
            freq_ghz: c.freq_ghz,
            duty: c.duty,
            cpi_factor: c.cpi_factor,
            capacity: c.capacity,
        });
    }
    for (i, c) in m.cores.into_iter().enumerate() {
        let origin = format!("cores[{i}]");
        let set = cpus(&format!("{origin}.cpus"), &c.cpus)?;
        spec.cores.push(CoresSpec {
            origin,
            cpus: set,
            class: c.class,
        });
    }
    for (name, list, out) in [
        ("modules", m.modules, &mut spec.modules),
        ("smt", m.smt, &mut spec.smt),
    ] {
        for (i, g) in list.into_iter().enumerate() {
            let origin = format!("{name}[{i}]");
            let set = cpus(&format!("{origin}.cpus"), &g.cpus)?;
            for part in groups(&origin, &set, g.shared_by)? {
                out.push(GroupSpec {
                    origin: origin.clone(),
                    cpus: part,
                    shares_fpu: g.shares_fpu,
                });
            }
        }
    }
    for (i, c) in m.caches.into_iter().enumerate() {
        let origin = format!("caches[{i}]");
        let set = cpus(&format!("{origin}.cpus"), &c.cpus)?;
        let size = size_bytes(&format!("{origin}.size"), &c.size)?;
        let level = int_in::<u8>(format!("{origin}.level"), c.level, "1..5")?;
        let assoc = int_in::<u32>(
            format!("{origin}.assoc"),
            c.assoc,
            "a positive number of ways",
        )?;
        let line = int_in::<u32>(
            format!("{origin}.line_bytes"),
            c.line_bytes,
            "a power of two",
        )?;
        for part in groups(&origin, &set, c.shared_by)? {
            spec.caches.push(CacheSpec {
                origin: origin.clone(),
                level,
                size_bytes: size,
                assoc,
                line_bytes: line,
                cpus: part,
                hit_latency_ns: c.latency_ns,
            });
        }
    }
    for (i, n) in m.nodes.into_iter().enumerate() {
        let origin = format!("nodes[{i}]");
        let set = cpus(&format!("{origin}.cpus"), &n.cpus)?;
        let memory_bytes = match &n.memory {
            Some(s) => Some(size_bytes(&format!("{origin}.memory"), s)?),
            None => None,
        };
        if let Some(g) = n.bandwidth_gbs {
            if !(g.is_finite() && g > 0.0) {
                return Err((
                    format!("{origin}.bandwidth_gbs"),
                    format!("must be a positive number, got {g}"),
                ));
            }
        }
        spec.nodes.push(NodeSpec {
            origin,
            cpus: set,
            distance: n.distance,
            latency_ns: n.latency_ns,
            memory_bytes,
            bandwidth_bytes_per_s: n.bandwidth_gbs.map(|g| g * 1e9),
        });
    }
    Ok(spec)
}

/// Parse and check a machine description. `source_name` names it in errors (a path or
/// `preset NAME`).
pub fn parse_machine(text: &str, source_name: &str) -> Result<Topology, MachineFileError> {
    let file: FileMachine =
        toml::from_str(text).map_err(|e| InputError::from_toml(source_name, text, &e))?;
    let spec = to_spec(file).map_err(|(field, msg)| InputError::at(source_name, &field, msg))?;
    Topology::build(spec).map_err(|e| InputError::at(source_name, &e.field, e.message))
}

/// Read and check a machine file.
pub fn load_machine_file(path: &Path) -> Result<Topology, MachineFileError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| InputError::unreadable(&name, &e))?;
    parse_machine(&text, &name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::CoreId;

    const GOOD: &str = r#"
name = "tiny"
description = "2 fast + 2 slow"
memory_latency_ns = 80

[[classes]]
name = "fast"
freq_ghz = 3.0

[[classes]]
name = "slow"
freq_ghz = 3.0
duty = 0.5

[[cores]]
cpus = "0-1"
class = "fast"

[[cores]]
cpus = "2-3"
class = "slow"

[[modules]]
cpus = "0-3"
shared_by = 2

[[caches]]
level = 2
size = "1 MiB"
assoc = 8
cpus = "0-3"
shared_by = 2

[[caches]]
level = 3
size = 8388608
assoc = 16
cpus = "0-3"
"#;

    #[test]
    fn parses_a_good_file() {
        let t = parse_machine(GOOD, "tiny.toml").unwrap();
        assert_eq!(t.num_cores(), 4);
        assert_eq!(t.modules().len(), 2);
        assert_eq!(t.module_mates(CoreId(1)), vec![CoreId(0)]);
        assert_eq!(t.caches().len(), 3);
        assert_eq!(t.llc_of(CoreId(0)).unwrap().size_bytes, 8 << 20);
        assert_eq!(t.class_of(CoreId(2)).capacity, 0.5);
        assert_eq!(t.class_of(CoreId(2)).effective_ghz(), Some(1.5));
        assert_eq!(t.nodes()[0].latency_ns, vec![80.0]);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16 KiB").unwrap(), 16384);
        assert_eq!(parse_size("48K").unwrap(), 49152);
        assert_eq!(parse_size("2MB").unwrap(), 2 << 20);
        assert_eq!(parse_size("1.5 KiB").unwrap(), 1536);
        assert_eq!(parse_size("123").unwrap(), 123);
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
    }

    fn bad(edit: (&str, &str)) -> String {
        let text = GOOD.replacen(edit.0, edit.1, 1);
        assert_ne!(text, GOOD, "edit {edit:?} changed nothing");
        parse_machine(&text, "m.toml")
            .expect_err("should be rejected")
            .to_string()
    }

    /// Every malformed case we list, with the one line it must produce.
    #[test]
    fn every_malformed_case_names_file_field_and_problem() {
        let cases: &[((&str, &str), &str)] = &[
            (("freq_ghz = 3.0\n\n[[classes]]", "freq_ghz = -3.0\n\n[[classes]]"), "m.toml: classes[0].freq_ghz: must be a positive number, got -3"),
            (("duty = 0.5", "duty = 2.0"), "m.toml: classes[1].duty: must be in (0, 1], got 2"),
            (("class = \"slow\"", "class = \"huge\""), "m.toml: cores[1].class: unknown class \"huge\""),
            (("cpus = \"2-3\"\nclass", "cpus = \"3-4\"\nclass"), "m.toml: cores: core ids must run 0..3 without gaps (4 cores are listed, the highest 4); core 2 is missing"),
            (("cpus = \"0-3\"\nshared_by = 2\n\n[[caches]]", "cpus = \"0-5\"\nshared_by = 2\n\n[[caches]]"), "m.toml: modules[0].cpus: unknown core 4 (the machine has cores 0-3)"),
            (("shared_by = 2\n\n[[caches]]", "shared_by = 3\n\n[[caches]]"), "m.toml: modules[0].shared_by: 4 cores do not split into groups of 3"),
            (("size = \"1 MiB\"", "size = \"1 parsec\""), "m.toml: caches[0].size: unknown size unit \"parsec\" in \"1 parsec\""),
            (("assoc = 8", "assoc = -8"), "m.toml: caches[0].assoc: must be a positive number of ways, got -8"),
            (("level = 3", "level = 2"), "m.toml: caches[1].cpus: core 0 is in two L2 caches"),
            (("cpus = \"0-1\"\nclass", "cpus = \"0-x\"\nclass"), "m.toml: cores[0].cpus: bad cpulist \"0-x\": \"x\" is not a CPU number"),
            (("freq_ghz = 3.0\n\n[[classes]]", "frq_ghz = 3.0\n\n[[classes]]"), "m.toml: line 8: unknown field `frq_ghz`, expected one of `name`, `freq_ghz`, `duty`, `cpi_factor`, `capacity`"),
            (("name = \"tiny\"", "name = "), "m.toml: line 2: name: invalid string"),
            (("memory_latency_ns = 80", "memory_latency_ns = -80"), "m.toml: memory_latency_ns: must be a positive number, got -80"),
            (("freq_ghz = 3.0\n\n[[classes]]", "freq_ghz = 1e-300\n\n[[classes]]"), "m.toml: classes[0].freq_ghz: must be between 0.01 and 100 GHz, got 1e-300"),
            (("freq_ghz = 3.0\n\n[[classes]]", "freq_ghz = 1e300\n\n[[classes]]"), "m.toml: classes[0].freq_ghz: must be between 0.01 and 100 GHz, got 1e300"),
            (("cpus = \"2-3\"\nclass", "cpus = \"2-8192\"\nclass"), "m.toml: cores[1].cpus: bad cpulist \"2-8192\": CPU 8192 is beyond the highest supported, 8191"),
            // A cache shared by cores that have higher-level caches of their own (a shared L2 below
            // private L3s): caches nest, a higher level is shared by at least the same cores.
            (("size = 8388608\nassoc = 16\ncpus = \"0-3\"", "size = 8388608\nassoc = 16\ncpus = \"0-3\"\nshared_by = 1"), "m.toml: caches[0].cpus: core 0 shares this L2 cache with core 1, but its L3 cache (caches[1]) does not hold core 1"),
        ];
        for (edit, want) in cases {
            assert_eq!(&bad(*edit), want, "edit {edit:?}");
        }
    }

    #[test]
    fn node_errors() {
        let nodes = "\n[[nodes]]\ncpus = \"0-1\"\ndistance = [10, 20]\n\n[[nodes]]\ncpus = \"2-3\"\ndistance = [20, 10]\n";
        let t = parse_machine(&format!("{GOOD}{nodes}"), "m.toml").unwrap();
        assert_eq!(t.nodes()[0].latency_ns, vec![80.0, 160.0]);
        let cases = [
            (
                ("distance = [20, 10]", "distance = [20, 10, 30]"),
                "m.toml: nodes[1].distance: distance matrix is not square: 3 entries for 2 nodes",
            ),
            (
                ("cpus = \"2-3\"\ndistance", "cpus = \"1-3\"\ndistance"),
                "m.toml: nodes[1].cpus: core 1 is in two nodes",
            ),
            (
                ("cpus = \"2-3\"\ndistance", "cpus = \"2\"\ndistance"),
                "m.toml: nodes: core 3 is in no node",
            ),
            (
                ("distance = [10, 20]", "distance = [10, -20]"),
                "m.toml: nodes[0].distance: distances must be 1..255, got -20",
            ),
            (
                (
                    "distance = [20, 10]",
                    "distance = [20, 10]\nbandwidth_gbs = -1.0",
                ),
                "m.toml: nodes[1].bandwidth_gbs: must be a positive number, got -1",
            ),
            (
                (
                    "distance = [20, 10]",
                    "distance = [20, 10]\nbandwidth_gbs = -2.5",
                ),
                "m.toml: nodes[1].bandwidth_gbs: must be a positive number, got -2.5",
            ),
        ];
        for ((from, to), want) in cases {
            let text = format!("{GOOD}{nodes}").replacen(from, to, 1);
            assert_eq!(
                parse_machine(&text, "m.toml").unwrap_err().to_string(),
                want
            );
        }
    }
}
