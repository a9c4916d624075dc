//! The Linux baselines on an asymmetric machine: what today's kernel does with a lone thread, a
//! barrier-coupled pair and more threads than cores, against the speed-blind `linux-cfs`.

use hetsched_core::machine_file::parse_machine;
use hetsched_core::policies::policy_by_name;
use hetsched_core::Topology;
use hetsched_sim::baseline::{baseline_by_name, BaselineEntry};
use hetsched_sim::workload::{Phase, PhaseEnd, ThreadSpec, Workload};
use hetsched_sim::{simulate, SimConfig};

mod common;

/// One full-speed core and one at half duty (as `hetsched emulate --duty 0.5` makes one).
fn one_fast_one_slow() -> Topology {
    parse_machine(
        r#"
name = "1f1s"
memory_latency_ns = 80.0
[[classes]]
name = "fast"
freq_ghz = 2.0
[[classes]]
name = "slow"
freq_ghz = 2.0
duty = 0.5
[[cores]]
cpus = "0"
class = "fast"
[[cores]]
cpus = "1"
class = "slow"
[[caches]]
level = 2
size = "1 MiB"
assoc = 8
cpus = "0-1"
shared_by = 1
"#,
        "1f1s",
    )
    .unwrap()
}

/// A CPU-bound phase: CPI 1, no LLC misses.
fn cpu_phase(instructions: f64, end: PhaseEnd) -> Phase {
    common::phase(instructions, 1.0, 0.0, end)
}

fn job(threads: u32, phases: Vec<Phase>, repeat: u32) -> Workload {
    common::app("job", threads, phases, repeat)
}

fn baseline(name: &str) -> &'static BaselineEntry {
    baseline_by_name(name).unwrap()
}

/// Makespans of `w` under `linux-default` (no placement) with the baseline, seeds 1..=10.
fn makespans(topo: &Topology, w: &Workload, b: &'static BaselineEntry) -> Vec<f64> {
    (1..=10)
        .map(|seed| {
            let cfg = SimConfig {
                seed,
                baseline: b,
                check_invariants: true,
                ..SimConfig::default()
            };
            let r = simulate(topo, w, policy_by_name("linux-default").unwrap(), cfg);
            assert!(r.finished);
            r.makespan_s
        })
        .collect()
}

/// 2e9 instructions at CPI 1 and 2 GHz: 1 s on the fast core, 2 s on the slow one.
#[test]
fn a_lone_thread_runs_on_the_fast_core() {
    let topo = one_fast_one_slow();
    let w = job(1, vec![cpu_phase(2e9, PhaseEnd::Next)], 1);
    let fast = |v: &[f64]| v.iter().filter(|&&s| s < 1.05).count();
    let modern = makespans(&topo, &w, baseline("linux-6"));
    assert!(fast(&modern) >= 9, "linux-6: {modern:?}");
    // The speed-blind balancer lands on either core, and never moves a lone running thread.
    let blind = makespans(&topo, &w, baseline("linux-cfs"));
    assert!(fast(&blind) < 10, "linux-cfs: {blind:?}");
}

/// A thread that starts on the slow core (the fast one busy) moves to the fast core when it idles:
/// the misfit rule. Two threads of unequal work: the short one leaves the fast core early.
#[test]
fn a_misfit_moves_to_an_idle_fast_core() {
    let topo = one_fast_one_slow();
    let mut w = job(1, vec![cpu_phase(0.4e9, PhaseEnd::Next)], 1);
    w.apps[0].threads.push(ThreadSpec::new(
        "long",
        1,
        vec![cpu_phase(2e9, PhaseEnd::Next)],
        1,
    ));
    // The short thread arrives first and takes the fast core (a new thread fits only there), so
    // the long one starts on the slow core. The short one is done after 0.2 s; the long one,
    // moved to the fast core then, ends at 0.2 + 1.8 / 2 = 1.1 s; stuck on the slow core, at 2 s.
    let modern = makespans(&topo, &w, baseline("linux-6"));
    for s in &modern {
        assert!((1.09..1.15).contains(s), "linux-6: {modern:?}");
    }
}

/// Three CPU-bound threads on two cores: capacity-weighted balance keeps two on the fast core
/// (each then runs at half of 2 GHz, as fast as the lone slow one), so all finish together.
#[test]
fn more_threads_than_cores_share_by_capacity() {
    let topo = one_fast_one_slow();
    let w = job(3, vec![cpu_phase(1e9, PhaseEnd::Next)], 1);
    let modern = makespans(&topo, &w, baseline("linux-6"));
    // 3e9 instructions over 3e9 instructions/s of total capacity: 1 s, plus time-slice rounding.
    for s in &modern {
        assert!(*s < 1.2, "linux-6: {modern:?}");
    }
}
