//! The discrete-event engine.
//!
//! Time is in integer nanoseconds. Two kinds of things happen:
//!
//! 1. **Ticks**, every `quantum_ns` on every core at once (a timer interrupt at HZ): core by core,
//!    the running thread is billed up to now and preempted if a queued thread has less virtual
//!    runtime (CFS-like), and the rate is recomputed from the current contention (LLC footprints,
//!    FPU mates, page placement); then the baseline balancer and the policy's `rebalance` run,
//!    each on its period.
//! 2. **Events** between ticks, from a priority queue ordered by (time, insertion sequence) so that
//!    same-time events keep one order (STYLE.md habit 6): a phase ends, a sleeper wakes, an app
//!    arrives. A core's phase-end event is only pushed when it falls before the next tick; a
//!    stale one (the core's generation moved on) is skipped.
//!
//! Work is billed to the core that ran it up to every rate change (SimSo issue #12): every change
//! of what a core runs, or of its rate, bills first.
//!
//! Contention lags by at most one tick: a thread's rate is fixed between ticks unless its own core
//! changes, so a co-runner that starts mid-tick on another core slows it from the next tick.
//!
//! The warm-cache model: each LLC keeps a counter of bytes filled into it. A thread's data survive
//! in an LLC of capacity C if fewer than C − footprint other bytes were filled since it last ran
//! there (LRU stack distance), so migration to another LLC, or a long absence, costs a refill
//! (`perf::cold_refill_ns`); shared data fragments are tracked the same way per LLC copy, and a
//! writer invalidates the other copies (write-invalidate, Pinter section 2.1): coherence misses.

use crate::baseline::{self, BalanceStats};
use crate::metrics::{AppResult, EngineStats, GanttSegment, RunResult};
use crate::perf::{self, CONTEXT_SWITCH_NS};
use crate::runqueue::RunQueue;
use crate::workload::{Phase, PhaseEnd, Workload};
use hetsched_core::rng::SeededRng;
use hetsched_core::{
    AppId, CoreId, CoreObs, CpuSet, Hint, PageMove, Placement, Policy, ThreadId, ThreadObs,
    ThreadState, Topology, View,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

/// Run settings.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    /// Stop at this simulated time even if work remains, ns.
    pub duration_ns: u64,
    /// Scheduler tick and time slice, ns.
    pub quantum_ns: u64,
    /// Record which thread ran where (for the Gantt chart).
    pub record_gantt: bool,
    /// Check the engine's invariants after every step (slow; for tests).
    pub check_invariants: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            duration_ns: 600 * NS_PER_S,
            quantum_ns: 4_000_000,
            record_gantt: false,
            check_invariants: false,
        }
    }
}

pub const NS_PER_S: u64 = 1_000_000_000;

/// Minimum run time before a tick may preempt a thread: Linux's default
/// `sched_min_granularity_ns` of 0.75 ms.
pub const MIN_GRANULARITY_NS: u64 = 750_000;

/// The baseline's periodic balance runs every this many ticks (Linux's busy balance interval on a
/// small domain is a few ms; 2 ticks of 4 ms is 8 ms).
pub const BALANCE_TICKS: u64 = 2;

/// How many cores ahead the tick's billing loop prefetches thread state.
const PREFETCH_AHEAD: usize = 4;

/// Most Gantt segments kept; later ones are dropped (the report says so).
pub const GANTT_MAX_SEGMENTS: usize = 200_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    PhaseEnd { core: u32, gen: u64 },
    Wake { thread: u32 },
    Arrival { spec: u32, copy: u32 },
}

/// A thread's simulation state. The fields touched at every bill and dispatch come first and fill
/// one cache line: with 16,384 threads, a cache miss per field is what the engine's speed is made of.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(crate) struct SimThread {
    /// The current phase: an index into `Simulation::phases`.
    cur: u32,
    remaining: f64,
    penalty_ns: f64,
    /// Virtual runtime, integer ns (billing is in whole ns, so integers are exact and compare
    /// fast in the queue scans).
    pub(crate) vruntime: i64,
    warm_fill: f64,
    ideal_ns: f64,
    total_bytes: f64,
    warm_llc: Option<u32>,
    // Cold fields.
    pub(crate) app: usize,
    group: usize,
    phase: usize,
    iter: u32,
    /// vruntime minus the core's min_vruntime when it left a queue (CFS normalisation).
    lag: i64,
    last_core: Option<CoreId>,
    bytes_per_node: Vec<f64>,
    start_ns: u64,
    end_ns: Option<u64>,
    exit_after_barrier: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct SimCore {
    pub(crate) current: Option<u32>,
    /// Queued threads with their vruntime (fixed while queued).
    pub(crate) queue: RunQueue,
    ns_per_instr: f64,
    cur_mpki: f64,
    cur_fpu_slow: f64,
    cur_ws: f64,
    /// LLC share the current mpki was computed for (NaN: none yet).
    cur_share: f64,
    /// Memory latency of the current thread, ns (sampled at dispatch and while it allocates).
    cur_lat: f64,
    /// The current phase's ideal time per instruction (fairness metric).
    cur_ideal: f64,
    /// The current phase's LLC references per kilo-instruction.
    cur_refs_pki: f64,
    /// The data fragment the current thread works on (as priced at dispatch or phase load).
    cur_df: Option<usize>,
    last_bill: u64,
    dispatched_at: u64,
    gen: u64,
    pub(crate) min_vruntime: i64,
    last_thread: Option<u32>,
    llc: Option<usize>,
    node: usize,
    eff_ghz: f64,
    cpi_factor: f64,
    fpu_mates: Vec<CoreId>,
    /// The core's class (index into the topology's classes).
    class: usize,
    /// The shared cache below the LLC this core uses (a Bulldozer module's L2): index into
    /// `Simulation::shared_l2s`.
    l2: Option<usize>,
    /// The running thread's footprint in that cache, its misses there per kilo-instruction, and
    /// its misses with that cache to itself (fixed for the phase, priced at dispatch).
    cur_l2_ws: f64,
    cur_l2_mpki: f64,
    cur_l2_alone: f64,
}

/// A cache below the LLC shared by several cores: its co-runners' footprints shrink a thread's
/// share, and the extra misses hit the LLC at its latency.
#[derive(Clone, Debug)]
struct SharedL2 {
    capacity: f64,
    sum_ws: f64,
    /// Hit latency of the level above (the LLC), ns.
    next_latency_ns: f64,
}

/// A workload phase with the values the hot path would otherwise recompute at every dispatch.
#[derive(Clone, Copy, Debug)]
struct PhaseInfo<'a> {
    phase: &'a Phase,
    /// Time per instruction alone on the fastest core (fairness metric).
    ideal_ns_per_instr: f64,
    /// LLC references per kilo-instruction (the miss curve's value at the smallest cache).
    refs_pki: f64,
    /// The phase's working set, bytes.
    ws_bytes: f64,
}

#[derive(Clone, Debug)]
struct LlcState {
    capacity: f64,
    line: f64,
    fill: f64,
    sum_ws: f64,
}

#[derive(Clone, Debug)]
struct DfState {
    bytes: f64,
    /// (LLC index, fill counter when the copy was last used) of each cached copy.
    copies: Vec<(usize, f64)>,
}

/// Pages of one owner on one node, allocated one after the other.
#[derive(Clone, Copy, Debug)]
struct PageRun {
    owner: u32,
    node: usize,
    bytes: f64,
}

#[derive(Clone, Debug)]
struct AppInstance {
    spec: usize,
    copy: u32,
    run: u32,
    start_ns: u64,
    live: u32,
    arrived: u32,
    waiting: Vec<u32>,
    dfs: Vec<DfState>,
    /// Bytes the instance's threads allocated, per node.
    bytes_per_node: Vec<f64>,
    total_bytes: f64,
    /// The instance's resident memory in allocation order, with the thread that brought each run
    /// of pages in: the owner lists of AMPS section 2.4.2 (one owner per page, as in the common
    /// case the paper describes; consecutive pages of one owner on one node form one run).
    pages: VecDeque<PageRun>,
    /// Completed (every thread exited); recorded once.
    done: bool,
}

/// One simulation of one policy on one machine and workload.
pub struct Simulation<'a> {
    topo: &'a Topology,
    workload: &'a Workload,
    policy: Box<dyn Policy>,
    cfg: SimConfig,
    rng: SeededRng,
    now: u64,
    next_tick: u64,
    tick_no: u64,
    next_policy_ns: u64,
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    pub(crate) threads: Vec<SimThread>,
    /// Every phase of the workload, flattened: spec by spec, group by group.
    phases: Vec<PhaseInfo<'a>>,
    /// Per spec, per thread group: the index of its first phase in `phases`.
    phase_base: Vec<Vec<u32>>,
    pub(crate) obs: Vec<ThreadObs>,
    pub(crate) cores: Vec<SimCore>,
    pub(crate) core_obs: Vec<CoreObs>,
    pub(crate) idle: CpuSet,
    /// Cores whose run queue holds a waiting thread.
    pub(crate) queued: CpuSet,
    llcs: Vec<LlcState>,
    /// Memory latency from each node's cores to each node, ns: the machine's unloaded latency plus
    /// the memory node's queueing delay.
    latency: Vec<Vec<f64>>,
    /// The machine's unloaded latencies.
    base_latency: Vec<Vec<f64>>,
    /// Per node: its memory's bandwidth in bytes per ns, when the machine gives one.
    bandwidth: Vec<Option<f64>>,
    /// Some node has a bandwidth: traffic is counted per node and queued against it.
    bandwidth_model: bool,
    /// Bytes each node's memory served since the last tick.
    node_traffic: Vec<f64>,
    /// Each node's current queueing delay, ns.
    queue_delay_ns: Vec<f64>,
    page_moves: Vec<PageMove>,
    apps: Vec<AppInstance>,
    /// Per spec: copies that will never run again.
    copies_done: Vec<u32>,
    completions: Vec<Vec<f64>>,
    /// CPU time per workload phase (index into `phases`) and core class, ns:
    /// `[phase * classes + class]` (HASS Table 2). Kept per phase, not per app, because the phase
    /// index is in the thread's hot cache line; folded per app in the result.
    class_ns: Vec<f64>,
    /// Moves between core classes per phase (HASS Table 3, partition migrations).
    class_moves: Vec<u64>,
    shared_l2s: Vec<SharedL2>,
    /// Misses in a shared cache below the LLC, per phase (BulldOver Figure 7).
    l2_misses: Vec<f64>,
    last_completion_ns: u64,
    need_pick: Vec<u32>,
    /// A thread was queued behind another since the last idle sweep.
    queued_behind: bool,
    placements: Vec<Placement>,
    /// The policy asks for threads of one data fragment to run in succession on a core.
    batch_by_df: bool,
    // statistics
    events: u64,
    migrations: u64,
    rejected_placements: u64,
    policy_time: std::time::Duration,
    llc_misses: f64,
    /// Bytes moved by the policy's page moves.
    pages_moved_bytes: f64,
    /// Whether any page has been placed yet (until then every access is local).
    memory_placed: bool,
    gantt: Vec<GanttSegment>,
    gantt_dropped: u64,
    balance: BalanceStats,
}

/// The fastest core's parameters, for the fairness metric's "alone on the best core" time.
#[derive(Clone, Copy, Debug)]
struct BestCore {
    eff_ghz: f64,
    cpi_factor: f64,
    llc_bytes: f64,
    latency_ns: f64,
}

impl<'a> Simulation<'a> {
    pub fn new(
        topo: &'a Topology,
        workload: &'a Workload,
        policy: Box<dyn Policy>,
        cfg: SimConfig,
    ) -> Self {
        let llcs: Vec<LlcState> = (0..topo.num_llcs())
            .map(|i| {
                let c = topo.llc(hetsched_core::LlcId(i as u32));
                LlcState {
                    capacity: c.size_bytes as f64,
                    line: c.line_bytes as f64,
                    fill: 0.0,
                    sum_ws: 0.0,
                }
            })
            .collect();
        let mut cores: Vec<SimCore> = topo
            .cores()
            .iter()
            .map(|c| {
                let class = topo.class(c.class);
                // A class without a clock runs at its capacity times a 2 GHz reference.
                let eff_ghz = class.effective_ghz().unwrap_or(2.0 * class.capacity);
                let fpu_mates = match topo.module_of(c.id) {
                    Some(m) if m.shares_fpu => topo.module_mates(c.id),
                    _ => Vec::new(),
                };
                SimCore {
                    current: None,
                    queue: RunQueue::new(),
                    ns_per_instr: 1.0,
                    cur_mpki: 0.0,
                    cur_fpu_slow: 1.0,
                    cur_ws: 0.0,
                    cur_share: f64::NAN,
                    cur_lat: 0.0,
                    cur_ideal: 0.0,
                    cur_refs_pki: 0.0,
                    cur_df: None,
                    last_bill: 0,
                    dispatched_at: 0,
                    gen: 0,
                    min_vruntime: 0,
                    last_thread: None,
                    llc: c.llc.map(|l| l.index()),
                    node: c.node.index(),
                    eff_ghz,
                    cpi_factor: class.cpi_factor,
                    fpu_mates,
                    class: c.class.index(),
                    l2: None,
                    cur_l2_ws: 0.0,
                    cur_l2_mpki: 0.0,
                    cur_l2_alone: 0.0,
                }
            })
            .collect();
        let best_core = topo
            .cores()
            .iter()
            .max_by(|a, b| {
                let ca = &cores[a.id.index()];
                let cb = &cores[b.id.index()];
                (ca.eff_ghz / ca.cpi_factor).total_cmp(&(cb.eff_ghz / cb.cpi_factor))
            })
            .map(|c| c.id)
            .unwrap_or(CoreId(0));
        let bc = &cores[best_core.index()];
        let best = BestCore {
            eff_ghz: bc.eff_ghz,
            cpi_factor: bc.cpi_factor,
            llc_bytes: topo
                .caches()
                .iter()
                .map(|c| c.size_bytes)
                .max()
                .unwrap_or(0) as f64,
            latency_ns: topo
                .nodes()
                .iter()
                .map(|n| n.latency_ns[n.id.index()])
                .fold(f64::MAX, f64::min),
        };
        let latency: Vec<Vec<f64>> = topo.nodes().iter().map(|n| n.latency_ns.clone()).collect();
        let bandwidth: Vec<Option<f64>> = topo
            .nodes()
            .iter()
            .map(|n| n.bandwidth_bytes_per_s.map(|b| b / NS_PER_S as f64))
            .collect();
        let bandwidth_model = bandwidth.iter().any(Option::is_some);
        let mut phases = Vec::new();
        let mut phase_base = Vec::with_capacity(workload.apps.len());
        for spec in &workload.apps {
            let mut bases = Vec::with_capacity(spec.threads.len());
            for group in &spec.threads {
                bases.push(phases.len() as u32);
                phases.extend(group.phases.iter().map(|phase| PhaseInfo {
                    phase,
                    ideal_ns_per_instr: ideal_ns_per_instr(phase, &best),
                    refs_pki: phase.miss.mpki_smallest(),
                    ws_bytes: phase.miss.working_set_bytes() as f64,
                }));
            }
            phase_base.push(bases);
        }
        // Shared caches below the LLC whose LLC has a known hit latency (module L2s).
        let mut shared_l2s: Vec<SharedL2> = Vec::new();
        let mut l2_of_cache: std::collections::BTreeMap<usize, usize> = Default::default();
        for core in topo.cores() {
            let Some(llc) = topo.llc_of(core.id) else {
                continue;
            };
            let (Some(next_latency_ns), true) = (llc.hit_latency_ns, llc.level > 1) else {
                continue;
            };
            let below = topo
                .caches()
                .iter()
                .position(|k| k.level == llc.level - 1 && k.cpus.contains(&core.id));
            let Some(idx) = below.filter(|&i| topo.caches()[i].cpus.len() > 1) else {
                continue;
            };
            let slot = *l2_of_cache.entry(idx).or_insert_with(|| {
                shared_l2s.push(SharedL2 {
                    capacity: topo.caches()[idx].size_bytes as f64,
                    sum_ws: 0.0,
                    next_latency_ns,
                });
                shared_l2s.len() - 1
            });
            cores[core.id.index()].l2 = Some(slot);
        }
        let n = topo.num_cores();
        let class_ns = vec![0.0; phases.len() * topo.classes().len()];
        let class_moves = vec![0; phases.len()];
        let mut sim = Simulation {
            topo,
            workload,
            policy,
            rng: SeededRng::new(cfg.seed),
            now: 0,
            next_tick: cfg.quantum_ns,
            tick_no: 0,
            next_policy_ns: 0,
            heap: BinaryHeap::new(),
            seq: 0,
            threads: Vec::new(),
            phases,
            phase_base,
            obs: Vec::new(),
            cores,
            core_obs: vec![CoreObs::default(); n],
            idle: CpuSet::all(n),
            queued: CpuSet::new(),
            llcs,
            base_latency: latency.clone(),
            latency,
            node_traffic: vec![0.0; bandwidth.len()],
            queue_delay_ns: vec![0.0; bandwidth.len()],
            bandwidth,
            bandwidth_model,
            page_moves: Vec::new(),
            apps: Vec::new(),
            copies_done: vec![0; workload.apps.len()],
            completions: vec![Vec::new(); workload.apps.len()],
            l2_misses: vec![0.0; class_moves.len()],
            class_ns,
            class_moves,
            shared_l2s,
            last_completion_ns: 0,
            need_pick: Vec::new(),
            queued_behind: false,
            placements: Vec::new(),
            batch_by_df: false,
            events: 0,
            migrations: 0,
            rejected_placements: 0,
            policy_time: std::time::Duration::ZERO,
            llc_misses: 0.0,
            pages_moved_bytes: 0.0,
            memory_placed: false,
            gantt: Vec::new(),
            gantt_dropped: 0,
            balance: BalanceStats::default(),
            cfg,
        };
        sim.next_policy_ns = sim.policy.rebalance_period_ns();
        sim.batch_by_df = sim.policy.batches_by_data_fragment();
        for (si, spec) in workload.apps.iter().enumerate() {
            for copy in 0..spec.copies {
                sim.push(
                    spec.arrival_ns,
                    Event::Arrival {
                        spec: si as u32,
                        copy,
                    },
                );
            }
        }
        sim
    }

    fn push(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, e)));
    }

    #[inline]
    fn phase_of(&self, t: usize) -> &'a Phase {
        self.phases[self.threads[t].cur as usize].phase
    }

    #[inline]
    fn phase_info(&self, t: usize) -> &PhaseInfo<'a> {
        &self.phases[self.threads[t].cur as usize]
    }

    fn all_done(&self) -> bool {
        self.copies_done
            .iter()
            .zip(&self.workload.apps)
            .all(|(&d, a)| d >= a.copies)
    }

    /// Run to the end (all work done, or the duration reached).
    pub fn run(mut self) -> RunResult {
        let wall = Instant::now();
        let mut finished = self.all_done();
        while !finished {
            let tick = self.next_tick;
            while let Some(Reverse((t, _, _))) = self.heap.peek() {
                if *t > tick {
                    break;
                }
                let Some(Reverse((t, _, e))) = self.heap.pop() else {
                    break;
                };
                // Fetch the next event's thread while this one is handled.
                if let Some(Reverse((_, _, next))) = self.heap.peek() {
                    self.prefetch_event(*next);
                }
                self.now = t;
                self.handle(e);
                self.settle();
                if self.cfg.check_invariants {
                    self.check_invariants();
                }
            }
            if self.all_done() {
                finished = true;
                break;
            }
            self.now = tick;
            if self.now >= self.cfg.duration_ns {
                break;
            }
            // From here on, "the next tick" is the following one.
            self.next_tick += self.cfg.quantum_ns;
            self.tick();
            self.settle();
            if self.cfg.check_invariants {
                self.check_invariants();
            }
        }
        // Bill and close what still runs.
        for c in 0..self.cores.len() {
            if self.cores[c].current.is_some() {
                self.bill(c);
                self.close_segment(c);
            }
        }
        let wall_s = wall.elapsed().as_secs_f64();
        let mut notices = Vec::new();
        while let Some(n) = self.policy.take_notice() {
            notices.push(n);
        }
        RunResult {
            notices,
            ..self.result(finished, wall_s)
        }
    }

    // ---- events ----------------------------------------------------------------------------

    /// Bring the state an event will touch into cache (a hint; no effect on results).
    fn prefetch_event(&self, e: Event) {
        let t = match e {
            Event::Wake { thread } => thread as usize,
            Event::PhaseEnd { core, .. } => match self.cores[core as usize].current {
                Some(t) => t as usize,
                None => return,
            },
            Event::Arrival { .. } => return,
        };
        prefetch(&self.threads[t]);
        prefetch(&self.obs[t].counters);
    }

    fn handle(&mut self, e: Event) {
        match e {
            Event::PhaseEnd { core, gen } => {
                let c = core as usize;
                if self.cores[c].gen != gen || self.cores[c].current.is_none() {
                    return;
                }
                self.events += 1;
                self.bill(c);
                let t = self.cores[c].current.unwrap_or(0) as usize;
                // Less than half a nanosecond of work left is rounding: the phase is done.
                let left_ns = self.threads[t].penalty_ns
                    + self.threads[t].remaining * self.cores[c].ns_per_instr;
                if left_ns >= 0.5 {
                    self.set_rate(c);
                    return;
                }
                self.threads[t].remaining = 0.0;
                self.threads[t].penalty_ns = 0.0;
                self.finish_phase(t, c);
            }
            Event::Wake { thread } => {
                self.events += 1;
                let t = thread as usize;
                if self.obs[t].state == ThreadState::Blocked {
                    self.wake(t);
                }
            }
            Event::Arrival { spec, copy } => {
                self.events += 1;
                self.start_instance(spec as usize, copy, 0);
            }
        }
    }

    fn start_instance(&mut self, spec_idx: usize, copy: u32, run: u32) {
        let spec = &self.workload.apps[spec_idx];
        let app_idx = self.apps.len();
        self.apps.push(AppInstance {
            spec: spec_idx,
            copy,
            run,
            start_ns: self.now,
            live: 0,
            arrived: 0,
            waiting: Vec::new(),
            dfs: spec
                .data_fragments
                .iter()
                .map(|&b| DfState {
                    bytes: b as f64,
                    copies: Vec::new(),
                })
                .collect(),
            bytes_per_node: vec![0.0; self.topo.nodes().len()],
            total_bytes: 0.0,
            pages: VecDeque::new(),
            done: false,
        });
        let nodes = self.topo.nodes().len();
        for (g, group) in spec.threads.iter().enumerate() {
            for _ in 0..group.count {
                let id = self.threads.len();
                self.threads.push(SimThread {
                    cur: self.phase_base[spec_idx][g],
                    app: app_idx,
                    group: g,
                    phase: 0,
                    iter: 0,
                    remaining: group.phases[0].instructions,
                    penalty_ns: 0.0,
                    vruntime: 0,
                    lag: 0,
                    last_core: None,
                    warm_llc: None,
                    warm_fill: 0.0,
                    bytes_per_node: vec![0.0; nodes],
                    total_bytes: 0.0,
                    start_ns: self.now,
                    end_ns: None,
                    ideal_ns: 0.0,
                    exit_after_barrier: false,
                });
                let mut obs = ThreadObs::new(
                    ThreadId(id as u32),
                    AppId(app_idx as u32),
                    spec.cpus.clone().unwrap_or_else(|| self.topo.all_cores()),
                    nodes,
                );
                obs.data_fragment = group.phases[0].data_fragment.map(|d| d as u64);
                obs.signature = Some(group.signature.clone());
                self.obs.push(obs);
                self.apps[app_idx].live += 1;
                // The policy may restrict the thread before it first runs.
                let placed =
                    self.call_policy(|p, view| p.on_thread_start(view, ThreadId(id as u32)));
                if let Some(set) = placed {
                    let allowed = set.intersection(&self.obs[id].user_allowed);
                    if allowed.is_empty() {
                        self.rejected_placements += 1;
                    } else {
                        self.obs[id].allowed = allowed;
                    }
                }
                let core = baseline::place_new(self, id);
                self.enqueue(id, core);
            }
        }
    }

    fn finish_phase(&mut self, t: usize, c: usize) {
        let phase = self.phase_of(t);
        if phase.free_bytes > 0 {
            self.free_memory(self.threads[t].app, phase.free_bytes as f64);
        }
        let spec_idx = self.apps[self.threads[t].app].spec;
        let group_idx = self.threads[t].group;
        let group = &self.workload.apps[spec_idx].threads[group_idx];
        let base = self.phase_base[spec_idx][group_idx];
        // Advance the phase pointer.
        let th = &mut self.threads[t];
        let mut last = false;
        loop {
            th.phase += 1;
            if th.phase == group.phases.len() {
                th.phase = 0;
                th.iter += 1;
                if th.iter >= group.repeat {
                    last = true;
                    break;
                }
            }
            // `once` phases run only in the first pass.
            if th.iter == 0 || !group.phases[th.phase].once {
                break;
            }
        }
        th.cur = base + th.phase as u32;
        match (&phase.end, last) {
            (PhaseEnd::Barrier, _) => {
                self.threads[t].exit_after_barrier = last;
                if !last {
                    self.load_phase(t, c);
                }
                self.arrive_barrier(t, c);
            }
            (_, true) => self.exit_thread(t, c),
            (PhaseEnd::Next, false) => {
                let before = self.obs[t].data_fragment;
                self.load_phase(t, c);
                self.hint_fragment_change(t, before);
                if self.cores[c].current == Some(t as u32) {
                    self.set_rate(c);
                }
            }
            (PhaseEnd::Sleep { ns }, false) => {
                let ns = *ns;
                // The next phase starts off-core: dispatch prices it (cache, footprint).
                self.block(c);
                let next = self.phase_of(t);
                self.threads[t].remaining = next.instructions;
                let before = self.obs[t].data_fragment;
                self.obs[t].data_fragment = next.data_fragment.map(|d| d as u64);
                self.hint_fragment_change(t, before);
                self.push(self.now + ns, Event::Wake { thread: t as u32 });
            }
        }
    }

    /// A thread of instance `a` frees `bytes` of the process's memory, oldest pages first. The
    /// owner-list rule of AMPS section 2.4.2: each freed page leaves the resident set of the thread
    /// that brought it in (the owner, same process), not of the thread that frees it; an owner that
    /// has exited is dropped from the list with no accounting.
    fn free_memory(&mut self, a: usize, mut bytes: f64) {
        while bytes > 0.0 {
            let Some(run) = self.apps[a].pages.front_mut() else {
                break;
            };
            let take = run.bytes.min(bytes);
            let (owner, node) = (run.owner as usize, run.node);
            run.bytes -= take;
            if run.bytes <= 0.0 {
                self.apps[a].pages.pop_front();
            }
            bytes -= take;
            let app = &mut self.apps[a];
            app.bytes_per_node[node] = (app.bytes_per_node[node] - take).max(0.0);
            app.total_bytes = (app.total_bytes - take).max(0.0);
            if self.obs[owner].state != ThreadState::Exited {
                let th = &mut self.threads[owner];
                th.bytes_per_node[node] = (th.bytes_per_node[node] - take).max(0.0);
                th.total_bytes = (th.total_bytes - take).max(0.0);
                self.obs[owner].resident_bytes[node] = th.bytes_per_node[node] as u64;
            }
        }
    }

    /// Load the thread's new current phase while it runs on `c`.
    fn load_phase(&mut self, t: usize, c: usize) {
        let phase = self.phase_of(t);
        self.threads[t].remaining = phase.instructions;
        self.obs[t].data_fragment = phase.data_fragment.map(|d| d as u64);
        self.refresh_phase_cache(c, t);
        // Footprint change on the LLC.
        if let Some(l) = self.cores[c].llc {
            let ws = self.phase_info(t).ws_bytes.min(self.llcs[l].capacity);
            self.llcs[l].sum_ws += ws - self.cores[c].cur_ws;
            self.cores[c].cur_ws = ws;
        }
        // A new data fragment may be cold.
        if phase.data_fragment.is_some() {
            let pen = self.df_refill(t, c);
            self.threads[t].penalty_ns += pen;
        }
    }

    fn arrive_barrier(&mut self, t: usize, c: usize) {
        let a = self.threads[t].app;
        self.apps[a].arrived += 1;
        if self.apps[a].arrived >= self.apps[a].live {
            self.release_barrier(a);
            if self.threads[t].exit_after_barrier {
                self.exit_thread(t, c);
            } else {
                self.set_rate(c);
            }
        } else {
            self.apps[a].waiting.push(t as u32);
            self.block(c);
        }
    }

    fn release_barrier(&mut self, a: usize) {
        self.apps[a].arrived = 0;
        let waiting = std::mem::take(&mut self.apps[a].waiting);
        for w in waiting {
            let w = w as usize;
            if self.threads[w].exit_after_barrier {
                self.finish_exit(w);
            } else {
                self.wake(w);
            }
        }
    }

    /// The running thread on `c` blocks (sleep or barrier).
    fn block(&mut self, c: usize) {
        let t = self.undispatch(c);
        self.obs[t].state = ThreadState::Blocked;
        self.threads[t].lag = self.threads[t].vruntime - self.cores[c].min_vruntime;
        self.need_pick.push(c as u32);
    }

    fn wake(&mut self, t: usize) {
        let core = baseline::place_wake(self, t);
        self.enqueue(t, core);
    }

    fn exit_thread(&mut self, t: usize, c: usize) {
        self.undispatch(c);
        self.need_pick.push(c as u32);
        self.finish_exit(t);
    }

    /// Bookkeeping of a thread that is off every core and queue.
    fn finish_exit(&mut self, t: usize) {
        self.obs[t].state = ThreadState::Exited;
        self.threads[t].end_ns = Some(self.now);
        self.call_policy(|p, view| p.on_thread_exit(view, ThreadId(t as u32)));
        let a = self.threads[t].app;
        self.apps[a].live -= 1;
        if self.apps[a].live > 0
            && self.apps[a].arrived > 0
            && self.apps[a].arrived >= self.apps[a].live
        {
            // Everyone left is waiting: the exit completes the barrier.
            self.release_barrier(a);
        }
        if self.apps[a].live == 0 && !self.apps[a].done {
            self.complete_instance(a);
        }
    }

    fn complete_instance(&mut self, a: usize) {
        self.apps[a].done = true;
        let inst = &self.apps[a];
        let spec = &self.workload.apps[inst.spec];
        let (spec_idx, copy, run) = (inst.spec, inst.copy, inst.run);
        self.completions[spec_idx].push((self.now - inst.start_ns) as f64 / NS_PER_S as f64);
        self.last_completion_ns = self.now;
        let again = spec.restart && spec.runs.is_none_or(|r| run + 1 < r);
        if again {
            self.start_instance(spec_idx, copy, run + 1);
        } else {
            self.copies_done[spec_idx] += 1;
        }
    }

    // ---- cores -----------------------------------------------------------------------------

    /// Put a runnable thread on a core's queue.
    pub(crate) fn enqueue(&mut self, t: usize, c: usize) {
        let core = CoreId(c as u32);
        if let Some(last) = self.threads[t].last_core {
            if last != core {
                self.migrations += 1;
                self.obs[t].counters.migrations += 1;
                if self.cores[last.index()].class != self.cores[c].class {
                    self.class_moves[self.threads[t].cur as usize] += 1;
                }
            }
        }
        self.threads[t].last_core = Some(core);
        // CFS: a thread joins at the queue's min_vruntime plus its lag, with at most one quantum
        // of credit for having slept.
        let lag = self.threads[t].lag.max(-(self.cfg.quantum_ns as i64));
        self.threads[t].vruntime = self.cores[c].min_vruntime + lag;
        self.obs[t].state = ThreadState::Runnable;
        self.obs[t].cpu = Some(core);
        let vr = self.threads[t].vruntime;
        self.cores[c].queue.push(vr, t as u32);
        self.queued.insert(core);
        self.core_obs[c].runnable += 1;
        if self.cores[c].current.is_none() {
            self.need_pick.push(c as u32);
        }
        if self.core_obs[c].runnable > 1 {
            self.queued_behind = true;
        }
    }

    /// Take a queued (not running) thread off its core's queue.
    pub(crate) fn dequeue_waiting(&mut self, t: usize, c: usize) {
        if self.cores[c].queue.remove(t as u32).is_some() {
            if self.cores[c].queue.is_empty() {
                self.queued.remove(CoreId(c as u32));
            }
            self.core_obs[c].runnable -= 1;
            self.threads[t].lag = self.threads[t].vruntime - self.cores[c].min_vruntime;
        }
    }

    /// Start running `t` (already counted in the core's runnable) on idle core `c`.
    fn dispatch(&mut self, c: usize, t: usize) {
        debug_assert!(self.cores[c].current.is_none());
        self.cores[c].current = Some(t as u32);
        self.cores[c].last_bill = self.now;
        self.cores[c].dispatched_at = self.now;
        self.core_obs[c].current = Some(ThreadId(t as u32));
        self.idle.remove(CoreId(c as u32));
        self.obs[t].state = ThreadState::Running;
        self.obs[t].cpu = Some(CoreId(c as u32));
        let mut penalty = 0.0;
        if self.cores[c].last_thread != Some(t as u32) {
            penalty += CONTEXT_SWITCH_NS;
        }
        self.cores[c].last_thread = Some(t as u32);
        let phase = self.phase_of(t);
        self.refresh_phase_cache(c, t);
        if let Some(l) = self.cores[c].llc {
            let cap = self.llcs[l].capacity;
            let ws = self.phase_info(t).ws_bytes.min(cap);
            let surviving = if self.threads[t].warm_llc == Some(l as u32) {
                ws.min((cap - (self.llcs[l].fill - self.threads[t].warm_fill)).max(0.0))
            } else {
                0.0
            };
            let missing = ws - surviving;
            let lat = self.cores[c].cur_lat;
            penalty += perf::cold_refill_ns(missing, self.llcs[l].line, lat);
            self.note_fill(t, l, missing, false);
            self.llcs[l].sum_ws += ws;
            self.cores[c].cur_ws = ws;
        }
        if let Some(l2) = self.cores[c].l2 {
            let ws = self
                .phase_info(t)
                .ws_bytes
                .min(self.shared_l2s[l2].capacity);
            self.shared_l2s[l2].sum_ws += ws;
            self.cores[c].cur_l2_ws = ws;
        }
        if phase.data_fragment.is_some() {
            penalty += self.df_refill(t, c);
        }
        self.threads[t].penalty_ns += penalty;
        self.set_rate(c);
    }

    /// Per-phase values the hot path reads from the core rather than recomputing.
    fn refresh_phase_cache(&mut self, c: usize, t: usize) {
        let info = *self.phase_info(t);
        let lat = self.mem_latency(t, c);
        let l2_alone = self.cores[c]
            .l2
            .map_or(0.0, |l2| info.phase.miss.mpki(self.shared_l2s[l2].capacity));
        let core = &mut self.cores[c];
        core.cur_l2_alone = l2_alone;
        core.cur_lat = lat;
        core.cur_share = f64::NAN;
        core.cur_ideal = info.ideal_ns_per_instr;
        core.cur_refs_pki = info.refs_pki;
        core.cur_df = info.phase.data_fragment;
    }

    /// Record `bytes` brought into LLC `l` on behalf of thread `t`: demand misses while it runs
    /// (`demand`), or a refill after a move or a long absence.
    fn note_fill(&mut self, t: usize, l: usize, bytes: f64, demand: bool) {
        if bytes <= 0.0 {
            return;
        }
        self.llcs[l].fill += bytes;
        let line = self.llcs[l].line;
        let lines = bytes / line;
        self.obs[t].counters.llc_misses += lines;
        self.llc_misses += lines;
        self.serve_from_memory(t, lines, line, demand);
    }

    /// `lines` LLC misses of thread `t` go to memory: each node serves its share, in proportion to
    /// where the thread's pages (or, with none, its process's) live; before any page is placed, the
    /// node of the core it runs on. The shares are the pages' access heat. Demand misses are also
    /// the traffic a node queues ([`perf::queueing_delay_ns`]): they come at the rate the latency
    /// allows. A refill is booked at once although it takes `cold_refill_ns` to happen, so
    /// counting it as one tick's traffic would be a burst no memory sees; its cost is priced by
    /// the refill time alone.
    fn serve_from_memory(&mut self, t: usize, lines: f64, line: f64, demand: bool) {
        let nodes = self.bandwidth.len();
        let queued = demand && self.bandwidth_model;
        if nodes == 1 {
            if queued {
                self.node_traffic[0] += lines * line;
            }
            return;
        }
        let th = &self.threads[t];
        let spread = if !self.memory_placed {
            None
        } else if th.total_bytes > 0.0 {
            Some((&th.bytes_per_node, th.total_bytes))
        } else {
            let app = &self.apps[th.app];
            (app.total_bytes > 0.0).then_some((&app.bytes_per_node, app.total_bytes))
        };
        match spread {
            Some((per_node, total)) => {
                let obs = &mut self.obs[t];
                for (n, &b) in per_node.iter().enumerate() {
                    let share = lines * b / total;
                    obs.node_accesses[n] += share;
                    if queued {
                        self.node_traffic[n] += share * line;
                    }
                }
            }
            None => {
                let node = self.obs[t].cpu.map_or(0, |c| self.cores[c.index()].node);
                self.obs[t].node_accesses[node] += lines;
                if queued {
                    self.node_traffic[node] += lines * line;
                }
            }
        }
    }

    /// Refill cost of the thread's current data fragment on core `c`'s LLC, and the coherence
    /// bookkeeping (a writer invalidates other copies).
    fn df_refill(&mut self, t: usize, c: usize) -> f64 {
        let phase = self.phase_of(t);
        let (Some(d), Some(l)) = (phase.data_fragment, self.cores[c].llc) else {
            return 0.0;
        };
        let a = self.threads[t].app;
        let cap = self.llcs[l].capacity;
        let fill = self.llcs[l].fill;
        let df = &mut self.apps[a].dfs[d];
        let bytes = df.bytes.min(cap);
        let surviving = match df.copies.iter().find(|(ll, _)| *ll == l) {
            Some(&(_, at)) => bytes.min((cap - (fill - at)).max(0.0)),
            None => 0.0,
        };
        let missing = bytes - surviving;
        df.copies.retain(|(ll, _)| *ll != l);
        if phase.df_writes {
            df.copies.clear();
        }
        df.copies.push((l, fill + missing));
        let lat = self.cores[c].cur_lat;
        self.note_fill(t, l, missing, false);
        perf::cold_refill_ns(missing, self.llcs[l].line, lat)
    }

    /// Stop the running thread on `c`, billing it first. Returns it.
    fn undispatch(&mut self, c: usize) -> usize {
        self.bill(c);
        self.close_segment(c);
        let t = self.cores[c].current.take().unwrap_or(0) as usize;
        self.core_obs[c].current = None;
        self.core_obs[c].runnable -= 1;
        self.idle.insert(CoreId(c as u32));
        self.cores[c].gen += 1;
        if let Some(l) = self.cores[c].llc {
            self.llcs[l].sum_ws -= self.cores[c].cur_ws;
            self.threads[t].warm_llc = Some(l as u32);
            self.threads[t].warm_fill = self.llcs[l].fill;
            // Data-fragment copy stays warm from now.
            if let Some(d) = self.cores[c].cur_df {
                let a = self.threads[t].app;
                let fill = self.llcs[l].fill;
                if let Some(copy) = self.apps[a].dfs[d]
                    .copies
                    .iter_mut()
                    .find(|(ll, _)| *ll == l)
                {
                    copy.1 = fill;
                }
            }
        }
        self.cores[c].cur_ws = 0.0;
        if let Some(l2) = self.cores[c].l2 {
            self.shared_l2s[l2].sum_ws -= self.cores[c].cur_l2_ws;
            self.cores[c].cur_l2_ws = 0.0;
        }
        t
    }

    /// End the running thread's stretch on `c`: its CPU time goes to its spec's class account,
    /// and to the Gantt chart when one is recorded.
    fn close_segment(&mut self, c: usize) {
        let Some(t) = self.cores[c].current else {
            return;
        };
        let start = self.cores[c].dispatched_at;
        let phase = self.threads[t as usize].cur as usize;
        let classes = self.topo.classes().len();
        self.class_ns[phase * classes + self.cores[c].class] +=
            self.now.saturating_sub(start) as f64;
        if !self.cfg.record_gantt {
            return;
        }
        if self.now <= start {
            return;
        }
        if let Some(last) = self.gantt.last_mut() {
            if last.core == c as u32 && last.thread == t && last.end_ns == start {
                last.end_ns = self.now;
                return;
            }
        }
        if self.gantt.len() >= GANTT_MAX_SEGMENTS {
            self.gantt_dropped += 1;
            return;
        }
        let app = self.threads[t as usize].app;
        self.gantt.push(GanttSegment {
            core: c as u32,
            thread: t,
            app: self.workload.apps[self.apps[app].spec].name.clone(),
            start_ns: start,
            end_ns: self.now,
        });
    }

    /// Average memory latency for thread `t` running on core `c`.
    fn mem_latency(&self, t: usize, c: usize) -> f64 {
        let node = self.cores[c].node;
        let row = &self.latency[node];
        if row.len() == 1 || !self.memory_placed {
            return row[node.min(row.len() - 1)];
        }
        let th = &self.threads[t];
        if th.total_bytes > 0.0 {
            return perf::weighted_latency(&th.bytes_per_node, row, node);
        }
        // A thread that allocated nothing reads its app's memory.
        let app = &self.apps[th.app];
        if app.total_bytes > 0.0 {
            return perf::weighted_latency(&app.bytes_per_node, row, node);
        }
        row[node]
    }

    /// Bill the running thread of `c` up to now.
    fn bill(&mut self, c: usize) {
        let Some(t) = self.cores[c].current else {
            return;
        };
        let t = t as usize;
        let dt = (self.now - self.cores[c].last_bill) as f64;
        if dt <= 0.0 {
            return;
        }
        self.cores[c].last_bill = self.now;
        let core = &self.cores[c];
        let (eff_ghz, ns_per_instr, mpki, cpi_factor) = (
            core.eff_ghz,
            core.ns_per_instr,
            core.cur_mpki,
            core.cpi_factor,
        );
        let (ideal, refs_pki) = (core.cur_ideal, core.cur_refs_pki);
        let phase = self.phase_of(t);
        let th = &mut self.threads[t];
        let pen = dt.min(th.penalty_ns);
        th.penalty_ns -= pen;
        let instr = ((dt - pen) / ns_per_instr).min(th.remaining);
        th.remaining -= instr;
        th.vruntime += dt as i64;
        th.ideal_ns += instr * ideal;
        let cnt = &mut self.obs[t].counters;
        cnt.cycles += dt * eff_ghz;
        cnt.instructions += instr;
        cnt.cpu_time_ns += dt;
        cnt.fp_busy_cycles += instr * phase.cpi * cpi_factor * phase.fp_fraction;
        cnt.llc_refs += instr * refs_pki / 1000.0;
        let misses = instr * mpki / 1000.0;
        // Ding et al. equation 5: the lines the thread's L2 evictions write into the LLC are its
        // LLC references; in steady state each demand miss evicts one of its own lines (its share
        // of the LLC is full). Refills after a move grow the share and evict nobody's of its own.
        let traffic = &mut self.obs[t].llc_traffic;
        traffic.fills += instr * refs_pki / 1000.0;
        traffic.evictions += misses;
        if self.cores[c].l2.is_some() {
            self.l2_misses[self.threads[t].cur as usize] +=
                instr * self.cores[c].cur_l2_mpki / 1000.0;
        }
        if let Some(l) = self.cores[c].llc {
            let bytes = misses * self.llcs[l].line;
            self.note_fill(t, l, bytes, true);
        } else {
            self.obs[t].counters.llc_misses += misses;
            self.llc_misses += misses;
            self.serve_from_memory(t, misses, 64.0, true);
        }
        if phase.alloc_bytes > 0 {
            let b = instr / phase.instructions * phase.alloc_bytes as f64;
            let node = self.cores[c].node;
            self.threads[t].bytes_per_node[node] += b;
            self.threads[t].total_bytes += b;
            let a = self.threads[t].app;
            self.apps[a].bytes_per_node[node] += b;
            self.apps[a].total_bytes += b;
            let owner = t as u32;
            match self.apps[a].pages.back_mut() {
                Some(run) if run.owner == owner && run.node == node => run.bytes += b,
                _ => self.apps[a].pages.push_back(PageRun {
                    owner,
                    node,
                    bytes: b,
                }),
            }
            self.memory_placed = true;
            self.cores[c].cur_lat = self.mem_latency(t, c);
            self.obs[t].resident_bytes[node] = self.threads[t].bytes_per_node[node] as u64;
        }
        // min_vruntime: the smallest of the running and queued threads, never decreasing.
        let m = self.threads[t]
            .vruntime
            .min(self.cores[c].queue.min_vruntime());
        if m > self.cores[c].min_vruntime {
            self.cores[c].min_vruntime = m;
        }
    }

    /// Recompute the running thread's rate on `c` and schedule its phase end if it falls before the
    /// next tick.
    fn set_rate(&mut self, c: usize) {
        let Some(t) = self.cores[c].current else {
            return;
        };
        let t = t as usize;
        let phase = self.phase_of(t);
        let core = &self.cores[c];
        let share = match core.llc {
            Some(l) => {
                let st = &self.llcs[l];
                perf::llc_share(core.cur_ws, st.sum_ws, st.capacity)
            }
            None => 0.0,
        };
        // The miss curve is evaluated only when the share changed.
        let mpki = if share == core.cur_share {
            core.cur_mpki
        } else {
            phase.miss.mpki(share)
        };
        let mut fpu_slow = 1.0;
        if phase.fp_fraction > 0.0 {
            let mates_fp: f64 = core
                .fpu_mates
                .iter()
                .filter_map(|m| self.cores[m.index()].current)
                .map(|o| self.phase_of(o as usize).fp_fraction)
                .sum();
            fpu_slow = perf::fpu_slowdown(phase.fp_fraction, mates_fp.min(1.0));
        }
        let mut ns = perf::ns_per_instruction(
            phase.cpi,
            core.cpi_factor,
            core.eff_ghz,
            fpu_slow,
            mpki,
            core.cur_lat / phase.mlp,
        );
        let mut l2_mpki = 0.0;
        if let Some(l2) = core.l2 {
            let st = &self.shared_l2s[l2];
            l2_mpki = phase
                .miss
                .mpki(perf::llc_share(core.cur_l2_ws, st.sum_ws, st.capacity));
            ns += perf::shared_cache_penalty_ns(l2_mpki, core.cur_l2_alone, st.next_latency_ns);
        }
        let core = &mut self.cores[c];
        core.cur_l2_mpki = l2_mpki;
        core.ns_per_instr = ns;
        core.cur_mpki = mpki;
        core.cur_share = share;
        core.cur_fpu_slow = fpu_slow;
        core.gen += 1;
        let th = &self.threads[t];
        // Integer time plus at least 1 ns: f64 sums at 1e10 ns cannot resolve sub-ns rests.
        let end = self.now + ceil_ns(th.penalty_ns + th.remaining * ns).max(1);
        if end <= self.next_tick {
            let gen = core.gen;
            self.push(
                end,
                Event::PhaseEnd {
                    core: c as u32,
                    gen,
                },
            );
        }
    }

    /// Give every core that needs it a thread, calling the balancer and the policy for idle ones.
    fn settle(&mut self) {
        let mut notified = CpuSet::new();
        loop {
            self.settle_cores(&mut notified);
            // Idle sweep: a thread queued behind another while some core idles (the kernel's
            // idle-balance kick). Each idle core with nothing pending tries to pull once.
            if !self.queued_behind || self.idle.is_empty() {
                break;
            }
            self.queued_behind = false;
            // Only idle cores some waiting thread may run on can pull anything: with threads
            // pinned to a few cores of a large machine, trying every idle core was quadratic.
            let mut wanted = CpuSet::new();
            for b in self.queued.iter() {
                for t in self.cores[b.index()].queue.threads() {
                    wanted.union_with(&self.obs[t as usize].allowed);
                }
            }
            let idle: Vec<CoreId> = self
                .idle
                .iter_intersection(&wanted)
                .filter(|c| self.core_obs[c.index()].runnable == 0)
                .collect();
            for c in idle {
                baseline::newidle_pull(self, c.index());
            }
            if self.need_pick.is_empty() {
                break;
            }
        }
        self.queued_behind = false;
    }

    fn settle_cores(&mut self, notified: &mut CpuSet) {
        while let Some(c) = self.need_pick.pop() {
            let c = c as usize;
            if self.cores[c].current.is_some() {
                continue;
            }
            if self.cores[c].queue.is_empty() {
                baseline::newidle_pull(self, c);
            }
            if self.cores[c].queue.is_empty() && !notified.contains(CoreId(c as u32)) {
                notified.insert(CoreId(c as u32));
                self.with_policy(|p, view, out| p.on_core_idle(view, CoreId(c as u32), out));
            }
            if self.cores[c].current.is_none() {
                if let Some(t) = self.pick_next(c) {
                    self.dispatch(c, t);
                }
            }
        }
    }

    /// Call the policy with a view of now, adding the time it takes to the policy's CPU time.
    fn call_policy<R>(&mut self, call: impl FnOnce(&mut dyn Policy, &View<'_>) -> R) -> R {
        let t0 = Instant::now();
        let view = View {
            now_ns: self.now,
            topology: self.topo,
            threads: &self.obs,
            cores: &self.core_obs,
        };
        let r = call(self.policy.as_mut(), &view);
        self.policy_time += t0.elapsed();
        r
    }

    /// Call the policy, then apply the placements it answers.
    fn with_policy(&mut self, call: impl FnOnce(&mut dyn Policy, &View<'_>, &mut Vec<Placement>)) {
        let mut out = std::mem::take(&mut self.placements);
        out.clear();
        self.call_policy(|p, view| call(p, view, &mut out));
        for p in out.drain(..) {
            self.apply_placement(p);
        }
        self.placements = out;
        let mut moves = std::mem::take(&mut self.page_moves);
        self.policy.take_page_moves(&mut moves);
        for m in moves.drain(..) {
            self.move_pages(&m);
        }
        self.page_moves = moves;
    }

    /// Move up to `m.max_bytes` of the application's pages that are not on `m.to` there (Ding et
    /// al. section 3.3.2, sticky pages): from the node whose pages are accessed most first, and
    /// within a node the most recently allocated first (a phase works on what it allocated last).
    /// Each owner waits while its pages are copied ([`perf::PAGE_MIGRATION_BYTES_PER_S`]).
    fn move_pages(&mut self, m: &PageMove) {
        let a = m.app.index();
        let to = m.to.index();
        if a >= self.apps.len() || self.apps[a].done || to >= self.latency.len() {
            return;
        }
        // Access heat per node of the application's pages.
        let nodes = self.latency.len();
        let mut heat = vec![0.0; nodes];
        for (th, obs) in self.threads.iter().zip(&self.obs) {
            if th.app == a {
                for (h, x) in heat.iter_mut().zip(&obs.node_accesses) {
                    *h += x;
                }
            }
        }
        let mut sources: Vec<usize> = (0..nodes)
            .filter(|&n| n != to && self.apps[a].bytes_per_node[n] > 0.0)
            .collect();
        sources.sort_by(|&x, &y| heat[y].total_cmp(&heat[x]).then(x.cmp(&y)));
        if sources.is_empty() || m.max_bytes == 0 {
            return;
        }
        // Bill the application's running threads before their memory changes under them.
        let running: Vec<usize> = (0..self.cores.len())
            .filter(|&c| {
                self.cores[c]
                    .current
                    .is_some_and(|t| self.threads[t as usize].app == a)
            })
            .collect();
        for &c in &running {
            self.bill(c);
        }
        let mut budget = m.max_bytes as f64;
        let mut moved_by_owner: Vec<(usize, f64)> = Vec::new();
        for src in sources {
            let mut i = self.apps[a].pages.len();
            while i > 0 && budget > 0.0 {
                i -= 1;
                let pages = &mut self.apps[a].pages;
                if pages[i].node != src {
                    continue;
                }
                let take = pages[i].bytes.min(budget);
                budget -= take;
                let owner = pages[i].owner as usize;
                if take >= pages[i].bytes {
                    pages[i].node = to;
                } else {
                    pages[i].bytes -= take;
                    pages.insert(
                        i + 1,
                        PageRun {
                            owner: owner as u32,
                            node: to,
                            bytes: take,
                        },
                    );
                }
                let app = &mut self.apps[a];
                app.bytes_per_node[src] -= take;
                app.bytes_per_node[to] += take;
                if self.obs[owner].state != ThreadState::Exited {
                    let th = &mut self.threads[owner];
                    th.bytes_per_node[src] = (th.bytes_per_node[src] - take).max(0.0);
                    th.bytes_per_node[to] += take;
                    self.obs[owner].resident_bytes[src] = th.bytes_per_node[src] as u64;
                    self.obs[owner].resident_bytes[to] = th.bytes_per_node[to] as u64;
                    moved_by_owner.push((owner, take));
                }
            }
        }
        for (owner, bytes) in moved_by_owner {
            self.threads[owner].penalty_ns +=
                bytes / perf::PAGE_MIGRATION_BYTES_PER_S * NS_PER_S as f64;
        }
        self.pages_moved_bytes += m.max_bytes as f64 - budget;
        for c in running {
            if let Some(t) = self.cores[c].current {
                self.cores[c].cur_lat = self.mem_latency(t as usize, c);
                self.set_rate(c);
            }
        }
    }

    /// Remove the queued thread with the least virtual runtime (ties: lowest id). When the policy
    /// asks for batching by data fragment (Pinter's priority groups), a queued thread of the same
    /// application and fragment as the core's last thread goes first, as long as its virtual
    /// runtime is within one quantum of the queue's least: a group runs in succession, and no
    /// thread falls more than a quantum behind its fair share.
    fn pick_next(&mut self, c: usize) -> Option<usize> {
        if self.batch_by_df {
            if let Some(last) = self.cores[c].last_thread {
                let last = last as usize;
                if let Some(df) = self.obs[last].data_fragment {
                    let app = self.threads[last].app;
                    let limit = self.cores[c]
                        .queue
                        .min_vruntime()
                        .saturating_add(self.cfg.quantum_ns as i64);
                    let mate = self.cores[c]
                        .queue
                        .entries()
                        .filter(|&(vr, t)| {
                            vr <= limit
                                && self.threads[t as usize].app == app
                                && self.obs[t as usize].data_fragment == Some(df)
                        })
                        .min();
                    if let Some((_, t)) = mate {
                        self.cores[c].queue.remove(t);
                        if self.cores[c].queue.is_empty() {
                            self.queued.remove(CoreId(c as u32));
                        }
                        return Some(t as usize);
                    }
                }
            }
        }
        let t = self.cores[c].queue.pop_first();
        if self.cores[c].queue.is_empty() {
            self.queued.remove(CoreId(c as u32));
        }
        t.map(|t| t as usize)
    }

    /// A thread moved to another data fragment: the application's hint (Pinter section 4.1: the
    /// current and next DF, "whenever it changes DFs"), answered by the policy at once.
    fn hint_fragment_change(&mut self, t: usize, before: Option<u64>) {
        let now = self.obs[t].data_fragment;
        if now == before {
            return;
        }
        let hint = Hint::DataFragment {
            current: before,
            next: now,
        };
        self.with_policy(|p, view, out| p.on_hint(view, ThreadId(t as u32), &hint, out));
    }

    /// Apply a policy placement: restrict the thread, moving it if it is outside its new set.
    pub(crate) fn apply_placement(&mut self, p: Placement) {
        let t = p.thread.index();
        if t >= self.obs.len() || self.obs[t].state == ThreadState::Exited {
            return;
        }
        let allowed = p.cpus.intersection(&self.obs[t].user_allowed);
        if allowed.is_empty() {
            self.rejected_placements += 1;
            return;
        }
        if allowed == self.obs[t].allowed {
            return;
        }
        self.obs[t].allowed = allowed;
        let Some(cpu) = self.obs[t].cpu else { return };
        let c = cpu.index();
        if self.obs[t].allowed.contains(cpu) {
            // A waiting thread whose new set offers an idle core goes there now, as the kernel's
            // idle balance would: no core idles while a thread waits that may run on it.
            if self.obs[t].state == ThreadState::Runnable {
                let dest = baseline::place_wake(self, t);
                if dest != c {
                    self.dequeue_waiting(t, c);
                    self.enqueue(t, dest);
                }
            }
            return;
        }
        match self.obs[t].state {
            ThreadState::Running => {
                self.undispatch(c);
                self.threads[t].lag = self.threads[t].vruntime - self.cores[c].min_vruntime;
                self.need_pick.push(c as u32);
                let dest = baseline::place_wake(self, t);
                self.enqueue(t, dest);
            }
            ThreadState::Runnable => {
                self.dequeue_waiting(t, c);
                let dest = baseline::place_wake(self, t);
                self.enqueue(t, dest);
            }
            _ => {}
        }
    }

    // ---- ticks -----------------------------------------------------------------------------

    fn tick(&mut self) {
        self.tick_no += 1;
        let n = self.cores.len();
        if self.bandwidth_model {
            self.update_queueing();
        }
        for c in 0..n {
            // A few cores ahead, fetch the thread state this loop will touch there: the running
            // thread (billed) and the first queued one (dispatched if it preempts). With 16k
            // threads, cache misses are what the engine's speed is made of.
            if let Some(ahead) = self.cores.get(c + PREFETCH_AHEAD) {
                if let Some(t) = ahead.current {
                    prefetch(&self.threads[t as usize]);
                    prefetch(&self.obs[t as usize].counters);
                }
                if let Some((_, t)) = ahead.queue.first() {
                    prefetch(&self.threads[t as usize]);
                    prefetch(&self.obs[t as usize].counters);
                }
            }
            let Some(cur) = self.cores[c].current else {
                continue;
            };
            let cur = cur as usize;
            self.bill(c);
            self.events += 1;
            if !self.cores[c].queue.is_empty()
                && self.now - self.cores[c].dispatched_at >= MIN_GRANULARITY_NS
                && self.cores[c].queue.min_vruntime() < self.threads[cur].vruntime
            {
                // Preempt: back to the same queue, keeping its vruntime.
                self.undispatch(c);
                self.obs[cur].state = ThreadState::Runnable;
                let vr = self.threads[cur].vruntime;
                self.cores[c].queue.push(vr, cur as u32);
                self.queued.insert(CoreId(c as u32));
                self.core_obs[c].runnable += 1;
                self.queued_behind = true;
                if let Some(t) = self.pick_next(c) {
                    self.dispatch(c, t);
                }
                continue;
            }
            if self.bandwidth_model {
                self.cores[c].cur_lat = self.mem_latency(cur, c);
            }
            self.set_rate(c);
        }
        if self.tick_no.is_multiple_of(BALANCE_TICKS) {
            baseline::periodic_balance(self);
        }
        if self.now >= self.next_policy_ns {
            let period = self.policy.rebalance_period_ns().max(self.cfg.quantum_ns);
            self.next_policy_ns = self.now.saturating_add(period);
            self.with_policy(|p, view, out| p.rebalance(view, out));
        }
    }

    /// Bill every running thread up to now, then set each node's queueing delay for the next tick
    /// from the traffic its memory served in the last one ([`perf::queueing_delay_ns`]).
    fn update_queueing(&mut self) {
        for c in 0..self.cores.len() {
            self.bill(c);
        }
        let interval = self.cfg.quantum_ns as f64;
        for n in 0..self.bandwidth.len() {
            let Some(b) = self.bandwidth[n] else {
                continue;
            };
            let delay = perf::queueing_delay_ns(
                self.node_traffic[n],
                interval,
                b,
                self.base_latency[n][n],
                self.queue_delay_ns[n],
            );
            self.queue_delay_ns[n] = delay;
            self.node_traffic[n] = 0.0;
            for (row, base) in self.latency.iter_mut().zip(&self.base_latency) {
                row[n] = base[n] + delay;
            }
        }
    }

    // ---- invariants and results ------------------------------------------------------------

    /// Panics when an invariant is broken: a thread on two cores, a runnable count that disagrees
    /// with the queues, or an idle core while a thread waits that may run on it.
    pub(crate) fn check_invariants(&self) {
        let mut seen = vec![0u32; self.threads.len()];
        for (c, core) in self.cores.iter().enumerate() {
            let n = core.queue.len() as u32 + core.current.is_some() as u32;
            assert_eq!(n, self.core_obs[c].runnable, "core {c} runnable count");
            assert_eq!(
                self.queued.contains(CoreId(c as u32)),
                !core.queue.is_empty(),
                "core {c} in the set of cores with waiting threads"
            );
            if let Some(t) = core.current {
                seen[t as usize] += 1;
                assert_eq!(self.obs[t as usize].state, ThreadState::Running);
                assert_eq!(self.obs[t as usize].cpu, Some(CoreId(c as u32)));
            }
            for t in core.queue.threads() {
                seen[t as usize] += 1;
                assert_eq!(
                    self.obs[t as usize].state,
                    ThreadState::Runnable,
                    "thread {t} queued on {c}"
                );
            }
        }
        for (t, &s) in seen.iter().enumerate() {
            assert!(s <= 1, "thread {t} is on {s} cores/queues");
            let st = self.obs[t].state;
            if matches!(st, ThreadState::Running | ThreadState::Runnable) {
                assert_eq!(s, 1, "thread {t} is {st:?} but on no core");
            }
        }
        for c in self.idle.iter() {
            for core in &self.cores {
                for t in core.queue.threads() {
                    assert!(
                        !self.obs[t as usize].allowed.contains(c),
                        "core {c} idle while thread {t} waits and may run there (t={}; idle core runnable {}, queue {:?}; waiting thread's core {:?})",
                        self.now,
                        self.core_obs[c.index()].runnable,
                        self.cores[c.index()].queue,
                        self.obs[t as usize].cpu
                    );
                }
            }
        }
    }

    fn result(&self, finished: bool, wall_s: f64) -> RunResult {
        let classes = self.topo.classes().len();
        // The phases of spec `si` are `phase_base[si][0]..` up to the next spec's first phase.
        let spec_phases = |si: usize| {
            let start = self.phase_base[si].first().copied().unwrap_or(0) as usize;
            let end = self
                .phase_base
                .get(si + 1)
                .and_then(|b| b.first().copied())
                .map_or(self.phases.len(), |e| e as usize);
            start..end
        };
        // FPU busy and total cycles per spec, from the threads' counters (BulldOver equation 1).
        let mut fp_cycles = vec![(0.0, 0.0); self.workload.apps.len()];
        // (instructions, LLC misses, evictions, fills) per spec.
        let mut llc = vec![[0.0; 4]; self.workload.apps.len()];
        for (th, obs) in self.threads.iter().zip(&self.obs) {
            let spec = self.apps[th.app].spec;
            let (busy, all) = (obs.counters.fp_busy_cycles, obs.counters.cycles);
            fp_cycles[spec].0 += busy;
            fp_cycles[spec].1 += all;
            let c = obs.counters;
            let sums = &mut llc[spec];
            sums[0] += c.instructions;
            sums[1] += c.llc_misses;
            sums[2] += obs.llc_traffic.evictions;
            sums[3] += obs.llc_traffic.fills;
        }
        let apps = self
            .workload
            .apps
            .iter()
            .zip(&self.completions)
            .enumerate()
            .map(|(si, (spec, times))| AppResult {
                fpu_usage: (fp_cycles[si].1 > 0.0).then(|| fp_cycles[si].0 / fp_cycles[si].1),
                l2_misses: spec_phases(si).map(|p| self.l2_misses[p]).sum(),
                cpu_s_by_class: (0..classes)
                    .map(|k| {
                        spec_phases(si)
                            .map(|p| self.class_ns[p * classes + k])
                            .sum::<f64>()
                            / NS_PER_S as f64
                    })
                    .collect(),
                class_migrations: spec_phases(si).map(|p| self.class_moves[p]).sum(),
                instructions: llc[si][0],
                llc_misses: llc[si][1],
                llc_evictions: llc[si][2],
                llc_fills: llc[si][3],
                name: spec.name.clone(),
                completion_s: if times.is_empty() {
                    None
                } else {
                    Some(times.iter().sum::<f64>() / times.len() as f64)
                },
                completions: times.len() as u64,
                completion_times_s: times.clone(),
            })
            .collect();
        // Fairness: coefficient of variation of per-thread normalised progress (work done, in time
        // it would take alone on the fastest core, over time alive).
        let rates: Vec<f64> = self
            .threads
            .iter()
            .filter_map(|t| {
                let end = t.end_ns.unwrap_or(self.now);
                let alive = end.saturating_sub(t.start_ns) as f64;
                (alive > 0.0).then(|| t.ideal_ns / alive)
            })
            .collect();
        let fairness = coefficient_of_variation(&rates);
        let makespan_ns = if finished {
            self.last_completion_ns
        } else {
            self.now
        };
        RunResult {
            policy: self.policy.name().to_string(),
            seed: self.cfg.seed,
            finished,
            makespan_s: makespan_ns as f64 / NS_PER_S as f64,
            apps,
            migrations: self.migrations,
            fairness,
            llc_misses: self.llc_misses,
            instructions: self.obs.iter().map(|o| o.counters.instructions).sum(),
            policy_cpu_s: self.policy_time.as_secs_f64(),
            rejected_placements: self.rejected_placements,
            threads: self.threads.len() as u64,
            gantt: if self.cfg.record_gantt {
                Some(self.gantt.clone())
            } else {
                None
            },
            gantt_dropped: self.gantt_dropped,
            engine: EngineStats {
                events: self.events,
                wall_s,
                events_per_s: if wall_s > 0.0 {
                    self.events as f64 / wall_s
                } else {
                    0.0
                },
                simulated_s: self.now as f64 / NS_PER_S as f64,
            },
            balance_moves: self.balance.moves,
            pages_moved_bytes: self.pages_moved_bytes,
            notices: Vec::new(),
        }
    }

    pub(crate) fn rng(&mut self) -> &mut SeededRng {
        &mut self.rng
    }
    pub(crate) fn balance_stats(&mut self) -> &mut BalanceStats {
        &mut self.balance
    }
    pub(crate) fn topology(&self) -> &'a Topology {
        self.topo
    }
}

/// Ask the CPU to bring `r`'s first cache line in (a hint: no effect on results).
#[inline(always)]
fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it reads nothing into the program and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            r as *const T as *const i8,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// The least whole number of ns at or above `x` (x >= 0), without a libm call.
#[inline]
fn ceil_ns(x: f64) -> u64 {
    let whole = x as u64;
    whole + ((whole as f64) < x) as u64
}

/// Time per instruction of a phase alone on the fastest core with the whole LLC and local memory.
fn ideal_ns_per_instr(phase: &Phase, best: &BestCore) -> f64 {
    let share = (phase.miss.working_set_bytes() as f64).min(best.llc_bytes);
    perf::ns_per_instruction(
        phase.cpi,
        best.cpi_factor,
        best.eff_ghz,
        1.0,
        phase.miss.mpki(share),
        best.latency_ns / phase.mlp,
    )
}

/// Standard deviation over mean, or 0 for fewer than two values.
pub fn coefficient_of_variation(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    if mean == 0.0 {
        return 0.0;
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
    var.sqrt() / mean
}
