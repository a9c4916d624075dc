//! The memory model Ding et al.'s scheduler needs, end to end: LLC evictions and fills per thread
//! (equation 5), bandwidth contention within a node (Fig. 8), and sticky-page moves by access heat
//! with a copy cost (section 3.3.2).

use hetsched_core::presets::machine_preset;
use hetsched_core::{
    AppId, CoreId, CpuSet, NodeId, PageMove, Placement, Policy, ThreadId, Topology, View,
};
use hetsched_sim::perf::PAGE_MIGRATION_BYTES_PER_S;
use hetsched_sim::{simulate, SimConfig, Workload};
use std::sync::{Arc, Mutex};

fn parse_machine(text: &str) -> Topology {
    hetsched_core::machine_file::parse_machine(text, "test.toml").unwrap()
}

/// One node of 4 cores at 2 GHz, 80 ns memory, optionally a bandwidth.
fn four_cores(bandwidth: Option<f64>) -> Topology {
    let bw = bandwidth.map_or(String::new(), |b| format!("bandwidth_gbs = {b}\n"));
    parse_machine(&format!(
        r#"
name = "four"
[[classes]]
name = "c"
freq_ghz = 2.0
[[cores]]
cpus = "0-3"
class = "c"
[[caches]]
level = 3
size = "8 MiB"
assoc = 16
cpus = "0-3"
[[nodes]]
cpus = "0-3"
distance = [10]
latency_ns = [80.0]
{bw}"#
    ))
}

fn streaming(copies: u32) -> String {
    format!(
        r#"
name = "stream"
[[apps]]
name = "s"
copies = {copies}
[[apps.threads]]
[[apps.threads.phases]]
instructions = 1e9
cpi = 0.5
mpki = {{ max = 40, min = 40, ws = "64 KiB" }}
mlp = 10
"#
    )
}

fn run(topo: &Topology, text: &str) -> hetsched_sim::RunResult {
    let w = Workload::parse(text, "w.toml", topo).unwrap();
    let p = hetsched_core::policies::policy_by_name("linux-default").unwrap();
    let r = simulate(topo, &w, p, SimConfig::default());
    assert!(r.finished);
    r
}

/// Four streaming threads on a node that serves 5 GB/s: alone each would pull 4.5 GB/s; together
/// the node's queue holds them to its bandwidth. Without a bandwidth they do not slow each other.
#[test]
fn a_node_serves_at_most_its_bandwidth() {
    let limited = four_cores(Some(5.0));
    let alone = run(&limited, &streaming(1)).makespan_s;
    // The unloaded model: 0.5 CPI / 2 GHz + 40/1000 misses × 80 ns / 10 in flight.
    let model = 1e9 * (0.25 + 0.04 * 80.0 / 10.0) * 1e-9;
    assert!(
        (alone / model - 1.0).abs() < 0.02,
        "alone {alone} s, model {model} s"
    );
    let four = run(&limited, &streaming(4)).makespan_s;
    let bytes = 4.0 * 1e9 * 0.04 * 64.0;
    let served = bytes / four / 1e9;
    assert!((served - 5.0).abs() < 0.25, "served {served} GB/s");
    assert!(four > 3.0 * alone, "{four} vs {alone}");
    let unlimited = four_cores(None);
    let free = run(&unlimited, &streaming(4)).makespan_s;
    assert!((free / alone - 1.0).abs() < 0.01, "{free} vs {alone}");
}

/// Equation 5's counters: a streaming thread evicts every line it fills (ER 1); one whose working
/// set fits the LLC evicts almost none.
#[test]
fn eviction_rate_is_one_for_streaming_and_small_when_the_working_set_fits() {
    let topo = four_cores(None);
    let er = |curve: &str| {
        let text = format!(
            "name = \"e\"\n[[apps]]\nname = \"a\"\n[[apps.threads]]\n[[apps.threads.phases]]\ninstructions = 1e9\ncpi = 1.0\nmpki = {curve}\n"
        );
        let a = run(&topo, &text).apps.remove(0);
        assert!(a.llc_fills > 0.0);
        a.llc_evictions / a.llc_fills
    };
    let stream = er("{ max = 20, min = 20, ws = \"1 GiB\" }");
    assert!((stream - 1.0).abs() < 1e-9, "{stream}");
    let fits = er("{ max = 20, min = 0.5, ws = \"2 MiB\" }");
    assert!((fits - 0.5 / 20.0).abs() < 1e-3, "{fits}");
}

/// Allocates on node 0, then moves to `then` and asks for up to `max_bytes` of its pages to go to
/// `to`; records the resident bytes per node it sees afterwards.
struct MoveOnce {
    then: CoreId,
    to: NodeId,
    max_bytes: u64,
    switch_ns: u64,
    moved: bool,
    pending: Vec<PageMove>,
    seen: Arc<Mutex<Vec<u64>>>,
}

impl Policy for MoveOnce {
    fn name(&self) -> &str {
        "move-once"
    }
    fn rebalance_period_ns(&self) -> u64 {
        1_000_000
    }
    fn on_thread_start(&mut self, _v: &View<'_>, _t: ThreadId) -> Option<CpuSet> {
        Some(CpuSet::single(CoreId(0)))
    }
    fn rebalance(&mut self, v: &View<'_>, out: &mut Vec<Placement>) {
        if v.now_ns >= self.switch_ns && !self.moved {
            self.moved = true;
            out.push(Placement::pin(ThreadId(0), self.then));
            if self.max_bytes > 0 {
                self.pending.push(PageMove {
                    app: AppId(0),
                    to: self.to,
                    max_bytes: self.max_bytes,
                });
            }
        } else if self.moved {
            *self.seen.lock().unwrap() = v.threads[0].resident_bytes.clone();
        }
    }
    fn take_page_moves(&mut self, out: &mut Vec<PageMove>) {
        out.append(&mut self.pending);
    }
}

fn move_run(text: &str, then: u32, to: u32, max_bytes: u64, switch_ns: u64) -> (f64, Vec<u64>) {
    let topo = machine_preset("amps-numa-1").unwrap().unwrap();
    let w = Workload::parse(text, "w.toml", &topo).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let p = MoveOnce {
        then: CoreId(then),
        to: NodeId(to),
        max_bytes,
        switch_ns,
        moved: false,
        pending: Vec::new(),
        seen: seen.clone(),
    };
    let r = simulate(&topo, &w, Box::new(p), SimConfig::default());
    assert!(r.finished);
    let v = seen.lock().unwrap().clone();
    (r.makespan_s, v)
}

/// A thread whose 512 MiB are on node 0 moves to node 2 (two hops, AMPS Table 1: 176 ns against
/// 68 local). Taking its pages along costs the copy and gives back local latency.
#[test]
fn sticky_pages_follow_a_moved_thread_at_a_copy_cost() {
    let text = r#"
name = "m"
[[apps]]
name = "a"
[[apps.threads]]
[[apps.threads.phases]]
instructions = 1e6
cpi = 0.01
alloc = "512 MiB"
sleep_ms = 10
[[apps.threads.phases]]
instructions = 1e8
cpi = 0.000001
mpki = { max = 50, min = 50, ws = "64 KiB" }
"#;
    let mib = 1u64 << 20;
    let (stay_remote, _) = move_run(text, 8, 2, 0, 5_000_000);
    let (moved, resident) = move_run(text, 8, 2, 512 * mib, 5_000_000);
    let stall = |lat: f64| 1e8 * 0.05 * lat * 1e-9;
    let copy = (512 * mib) as f64 / PAGE_MIGRATION_BYTES_PER_S;
    // Work alone, without the 10 ms sleep and the allocation phase.
    let work = |t: f64| t - 0.010;
    assert!(
        (work(stay_remote) / stall(176.0) - 1.0).abs() < 0.02,
        "{stay_remote}"
    );
    assert!(
        (work(moved) / (stall(68.0) + copy) - 1.0).abs() < 0.02,
        "moved {moved}, expected {}",
        stall(68.0) + copy + 0.010
    );
    assert_eq!(resident[0], 0);
    assert!(resident[2].abs_diff(512 * mib) < 1024, "{resident:?}");
}

/// A budget smaller than the pages takes them from the node accessed most: 96 MiB on node 1 are
/// hotter than 32 MiB on node 0, so a 32 MiB move to node 2 empties part of node 1, not node 0.
#[test]
fn a_partial_move_takes_the_hottest_node_first() {
    let text = r#"
name = "h"
[[apps]]
name = "a"
[[apps.threads]]
[[apps.threads.phases]]
instructions = 1e6
cpi = 0.01
alloc = "32 MiB"
sleep_ms = 10
[[apps.threads.phases]]
instructions = 1e8
cpi = 0.5
mpki = { max = 5, min = 5, ws = "64 KiB" }
"#;
    // The thread allocates 32 MiB on node 0 and, after moving to core 4 (node 1) at 5 ms, runs
    // there; a second workload allocates 96 MiB on node 1 in its second phase.
    let two_nodes = text.replace(
        "mpki = { max = 5, min = 5, ws = \"64 KiB\" }",
        "mpki = { max = 5, min = 5, ws = \"64 KiB\" }\nalloc = \"96 MiB\"\n[[apps.threads.phases]]\ninstructions = 1e9\ncpi = 0.5\nmpki = { max = 5, min = 5, ws = \"64 KiB\" }",
    );
    let mib = 1u64 << 20;
    let topo = machine_preset("amps-numa-1").unwrap().unwrap();
    let w = Workload::parse(&two_nodes, "w.toml", &topo).unwrap();
    // First move to node 1 (no pages), then, once the work is half done, pages to node 2.
    struct TwoSteps {
        step: u32,
        pending: Vec<PageMove>,
        seen: Arc<Mutex<Vec<u64>>>,
    }
    impl Policy for TwoSteps {
        fn name(&self) -> &str {
            "two-steps"
        }
        fn rebalance_period_ns(&self) -> u64 {
            1_000_000
        }
        fn on_thread_start(&mut self, _v: &View<'_>, _t: ThreadId) -> Option<CpuSet> {
            Some(CpuSet::single(CoreId(0)))
        }
        fn rebalance(&mut self, v: &View<'_>, out: &mut Vec<Placement>) {
            let resident = &v.threads[0].resident_bytes;
            if self.step == 0 && v.now_ns >= 5_000_000 {
                self.step = 1;
                out.push(Placement::pin(ThreadId(0), CoreId(4)));
            } else if self.step == 1 && resident[1] >= 95 << 20 {
                self.step = 2;
                out.push(Placement::pin(ThreadId(0), CoreId(8)));
                self.pending.push(PageMove {
                    app: AppId(0),
                    to: NodeId(2),
                    max_bytes: 32 << 20,
                });
            } else if self.step == 2 {
                *self.seen.lock().unwrap() = resident.clone();
            }
        }
        fn take_page_moves(&mut self, out: &mut Vec<PageMove>) {
            out.append(&mut self.pending);
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let p = TwoSteps {
        step: 0,
        pending: Vec::new(),
        seen: seen.clone(),
    };
    let r = simulate(&topo, &w, Box::new(p), SimConfig::default());
    assert!(r.finished);
    assert!((r.pages_moved_bytes - (32 * mib) as f64).abs() < 1024.0);
    let resident = seen.lock().unwrap().clone();
    assert!(resident[0].abs_diff(32 * mib) < 1024, "{resident:?}");
    assert!(resident[1].abs_diff(64 * mib) < 1024, "{resident:?}");
    assert!(resident[2].abs_diff(32 * mib) < 1024, "{resident:?}");
}
