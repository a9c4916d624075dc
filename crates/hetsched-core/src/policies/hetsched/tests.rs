//! Each signal `hetsched` decides on, on a crafted case: which part takes a thread, the benefit
//! estimate and its swaps (LLC misses, signatures, hysteresis, no counters), pages that follow a
//! lone thread across nodes (node residency), FPU spreading (FPU busy cycles), multi-threaded
//! processes balanced by AMPS, not placed whole, and data fragments (hints).

use super::benefit::{counter_benefit, BENEFIT_PERIOD_NS, MIN_DWELL_NS, SWAP_MARGIN};
use super::*;
use crate::ids::AppId;
use crate::observe::{CoreObs, Counters};
use crate::policies::hass::estimate::ClassModel;
use crate::presets::machine_preset;
use crate::signature::Signature;
use std::sync::Arc;

fn preset(name: &str) -> Topology {
    machine_preset(name).unwrap().unwrap()
}

/// What one thread does each period: the share of its CPU time stalled on LLC misses and the
/// share of its cycles the FPU is busy.
#[derive(Clone, Copy, Default)]
struct Behaviour {
    stall: f64,
    fp: f64,
    /// The share of each period it sleeps (a request service waiting for work).
    sleep: f64,
}

/// Hand-driven threads under the policy: every period each runnable thread runs for the whole
/// period on its core; placements are applied (a single-core mask moves the thread there).
struct Bench {
    topo: Topology,
    threads: Vec<ThreadObs>,
    behaviour: Vec<Behaviour>,
    now: u64,
    pages: Vec<PageMove>,
}

impl Bench {
    fn new(machine: &str) -> Self {
        Bench::on(preset(machine))
    }

    fn on(topo: Topology) -> Self {
        Bench {
            topo,
            threads: Vec::new(),
            behaviour: Vec::new(),
            now: 0,
            pages: Vec::new(),
        }
    }

    fn cores(&self) -> Vec<CoreObs> {
        let mut cores = vec![CoreObs::default(); self.topo.num_cores()];
        for t in &self.threads {
            if let (Some(c), ThreadState::Running | ThreadState::Runnable) = (t.cpu, t.state) {
                let core = &mut cores[c.index()];
                core.runnable += 1;
                core.current.get_or_insert(t.id);
            }
        }
        cores
    }

    fn apply(&mut self, out: &[Placement]) {
        for pl in out {
            let t = &mut self.threads[pl.thread.index()];
            t.allowed = pl.cpus.intersection(&t.user_allowed);
            if !t.cpu.is_some_and(|c| t.allowed.contains(c)) {
                t.cpu = t.allowed.first();
            }
        }
    }

    /// Start a thread of `app` on `cpu` (where the backend put it), with `resident` bytes on its
    /// node; the policy's start placement is applied.
    fn start(&mut self, p: &mut Hetsched, app: u32, cpu: u32, b: Behaviour) -> ThreadId {
        let id = ThreadId(self.threads.len() as u32);
        let nodes = self.topo.nodes().len();
        let mut t = ThreadObs::new(id, AppId(app), self.topo.all_cores(), nodes);
        t.state = ThreadState::Running;
        t.cpu = Some(CoreId(cpu));
        self.threads.push(t);
        self.behaviour.push(b);
        let cores = self.cores();
        let v = crate::policies::fixture::view(&self.topo, &self.threads, &cores, self.now);
        if let Some(set) = p.on_thread_start(&v, id) {
            self.apply(&[Placement::new(id, set)]);
        }
        id
    }

    /// One benefit period: every running thread runs it whole; then the policy rebalances.
    fn period(&mut self, p: &mut Hetsched) -> Vec<Placement> {
        self.now += BENEFIT_PERIOD_NS;
        let period = BENEFIT_PERIOD_NS as f64;
        for (t, b) in self.threads.iter_mut().zip(&self.behaviour) {
            let Some(c) = t.cpu else { continue };
            let ghz = self.topo.class_of(c).effective_ghz().unwrap_or(2.0);
            let latency = self.topo.latency_ns(c, self.topo.node_of(c));
            let period = period * (1.0 - b.sleep);
            let cycles = period * ghz;
            t.counters.cpu_time_ns += period;
            t.counters.cycles += cycles;
            t.counters.instructions += cycles;
            t.counters.llc_misses += b.stall * period / latency;
            t.counters.llc_refs += 2.0 * b.stall * period / latency;
            t.counters.fp_busy_cycles += b.fp * cycles;
        }
        self.queue();
        let cores = self.cores();
        let mut out = Vec::new();
        let v = crate::policies::fixture::view(&self.topo, &self.threads, &cores, self.now);
        p.rebalance(&v, &mut out);
        p.take_page_moves(&mut self.pages);
        self.apply(&out);
        out
    }

    /// As a backend shows them: on each core the first runnable thread runs, the others wait.
    fn queue(&mut self) {
        let mut busy = vec![false; self.topo.num_cores()];
        for t in &mut self.threads {
            if let (Some(c), ThreadState::Running | ThreadState::Runnable) = (t.cpu, t.state) {
                let first = !std::mem::replace(&mut busy[c.index()], true);
                t.state = if first {
                    ThreadState::Running
                } else {
                    ThreadState::Runnable
                };
            }
        }
    }

    fn cpu(&self, t: ThreadId) -> CoreId {
        self.threads[t.index()].cpu.unwrap()
    }
}

fn policy() -> Hetsched {
    Hetsched::new(HetschedConfig::default())
}

const MEMORY: Behaviour = Behaviour {
    stall: 0.8,
    fp: 0.0,
    sleep: 0.0,
};
const COMPUTE: Behaviour = Behaviour {
    stall: 0.0,
    fp: 0.0,
    sleep: 0.0,
};

#[test]
fn each_thread_goes_to_the_part_its_situation_calls_for() {
    let amp = Shape::of(&preset("amps-smp"));
    let bulldozer = Shape::of(&preset("bulldover"));
    let smp = Shape::of(&preset("pinter-smp"));
    let t = ThreadObs::new(ThreadId(0), AppId(0), CpuSet::all(8), 1);
    let mut hinted = t.clone();
    hinted.data_fragment = Some(7);
    // A fragment on a one-speed machine: Pinter's groups; on an asymmetric one, AMPS (a group
    // pinned to one CPU would hold its threads to that CPU's speed).
    assert_eq!(part_for(smp, &hinted), Part::Fragments);
    assert_eq!(part_for(bulldozer, &hinted), Part::Fragments);
    assert_eq!(part_for(amp, &hinted), Part::Amps);
    // Any other thread on an asymmetric machine, of a single- or a multi-threaded process: AMPS
    // (no process is placed whole; module doc).
    assert_eq!(part_for(amp, &t), Part::Amps);
    // One speed, shared FPUs: BulldOver, threads of multi-threaded processes too.
    assert!(!bulldozer.asymmetric && bulldozer.shared_fpu);
    assert_eq!(part_for(bulldozer, &t), Part::Fpu);
    // One speed, one node, no shared FPU: nothing to add to the backend.
    assert_eq!(part_for(smp, &t), Part::Backend);
}

#[test]
fn counter_benefit_splits_cpu_time_into_compute_and_stall() {
    let class = |ghz: f64| ClassModel {
        ghz,
        cpi_factor: 1.0,
        llc_bytes: 0,
        llc_assoc: 0,
        mem_latency_ns: 100.0,
    };
    let (fast, slow) = (class(2.0), class(1.0));
    // 1 ms of CPU on the slow core, no misses: all compute, twice as fast on the fast core.
    let d = Counters {
        cpu_time_ns: 1e6,
        ..Default::default()
    };
    assert_eq!(counter_benefit(&d, 100.0, &slow, &fast, &slow), Some(2.0));
    // 8,000 misses at 100 ns stall 0.8 ms of 1 ms on the fast core: 0.2 ms of compute doubles
    // on the slow core, the stall stays: 1.2 / 1.0.
    let d = Counters {
        cpu_time_ns: 1e6,
        llc_misses: 8000.0,
        ..Default::default()
    };
    let b = counter_benefit(&d, 100.0, &fast, &fast, &slow).unwrap();
    assert!((b - 1.2).abs() < 1e-12, "{b}");
    // A thread that did not run has no estimate.
    assert_eq!(
        counter_benefit(&Counters::default(), 100.0, &fast, &fast, &slow),
        None
    );
}

/// Two memory-bound threads take the fast cores first (AMPS's faster-core-first); two compute-
/// bound ones land on slow cores. Once both sides have dwelt, the swaps give the fast cores to the
/// compute-bound threads, and nothing moves back.
#[test]
fn llc_misses_swap_memory_bound_threads_off_the_fast_cores() {
    let mut s = Bench::new("amps-smp");
    let mut p = policy();
    let mem: Vec<ThreadId> = (0..2).map(|a| s.start(&mut p, a, 7, MEMORY)).collect();
    let cpu: Vec<ThreadId> = (2..4).map(|a| s.start(&mut p, a, 7, COMPUTE)).collect();
    let fast = |c: CoreId| c.0 < 2;
    assert!(mem.iter().all(|&t| fast(s.cpu(t))), "faster-core-first");
    assert!(cpu.iter().all(|&t| !fast(s.cpu(t))));
    let mut swapped_at = None;
    for k in 1..=30u64 {
        let out = s.period(&mut p);
        if !out.is_empty() && swapped_at.is_none() {
            swapped_at = Some(k * BENEFIT_PERIOD_NS);
        } else if swapped_at.is_some() {
            assert!(out.is_empty(), "period {k}: moved again {out:?}");
        }
    }
    let at = swapped_at.expect("a swap");
    // Estimates start at the first period, so the dwell ends MIN_DWELL_NS after it.
    assert_eq!(at, BENEFIT_PERIOD_NS + MIN_DWELL_NS);
    assert!(
        cpu.iter().all(|&t| fast(s.cpu(t))),
        "compute-bound on fast cores"
    );
    assert!(mem.iter().all(|&t| !fast(s.cpu(t))));
    assert!(p.benefit_of(cpu[0]).unwrap() > p.benefit_of(mem[0]).unwrap() * 1.5);
    assert!(s.pages.is_empty(), "one node: no page moves");
}

/// A signature, when a thread has one, decides its estimate: the thread that counters call
/// compute-bound but whose signature misses heavily gives up the fast core.
#[test]
fn a_signature_overrides_what_counters_suggest() {
    let mut s = Bench::new("amps-smp");
    let mut p = policy();
    let a = s.start(&mut p, 0, 7, COMPUTE);
    let b = s.start(&mut p, 1, 7, COMPUTE);
    s.threads[a.index()].signature = Some(Arc::new(Signature::from_row("mem", &[400.0])));
    s.start(&mut p, 2, 7, COMPUTE);
    s.start(&mut p, 3, 7, COMPUTE);
    for _ in 0..10 {
        s.period(&mut p);
    }
    assert!(
        s.cpu(a).0 >= 2,
        "the signature's memory-bound thread left the fast core"
    );
    assert!(s.cpu(b).0 < 2, "the other fast thread stayed");
}

/// Estimates that differ by less than the margin, noisy period to period, move nothing: the
/// IPC-driven algorithm's thrashing (HASS section 6) does not happen. (The threads sleep more
/// than half of each period, so the progress swaps, which even out busy threads only, leave them
/// be; the estimates are ratios of their CPU time and do not change.)
#[test]
fn differences_under_the_margin_swap_nothing() {
    let mut s = Bench::new("amps-smp");
    let mut p = policy();
    // On the fast core a stall share s gives an estimate of 2 - s; on the slow one 2 / (1 + s)
    // (amps-smp's slow cores run at half speed). The shares below make the two sides' estimates
    // cross every period, 1.60 against 1.66 and back: without a margin they would swap.
    let low = Behaviour {
        stall: 0.40,
        sleep: 0.6,
        ..COMPUTE
    };
    let high = Behaviour {
        stall: 0.2048,
        sleep: 0.6,
        ..COMPUTE
    };
    let ids: Vec<ThreadId> = [low, low, high, high]
        .iter()
        .enumerate()
        .map(|(a, &b)| s.start(&mut p, a as u32, 7, b))
        .collect();
    for k in 0..100 {
        // Alternate which side looks better, by a few percent.
        let (x, y) = if k % 2 == 0 {
            (0.40, 0.2048)
        } else {
            (0.34, 0.25)
        };
        for (i, &t) in ids.iter().enumerate() {
            s.behaviour[t.index()].stall = if i < 2 { x } else { y };
        }
        assert!(s.period(&mut p).is_empty(), "period {k}");
    }
    let (bf, bs) = (p.benefit_of(ids[0]).unwrap(), p.benefit_of(ids[2]).unwrap());
    assert!(bs < bf * (1.0 + SWAP_MARGIN), "{bf} {bs}");
}

/// Without LLC-miss counters (this VM, or any machine with software events only) every thread
/// gains alike: no benefit swap, AMPS's balance decides how many threads each core runs, and the
/// progress swaps decide who: four busy programs on 2 fast and 6 slow cores take turns on the
/// fast cores, each move at least a dwell time after the thread's last, until each has received
/// about the same capacity.
#[test]
fn without_miss_counters_busy_threads_take_turns_on_the_fast_cores() {
    let mut s = Bench::new("amps-smp");
    let mut p = policy();
    let ids: Vec<ThreadId> = (0..4).map(|a| s.start(&mut p, a, 7, COMPUTE)).collect();
    let fast = |c: CoreId| c.0 < 2;
    let mut on_fast = [0u32; 4];
    let mut last_move = [0u64; 4];
    let periods = 60u64;
    for k in 1..=periods {
        let out = s.period(&mut p);
        for pl in &out {
            let i = ids.iter().position(|&t| t == pl.thread).unwrap();
            assert!(
                last_move[i] == 0 || s.now - last_move[i] >= MIN_DWELL_NS,
                "period {k}: thread {i} moved again within the dwell time"
            );
            last_move[i] = s.now;
        }
        // Every swap pairs a fast core's thread with a slow one's: two of them stay fast.
        assert_eq!(ids.iter().filter(|&&t| fast(s.cpu(t))).count(), 2);
        for (i, &t) in ids.iter().enumerate() {
            on_fast[i] += u32::from(fast(s.cpu(t)));
        }
    }
    // Half the periods each on a fast core, give or take a dwell time and the first periods.
    let dwell = (MIN_DWELL_NS / BENEFIT_PERIOD_NS) as u32;
    for (i, &n) in on_fast.iter().enumerate() {
        assert!(
            n.abs_diff(periods as u32 / 2) <= 2 * dwell,
            "thread {i} on a fast core {n} of {periods} periods"
        );
    }
}

/// A thread that sleeps most of what its core offers (a request service) has received little
/// because it asked for little: the progress swaps give it no faster core, and a busy one that
/// has received less than it keeps its place among the busy.
#[test]
fn sleeping_threads_are_not_given_turns_on_the_fast_cores() {
    let mut s = Bench::new("amps-smp");
    let mut p = policy();
    let sleeper = Behaviour {
        sleep: 0.8,
        ..COMPUTE
    };
    // Two busy programs take the fast cores first, then two sleepers and two busy ones the slow.
    let busy_fast: Vec<ThreadId> = (0..2).map(|a| s.start(&mut p, a, 7, COMPUTE)).collect();
    let sleepers: Vec<ThreadId> = (2..4).map(|a| s.start(&mut p, a, 7, sleeper)).collect();
    for k in 0..30 {
        s.period(&mut p);
        for &t in &sleepers {
            assert!(s.cpu(t).0 >= 2, "period {k}: a sleeper got a fast core");
        }
    }
    assert!(busy_fast.iter().all(|&t| s.cpu(t).0 < 2));
}

/// A swap across nodes takes a lone thread's pages along (Ding's sticky pages); a thread of a
/// process with other threads keeps AMPS's rule and does not move away from its memory.
#[test]
fn node_residency_gates_swaps_across_nodes() {
    // hass-amd-2-2: one core a node; cores 0-1 slow, 2-3 fast.
    let mut s = Bench::new("hass-amd-2-2");
    let mut p = policy();
    let mem = s.start(&mut p, 0, 0, MEMORY);
    let cpu = s.start(&mut p, 1, 0, COMPUTE);
    assert_eq!((s.cpu(mem).0, s.cpu(cpu).0), (2, 3), "faster-core-first");
    let other = s.start(&mut p, 2, 0, COMPUTE);
    s.start(&mut p, 3, 0, COMPUTE);
    let gib = 1u64 << 30;
    for t in [mem, cpu, other] {
        let node = s.topo.node_of(s.cpu(t)).index();
        s.threads[t.index()].resident_bytes[node] = gib;
    }
    for _ in 0..10 {
        s.period(&mut p);
    }
    assert!(
        s.cpu(mem).0 < 2,
        "the memory-bound thread went to a slow core"
    );
    let moved: Vec<(AppId, u32)> = s.pages.iter().map(|m| (m.app, m.to.0)).collect();
    assert!(moved.contains(&(AppId(0), s.cpu(mem).0)), "{moved:?}");
    assert!(s.pages.iter().all(|m| m.max_bytes == gib));

    // The same with the memory-bound thread one of two in its process: no swap.
    let mut s = Bench::new("hass-amd-2-2");
    let mut p = policy();
    let mem = s.start(&mut p, 0, 0, MEMORY);
    s.start(&mut p, 1, 0, COMPUTE);
    s.start(&mut p, 2, 0, COMPUTE);
    s.start(&mut p, 3, 0, COMPUTE);
    let sibling = s.start(&mut p, 0, 0, Behaviour::default());
    s.threads[sibling.index()].state = ThreadState::Blocked;
    s.threads[sibling.index()].cpu = None;
    let node = s.topo.node_of(s.cpu(mem)).index();
    s.threads[mem.index()].resident_bytes[node] = gib;
    for _ in 0..10 {
        s.period(&mut p);
    }
    assert_eq!(
        s.cpu(mem).0,
        2,
        "its memory is more than the LLC away: it stays"
    );
    assert!(s.pages.is_empty());
}

/// One speed and shared FPUs: the FP-intensive threads are bound one per module (BulldOver).
#[test]
fn fpu_busy_cycles_spread_fp_threads_one_per_module() {
    let mut s = Bench::new("bulldover");
    let mut p = policy();
    let fp = Behaviour { fp: 0.9, ..COMPUTE };
    // The backend put the four FP threads pairwise on modules 0 and 1.
    let fps: Vec<ThreadId> = (0..4).map(|a| s.start(&mut p, a, a, fp)).collect();
    for a in 4..8 {
        s.start(&mut p, a, a, COMPUTE);
    }
    s.now = BULLDOVER_PERIOD_NS - BENEFIT_PERIOD_NS;
    s.period(&mut p);
    s.now = 2 * BULLDOVER_PERIOD_NS - BENEFIT_PERIOD_NS;
    s.period(&mut p);
    let mut modules: Vec<u32> = fps
        .iter()
        .map(|&t| s.topo.module_of(s.cpu(t)).unwrap().id.0)
        .collect();
    modules.sort();
    assert_eq!(modules, vec![0, 1, 2, 3]);
    assert!(fps.iter().all(|&t| s.threads[t.index()].allowed.len() == 1));
}

/// Two multi-threaded processes on Ding's machine (4 fast and 12 slow cores), one memory-bound
/// and one compute-bound, threads started in turn: AMPS places them, none whole on one side; every
/// fast core runs one thread (faster-core-first) and no core two, and a process that gains threads
/// stays with AMPS.
#[test]
fn multi_threaded_processes_are_balanced_by_amps_not_placed_whole() {
    let mut s = Bench::new("ding-4f12s");
    let mut p = policy();
    let mut threads = Vec::new();
    for i in 0..4 {
        threads.push(s.start(&mut p, 0, 4 + i, MEMORY));
        threads.push(s.start(&mut p, 1, 8 + i, COMPUTE));
    }
    for _ in 0..30 {
        s.period(&mut p);
    }
    threads.push(s.start(&mut p, 1, 12, COMPUTE));
    s.period(&mut p);
    assert!(threads.iter().all(|&t| p.part_of(t) == Some(Part::Amps)));
    let fast = s.topo.class_cores(s.topo.classes_by_speed()[0]);
    let mut on = vec![0; s.topo.num_cores()];
    for &t in &threads {
        let allowed = &s.threads[t.index()].allowed;
        assert_eq!(allowed.len(), 1, "pinned");
        on[allowed.iter().next().unwrap().index()] += 1;
    }
    assert!(on.iter().all(|&n| n <= 1), "one thread a core: {on:?}");
    assert!(
        fast.iter().all(|c| on[c.index()] == 1),
        "fast cores used: {on:?}"
    );
}

/// Threads that name one data fragment share a CPU (Pinter); a thread that stops naming one
/// leaves the group at the next balance.
#[test]
fn data_fragment_hints_group_threads_on_one_cpu() {
    let mut s = Bench::new("pinter-smp");
    let mut p = policy();
    let ids: Vec<ThreadId> = (0..4).map(|i| s.start(&mut p, 0, i % 2, COMPUTE)).collect();
    let mut out = Vec::new();
    for (i, &t) in ids.iter().enumerate() {
        let df = (i / 2) as u64;
        s.threads[t.index()].data_fragment = Some(df);
        let cores = s.cores();
        let v = crate::policies::fixture::view(&s.topo, &s.threads, &cores, s.now);
        let hint = Hint::DataFragment {
            current: None,
            next: Some(df),
        };
        p.on_hint(&v, t, &hint, &mut out);
        s.apply(&out);
        out.clear();
    }
    assert!(ids.iter().all(|&t| p.part_of(t) == Some(Part::Fragments)));
    assert_eq!(s.cpu(ids[0]), s.cpu(ids[1]));
    assert_eq!(s.cpu(ids[2]), s.cpu(ids[3]));
    assert_ne!(s.cpu(ids[0]), s.cpu(ids[2]));
    assert_eq!(s.threads[ids[0].index()].allowed.len(), 1);
    // Thread 3 stops naming a fragment: the backend takes it back, unpinned.
    s.threads[ids[3].index()].data_fragment = None;
    let cores = s.cores();
    let v = crate::policies::fixture::view(&s.topo, &s.threads, &cores, s.now);
    let hint = Hint::DataFragment {
        current: Some(1),
        next: None,
    };
    p.on_hint(&v, ids[3], &hint, &mut out);
    s.apply(&out);
    s.period(&mut p);
    assert_eq!(p.part_of(ids[3]), Some(Part::Backend));
    assert_eq!(s.threads[ids[3].index()].allowed, s.topo.all_cores());
}

/// On an asymmetric machine a barrier job's threads that all name one fragment, by hint or in the
/// view alone, stay with AMPS, one a core, every fast core used: Pinter's group would have put
/// them all on one CPU.
#[test]
fn one_fragment_on_an_asymmetric_machine_does_not_gather_its_threads() {
    let mut s = Bench::new("amps-smp");
    let mut p = policy();
    let ids: Vec<ThreadId> = (0..8).map(|i| s.start(&mut p, 0, i, COMPUTE)).collect();
    let mut out = Vec::new();
    for &t in &ids[..4] {
        s.threads[t.index()].data_fragment = Some(0);
        let cores = s.cores();
        let v = crate::policies::fixture::view(&s.topo, &s.threads, &cores, s.now);
        let hint = Hint::DataFragment {
            current: None,
            next: Some(0),
        };
        p.on_hint(&v, t, &hint, &mut out);
        s.apply(&out);
        out.clear();
    }
    for &t in &ids[4..] {
        s.threads[t.index()].data_fragment = Some(0);
    }
    for _ in 0..3 {
        s.period(&mut p);
    }
    assert!(ids.iter().all(|&t| p.part_of(t) == Some(Part::Amps)));
    let mut on = vec![0; s.topo.num_cores()];
    for &t in &ids {
        on[s.cpu(t).index()] += 1;
    }
    assert!(on.iter().all(|&n| n == 1), "one thread a core: {on:?}");
}

/// Threads that start between two balances are added to the last count in full, which matches
/// a count in full at that instant; a start a balance period later counts in full again (an
/// exited thread leaves the count).
#[test]
fn starts_between_balances_add_to_the_last_count() {
    let mut s = Bench::new("ding-4f12s");
    let mut p = policy();
    let ts: Vec<ThreadId> = (0..4).map(|i| s.start(&mut p, 0, i, COMPUTE)).collect();
    assert_eq!(p.counts.get(AppId(0)), 4);
    let cores = s.cores();
    let v = crate::policies::fixture::view(&s.topo, &s.threads, &cores, s.now);
    let mut full = policy();
    full.process_counts(&v, 0);
    assert_eq!(full.counts.get(AppId(0)), 4);
    // Within the balance period the count is the last one plus the starts.
    s.threads[ts[3].index()].state = ThreadState::Exited;
    s.now += AMPS_BALANCE_PERIOD_NS - 1;
    s.start(&mut p, 1, 5, COMPUTE);
    assert_eq!((p.counts.get(AppId(0)), p.counts.get(AppId(1))), (4, 1));
    // A period after the count in full, the next start counts in full.
    s.now += 1;
    s.start(&mut p, 2, 6, COMPUTE);
    assert_eq!(
        (0..3).map(|a| p.counts.get(AppId(a))).collect::<Vec<_>>(),
        vec![3, 1, 1]
    );
}

/// A balance that finds the threads' fragments and exits and the parts as the last one left them
/// places nothing; a change in any of them is acted on
/// at the next balance, including a fragment named without a hint.
#[test]
fn an_unchanged_system_is_not_reassigned_and_a_change_is() {
    let mut s = Bench::new("ding-4f12s");
    let mut p = policy();
    let a = s.start(&mut p, 0, 4, COMPUTE);
    let b = s.start(&mut p, 1, 5, COMPUTE);
    s.period(&mut p);
    assert!(!p.parts_touched && !p.inputs_changed);
    assert_eq!(p.part_of(a), Some(Part::Amps));
    s.period(&mut p);
    assert_eq!(p.part_of(a), Some(Part::Amps));
    // The view alone says a's application names its fragment now: on this asymmetric machine it
    // stays with AMPS.
    s.threads[a.index()].data_fragment = Some(7);
    s.period(&mut p);
    assert_eq!(p.part_of(a), Some(Part::Amps));
    assert_eq!(p.part_of(b), Some(Part::Amps));
    s.threads[b.index()].state = ThreadState::Exited;
    s.period(&mut p);
    assert_eq!(p.part_of(b), None);
}

/// `amps-smp` (2 fast + 6 slow cores) with one single-threaded program and `wide` threads of one
/// other process, all running: the program's thread, the others', after two periods.
fn one_program_beside(p: &mut Hetsched, wide: u32) -> (Bench, ThreadId, Vec<ThreadId>) {
    let mut s = Bench::new("amps-smp");
    // The program starts last, on a slow core, so that holding a fast core means moving it.
    let others: Vec<ThreadId> = (0..wide).map(|i| s.start(p, 1, i % 8, COMPUTE)).collect();
    let single = s.start(p, 0, 7, COMPUTE);
    s.period(p);
    s.period(p);
    (s, single, others)
}

/// Threads outnumber cores: the single-threaded program holds a fast core alone, the other
/// process's threads share the rest, and none is placed on the held core again.
#[test]
fn a_single_threaded_program_holds_a_fast_core_while_threads_outnumber_cores() {
    let mut p = policy();
    let (mut s, single, others) = one_program_beside(&mut p, 10);
    let fast = s.topo.class_cores(s.topo.classes_by_speed()[0]);
    let held = s.cpu(single);
    assert!(fast.contains(held), "on a fast core: {held:?}");
    assert_eq!(p.held_core(single), Some(held));
    for _ in 0..3 {
        s.period(&mut p);
        assert_eq!(s.cpu(single), held, "keeps its core");
        for &t in &others {
            assert_ne!(s.cpu(t), held, "thread {t:?} on the held core");
        }
    }
    // The program blocks: its core is open to the others again, and closes when it runs.
    s.threads[single.index()].state = ThreadState::Blocked;
    let cores = s.cores();
    let v = crate::policies::fixture::view(&s.topo, &s.threads, &cores, s.now);
    assert!(p.conserves_work_for(&v, others[0], held));
    s.threads[single.index()].state = ThreadState::Running;
    let cores = s.cores();
    let v = crate::policies::fixture::view(&s.topo, &s.threads, &cores, s.now);
    assert!(!p.conserves_work_for(&v, others[0], held));
}

/// As many threads as cores: every thread has a core already, and nothing is held.
#[test]
fn nothing_is_held_while_every_thread_has_a_core() {
    let mut p = policy();
    let (_, single, _) = one_program_beside(&mut p, 7);
    assert_eq!(p.held_core(single), None);
}

/// More single-threaded programs than fast cores: none holds one (those left over would share
/// the slow cores with everything else and finish last).
#[test]
fn all_programs_hold_a_core_or_none_does() {
    let mut p = policy();
    let mut s = Bench::new("amps-smp");
    let wide: Vec<ThreadId> = (0..10)
        .map(|i| s.start(&mut p, 9, i % 8, COMPUTE))
        .collect();
    let singles: Vec<ThreadId> = (0..3).map(|i| s.start(&mut p, i, 5 + i, COMPUTE)).collect();
    s.period(&mut p);
    s.period(&mut p);
    assert!(singles.iter().all(|&t| p.held_core(t).is_none()));
    assert!(wide.iter().all(|&t| p.part_of(t) == Some(Part::Amps)));
}

/// Four busy 3-thread processes on one-speed machines of 2 nodes of 8 cores: no process is placed
/// whole (there is no fast side; per node, whole placement lost to the kernel's balance), so the
/// threads go to the backend, or with shared FPUs to the FPU part.
#[test]
fn on_one_speed_numa_machines_processes_are_not_placed_whole() {
    for (fpu_modules, want) in [(false, Part::Backend), (true, Part::Fpu)] {
        let machine = crate::shapes::MachineShape {
            name: "two nodes".into(),
            ghz: vec![2.0],
            cores: vec![16],
            nodes: 2,
            shared_llc: true,
            fpu_modules,
        };
        let mut s = Bench::on(machine.topology().unwrap());
        let mut p = policy();
        let threads: Vec<ThreadId> = (0..12)
            .map(|i| s.start(&mut p, i / 3, i, COMPUTE))
            .collect();
        for _ in 0..5 {
            s.period(&mut p);
        }
        for &t in &threads {
            assert_eq!(p.part_of(t), Some(want), "FPU modules {fpu_modules}");
        }
    }
}

/// An exited thread stays in the view for good (its id is its index); a balance reads only the
/// threads still there. After 600 short single-threaded programs came and went beside one that
/// stays, the reassignment's list and the benefit pass's hold the one left, not the 601 ever
/// started (reading every one at every balance made a service's balances cost more the longer
/// it ran); and a thread that starts again after it was dropped is read again.
#[test]
fn balances_read_only_the_threads_that_have_not_exited() {
    let mut b = Bench::new("amps-smp");
    let mut p = policy();
    let stays = b.start(&mut p, 0, 0, COMPUTE);
    for k in 0..600u32 {
        let t = b.start(&mut p, 1 + k, 1 + k % 3, MEMORY);
        b.period(&mut p);
        b.threads[t.index()].state = ThreadState::Exited;
    }
    for _ in 0..3 {
        b.period(&mut p);
    }
    assert_eq!(b.threads.len(), 601);
    assert_eq!(p.live.ids(), &[stays.0], "the reassignment's list");
    assert_eq!(
        p.benefit.live_threads(),
        &[stays.0],
        "the benefit pass's list"
    );
    assert_eq!(p.part_of(stays), Some(Part::Amps));
    // One of the departed starts again (a backend that hands a thread id back).
    let again = ThreadId(300);
    b.threads[again.index()].state = ThreadState::Running;
    let cores = b.cores();
    let v = crate::policies::fixture::view(&b.topo, &b.threads, &cores, b.now);
    p.on_thread_start(&v, again);
    b.period(&mut p);
    assert_eq!(p.live.ids(), &[stays.0, again.0]);
    assert_eq!(p.benefit.live_threads(), &[stays.0, again.0]);
    assert_eq!(p.part_of(again), Some(Part::Amps));
}
