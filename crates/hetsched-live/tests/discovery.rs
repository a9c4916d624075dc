//! Discovery against committed fixture trees with known answers (made by
//! tools/make_sysfs_fixtures.py).

use hetsched_core::{CoreId, Topology};
use hetsched_live::discover;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name)
}

fn class_summary(t: &Topology) -> Vec<(String, usize, f64)> {
    t.classes_by_speed()
        .into_iter()
        .map(|c| {
            (
                t.class(c).name.clone(),
                t.class_cores(c).len(),
                (t.class(c).capacity * 1000.0).round() / 1000.0,
            )
        })
        .collect()
}

#[test]
fn this_vm() {
    let d = discover(&fixture("vm-2cpu"));
    let t = &d.topology;
    assert_eq!(t.num_cores(), 2);
    assert_eq!(
        d.capacity_source, None,
        "equal cpu_capacity values are skipped"
    );
    assert!(!t.is_asymmetric());
    assert_eq!(
        t.caches().len(),
        5,
        "2 L1d + 2 L2 + 1 shared L3 (instruction caches skipped)"
    );
    let l3 = t.llc_of(CoreId(1)).unwrap();
    assert_eq!(
        (l3.level, l3.size_bytes, l3.assoc, l3.cpus.len()),
        (3, 107520 * 1024, 15, 2)
    );
    assert_eq!(t.cache_of(CoreId(0), 1).unwrap().size_bytes, 48 * 1024);
    assert_eq!(t.nodes().len(), 1);
    assert!(d
        .warnings
        .iter()
        .any(|w| w.contains("memory latency is not in sysfs")));
}

#[test]
fn intel_hybrid_uses_core_types_and_max_freq() {
    let d = discover(&fixture("intel-hybrid"));
    let t = &d.topology;
    assert_eq!(t.num_cores(), 32);
    assert_eq!(
        d.capacity_source.as_deref(),
        Some("cpufreq/cpuinfo_max_freq")
    );
    assert_eq!(
        class_summary(t),
        vec![("p-core".into(), 16, 1.0), ("e-core".into(), 16, 0.741)]
    );
    let p = t.class(t.classes_by_speed()[0]);
    assert_eq!(p.freq_ghz, Some(5.8));
    assert_eq!(t.core(CoreId(2)).siblings, vec![CoreId(3)]);
    assert_eq!(
        t.cache_of(CoreId(21), 2).unwrap().cpus,
        (20..24).map(CoreId).collect::<Vec<_>>()
    );
    assert_eq!(t.llc_of(CoreId(0)).unwrap().size_bytes, 36 << 20);
}

#[test]
fn big_little_phone_has_three_classes_from_cpu_capacity() {
    let d = discover(&fixture("big-little-phone"));
    let t = &d.topology;
    assert_eq!(d.capacity_source.as_deref(), Some("cpu_capacity"));
    assert_eq!(
        class_summary(t),
        vec![
            ("prime".into(), 2, 1.0),
            ("big".into(), 2, 0.486),
            ("little".into(), 4, 0.156)
        ]
    );
    assert_eq!(t.class_of(CoreId(0)).name, "little");
    assert_eq!(t.class_of(CoreId(7)).freq_ghz, Some(2.85));
}

#[test]
fn numa_server_drops_memory_only_node() {
    let d = discover(&fixture("numa-2node"));
    let t = &d.topology;
    assert_eq!(t.num_cores(), 32);
    assert!(!t.is_asymmetric());
    assert_eq!(t.nodes().len(), 2);
    assert_eq!(t.nodes()[0].distance, vec![10, 21]);
    assert_eq!(t.node_of(CoreId(17)).0, 0);
    assert_eq!(t.node_of(CoreId(8)).0, 1);
    assert_eq!(t.core(CoreId(17)).siblings, vec![CoreId(1)]);
    assert_eq!(t.num_llcs(), 2);
    let ratio = t.latency_ns(CoreId(0), hetsched_core::NodeId(1))
        / t.latency_ns(CoreId(0), hetsched_core::NodeId(0));
    assert!((ratio - 2.1).abs() < 1e-9);
}

#[test]
fn amd_prefcore_ranking_clusters_into_ccds() {
    let d = discover(&fixture("amd-prefcore"));
    let t = &d.topology;
    assert_eq!(
        d.capacity_source.as_deref(),
        Some("cpufreq/amd_pstate_prefcore_ranking")
    );
    assert_eq!(
        class_summary(t),
        vec![("big".into(), 16, 1.0), ("little".into(), 16, 0.788)]
    );
    assert_eq!(t.class_of(CoreId(20)).name, "big");
    assert_eq!(t.class_of(CoreId(9)).name, "little");
}

#[test]
fn missing_files_degrade_to_symmetric_unknown() {
    let dir = std::env::temp_dir().join(format!("hetsched-empty-sysfs-{}", std::process::id()));
    for c in 0..3 {
        std::fs::create_dir_all(dir.join(format!("sys/devices/system/cpu/cpu{c}"))).unwrap();
    }
    let d = discover(&dir);
    assert_eq!(d.topology.num_cores(), 3);
    assert!(!d.topology.is_asymmetric());
    assert!(d.topology.caches().is_empty());
    assert!(d.warnings.len() >= 3, "{:?}", d.warnings);
    let nothing = discover(&dir.join("does-not-exist"));
    assert_eq!(nothing.topology.num_cores(), 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn offline_cpus_are_left_out_and_keep_their_os_numbers() {
    let dir = std::env::temp_dir().join(format!("hetsched-offline-sysfs-{}", std::process::id()));
    let cpu = dir.join("sys/devices/system/cpu");
    for c in [0, 2, 3] {
        std::fs::create_dir_all(cpu.join(format!("cpu{c}"))).unwrap();
        std::fs::write(
            cpu.join(format!("cpu{c}/cpu_capacity")),
            if c == 0 { "1024" } else { "512" },
        )
        .unwrap();
    }
    std::fs::write(cpu.join("online"), "0,2-3\n").unwrap();
    let d = discover(&dir);
    let t = &d.topology;
    assert_eq!(t.num_cores(), 3);
    assert_eq!(
        t.cores().iter().map(|c| c.os_cpu).collect::<Vec<_>>(),
        vec![0, 2, 3]
    );
    assert_eq!(t.class_of(CoreId(1)).capacity, 0.5);
    std::fs::remove_dir_all(&dir).ok();
}
