//! Machine presets: every machine of the papers with the papers' numbers, modern shapes, and the
//! simulator's scale machine. Each is a machine file (`presets/*.toml`) compiled into the binary,
//! so a preset is also a worked example of the format; each file names its sources.

use crate::machine_file::{parse_machine, MachineFileError};
use crate::topology::Topology;

/// (name, machine file text), in the order `hetsched machines` lists them.
pub const MACHINE_PRESETS: &[(&str, &str)] = &[
    ("amps-smp", include_str!("../presets/amps-smp.toml")),
    ("amps-numa-1", include_str!("../presets/amps-numa-1.toml")),
    ("amps-numa-2", include_str!("../presets/amps-numa-2.toml")),
    (
        "hass-intel-2-2",
        include_str!("../presets/hass-intel-2-2.toml"),
    ),
    ("hass-amd-2-2", include_str!("../presets/hass-amd-2-2.toml")),
    (
        "hass-amd-12-4",
        include_str!("../presets/hass-amd-12-4.toml"),
    ),
    (
        "hass-amd-4-4-2-2",
        include_str!("../presets/hass-amd-4-4-2-2.toml"),
    ),
    ("bulldover", include_str!("../presets/bulldover.toml")),
    ("pinter-smp", include_str!("../presets/pinter-smp.toml")),
    ("ding-4f12s", include_str!("../presets/ding-4f12s.toml")),
    (
        "intel-hybrid-8p16e",
        include_str!("../presets/intel-hybrid-8p16e.toml"),
    ),
    (
        "arm-3cluster-phone",
        include_str!("../presets/arm-3cluster-phone.toml"),
    ),
    (
        "amd-dual-ccd-vcache",
        include_str!("../presets/amd-dual-ccd-vcache.toml"),
    ),
    ("scale-512", include_str!("../presets/scale-512.toml")),
    ("scale-1024", include_str!("../presets/scale-1024.toml")),
];

/// Names of every machine preset.
pub fn machine_names() -> impl Iterator<Item = &'static str> {
    MACHINE_PRESETS.iter().map(|(n, _)| *n)
}

/// Build a machine preset; `None` when no preset has that name.
pub fn machine_preset(name: &str) -> Option<Result<Topology, MachineFileError>> {
    MACHINE_PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, text)| parse_machine(text, &format!("preset {n}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{CoreId, NodeId};

    fn get(name: &str) -> Topology {
        machine_preset(name)
            .expect("preset exists")
            .expect("preset parses")
    }

    #[test]
    fn every_preset_parses_and_is_named_as_listed() {
        for (name, _) in MACHINE_PRESETS {
            let t = get(name);
            assert_eq!(t.name(), *name);
            assert!(!t.description().is_empty());
        }
        assert!(machine_preset("no-such-machine").is_none());
    }

    /// AMPS Table 1 and section 4.1.
    #[test]
    fn amps_machines_match_the_paper() {
        let smp = get("amps-smp");
        assert_eq!(smp.num_cores(), 8);
        assert_eq!(
            smp.cores()
                .iter()
                .filter(|c| smp.class(c.class).capacity == 1.0)
                .count(),
            2
        );
        assert_eq!(smp.class_of(CoreId(5)).capacity, 0.5);
        assert_eq!(smp.nodes()[0].latency_ns, vec![79.0]);
        assert_eq!(smp.llc_of(CoreId(3)).unwrap().size_bytes, 1 << 20);
        for name in ["amps-numa-1", "amps-numa-2"] {
            let t = get(name);
            assert_eq!(t.num_cores(), 32);
            assert_eq!(t.nodes().len(), 8);
            let fast: Vec<_> = t
                .cores()
                .iter()
                .filter(|c| t.class(c.class).capacity == 1.0)
                .collect();
            assert_eq!(fast.len(), 8);
            for n in t.nodes() {
                let mut lat = n.latency_ns.clone();
                lat.sort_by(f64::total_cmp);
                lat.dedup();
                assert_eq!(lat, vec![68.0, 146.0, 176.0], "{name} node {}", n.id);
                assert_eq!(n.latency_ns[n.id.index()], 68.0);
            }
        }
        let n1 = get("amps-numa-1");
        assert!((0..8).all(|c| n1.node_of(CoreId(c)).0 < 2));
        let n2 = get("amps-numa-2");
        let fast_nodes: Vec<NodeId> = n2
            .cores()
            .iter()
            .filter(|c| n2.class(c.class).capacity == 1.0)
            .map(|c| c.node)
            .collect();
        assert_eq!(fast_nodes, (0..8).map(NodeId).collect::<Vec<_>>());
    }

    /// HASS Table 1.
    #[test]
    fn hass_machines_match_the_paper() {
        let cases: &[(&str, &[(usize, f64)])] = &[
            ("hass-intel-2-2", &[(2, 2.0), (2, 3.0)]),
            ("hass-amd-2-2", &[(2, 1.15), (2, 2.3)]),
            ("hass-amd-12-4", &[(12, 1.15), (4, 2.3)]),
            (
                "hass-amd-4-4-2-2",
                &[(4, 1.15), (4, 1.4), (2, 2.0), (2, 2.3)],
            ),
        ];
        for (name, parts) in cases {
            let t = get(name);
            let mut got: Vec<(usize, f64)> = t
                .classes()
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    (
                        t.class_cores(crate::ClassId(i as u32)).len(),
                        c.freq_ghz.unwrap(),
                    )
                })
                .collect();
            got.sort_by(|a, b| a.1.total_cmp(&b.1));
            assert_eq!(&got, parts, "{name}");
            assert_eq!(t.partitions(16).len(), parts.len());
        }
        let t = get("hass-amd-12-4");
        assert_eq!(t.llc_of(CoreId(0)).unwrap().cpus.len(), 4);
        assert_eq!(t.num_llcs(), 4);
    }

    #[test]
    fn bulldover_pinter_and_ding() {
        let b = get("bulldover");
        assert_eq!((b.num_cores(), b.modules().len()), (8, 4));
        assert_eq!(b.module_pairs().len(), 4);
        assert_eq!(
            b.cache_of(CoreId(0), 2).unwrap().cpus,
            vec![CoreId(0), CoreId(1)]
        );
        let p = get("pinter-smp");
        assert_eq!(p.num_cores(), 2);
        assert_eq!(p.private_cache_bytes(CoreId(1)), 2 << 20);
        let d = get("ding-4f12s");
        assert_eq!(d.num_cores(), 16);
        assert_eq!(d.class_cores(d.classes_by_speed()[0]).len(), 4);
        assert_eq!(d.nodes().len(), 4);
        assert_eq!(d.relative_speed(CoreId(0)), 2.0);
    }

    #[test]
    fn modern_shapes() {
        let i = get("intel-hybrid-8p16e");
        assert_eq!(i.num_cores(), 32);
        assert_eq!(i.core(CoreId(0)).siblings, vec![CoreId(1)]);
        assert!(i.core(CoreId(16)).siblings.is_empty());
        assert_eq!(i.cache_of(CoreId(17), 2).unwrap().cpus.len(), 4);
        let a = get("arm-3cluster-phone");
        assert_eq!(a.classes().len(), 3);
        assert_eq!(
            a.classes_by_speed()
                .iter()
                .map(|c| a.class(*c).name.as_str())
                .collect::<Vec<_>>(),
            ["prime", "mid", "little"]
        );
        let v = get("amd-dual-ccd-vcache");
        assert_eq!(v.core(CoreId(3)).siblings, vec![CoreId(19)]);
        assert_eq!(v.llc_of(CoreId(3)).unwrap().size_bytes, 96 << 20);
        assert_eq!(v.llc_of(CoreId(9)).unwrap().size_bytes, 32 << 20);
        let s = get("scale-1024");
        assert_eq!(
            (s.num_cores(), s.nodes().len(), s.num_llcs()),
            (1024, 16, 64)
        );
    }
}
