//! Tests of building and querying the machine model.

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
        });
    });
    assert!(e.message.contains("two modules"));
}
