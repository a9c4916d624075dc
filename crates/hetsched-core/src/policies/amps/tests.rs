//! Each AMPS rule on crafted machines and states; a wrong rule fails one of these.

use super::numa::{
    self, high_overhead, running_move_allowed, AllocationPhase, AllocationWatch, NumaMode,
};
use super::*;
use crate::ids::AppId;
use crate::machine_file::parse_machine;
use crate::observe::{CoreObs, ThreadObs};

/// One core of `fast_ghz` and `slow` cores of 1 GHz, 1 MiB private LLCs, one node.
fn smp(fast: &str, slow: &str, fast_ghz: f64) -> Topology {
    let text = format!(
        r#"
name = "t"
memory_latency_ns = 80.0
[[classes]]
name = "fast"
freq_ghz = {fast_ghz}
[[classes]]
name = "slow"
freq_ghz = 1.0
[[cores]]
cpus = "{fast}"
class = "fast"
[[cores]]
cpus = "{slow}"
class = "slow"
[[caches]]
level = 2
size = "1 MiB"
assoc = 8
cpus = "0-{last}"
shared_by = 1
"#,
        last = CpuSet::parse_list(fast)
            .unwrap()
            .iter()
            .chain(CpuSet::parse_list(slow).unwrap().iter())
            .map(|c| c.0)
            .max()
            .unwrap()
    );
    parse_machine(&text, "test").unwrap()
}

/// Two nodes of two cores: node 0 = cores 0 (fast, 2 GHz) and 1; node 1 = cores 2 and 3 (slow);
/// 8 MiB LLC per core.
fn numa2() -> Topology {
    parse_machine(
        r#"
name = "n"
[[classes]]
name = "fast"
freq_ghz = 2.0
[[classes]]
name = "slow"
freq_ghz = 1.0
[[cores]]
cpus = "0"
class = "fast"
[[cores]]
cpus = "1-3"
class = "slow"
[[caches]]
level = 3
size = "8 MiB"
assoc = 16
cpus = "0-3"
shared_by = 1
[[nodes]]
cpus = "0-1"
distance = [10, 20]
latency_ns = [68.0, 146.0]
[[nodes]]
cpus = "2-3"
distance = [20, 10]
latency_ns = [146.0, 68.0]
"#,
        "numa2",
    )
    .unwrap()
}

/// A system state: threads with their core and state; core observations derived from them.
struct State {
    topo: Topology,
    threads: Vec<ThreadObs>,
}

impl State {
    fn new(topo: Topology) -> Self {
        Self {
            topo,
            threads: Vec::new(),
        }
    }

    /// Add a thread on `core` (running if the core has none yet, else queued).
    fn add(&mut self, core: u32) -> ThreadId {
        let id = ThreadId(self.threads.len() as u32);
        let busy = self
            .threads
            .iter()
            .any(|t| t.cpu == Some(CoreId(core)) && t.state == ThreadState::Running);
        let all = self.topo.all_cores();
        self.threads.push(ThreadObs {
            state: if busy {
                ThreadState::Runnable
            } else {
                ThreadState::Running
            },
            cpu: Some(CoreId(core)),
            allowed: CpuSet::single(CoreId(core)),
            ..ThreadObs::new(id, AppId(0), all, self.topo.nodes().len())
        });
        id
    }

    fn cores(&self) -> Vec<CoreObs> {
        let mut v = vec![CoreObs::default(); self.topo.num_cores()];
        for t in &self.threads {
            if let (Some(c), ThreadState::Running | ThreadState::Runnable) = (t.cpu, t.state) {
                v[c.index()].runnable += 1;
                if t.state == ThreadState::Running {
                    v[c.index()].current = Some(t.id);
                }
            }
        }
        v
    }

    fn view<'a>(&'a self, cores: &'a [CoreObs]) -> View<'a> {
        crate::policies::fixture::view(&self.topo, &self.threads, cores, 0)
    }

    /// Apply placements as a backend would (a moved thread runs if its new core is idle).
    fn apply(&mut self, out: &[Placement]) {
        for p in out {
            let core = p.cpus.first().unwrap();
            let t = p.thread.index();
            self.threads[t].cpu = None;
            self.threads[t].state = ThreadState::Blocked;
            let busy = self
                .threads
                .iter()
                .any(|x| x.cpu == Some(core) && x.state == ThreadState::Running);
            self.threads[t].cpu = Some(core);
            self.threads[t].allowed = p.cpus.clone();
            self.threads[t].state = if busy {
                ThreadState::Runnable
            } else {
                ThreadState::Running
            };
        }
    }

    fn per_core(&self) -> Vec<u32> {
        self.cores().iter().map(|c| c.runnable).collect()
    }

    fn rebalance(&mut self, amps: &mut Amps) -> Vec<Placement> {
        let cores = self.cores();
        let mut out = Vec::new();
        amps.rebalance(&self.view(&cores), &mut out);
        self.apply(&out);
        out
    }
}

fn amps_s1() -> Amps {
    Amps::new(AmpsConfig {
        scaling: 1.0,
        ..Default::default()
    })
}

#[test]
fn scaled_load_and_balance_follow_figure_1() {
    // Figure 1: one fast core (P = 2) with four threads, three slow cores with two each: L = 2 on
    // every core, balanced.
    assert_eq!(scaled_load(4, 2.0), 2.0);
    assert!(is_balanced([2.0, 2.0, 2.0, 2.0]));
    assert!(is_balanced([3.0, 2.0]));
    assert!(!is_balanced([3.5, 2.0]));
    // P = F × S with S = 0.85 for a core twice as fast (section 3).
    let t = smp("0", "1-3", 2.0);
    assert!((t.scaled_power(CoreId(0), 0.85) - 1.7).abs() < 1e-12);
    assert_eq!(t.scaled_power(CoreId(1), 0.85), 1.0);
}

#[test]
fn initial_placement_fills_idle_cores_before_sharing_the_fast_one() {
    // Figure 2(b)'s machine: a P = 4 core and three P = 1 cores, all idle. The paper puts three
    // threads on the fast core before a slow one gets any; rule 6 (an idle core adds its speed to
    // the machine's throughput, a shared one adds nothing) gives the fast core the first thread and
    // each idle slow core the next ones. With every core busy, the least new scaled load decides
    // again: the fifth thread's 2/4 on the fast core against 2/1 on a slow one.
    let mut s = State::new(smp("0", "1-3", 4.0));
    let mut amps = amps_s1();
    let mut placed = Vec::new();
    for _ in 0..5 {
        let cores = s.cores();
        let id = ThreadId(s.threads.len() as u32);
        // The backend creates the thread, then asks where it starts.
        s.threads
            .push(ThreadObs::new(id, AppId(0), s.topo.all_cores(), 1));
        let set = amps.on_thread_start(&s.view(&cores), id).unwrap();
        assert_eq!(set.len(), 1);
        let core = set.first().unwrap();
        placed.push(core.0);
        s.apply(&[Placement::pin(id, core)]);
    }
    assert_eq!(placed, vec![0, 1, 2, 3, 0]);
}

/// Among idle cores of one speed a new thread takes the one with the fewest threads on its LLC,
/// then in its module (Linux's fork placement takes the idlest group, `select_idle_core` a core
/// whose siblings idle): two LLCs of four fast cores, modules of two, and a slow core.
#[test]
fn initial_placement_spreads_over_llcs_then_modules() {
    let topo = parse_machine(
        r#"
name = "spread"
memory_latency_ns = 80.0
[[classes]]
name = "fast"
freq_ghz = 2.0
[[classes]]
name = "slow"
freq_ghz = 1.0
[[cores]]
cpus = "0-7"
class = "fast"
[[cores]]
cpus = "8"
class = "slow"
[[modules]]
cpus = "0-7"
shared_by = 2
shares_fpu = true
[[caches]]
level = 3
size = "8 MiB"
assoc = 16
cpus = "0-7"
shared_by = 4
[[caches]]
level = 3
size = "1 MiB"
assoc = 16
cpus = "8"
shared_by = 1
"#,
        "test",
    )
    .unwrap();
    let mut s = State::new(topo);
    let mut amps = amps_s1();
    let mut placed = Vec::new();
    for _ in 0..6 {
        let cores = s.cores();
        let id = ThreadId(s.threads.len() as u32);
        s.threads
            .push(ThreadObs::new(id, AppId(0), s.topo.all_cores(), 1));
        let core = amps
            .on_thread_start(&s.view(&cores), id)
            .unwrap()
            .first()
            .unwrap();
        placed.push(core.0);
        s.apply(&[Placement::pin(id, core)]);
    }
    // The other LLC, then the other module of each LLC, then the lowest id once every module
    // and LLC is as busy as the others.
    assert_eq!(placed, vec![0, 4, 2, 6, 1, 5]);
}

/// A faster core that goes idle pulls, from another node, a program running alone on a slow core
/// when the program is its process's only thread and AMPS's overhead prediction does not call the
/// move costly; a thread with siblings stays with their shared data (the periodic balance's node
/// threshold decides for it), and one whose memory exceeds the destination's LLC stays with its
/// memory.
#[test]
fn an_idle_fast_core_pulls_a_lone_program_from_another_node() {
    // numa2: node 0 = core 0 (fast) and core 1; node 1 = cores 2 and 3 (slow); 8 MiB LLCs.
    let pulled = |apps: &[u32], resident: u64| {
        let mut s = State::new(numa2());
        let mut amps = Amps::new(AmpsConfig::default());
        for (i, &app) in apps.iter().enumerate() {
            let t = s.add(2 + i as u32);
            s.threads[t.index()].app = AppId(app);
            s.threads[t.index()].resident_bytes = vec![0, resident];
        }
        let cores = s.cores();
        for i in 0..apps.len() {
            // Registers the thread's process; where it would start is not asked here.
            amps.on_thread_start(&s.view(&cores), ThreadId(i as u32));
        }
        // The fast core has just gone idle (new-idle balance).
        let mut out = Vec::new();
        amps.on_core_idle(&s.view(&cores), CoreId(0), &mut out);
        out.iter()
            .map(|p| (p.thread.0, p.cpus.first().unwrap().0))
            .collect::<Vec<_>>()
    };
    assert_eq!(pulled(&[0], 1 << 20), vec![(0, 0)], "a lone program moves");
    let two = pulled(&[0, 1], 1 << 20);
    assert!(
        two.len() == 1 && two[0].1 == 0,
        "one of two programs moves: {two:?}"
    );
    assert!(
        pulled(&[0, 0], 1 << 20).is_empty(),
        "two threads of one process"
    );
    assert!(
        pulled(&[0], 64 << 20).is_empty(),
        "its memory exceeds the LLC"
    );
}

#[test]
fn initial_placement_respects_the_users_mask() {
    let s = State::new(smp("0", "1-3", 4.0));
    let cores = s.cores();
    let allowed: CpuSet = [CoreId(2), CoreId(3)].into_iter().collect();
    let c = initial_core(&allowed, |c| cores[c.index()].runnable, |_| 1.0, |_| 0);
    assert_eq!(c, Some(CoreId(2)));
    assert_eq!(initial_core(&CpuSet::new(), |_| 0, |_| 1.0, |_| 0), None);
}

/// The start rule as its doc states it, in two passes: the candidates (the idle cores if any,
/// else every core), then the best of them in order.
fn initial_core_as_stated(
    allowed: &CpuSet,
    runnable: &[u32],
    power: &[f64],
    crowd: &[u64],
) -> Option<CoreId> {
    let any_idle = allowed.iter().any(|c| runnable[c.index()] == 0);
    let mut best: Option<(f64, f64, CoreId)> = None;
    for c in allowed
        .iter()
        .filter(|c| !any_idle || runnable[c.index()] == 0)
    {
        let (p, l) = (
            power[c.index()],
            scaled_load(runnable[c.index()] + 1, power[c.index()]),
        );
        let better = match best {
            None => true,
            Some((bl, bp, b)) => {
                let eps = LOAD_EPS * bl.max(1.0);
                if (l - bl).abs() > eps {
                    l < bl
                } else if (p - bp).abs() > LOAD_EPS {
                    (p > bp) == (l < 1.0 - LOAD_EPS)
                } else {
                    any_idle && crowd[c.index()] < crowd[b.index()]
                }
            }
        };
        if better {
            best = Some((l, p, c));
        }
    }
    best.map(|b| b.2)
}

proptest::proptest! {
    /// The one-pass start rule picks the core the rule as stated picks, on random masks, loads
    /// (idle cores or none), powers of a few classes and crowds.
    #[test]
    fn the_start_rule_in_one_pass_picks_as_stated(
        cores in proptest::collection::vec((0u32..4, 0usize..3, 0u64..3, proptest::bool::ANY), 1..40),
        busy in proptest::bool::ANY,
    ) {
        let runnable: Vec<u32> = cores.iter().map(|c| if busy { c.0 + 1 } else { c.0 }).collect();
        let power: Vec<f64> = cores.iter().map(|c| [0.85, 1.7, 3.4][c.1]).collect();
        let crowd: Vec<u64> = cores.iter().map(|c| c.2).collect();
        let allowed: CpuSet = cores
            .iter()
            .enumerate()
            .filter(|(_, c)| c.3)
            .map(|(i, _)| CoreId(i as u32))
            .collect();
        let got = initial_core(
            &allowed,
            |c| runnable[c.index()],
            |c| power[c.index()],
            |c| crowd[c.index()],
        );
        proptest::prop_assert_eq!(got, initial_core_as_stated(&allowed, &runnable, &power, &crowd));
    }
}

#[test]
fn faster_core_first_moves_one_running_thread_to_an_idle_fast_core_figure_2a() {
    // Figure 2(a): the P = 4 core idles while three slow cores run one thread each. One thread
    // moves to the fast core (faster-core-first). The paper moves all three (L = 3/4 < 1); rule 6
    // forbids the second and third moves, which would idle a slow core to time-share the fast one
    // and lower the machine's throughput from 4 + 1 + 1 to 4 + 1.
    let mut s = State::new(smp("0", "1-3", 4.0));
    for c in 1..=3 {
        s.add(c);
    }
    let mut amps = amps_s1();
    let out = s.rebalance(&mut amps);
    assert_eq!(out.len(), 1);
    assert_eq!(s.per_core()[0], 1);
    assert_eq!(s.per_core().iter().filter(|&&n| n == 1).count(), 3);
    assert!(s.rebalance(&mut amps).is_empty(), "stable after the move");
}

#[test]
fn an_idle_slow_core_pulls_a_thread_waiting_on_the_fast_core() {
    // One fast core at 2.5x (P = 2.125) with two threads, a slow core idle: the scaled loads are
    // balanced (2/2.125 against 0) and the idle core's load after a move (1) is not below the fast
    // core's (0.94), so the paper's rule moves nothing; rule 6 does, in a periodic balance and on
    // the idle core's own call.
    for idle_call in [false, true] {
        let mut s = State::new(smp("0", "1", 2.5));
        s.add(0);
        s.add(0);
        let mut amps = Amps::new(AmpsConfig::default());
        let out = if idle_call {
            let cores = s.cores();
            let mut out = Vec::new();
            amps.on_core_idle(&s.view(&cores), CoreId(1), &mut out);
            s.apply(&out);
            out
        } else {
            s.rebalance(&mut amps)
        };
        assert_eq!(out.len(), 1, "idle call: {idle_call}");
        assert_eq!(s.per_core(), vec![1, 1]);
        assert!(s.rebalance(&mut amps).is_empty(), "stable after the move");
    }
}

/// A closed core is left to its holder: nothing starts there, an idle one pulls nothing, the
/// periodic balance moves every other thread off it and never moves the holder, and with nothing
/// closed the balance is the paper's again.
#[test]
fn closed_cores_are_left_to_their_holders() {
    // Core 0 fast (2.5x); cores 1-3 slow. The holder runs on core 0 with a stray queued behind it.
    let mut s = State::new(smp("0", "1-3", 2.5));
    let holder = s.add(0);
    let stray = s.add(0);
    s.add(1);
    s.add(1);
    let mut amps = Amps::new(AmpsConfig::default());
    let closed = CpuSet::single(CoreId(0));
    amps.close(&closed, &[holder]);
    let out = s.rebalance(&mut amps);
    assert!(
        out.iter().all(|p| p.thread != holder),
        "the holder never moves"
    );
    assert!(
        out.iter().all(|p| !p.cpus.contains(CoreId(0))),
        "nothing moves to core 0"
    );
    assert_ne!(
        s.threads[stray.index()].cpu,
        Some(CoreId(0)),
        "the stray left"
    );
    assert_eq!(s.per_core()[0], 1, "the holder alone on its core");
    // Four threads on the three open cores, one each at most two.
    assert!(s.per_core()[1..].iter().all(|&n| (1..=2).contains(&n)));
    // A new thread does not start on the closed core, although it is the fast one.
    let t = s.add(3);
    let cores = s.cores();
    let start = amps.on_thread_start(&s.view(&cores), t).unwrap();
    assert!(!start.contains(CoreId(0)));
    // The holder blocks: core 0 idles and is closed no more once the combined policy says so.
    s.threads[holder.index()].state = ThreadState::Blocked;
    let cores = s.cores();
    let mut out = Vec::new();
    amps.on_core_idle(&s.view(&cores), CoreId(0), &mut out);
    assert!(out.is_empty(), "closed: the idle call pulls nothing");
    amps.close(&CpuSet::new(), &[]);
    amps.on_core_idle(&s.view(&cores), CoreId(0), &mut out);
    assert_eq!(
        out.len(),
        1,
        "open: the idle fast core pulls a waiting thread"
    );
}

#[test]
fn throughput_gain_counts_cores_that_start_or_stop_being_busy() {
    assert_eq!(throughput_gain(2, 2.5, 0, 1.0), 1.0);
    assert_eq!(throughput_gain(1, 1.0, 1, 2.5), -1.0);
    assert_eq!(throughput_gain(1, 1.0, 0, 2.5), 1.5);
    assert_eq!(throughput_gain(3, 1.0, 2, 2.5), 0.0);
}

#[test]
fn an_idle_fast_core_pulls_at_once() {
    let mut s = State::new(smp("0", "1-3", 2.0));
    let t = s.add(2);
    let mut amps = Amps::new(AmpsConfig::default());
    let cores = s.cores();
    let mut out = Vec::new();
    amps.on_core_idle(&s.view(&cores), CoreId(0), &mut out);
    assert_eq!(out, vec![Placement::pin(t, CoreId(0))]);
    // An idle slow core pulls nothing from a fast core running one thread: 1/1 > 1/1.7.
    let mut s = State::new(smp("0", "1-3", 2.0));
    s.add(0);
    let cores = s.cores();
    out.clear();
    amps.on_core_idle(&s.view(&cores), CoreId(1), &mut out);
    assert!(out.is_empty());
}

#[test]
fn the_guard_forbids_moves_that_do_not_lower_the_load() {
    // Slow cores with 2, 1 and 1 threads, the fast core (P = 1.7) with 3: moving to a slow core
    // would give 2/1, not less than the source's 2/1; to the fast core 4/1.7 > 2.
    let mut s = State::new(smp("0", "1-3", 2.0));
    s.add(1);
    s.add(1);
    s.add(2);
    s.add(3);
    for _ in 0..3 {
        s.add(0);
    }
    let mut amps = Amps::new(AmpsConfig::default());
    assert!(s.rebalance(&mut amps).is_empty());
    // Three on slow core 1 and slow core 2 idle: one moves (1 < 3), then nothing improves.
    let mut s = State::new(smp("0", "1-3", 2.0));
    for _ in 0..3 {
        s.add(1);
    }
    for _ in 0..3 {
        s.add(0);
    }
    s.add(3);
    s.add(3);
    let out = s.rebalance(&mut amps);
    assert_eq!(out.len(), 1);
    assert_eq!(s.per_core(), vec![3, 2, 1, 2]);
    // A queued thread is moved, not the running one (thread 0).
    assert_eq!(out[0].thread, ThreadId(2));
}

#[test]
fn the_slower_core_counts_as_more_loaded_at_equal_scaled_load() {
    // The fast core (P = 2, S = 1) runs 4 threads (L = 2) and slow core 1 runs 2 (L = 2); an idle
    // slow core pulls one thread: from the slow core, not from the fast one.
    let mut s = State::new(smp("0", "1-2", 2.0));
    for _ in 0..4 {
        s.add(0);
    }
    s.add(1);
    s.add(1);
    let mut amps = amps_s1();
    let cores = s.cores();
    let mut out = Vec::new();
    amps.on_core_idle(&s.view(&cores), CoreId(2), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(s.threads[out[0].thread.index()].cpu, Some(CoreId(1)));
}

#[test]
fn balance_makes_load_proportional_to_power() {
    // 32 threads on 2 fast (P = 1.7) + 6 slow cores, all started on slow core 2: after one
    // balance the system is balanced and each fast core holds more threads than any slow core.
    let mut s = State::new(smp("0-1", "2-7", 2.0));
    for _ in 0..32 {
        s.add(2);
    }
    let mut amps = Amps::new(AmpsConfig::default());
    s.rebalance(&mut amps);
    let n = s.per_core();
    let loads: Vec<f64> = n
        .iter()
        .enumerate()
        .map(|(c, &k)| scaled_load(k, if c < 2 { 1.7 } else { 1.0 }))
        .collect();
    assert!(is_balanced(loads.iter().copied()), "{n:?}");
    assert_eq!(n.iter().sum::<u32>(), 32);
    assert!(n[0].min(n[1]) > *n[2..].iter().max().unwrap(), "{n:?}");
}

#[test]
fn high_overhead_needs_all_three_conditions() {
    let t = numa2();
    let mib = 1u64 << 20;
    // 64 MiB on node 1, moving from core 2 (node 1) to core 0 (node 0), LLC 8 MiB: high.
    assert!(high_overhead(&t, &[0, 64 * mib], CoreId(2), CoreId(0)));
    // (1) same node: not high.
    assert!(!high_overhead(&t, &[0, 64 * mib], CoreId(2), CoreId(3)));
    // (2) the source node is not where most pages are: not high.
    assert!(!high_overhead(
        &t,
        &[64 * mib, 32 * mib],
        CoreId(2),
        CoreId(0)
    ));
    // (3) the resident set fits the destination's LLC: not high.
    assert!(!high_overhead(&t, &[0, 4 * mib], CoreId(2), CoreId(0)));
    // Nothing resident: not high.
    assert!(!high_overhead(&t, &[0, 0], CoreId(2), CoreId(0)));
}

#[test]
fn each_numa_policy_decides_as_section_2_4_3_says() {
    let t = numa2();
    let big = [0, 64u64 << 20];
    let small = [0, 1u64 << 20];
    let (from, remote, local) = (CoreId(2), CoreId(0), CoreId(3));
    for (mode, rss, allocating, to, allowed) in [
        (NumaMode::Always, &big, true, remote, true),
        (NumaMode::SameNode, &small, false, remote, false),
        (NumaMode::SameNode, &big, true, local, true),
        (NumaMode::Rss, &big, false, remote, false),
        (NumaMode::Rss, &small, false, remote, true),
        (NumaMode::Rss, &small, true, remote, false),
        (NumaMode::Rss, &big, false, local, true),
        // In its allocation phase a thread may still move within its node: its pages stay there.
        (NumaMode::Rss, &big, true, local, true),
        (NumaMode::Rss, &small, true, local, true),
    ] {
        assert_eq!(
            running_move_allowed(mode, &t, rss, allocating, from, to),
            allowed,
            "{mode} rss {rss:?} allocating {allocating} to {to}"
        );
    }
    assert_eq!("same-node".parse::<NumaMode>(), Ok(NumaMode::SameNode));
    assert!("sometimes".parse::<NumaMode>().is_err());
    assert_eq!(NumaMode::default_for(&t), NumaMode::Rss);
    assert_eq!(NumaMode::default_for(&smp("0", "1", 2.0)), NumaMode::Always);
}

#[test]
fn allocation_phase_is_rss_growth_between_interrupts() {
    let mut a = AllocationPhase::default();
    a.observe(0);
    assert!(!a.allocating());
    a.observe(4096);
    assert!(a.allocating());
    a.observe(4096);
    assert!(!a.allocating(), "stable RSS: not allocating");
    a.observe(1024);
    assert!(!a.allocating(), "shrinking RSS: not allocating");
}

#[test]
fn numa_policies_gate_running_thread_moves_in_a_balance() {
    // A thread runs alone on slow core 2 (node 1) with 64 MiB resident there; fast core 0 (node 0)
    // idles. `always` moves it, `same-node` and `rss` keep it; with 1 MiB resident `rss` moves it.
    let build = |resident: u64| {
        let mut s = State::new(numa2());
        let t = s.add(2);
        s.threads[t.index()].resident_bytes = vec![0, resident];
        s
    };
    let moved = |mode: NumaMode, resident: u64| {
        let mut s = build(resident);
        let mut amps = Amps::new(AmpsConfig {
            numa: Some(mode),
            ..Default::default()
        });
        // A first interrupt with the fast core busy records the resident set (which then stays
        // put, so the thread is not allocating); then the fast core idles.
        let busy = s.add(0);
        assert!(s.rebalance(&mut amps).is_empty());
        s.threads[busy.index()].state = ThreadState::Exited;
        s.threads[busy.index()].cpu = None;
        !s.rebalance(&mut amps).is_empty()
    };
    assert!(moved(NumaMode::Always, 64 << 20));
    assert!(!moved(NumaMode::SameNode, 64 << 20));
    assert!(!moved(NumaMode::Rss, 64 << 20));
    assert!(moved(NumaMode::Rss, 1 << 20));
    // A thread in its allocation phase stays under `rss` even with a small resident set.
    let mut s = build(0);
    let mut amps = Amps::new(AmpsConfig {
        numa: Some(NumaMode::Rss),
        ..Default::default()
    });
    // Two interrupts with growing RSS while the fast core is busy, then the fast core idles.
    s.add(0);
    s.threads[0].resident_bytes = vec![0, 1 << 20];
    s.rebalance(&mut amps);
    s.threads[0].resident_bytes = vec![0, 2 << 20];
    s.threads[1].state = ThreadState::Exited;
    s.threads[1].cpu = None;
    let out = s.rebalance(&mut amps);
    assert!(out.is_empty(), "allocating: stays");
    let out = s.rebalance(&mut amps);
    assert_eq!(out.len(), 1, "RSS stable since the last interrupt: moves");
}

/// The allocation-phase flags kept from a log of threads whose resident sets changed are those
/// that observing every interrupted thread gives, at every interrupt: threads run, wait, block and
/// allocate at random (each allocation logged, as a backend logs it), and now and then an
/// interrupt comes without a log, after which the log cannot be trusted until the next one.
#[test]
fn allocation_flags_from_the_log_equal_observing_every_interrupted_thread() {
    let topo = numa2();
    let n = 24;
    let mut s = State::new(topo.clone());
    for i in 0..n {
        s.add(i % topo.num_cores() as u32);
    }
    let mut rng = crate::rng::SeededRng::new(3);
    let mut watch = AllocationWatch::default();
    let mut every = vec![AllocationPhase::default(); n as usize];
    for t in 0..n {
        watch.restart(ThreadId(t));
    }
    let mut log: Vec<ThreadId> = Vec::new();
    let (mut allocating_seen, mut stale_reset) = (0, 0);
    for step in 0..4000 {
        for _ in 0..rng.below(6) {
            let i = rng.below(n as usize);
            match rng.below(5) {
                0 => {
                    s.threads[i].resident_bytes[rng.below(2)] += 4096;
                    if !log.contains(&ThreadId(i as u32)) {
                        log.push(ThreadId(i as u32));
                    }
                }
                1 => s.threads[i].state = ThreadState::Blocked,
                _ => {
                    // Onto a core, running there (the core's previous current thread waits).
                    let c = CoreId(rng.below(topo.num_cores()) as u32);
                    for t in &mut s.threads {
                        if t.cpu == Some(c) && t.state == ThreadState::Running {
                            t.state = ThreadState::Runnable;
                        }
                    }
                    s.threads[i].cpu = Some(c);
                    s.threads[i].state = ThreadState::Running;
                }
            }
        }
        let cores = s.cores();
        let without_log = step % 50 == 49;
        let view = View {
            resident_changed: (!without_log).then_some(&log[..]),
            ..s.view(&cores)
        };
        let before: Vec<bool> = watch
            .phases()
            .iter()
            .map(AllocationPhase::allocating)
            .collect();
        watch.interrupt(&view);
        for c in &cores {
            if let Some(t) = c.current {
                let total = numa::total_rss(&s.threads[t.index()].resident_bytes);
                every[t.index()].observe(total);
            }
        }
        assert_eq!(watch.phases(), &every[..], "step {step}");
        allocating_seen += every.iter().filter(|p| p.allocating()).count();
        stale_reset += (0..n as usize)
            .filter(|&i| before[i] && !every[i].allocating() && !log.contains(&ThreadId(i as u32)))
            .count();
        log.clear();
    }
    // Both ways a flag changes were met: threads found allocating, and threads found not
    // allocating again without being in the log.
    assert!(
        allocating_seen > 100 && stale_reset > 100,
        "{allocating_seen} {stale_reset}"
    );
}

#[test]
fn siblings_stay_in_the_node_of_their_memory_where_the_combined_policy_asks() {
    // A thread runs alone on slow core 2 (node 1) with 1 MiB resident, small enough for `rss` to
    // move it to fast core 0 (node 0) once that core's thread exits. With `keep_siblings_home` it
    // stays if its memory is in node 1 and its process has another thread; it moves if its memory
    // is in node 0 (the move brings it home) or it is its process's only thread.
    let moved = |keep: bool, memory_node: usize, sibling: bool| {
        let mut s = State::new(numa2());
        let t = s.add(2);
        let mut resident = vec![0, 0];
        resident[memory_node] = 1 << 20;
        s.threads[t.index()].resident_bytes = resident;
        let busy = s.add(0);
        if !sibling {
            s.threads[busy.index()].app = AppId(1);
        }
        let mut amps = Amps::new(AmpsConfig {
            numa: Some(NumaMode::Rss),
            keep_siblings_home: keep,
            ..Default::default()
        });
        for id in [t, busy] {
            let cores = s.cores();
            amps.on_thread_start(&s.view(&cores), id);
        }
        // A first interrupt with the fast core busy records the resident set; then it idles.
        assert!(s.rebalance(&mut amps).is_empty());
        s.threads[busy.index()].state = ThreadState::Exited;
        s.threads[busy.index()].cpu = None;
        s.rebalance(&mut amps) == vec![Placement::pin(t, CoreId(0))]
    };
    assert!(moved(false, 1, true), "the paper's rss moves it");
    assert!(!moved(true, 1, true), "a sibling stays beside its memory");
    assert!(moved(true, 0, true), "a sibling goes home");
    assert!(moved(true, 1, false), "a process's only thread moves");
}

#[test]
fn an_allocating_thread_still_moves_to_an_idle_faster_core_of_its_node() {
    // Node 0 is fast core 0 and slow core 1. A thread runs alone on core 1, its resident set
    // growing at every interrupt; core 0 idles once its own thread exits. Under `rss` it moves
    // within the node (its pages stay where they are), where before it stayed on the slow core
    // for as long as it allocated.
    let mut s = State::new(numa2());
    let t = s.add(1);
    let busy = s.add(0);
    let mut amps = Amps::new(AmpsConfig {
        numa: Some(NumaMode::Rss),
        ..Default::default()
    });
    s.threads[t.index()].resident_bytes = vec![1 << 20, 0];
    assert!(s.rebalance(&mut amps).is_empty(), "both cores busy");
    s.threads[t.index()].resident_bytes = vec![2 << 20, 0];
    s.threads[busy.index()].state = ThreadState::Exited;
    s.threads[busy.index()].cpu = None;
    let out = s.rebalance(&mut amps);
    assert_eq!(
        out,
        vec![Placement::pin(t, CoreId(0))],
        "allocating, within its node: moves"
    );
}

#[test]
fn user_masks_are_respected() {
    // The only thread that could move may not run on the idle fast core.
    let mut s = State::new(smp("0", "1-3", 2.0));
    let t = s.add(1);
    s.add(1);
    s.threads[t.index()].user_allowed = [CoreId(1)].into_iter().collect();
    s.threads[1].user_allowed = [CoreId(1)].into_iter().collect();
    let mut amps = Amps::new(AmpsConfig::default());
    assert!(s.rebalance(&mut amps).is_empty());
}

/// Run queues handed out in an order of their own (reversed), as a backend's queues are in no
/// particular order.
struct ReversedQueues(Vec<Vec<ThreadId>>);

impl crate::observe::RunQueues for ReversedQueues {
    fn for_each_waiting(&self, core: CoreId, f: &mut dyn FnMut(ThreadId)) {
        self.0[core.index()].iter().rev().copied().for_each(f);
    }
}

proptest::proptest! {
    /// A balance reads a source's waiting threads from the backend's run queues when the view
    /// has them, and from a pass over the threads when not: both give the same placements, on a
    /// NUMA machine and on an SMP one, with some threads' user masks narrowed.
    #[test]
    fn run_queues_and_a_pass_over_the_threads_place_alike(
        numa in proptest::bool::ANY,
        threads in proptest::collection::vec((0u32..8, proptest::bool::ANY), 1..40),
    ) {
        let topo = if numa { numa2() } else { smp("0-1", "2-7", 2.0) };
        let n = topo.num_cores();
        let mut s = State::new(topo);
        for &(core, narrow) in &threads {
            let core = core % n as u32;
            let t = s.add(core);
            if narrow {
                // Allowed on its own core and the next one only.
                let next = CoreId((core + 1) % n as u32);
                s.threads[t.index()].user_allowed = [CoreId(core), next].into_iter().collect();
            }
        }
        let cores = s.cores();
        let mut queues = vec![Vec::new(); n];
        for t in &s.threads {
            if let (ThreadState::Runnable, Some(c)) = (t.state, t.cpu) {
                queues[c.index()].push(t.id);
            }
        }
        let queues = ReversedQueues(queues);
        let scanned = {
            let mut out = Vec::new();
            Amps::new(AmpsConfig::default()).rebalance(&s.view(&cores), &mut out);
            out
        };
        let queued = {
            let mut out = Vec::new();
            let view = View { run_queues: Some(&queues), ..s.view(&cores) };
            Amps::new(AmpsConfig::default()).rebalance(&view, &mut out);
            out
        };
        proptest::prop_assert!(!threads.is_empty());
        proptest::prop_assert_eq!(scanned, queued);
    }
}

/// The process counts behind rule 6's pull across nodes: a thread started twice counts once, an
/// exit of a thread never started changes nothing, and a process leaves with its last thread.
#[test]
fn members_count_each_process_s_live_threads() {
    let mut m = Members::default();
    let (a, b, c) = (ThreadId(0), ThreadId(5), ThreadId(9));
    m.start(a, AppId(7));
    assert!(m.alone(a));
    m.start(b, AppId(7));
    assert!(!m.alone(a) && !m.alone(b));
    // Started again (it joins from another part of a combined policy): still one thread.
    m.start(b, AppId(7));
    m.exit(a);
    assert!(m.alone(b), "b is app 7's only thread");
    m.exit(c);
    m.exit(a);
    assert!(m.alone(b));
    // A thread that changes process counts under the new one only.
    m.start(b, AppId(8));
    assert!(m.alone(b));
    m.exit(b);
    assert!(!m.alone(b));
    assert!(m.count.is_empty(), "no process left: {:?}", m.count);
}

proptest::proptest! {
    /// Orders kept from one periodic balance to the next (the cores whose run queues changed
    /// refiled, keys no core has any more forgotten and their ids given to new ones) place
    /// exactly as orders made afresh for every balance, over rounds in which threads block, wake
    /// on other cores and start.
    #[test]
    fn kept_orders_place_as_orders_made_afresh(
        numa in proptest::bool::ANY,
        first in proptest::collection::vec(0u32..8, 1..40),
        rounds in proptest::collection::vec(
            proptest::collection::vec((0u32..3, 0u32..64, 0u32..8), 0..12),
            1..8,
        ),
    ) {
        let topo = if numa { numa2() } else { smp("0-1", "2-7", 2.0) };
        let n = topo.num_cores() as u32;
        let mut s = State::new(topo);
        for &core in &first {
            s.add(core % n);
        }
        let mut kept = Amps::new(AmpsConfig::default());
        for changes in &rounds {
            for &(what, pick, core) in changes {
                let t = pick as usize % s.threads.len();
                match what {
                    // Block: the core's next waiting thread runs in its place.
                    0 => {
                        if let Some(c) = s.threads[t].cpu.filter(|_| {
                            matches!(s.threads[t].state, ThreadState::Running | ThreadState::Runnable)
                        }) {
                            let was_running = s.threads[t].state == ThreadState::Running;
                            s.threads[t].state = ThreadState::Blocked;
                            if was_running {
                                if let Some(next) = s.threads.iter_mut().find(|x| {
                                    x.cpu == Some(c) && x.state == ThreadState::Runnable
                                }) {
                                    next.state = ThreadState::Running;
                                }
                            }
                        }
                    }
                    // Wake a blocked thread on another core (placed there as a backend would).
                    1 => {
                        if s.threads[t].state == ThreadState::Blocked {
                            s.apply(&[Placement::pin(ThreadId(t as u32), CoreId(core % n))]);
                        }
                    }
                    _ => {
                        s.add(core % n);
                    }
                }
            }
            let cores = s.cores();
            let view = s.view(&cores);
            let mut afresh = kept.clone();
            afresh.orders = Orders::default();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            kept.rebalance(&view, &mut a);
            afresh.rebalance(&view, &mut b);
            proptest::prop_assert_eq!(&a, &b);
            s.apply(&a);
        }
    }
}
