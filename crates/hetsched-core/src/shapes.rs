//! Generated machine shapes: a machine described by a few numbers (core classes and their clock,
//! cores per class, NUMA nodes, shared or private last-level caches, FPU-sharing modules), turned
//! into a machine file and checked like any other. Parameter sweeps generate their machines with
//! it, and the simulator's property tests draw random machines through it.

use crate::machine_file::{parse_machine, MachineFileError};
use crate::Topology;
use std::fmt::Write as _;

/// Memory latency of a generated machine, ns: the order of a DRAM access on the AMPS and HASS
/// machines (docs/machine-format.md), so generated shapes price memory as the presets do.
pub const MEMORY_LATENCY_NS: f64 = 80.0;

/// A machine shape. Classes are listed fastest first; `ghz[k]` and `cores[k]` describe class `k`
/// (named `c0`, `c1`, ...). Cores are numbered class by class, then split into `nodes` NUMA nodes
/// of consecutive cores (the last one smaller when they do not divide evenly).
#[derive(Clone, Debug, PartialEq)]
pub struct MachineShape {
    /// The machine's name in results.
    pub name: String,
    /// Clock of each class, GHz.
    pub ghz: Vec<f64>,
    /// Cores of each class.
    pub cores: Vec<u32>,
    /// NUMA nodes (1: an SMP machine), at most one a core.
    pub nodes: u32,
    /// One 8 MiB, 16-way L3 per node when true; else a private 1 MiB, 8-way L2 per core.
    pub shared_llc: bool,
    /// Pairs of consecutive cores share an FPU (Bulldozer modules), when the core count is even.
    pub fpu_modules: bool,
}

impl MachineShape {
    /// Cores in all.
    pub fn total(&self) -> u32 {
        self.cores.iter().sum()
    }

    /// The shape as a machine file (docs/machine-format.md).
    pub fn toml(&self) -> String {
        let n = self.total();
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(
            s,
            "name = {:?}\nmemory_latency_ns = {MEMORY_LATENCY_NS:?}",
            self.name
        );
        for (k, g) in self.ghz.iter().enumerate() {
            let _ = writeln!(s, "[[classes]]\nname = \"c{k}\"\nfreq_ghz = {g:?}");
        }
        let mut first = 0;
        for (k, &c) in self.cores.iter().enumerate() {
            let _ = writeln!(
                s,
                "[[cores]]\ncpus = \"{}-{}\"\nclass = \"c{k}\"",
                first,
                first + c.max(1) - 1
            );
            first += c;
        }
        let nodes = self.nodes.clamp(1, n.max(1));
        let per = n.div_ceil(nodes);
        let mut ranges = Vec::new();
        let mut lo = 0;
        while lo < n {
            let hi = (lo + per).min(n);
            ranges.push((lo, hi - 1));
            lo = hi;
        }
        for &(lo, hi) in &ranges {
            if self.shared_llc {
                let _ = writeln!(
                    s,
                    "[[caches]]\nlevel = 3\nsize = \"8 MiB\"\nassoc = 16\ncpus = \"{lo}-{hi}\""
                );
            } else {
                let _ = writeln!(
                    s,
                    "[[caches]]\nlevel = 2\nsize = \"1 MiB\"\nassoc = 8\ncpus = \"{lo}-{hi}\"\n\
                     shared_by = 1"
                );
            }
        }
        if ranges.len() > 1 {
            // SLIT-style distances: 10 local, 20 remote (the ACPI convention).
            for &(lo, hi) in &ranges {
                let row: Vec<&str> = ranges
                    .iter()
                    .map(|r| if r.0 == lo { "10" } else { "20" })
                    .collect();
                let _ = writeln!(
                    s,
                    "[[nodes]]\ncpus = \"{lo}-{hi}\"\ndistance = [{}]",
                    row.join(", ")
                );
            }
        }
        if self.fpu_modules && n.is_multiple_of(2) {
            let _ = writeln!(s, "[[modules]]\ncpus = \"0-{}\"\nshared_by = 2", n - 1);
        }
        s
    }

    /// The machine, checked as a machine file is.
    pub fn topology(&self) -> Result<Topology, MachineFileError> {
        parse_machine(&self.toml(), &format!("generated machine {}", self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_two_node_two_class_shape_builds() {
        let shape = MachineShape {
            name: "g".into(),
            ghz: vec![3.0, 1.5],
            cores: vec![2, 4],
            nodes: 2,
            shared_llc: true,
            fpu_modules: false,
        };
        let t = shape.topology().unwrap();
        assert_eq!(t.num_cores(), 6);
        assert_eq!(t.name(), "g");
        assert_eq!(t.classes().len(), 2);
        assert_eq!(t.nodes().len(), 2);
    }
}
