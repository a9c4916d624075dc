use super::*;
use crate::observe::{CoreObs, ThreadObs};
use crate::policies::fixture::view;
use crate::presets::machine_preset;
use crate::topology::Topology;

/// Ding's machine: cores 0-3 fast on node 0, 4-15 slow on nodes 1-3.
fn ding() -> Topology {
    machine_preset("ding-4f12s").unwrap().unwrap()
}

/// Hand-driven threads with per-process miss behaviour.
struct Bench {
    topo: Topology,
    threads: Vec<ThreadObs>,
    /// Per thread: (LLC misses per kilo-instruction, eviction rate).
    rates: Vec<(f64, f64)>,
    cores: Vec<CoreObs>,
    now: u64,
}

impl Bench {
    fn new() -> Self {
        let topo = ding();
        let cores = vec![CoreObs::default(); topo.num_cores()];
        Bench {
            topo,
            threads: Vec::new(),
            rates: Vec::new(),
            cores,
            now: 0,
        }
    }

    /// A process of `n` threads on core `cpu`, missing `mpki` with eviction rate `er`.
    fn process(&mut self, p: &mut NumaAmp, app: u32, n: u32, cpu: u32, mpki: f64, er: f64) {
        for _ in 0..n {
            let id = ThreadId(self.threads.len() as u32);
            let mut t = ThreadObs::new(id, AppId(app), self.topo.all_cores(), 4);
            t.state = ThreadState::Running;
            t.cpu = Some(CoreId(cpu));
            self.threads.push(t);
            self.rates.push((mpki, er));
            let cores = self.cores.clone();
            let v = view(&self.topo, &self.threads, &cores, self.now);
            if let Some(set) = p.on_thread_start(&v, id) {
                self.threads[id.index()].allowed = set;
            }
        }
    }

    /// One profiling period: every live thread runs 10^8 instructions at its rates; the policy's
    /// placements are applied. Returns them.
    fn period(&mut self, p: &mut NumaAmp) -> Vec<Placement> {
        self.now += PROFILE_PERIOD_NS;
        for (t, &(mpki, er)) in self.threads.iter_mut().zip(&self.rates) {
            if t.state == ThreadState::Exited {
                continue;
            }
            let misses = 1e8 * mpki / 1000.0;
            t.counters.instructions += 1e8;
            t.counters.llc_misses += misses;
            t.counters.llc_refs += misses / er;
            t.llc_traffic.evictions += misses;
            t.llc_traffic.fills += misses / er;
        }
        let cores = self.cores.clone();
        let mut out = Vec::new();
        p.rebalance(&view(&self.topo, &self.threads, &cores, self.now), &mut out);
        self.apply(&out);
        out
    }

    fn apply(&mut self, out: &[Placement]) {
        for pl in out {
            self.threads[pl.thread.index()].allowed = pl.cpus.clone();
        }
    }

    fn allowed_of(&self, app: u32) -> Vec<String> {
        self.threads
            .iter()
            .filter(|t| t.app == AppId(app) && t.state != ThreadState::Exited)
            .map(|t| t.allowed.to_string())
            .collect()
    }

    fn on_fast(&self, app: u32) -> bool {
        self.allowed_of(app).iter().all(|a| a == "0-3")
    }

    fn on_slow(&self, app: u32) -> bool {
        let slow = CpuSet::parse_list("4-15").unwrap();
        self.threads
            .iter()
            .filter(|t| t.app == AppId(app) && t.state != ThreadState::Exited)
            .all(|t| t.allowed.intersection(&slow) == t.allowed)
    }

    fn set_rate(&mut self, app: u32, mpki: f64) {
        for (t, r) in self.threads.iter().zip(self.rates.iter_mut()) {
            if t.app == AppId(app) {
                r.0 = mpki;
            }
        }
    }
}

fn policy() -> NumaAmp {
    NumaAmp::new(NumaAmpConfig::default())
}

#[test]
fn the_most_cpu_bound_fitting_processes_take_the_fast_cores() {
    let mut p = policy();
    let mut b = Bench::new();
    // Six one-thread processes, missing 30, 20, 10, 2, 1 and 0 per kilo-instruction.
    for (app, mpki) in [30.0, 20.0, 10.0, 2.0, 1.0, 0.0].into_iter().enumerate() {
        b.process(&mut p, app as u32, 1, 4 + app as u32, mpki, 1.0);
    }
    b.period(&mut p);
    // Six threads: the fast cores take four (fast_budget), the four with the fewest misses.
    let fast: Vec<u32> = (0..6).filter(|&a| b.on_fast(a)).collect();
    assert_eq!(fast, vec![2, 3, 4, 5]);
    for a in 0..2 {
        assert!(b.on_slow(a), "{:?}", b.allowed_of(a));
    }
}

#[test]
fn a_process_too_wide_for_the_fast_cores_takes_what_whole_processes_leave() {
    let mut p = policy();
    let mut b = Bench::new();
    // A CPU-bound process of 8 threads, and two one-thread processes, one memory-bound.
    b.process(&mut p, 0, 8, 4, 0.0, 1.0);
    b.process(&mut p, 1, 1, 5, 25.0, 1.0);
    b.process(&mut p, 2, 1, 6, 0.5, 1.0);
    b.period(&mut p);
    // Equation 1 as we read it: both fitting processes rank above the wide one, even the
    // memory-bound, and take two of the 4 fast cores whole; the wide one gets the other two for
    // two of its threads (the lowest ids), its other six stay on the slow cores.
    assert!(b.on_fast(1) && b.on_fast(2));
    let fast = CpuSet::parse_list("0-3").unwrap();
    let slow = CpuSet::parse_list("4-15").unwrap();
    let wide: Vec<&ThreadObs> = b.threads.iter().filter(|t| t.app == AppId(0)).collect();
    assert!(
        wide[..2].iter().all(|t| t.allowed == fast),
        "{:?}",
        b.allowed_of(0)
    );
    assert!(
        wide[2..].iter().all(|t| t.allowed.is_subset(&slow)),
        "{:?}",
        b.allowed_of(0)
    );
    // With the fitting ones gone, the wide process has the fast cores' share alone: 4 threads.
    for t in b.threads.iter_mut().filter(|t| t.app != AppId(0)) {
        t.state = ThreadState::Exited;
    }
    let cores = b.cores.clone();
    for t in 8..10 {
        p.on_thread_exit(&view(&b.topo, &b.threads, &cores, b.now), ThreadId(t));
    }
    b.period(&mut p);
    let on_fast = b
        .threads
        .iter()
        .filter(|t| t.app == AppId(0) && t.allowed == fast)
        .count();
    assert_eq!(on_fast, 4, "{:?}", b.allowed_of(0));
}

#[test]
fn a_small_miss_rate_change_does_not_reschedule_and_a_large_one_does() {
    let mut p = policy();
    let mut b = Bench::new();
    for (app, mpki) in [1.0, 2.0, 3.0, 4.0, 20.0].into_iter().enumerate() {
        b.process(&mut p, app as u32, 1, 4 + app as u32, mpki, 1.0);
    }
    b.period(&mut p);
    assert!(!b.on_fast(4));
    assert!(b.on_fast(0));
    // Process 0 drifts by 30% (CVR 0.3 < 0.5): no schedule, nothing moves.
    b.set_rate(0, 1.3);
    assert!(b.period(&mut p).is_empty());
    // Process 4's misses fall from 20 to 0.5 (CVR 39): a schedule, and it takes process 3's place.
    b.set_rate(4, 0.5);
    let moves = b.period(&mut p);
    assert!(!moves.is_empty());
    assert!(b.on_fast(4));
    assert!(!b.on_fast(3));
}

#[test]
fn an_exit_reschedules_at_once_when_a_fast_core_idles() {
    let mut p = policy();
    let mut b = Bench::new();
    for (app, mpki) in [1.0, 2.0, 3.0, 4.0, 20.0].into_iter().enumerate() {
        b.process(&mut p, app as u32, 1, 4 + app as u32, mpki, 1.0);
    }
    b.period(&mut p);
    assert!(!b.on_fast(4));
    // Process 0 (on a fast core) exits; the fast core idles while slow core 8 runs process 4.
    b.threads[0].state = ThreadState::Exited;
    b.cores[8].runnable = 1;
    let cores = b.cores.clone();
    let v = view(&b.topo, &b.threads, &cores, b.now + 1);
    p.on_thread_exit(&v, ThreadId(0));
    let mut out = Vec::new();
    p.on_core_idle(&v, CoreId(0), &mut out);
    b.apply(&out);
    // Direct invocation: no waiting for the next period.
    assert!(b.on_fast(4));
    // A slow core idling does not invoke it.
    let mut p2 = policy();
    let mut b2 = Bench::new();
    b2.process(&mut p2, 0, 1, 4, 1.0, 1.0);
    b2.period(&mut p2);
    b2.cores[0].runnable = 1;
    let cores = b2.cores.clone();
    let v = view(&b2.topo, &b2.threads, &cores, b2.now);
    p2.on_thread_exit(&v, ThreadId(0));
    let mut out = Vec::new();
    p2.on_core_idle(&v, CoreId(5), &mut out);
    assert!(out.is_empty());
}

#[test]
fn contention_heavy_processes_are_scattered_with_their_pages() {
    let mut p = policy();
    let mut b = Bench::new();
    // Four CPU-bound singles take the fast cores.
    for app in 0..4 {
        b.process(&mut p, app, 1, app, 0.1, 1.0);
    }
    // Three memory-heavy two-thread processes, all on node 1 (cores 4-7), each with 64 MiB there;
    // three light ones on nodes 2 and 3.
    for app in 4..7 {
        b.process(&mut p, app, 2, 4, 15.0, 0.5);
    }
    for app in 7..10 {
        b.process(&mut p, app, 2, 8 + (app - 7), 0.5, 1.0);
    }
    for t in b.threads.iter_mut().filter(|t| (4..7).contains(&t.app.0)) {
        t.resident_bytes[1] = 32 << 20;
    }
    b.period(&mut p);
    let mut moves = Vec::new();
    p.take_page_moves(&mut moves);
    // Each heavy process in its own domain.
    let domains: Vec<String> = (4..7).map(|a| b.allowed_of(a)[0].clone()).collect();
    let mut distinct = domains.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "{domains:?}");
    for d in &domains {
        assert!(["4-7", "8-11", "12-15"].contains(&d.as_str()), "{d}");
    }
    // Pages follow the heavy processes that left node 1: all 64 MiB of each.
    for a in 4..7 {
        let node = match b.allowed_of(a)[0].as_str() {
            "4-7" => 1,
            "8-11" => 2,
            _ => 3,
        };
        let m: Vec<&PageMove> = moves.iter().filter(|m| m.app == AppId(a)).collect();
        if node == 1 {
            assert!(m.iter().all(|m| m.max_bytes == 0 || m.to == NodeId(1)));
        } else {
            assert_eq!(m.len(), 1, "app {a}: {moves:?}");
            assert_eq!(m[0].to, NodeId(node));
            assert_eq!(m[0].max_bytes, 64 << 20);
        }
    }
    // A second period with nothing changed moves nothing.
    assert!(b.period(&mut p).is_empty());
    let mut again = Vec::new();
    p.take_page_moves(&mut again);
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn without_the_numa_part_slow_processes_share_every_slow_core_and_no_page_moves() {
    let mut p = NumaAmp::new(NumaAmpConfig {
        numa_aware: false,
        ..Default::default()
    });
    let mut b = Bench::new();
    for app in 0..4 {
        b.process(&mut p, app, 1, app, 0.1, 1.0);
    }
    for app in 4..7 {
        b.process(&mut p, app, 2, 4, 15.0, 0.5);
    }
    for t in b.threads.iter_mut().filter(|t| t.app.0 >= 4) {
        t.resident_bytes[1] = 32 << 20;
    }
    b.period(&mut p);
    for a in 4..7 {
        assert!(b.allowed_of(a).iter().all(|s| s == "4-15"));
    }
    let mut moves = Vec::new();
    p.take_page_moves(&mut moves);
    assert!(moves.is_empty());
}

#[test]
fn the_static_variant_ranks_by_offline_speedup_and_ignores_miss_rates() {
    use crate::signature::Signature;
    use std::sync::Arc;
    let speedups: BTreeMap<String, f64> = [("slowpoke", 1.1), ("racer", 1.9)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let mut p = NumaAmp::new(NumaAmpConfig {
        static_speedups: Some(speedups),
        ..Default::default()
    });
    let mut b = Bench::new();
    // Five processes of one thread: four "slowpoke" then one "racer"; the racer misses most.
    for app in 0..5 {
        b.process(
            &mut p,
            app,
            1,
            4 + app,
            if app == 4 { 30.0 } else { 0.0 },
            1.0,
        );
        let name = if app == 4 { "racer" } else { "slowpoke" };
        b.threads[app as usize].signature = Some(Arc::new(Signature::from_row(name, &[1.0; 11])));
    }
    b.period(&mut p);
    assert!(b.on_fast(4), "the racer's offline speedup puts it first");
    let fast = (0..5).filter(|&a| b.on_fast(a)).count();
    assert_eq!(fast, 4);
    // Its misses vanish: the static variant does not look.
    b.set_rate(0, 100.0);
    assert!(b.period(&mut p).is_empty());
}

#[test]
fn a_homogeneous_single_node_machine_gets_nothing_and_one_notice() {
    let topo = machine_preset("pinter-smp").unwrap().unwrap();
    let mut p = policy();
    let mut threads = vec![ThreadObs::new(ThreadId(0), AppId(0), topo.all_cores(), 1)];
    threads[0].state = ThreadState::Running;
    let cores = vec![CoreObs::default(); topo.num_cores()];
    let mut out = Vec::new();
    p.rebalance(&view(&topo, &threads, &cores, 0), &mut out);
    assert!(p.take_notice().is_some());
    assert!(p.take_notice().is_none());
    // Every thread keeps the whole machine.
    assert!(out.iter().all(|pl| pl.cpus == topo.all_cores()));
}

#[test]
fn a_new_process_takes_free_fast_cores_at_the_next_check_not_the_next_profile() {
    let mut p = policy();
    let mut b = Bench::new();
    // A first profile with nothing running, then a 2-thread process starts.
    let cores = b.cores.clone();
    p.rebalance(&view(&b.topo, &b.threads, &cores, b.now), &mut Vec::new());
    b.process(&mut p, 0, 2, 4, 0.0, 1.0);
    assert!(b.on_slow(0), "{:?}", b.allowed_of(0));
    // One check period later, long before the next profile, the unmeasured process (neutral
    // estimate) has the idle fast cores.
    b.now += CHECK_PERIOD_NS;
    let mut out = Vec::new();
    p.rebalance(&view(&b.topo, &b.threads, &cores, b.now), &mut out);
    const { assert!(CHECK_PERIOD_NS < PROFILE_PERIOD_NS / 10) };
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(out.iter().all(|pl| pl.cpus.to_string() == "0-3"), "{out:?}");
    // Nothing changed: the next check places nothing.
    b.now += CHECK_PERIOD_NS;
    for pl in &out {
        b.threads[pl.thread.index()].allowed = pl.cpus.clone();
    }
    let mut again = Vec::new();
    p.rebalance(&view(&b.topo, &b.threads, &cores, b.now), &mut again);
    assert!(again.is_empty(), "{again:?}");
}
