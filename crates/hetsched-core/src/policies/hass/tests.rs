use super::estimate::{estimated_ns, ClassModel};
use super::*;
use crate::ids::AppId;
use crate::observe::{CoreObs, ThreadObs, ThreadState};
use crate::presets::machine_preset;
use crate::signature::ART_179_TOML;
use std::sync::Arc;

fn amd22() -> Topology {
    machine_preset("hass-amd-2-2").unwrap().unwrap()
}

/// No misses at any cache size: pure execution time.
fn cpu_bound() -> Arc<Signature> {
    Arc::new(Signature::from_row("cpu", &[0.0]))
}

/// 400 misses per 4096 instructions at every size: stalls dominate.
fn memory_bound() -> Arc<Signature> {
    Arc::new(Signature::from_row("mem", &[400.0]))
}

/// A hand-built system: threads with signatures, as a backend would show them.
struct State {
    topo: Topology,
    threads: Vec<ThreadObs>,
    now: u64,
}

impl State {
    fn new(topo: Topology) -> Self {
        State {
            topo,
            threads: Vec::new(),
            now: 0,
        }
    }
    fn cores(&self) -> Vec<CoreObs> {
        vec![CoreObs::default(); self.topo.num_cores()]
    }
    fn view<'a>(&'a self, cores: &'a [CoreObs]) -> View<'a> {
        crate::policies::fixture::view(&self.topo, &self.threads, cores, self.now)
    }
    /// Start a thread through the policy (as the backend does) and mark it running.
    fn start(&mut self, hass: &mut Hass, sig: Arc<Signature>) -> ThreadId {
        let id = ThreadId(self.threads.len() as u32);
        let mut t = ThreadObs::new(id, AppId(id.0), self.topo.all_cores(), 4);
        t.signature = Some(sig);
        self.threads.push(t);
        self.now += 1;
        let cores = self.cores();
        let set = hass.on_thread_start(&self.view(&cores), id).unwrap();
        self.threads[id.index()].allowed = set;
        self.threads[id.index()].state = ThreadState::Running;
        id
    }
    /// Every thread runs `cpu_ns` more CPU time; the policy rebalances; placements are applied.
    fn run_and_rebalance(&mut self, hass: &mut Hass, cpu_ns: f64) -> Vec<Placement> {
        for t in &mut self.threads {
            if is_runnable(t.state) {
                t.counters.cpu_time_ns += cpu_ns;
            }
        }
        self.now += cpu_ns as u64;
        let cores = self.cores();
        let mut out = Vec::new();
        hass.rebalance(&self.view(&cores), &mut out);
        for p in &out {
            self.threads[p.thread.index()].allowed = p.cpus.clone();
        }
        out
    }
}

/// The fast partition of the AMD-2,2 machine (partitions come fastest first).
const FAST: usize = 0;
const SLOW: usize = 1;

#[test]
fn estimate_memory_bound_threads_gain_far_less_from_a_fast_core() {
    // HASS section 3: clock speed hardly matters to a thread that stalls on memory.
    let classes = ClassModel::of_machine(&amd22());
    let (fast, slow) = (&classes[0], &classes[1]);
    assert_eq!((fast.ghz, slow.ghz), (2.3, 1.15));
    assert_eq!((fast.llc_bytes, fast.llc_assoc), (2 << 20, 32));
    let ratio = |s: &Signature| estimated_ns(s, slow) / estimated_ns(s, fast);
    assert!((ratio(&cpu_bound()) - 2.0).abs() < 1e-12);
    let art = Signature::parse(ART_179_TOML, "art").unwrap();
    // 86 misses at 2 MB / 32-way, 80 ns each: (5342 + 6880) / (2671 + 6880) = 1.28.
    let want = (4096.0 * 1.5 / 1.15 + 86.0 * 80.0) / (4096.0 * 1.5 / 2.3 + 86.0 * 80.0);
    assert!((ratio(&art) - want).abs() < 1e-9, "{}", ratio(&art));
    assert!(ratio(&memory_bound()) < 1.1);
    assert!(ratio(&art) < ratio(&cpu_bound()) && ratio(&memory_bound()) < ratio(&art));
}

#[test]
fn regular_assignment_fills_fast_cores_then_respects_underload() {
    let mut s = State::new(amd22());
    let mut hass = Hass::new(1);
    // Memory-bound threads arrive first and take the empty fast cores (expected performance is
    // higher there while a core is free); the CPU-bound ones find the fast partition full and a
    // slow one underloaded, so underload protection sends them to the slow cores.
    let m1 = s.start(&mut hass, memory_bound());
    let m2 = s.start(&mut hass, memory_bound());
    let c1 = s.start(&mut hass, cpu_bound());
    let c2 = s.start(&mut hass, cpu_bound());
    assert_eq!(hass.partition_of(m1), Some(FAST));
    assert_eq!(hass.partition_of(m2), Some(FAST));
    assert_eq!(hass.partition_of(c1), Some(SLOW));
    assert_eq!(hass.partition_of(c2), Some(SLOW));
    assert_eq!(s.threads[c1.index()].allowed.to_list(), "0-1");
}

#[test]
fn optimistic_swaps_fix_the_greedy_lock_in() {
    let mut s = State::new(amd22());
    let mut hass = Hass::new(7);
    let mem: Vec<ThreadId> = (0..2).map(|_| s.start(&mut hass, memory_bound())).collect();
    let cpu: Vec<ThreadId> = (0..2).map(|_| s.start(&mut hass, cpu_bound())).collect();
    // Regular assignment cannot move anyone (the system is exactly full); after enough refreshes
    // the optimistic swaps put the CPU-bound threads on the fast cores.
    for _ in 0..20 {
        s.run_and_rebalance(&mut hass, REFRESH_CPU_NS);
    }
    for t in &cpu {
        assert_eq!(hass.partition_of(*t), Some(FAST), "cpu-bound {t:?}");
    }
    for t in &mem {
        assert_eq!(hass.partition_of(*t), Some(SLOW), "memory-bound {t:?}");
    }
    assert_eq!(hass.stats.regular_moves, 0);
    assert_eq!(hass.stats.optimistic_swaps, 2);
    // Once right, nothing moves again.
    let before = hass.stats;
    for _ in 0..10 {
        assert!(s.run_and_rebalance(&mut hass, REFRESH_CPU_NS).is_empty());
    }
    assert_eq!(hass.stats.optimistic_swaps, before.optimistic_swaps);
}

#[test]
fn no_swap_when_the_system_would_lose() {
    // Two CPU-bound threads with the same signature: a swap gains the initiator nothing net, so
    // the system's expected performance does not rise and nobody moves.
    let mut s = State::new(amd22());
    let mut hass = Hass::new(3);
    for _ in 0..4 {
        s.start(&mut hass, cpu_bound());
    }
    for _ in 0..10 {
        assert!(s.run_and_rebalance(&mut hass, REFRESH_CPU_NS).is_empty());
    }
    assert_eq!(hass.stats.optimistic_swaps, 0);
    assert_eq!(hass.stats.regular_moves, 0);
}

#[test]
fn refresh_follows_cpu_time_not_wall_time() {
    let mut s = State::new(amd22());
    let mut hass = Hass::new(1);
    let t = s.start(&mut hass, cpu_bound());
    // Wall time passes while the thread sleeps: no refresh.
    s.threads[t.index()].state = ThreadState::Blocked;
    for _ in 0..5 {
        s.run_and_rebalance(&mut hass, REFRESH_CPU_NS);
    }
    assert_eq!(hass.stats.refreshes, 0);
    s.threads[t.index()].state = ThreadState::Running;
    s.run_and_rebalance(&mut hass, REFRESH_CPU_NS * 0.5);
    assert_eq!(hass.stats.refreshes, 0, "half a refresh period of CPU");
    s.run_and_rebalance(&mut hass, REFRESH_CPU_NS * 0.5);
    assert_eq!(hass.stats.refreshes, 1);
    s.run_and_rebalance(&mut hass, REFRESH_CPU_NS * 0.9);
    assert_eq!(hass.stats.refreshes, 1);
}

#[test]
fn overloaded_partitions_share_by_expected_performance() {
    // Overload (no partition underloaded): the fast partition takes CPU-bound threads while its
    // share of a fast core still beats a slow core to itself: with 2 fast cores, a CPU-bound
    // thread expects 2 x 2/n there; memory-bound threads prefer a slow core of their own.
    let mut s = State::new(amd22());
    let mut hass = Hass::new(1);
    let ids: Vec<ThreadId> = (0..5).map(|_| s.start(&mut hass, cpu_bound())).collect();
    let fast = ids
        .iter()
        .filter(|&&t| hass.partition_of(t) == Some(FAST))
        .count();
    // Threads 1-2 fast (free cores), 3-4 slow (underload protection), the 5th: fast expects
    // 2 x 2/3 = 1.33, slow 1 x 2/3 = 0.67: fast.
    assert_eq!(fast, 3);
    let m = s.start(&mut hass, memory_bound());
    // Memory-bound: fast 1.08 x 2/4 = 0.54 against slow 1 x 2/3 = 0.67: slow.
    assert_eq!(hass.partition_of(m), Some(SLOW));
}

#[test]
fn threads_without_a_signature_are_left_alone_and_a_hint_admits_them() {
    let mut s = State::new(amd22());
    let mut hass = Hass::new(1);
    let id = ThreadId(0);
    s.threads
        .push(ThreadObs::new(id, AppId(0), s.topo.all_cores(), 4));
    let cores = s.cores();
    assert!(hass.on_thread_start(&s.view(&cores), id).is_none());
    assert_eq!(hass.partition_of(id), None);
    let mut out = Vec::new();
    hass.on_hint(&s.view(&cores), id, &Hint::Signature(cpu_bound()), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].cpus.to_list(), "2-3");
    assert_eq!(hass.partition_of(id), Some(FAST));
}

#[test]
fn a_second_signature_for_a_thread_not_in_this_instants_counts_is_taken_in() {
    let mut s = State::new(amd22());
    let mut hass = Hass::new(1);
    let id = s.start(&mut hass, cpu_bound());
    assert_eq!(hass.partition_of(id), Some(FAST));
    // Counted at an instant when it slept...
    s.threads[id.index()].state = ThreadState::Blocked;
    s.now += 1;
    let cores = s.cores();
    let mut out = Vec::new();
    hass.rebalance(&s.view(&cores), &mut out);
    // ... then, at the same instant, runnable with a new signature (a backend shows a thread that
    // sends a hint as runnable): rated afresh, where a subtraction from an empty partition's
    // count used to panic.
    s.threads[id.index()].state = ThreadState::Runnable;
    hass.on_hint(
        &s.view(&cores),
        id,
        &Hint::Signature(memory_bound()),
        &mut out,
    );
    assert_eq!(out.len(), 1);
    // Alone on the machine, even a memory-bound thread does best on a fast core.
    assert_eq!(hass.partition_of(id), Some(FAST));
    assert_eq!(out[0].cpus.to_list(), "2-3");
}
