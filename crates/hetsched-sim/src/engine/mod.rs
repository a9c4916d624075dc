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
//!    same-time events always run in one order, whatever the heap's internal layout: a phase ends,
//!    a sleeper wakes, an app arrives. A core's phase-end event is only pushed when it falls before
//!    the next tick; a stale one (the core's generation moved on) is skipped.
//!
//! Work is billed to the core that ran it up to every rate change: every change of what a core
//! runs, or of its rate, bills first, so no stretch of work is priced at a rate it did not run at.
//!
//! Contention lags by at most one tick: a thread's rate is fixed between ticks unless its own core
//! changes, so a co-runner that starts mid-tick on another core slows it from the next tick.
//!
//! The warm-cache model: each LLC keeps a counter of bytes filled into it. A thread's data survive
//! in an LLC of capacity C if fewer than C − footprint other bytes were filled since it last ran
//! there (LRU stack distance), so migration to another LLC, or a long absence, costs a refill
//! (`perf::cold_refill_ns`); shared data fragments are tracked the same way per LLC copy, and a
//! writer invalidates the other copies (write-invalidate, Pinter section 2.1): coherence misses.
//!
//! The modules, one concern each: [`state`] (the records and how they are built), `apps`
//! (arrivals, phases, barriers, exits), `cores` (queues, dispatch, billing, rates), `memory` (LLC
//! warmth, pages, memory latency and bandwidth), `policy_port` (the policy's view and placements),
//! `changes` (the threads whose observation changed since the policy's last balance),
//! `baseline_port` (the baseline balancer's view and moves), `record` (Gantt, invariants, result).
//! Every function takes a thread before a core.

mod apps;
mod baseline_port;
mod changes;
mod cores;
mod jitter;
mod memory;
mod policy_port;
mod record;
pub(crate) mod state;

use crate::baseline::{self, Baseline, BaselineEntry};
use crate::metrics::{GanttSegment, RunResult};
use crate::runqueue::RunQueue;
use crate::workload::{Phase, Workload};
use hetsched_core::prefetch::prefetch;
use hetsched_core::{
    AppId, CoreId, CoreObs, CpuSet, IdVec, LlcId, PageMove, Placement, Policy, ThreadId, ThreadObs,
    ThreadState, Topology,
};
use state::{AppInstance, LlcState, MpkiMemo, NodeBytes, PhaseInfo, SharedL2, SimCore, SimThread};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

pub use crate::metrics::coefficient_of_variation;

/// Run settings.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seeds everything that varies between runs (the baseline's tie-breaks, policies' probes).
    pub seed: u64,
    /// Stop at this simulated time even if work remains, ns.
    pub duration_ns: u64,
    /// Scheduler tick and time slice, ns.
    pub quantum_ns: u64,
    /// Record which thread ran where (for the Gantt chart).
    pub record_gantt: bool,
    /// Check the engine's invariants after every step (slow; for tests).
    pub check_invariants: bool,
    /// The kernel balancer that runs under the policy.
    pub baseline: &'static BaselineEntry,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            duration_ns: 600 * NS_PER_S,
            quantum_ns: 4_000_000,
            record_gantt: false,
            check_invariants: false,
            baseline: baseline::default_baseline(),
        }
    }
}

/// Nanoseconds in a second (the engine's clock is integer ns).
pub const NS_PER_S: u64 = 1_000_000_000;

/// Minimum run time before a tick may preempt a thread: Linux's default
/// `sched_min_granularity_ns` of 0.75 ms.
pub const MIN_GRANULARITY_NS: u64 = 750_000;

/// How many cores ahead the tick's billing loop prefetches thread state.
const PREFETCH_AHEAD: usize = 4;

/// How many cores ahead it prefetches what it finds through that state (the threads' process's
/// memory heat), once the state has arrived.
const PREFETCH_THROUGH: usize = 2;

/// Most Gantt segments kept; later ones are dropped (the report says so).
pub const GANTT_MAX_SEGMENTS: usize = 200_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    PhaseEnd { core: CoreId, gen: u64 },
    Wake { thread: ThreadId },
    Arrival { spec: u32, copy: u32 },
}

/// One simulation of one policy on one machine and workload.
pub struct Simulation<'a> {
    topo: &'a Topology,
    workload: &'a Workload,
    policy: Box<dyn Policy>,
    /// The kernel balancer; out of its slot only while it runs (it then sees the engine through
    /// [`baseline::BalancePort`]).
    baseline: Option<Box<dyn Baseline>>,
    /// Start and wake-up delays drawn from the seed.
    jitter: jitter::Jitter,
    cfg: SimConfig,
    now: u64,
    next_tick: u64,
    tick_no: u64,
    next_policy_ns: u64,
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    threads: IdVec<ThreadId, SimThread>,
    /// Bytes each thread allocated per node, kept when some phase of the workload allocates.
    node_bytes: NodeBytes,
    /// Every phase of the workload, flattened: spec by spec, group by group.
    phases: Vec<PhaseInfo<'a>>,
    /// Per spec, per thread group: the index of its first phase in `phases`.
    phase_base: Vec<Vec<u32>>,
    obs: IdVec<ThreadId, ThreadObs>,
    /// Threads whose observation changed since the policy's last periodic balance, and of those
    /// the ones whose resident pages or lifecycle changed.
    changes: changes::ChangeLogs,
    cores: IdVec<CoreId, SimCore>,
    /// Each core's waiting threads.
    queues: IdVec<CoreId, RunQueue>,
    core_obs: IdVec<CoreId, CoreObs>,
    idle: CpuSet,
    /// Cores whose run queue holds a waiting thread.
    queued: CpuSet,
    /// Per thread: its allowed set holds two cores or more, so a balancer may move it (a dense
    /// array beside the threads' records: read at every queue change, it stays in cache).
    may_move: IdVec<ThreadId, bool>,
    /// Waiting threads that may move: with none, a periodic balance can move nothing (every
    /// thread pinned, as under a policy that places each one).
    waiting_may_move: u32,
    /// Per thread: its allowed set in 64 bits ([`baseline::summarise`]).
    allowed_summary: IdVec<ThreadId, u64>,
    /// Cores per bit of `allowed_summary`.
    summary_span: u32,
    /// Per thread: whether its allowed set holds every core or one ([`baseline::Reach`]).
    allowed_reach: IdVec<ThreadId, baseline::Reach>,
    llcs: IdVec<LlcId, LlcState>,
    /// Miss-curve values already worked out, by phase and LLC share.
    mpki_memo: MpkiMemo,
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
    /// LLC misses each node's memory served for each application instance, cumulative,
    /// `[node][instance]`: the access heat of the instance's pages per node (Ding et al. section
    /// 3.3.2, sticky pages). Node-major, because the tick bills the cores node by node and a core's
    /// misses mostly go to its own node. Empty on a one-node machine, and for a workload that never
    /// allocates: its instances have no pages to move, so the heat, read only to order a move's
    /// source nodes, would never be read (kept, it is nodes x instances, and on a large machine the
    /// bill's cache misses).
    app_heat: Vec<Vec<f64>>,
    /// Each node's current queueing delay, ns.
    queue_delay_ns: Vec<f64>,
    page_moves: Vec<PageMove>,
    apps: IdVec<AppId, AppInstance>,
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
    /// Some core shares its FPU with others (a module's): only then are `SimCore::fpu_mates` read.
    fpu_shared: bool,
    /// Misses in a shared cache below the LLC, per phase (BulldOver Figure 7).
    l2_misses: Vec<f64>,
    last_completion_ns: u64,
    need_pick: Vec<CoreId>,
    /// A work-conservation breach seen since the last periodic balance (debug builds): a second
    /// one at the next balance is a broken promise.
    conservation_breach: Option<(CoreId, ThreadId)>,
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
    /// Threads the baseline balancer moved.
    balance_moves: u64,
}

impl<'a> Simulation<'a> {
    /// A simulation of `policy` on `topo` running `workload`, ready to [`Simulation::run`].
    pub fn new(
        topo: &'a Topology,
        workload: &'a Workload,
        policy: Box<dyn Policy>,
        cfg: SimConfig,
    ) -> Self {
        let mut cores = state::build_cores(topo);
        let best = state::best_core(topo, &cores);
        let (phases, phase_base) = state::build_phases(workload, &best);
        let shared_l2s = state::build_shared_l2s(topo, &mut cores);
        let fpu_shared = cores.iter().any(|c| !c.fpu_mates.is_empty());
        let latency: Vec<Vec<f64>> = topo.nodes().iter().map(|n| n.latency_ns.clone()).collect();
        let bandwidth = state::node_bandwidths(topo);
        let bandwidth_model = bandwidth.iter().any(Option::is_some);
        let n = topo.num_cores();
        let class_ns = vec![0.0; phases.len() * topo.classes().len()];
        let class_moves = vec![0; phases.len()];
        // Only a workload with a phase that allocates places pages on nodes: per-node bytes and the
        // pages' access heat are kept for it alone.
        let allocates = workload
            .apps
            .iter()
            .flat_map(|a| &a.threads)
            .flat_map(|g| &g.phases)
            .any(|p| p.alloc_bytes > 0);
        let mut sim = Simulation {
            topo,
            workload,
            policy,
            baseline: Some((cfg.baseline.make)(cfg.seed)),
            jitter: jitter::Jitter::new(cfg.seed),
            now: 0,
            next_tick: cfg.quantum_ns,
            tick_no: 0,
            next_policy_ns: 0,
            heap: BinaryHeap::new(),
            seq: 0,
            threads: IdVec::new(),
            node_bytes: NodeBytes::new(topo.nodes().len(), allocates),
            phases,
            phase_base,
            obs: IdVec::new(),
            changes: changes::ChangeLogs::default(),
            cores,
            queues: IdVec::from_vec(vec![RunQueue::new(); n]),
            core_obs: IdVec::from_vec(vec![CoreObs::default(); n]),
            idle: CpuSet::all(n),
            queued: CpuSet::new(),
            may_move: IdVec::new(),
            waiting_may_move: 0,
            allowed_summary: IdVec::new(),
            summary_span: baseline::summary_span(n),
            allowed_reach: IdVec::new(),
            llcs: state::build_llcs(topo),
            mpki_memo: MpkiMemo::new(),
            base_latency: latency.clone(),
            latency,
            node_traffic: vec![0.0; bandwidth.len()],
            app_heat: if bandwidth.len() > 1 && allocates {
                vec![Vec::new(); bandwidth.len()]
            } else {
                Vec::new()
            },
            queue_delay_ns: vec![0.0; bandwidth.len()],
            bandwidth,
            bandwidth_model,
            page_moves: Vec::new(),
            apps: IdVec::new(),
            copies_done: vec![0; workload.apps.len()],
            completions: vec![Vec::new(); workload.apps.len()],
            l2_misses: vec![0.0; class_moves.len()],
            class_ns,
            class_moves,
            shared_l2s,
            fpu_shared,
            last_completion_ns: 0,
            need_pick: Vec::new(),
            conservation_breach: None,
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
            balance_moves: 0,
            cfg,
        };
        sim.next_policy_ns = sim.policy.rebalance_period_ns();
        sim.batch_by_df = sim.policy.batches_by_data_fragment();
        for (si, spec) in workload.apps.iter().enumerate() {
            for copy in 0..spec.copies {
                let at = spec.arrival_ns + sim.jitter.launch_delay_ns();
                sim.push(
                    at,
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
    fn phase_of(&self, t: ThreadId) -> &'a Phase {
        self.phases[self.threads[t].cur as usize].phase
    }

    #[inline]
    fn phase_info(&self, t: ThreadId) -> &PhaseInfo<'a> {
        &self.phases[self.threads[t].cur as usize]
    }

    /// The shared cache below the LLC core `c` uses, if any: read from the core's cold line only
    /// on a machine that has such caches.
    #[inline]
    fn l2_of(&self, c: CoreId) -> Option<usize> {
        if self.shared_l2s.is_empty() {
            None
        } else {
            self.cores[c].l2
        }
    }

    /// The cores that share core `c`'s FPU: read from the core's cold line only on a machine
    /// where some core shares one.
    #[inline]
    fn fpu_mates(&self, c: CoreId) -> &[CoreId] {
        if self.fpu_shared {
            &self.cores[c].fpu_mates
        } else {
            &[]
        }
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
            self.run_events_until(tick);
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
        for c in self.cores.ids() {
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

    /// Handle every event due at or before `tick`, in (time, insertion) order.
    fn run_events_until(&mut self, tick: u64) {
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
    }

    /// Bring the state an event will touch into cache (a hint; no effect on results).
    fn prefetch_event(&self, e: Event) {
        let t = match e {
            Event::Wake { thread } => {
                if let Some(b) = &self.baseline {
                    b.prefetch_wake(thread);
                }
                // The balancer's first question: may it run on its previous core?
                prefetch(&self.allowed_reach[thread]);
                thread
            }
            Event::PhaseEnd { core, .. } => match self.cores[core].current {
                Some(t) => t,
                None => return,
            },
            Event::Arrival { .. } => return,
        };
        prefetch(&self.threads[t]);
        prefetch(&self.threads[t].group);
        prefetch(&self.obs[t].counters);
    }

    fn handle(&mut self, e: Event) {
        match e {
            Event::PhaseEnd { core: c, gen } => {
                let Some(t) = self.cores[c].current.filter(|_| self.cores[c].gen == gen) else {
                    return;
                };
                self.events += 1;
                self.bill(c);
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
                if self.obs[thread].state == ThreadState::Blocked {
                    self.wake(thread);
                }
            }
            Event::Arrival { spec, copy } => {
                self.events += 1;
                self.start_instance(spec as usize, copy, 0);
            }
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
            // A policy that promised work conservation ([`Policy::conserves_work_for`]) and keeps
            // a waiting thread from an idle core is asked too, once a settle: the kernel's idle
            // balance ran the AMPS balancer the same way.
            let mut wanted = CpuSet::new();
            let mut movable = CpuSet::new();
            for b in self.queued.iter() {
                for t in self.queues[b].threads() {
                    wanted.union_with(&self.obs[t].allowed);
                    movable.union_with(&self.obs[t].user_allowed);
                }
            }
            let idle: Vec<CoreId> = self
                .idle
                .iter_intersection(&movable)
                .filter(|&c| self.core_obs[c].runnable == 0)
                .collect();
            for c in idle {
                if wanted.contains(c) {
                    self.newidle_pull(c);
                }
                if self.queues[c].is_empty() && !notified.contains(c) && self.breach_at(c) {
                    notified.insert(c);
                    self.with_policy(|p, view, out| p.on_core_idle(view, c, out));
                    self.check_conserving(Some(c));
                }
            }
            if self.need_pick.is_empty() {
                break;
            }
        }
        self.queued_behind = false;
    }

    fn settle_cores(&mut self, notified: &mut CpuSet) {
        while let Some(c) = self.need_pick.pop() {
            if self.cores[c].current.is_some() {
                continue;
            }
            if self.queues[c].is_empty() {
                self.newidle_pull(c);
            }
            if self.queues[c].is_empty() && !notified.contains(c) {
                notified.insert(c);
                self.with_policy(|p, view, out| p.on_core_idle(view, c, out));
                self.check_conserving(Some(c));
            }
            if self.cores[c].current.is_none() {
                if let Some(t) = self.pick_next(c) {
                    self.dispatch(t, c);
                }
            }
        }
    }

    fn tick(&mut self) {
        self.tick_no += 1;
        if self.bandwidth_model {
            self.update_queueing();
        }
        for c in self.cores.ids() {
            self.tick_core(c);
        }
        let tick = self.tick_no;
        self.with_baseline(|b, port| b.on_tick(tick, port));
        if self.now >= self.next_policy_ns {
            let period = self.policy.rebalance_period_ns().max(self.cfg.quantum_ns);
            self.next_policy_ns = self.now.saturating_add(period);
            self.rebalance_policy();
            self.check_conserving(None);
        }
    }

    /// One core's part of a tick: bill the running thread, preempt it if a queued thread has less
    /// virtual runtime and it ran its minimum slice, else recompute its rate.
    #[inline]
    fn tick_core(&mut self, c: CoreId) {
        // A few cores ahead, fetch the thread state this loop will touch there: the running thread
        // (billed) and the first queued one (dispatched if it preempts). With 16k threads, cache
        // misses are what the engine's speed is made of.
        let ahead = CoreId(c.0 + PREFETCH_AHEAD as u32);
        if let Some(core) = self.cores.get(ahead) {
            if let Some(t) = core.current {
                prefetch(&self.threads[t]);
                prefetch(&self.obs[t].counters);
                prefetch(&self.obs[t].llc_traffic);
            }
            if let Some((_, t)) = self.queues[ahead].first() {
                prefetch(&self.threads[t]);
                prefetch(&self.obs[t].counters);
                self.queues[ahead].prefetch();
            }
        }
        let through = CoreId(c.0 + PREFETCH_THROUGH as u32);
        if let Some(queue) = self.queues.get(through) {
            queue.prefetch_next_least();
        }
        if let (Some(core), false) = (self.cores.get(through), self.app_heat.is_empty()) {
            let heat = &self.app_heat[core.node as usize];
            for t in core
                .current
                .into_iter()
                .chain(self.queues[through].first().map(|f| f.1))
            {
                if let Some(h) = heat.get(self.threads[t].app.index()) {
                    prefetch(h);
                }
            }
        }
        let Some(cur) = self.cores[c].current else {
            return;
        };
        self.bill(c);
        self.events += 1;
        if !self.queues[c].is_empty()
            && self.now - self.cores[c].dispatched_at >= MIN_GRANULARITY_NS
            && self.queues[c].min_vruntime() < self.threads[cur].vruntime
        {
            // Preempt: back to the same queue, keeping its vruntime.
            self.undispatch(c);
            self.obs[cur].state = ThreadState::Runnable;
            let vr = self.threads[cur].vruntime;
            self.core_obs[c].runnable += 1;
            self.queued_behind = true;
            // A batch by data fragment follows the thread that ran (`pick_next`); one with no
            // fragment has no mates, and the queue's least runs.
            let next = if self.batch_by_df && self.obs[cur].data_fragment.is_some() {
                self.queue_push(c, vr, cur);
                self.pick_next(c)
            } else {
                // The queue's least runs: queued and taken in one step, the queue staying
                // non-empty throughout.
                Some(self.queue_push_pop(c, vr, cur))
            };
            if let Some(t) = next {
                self.dispatch(t, c);
            }
            return;
        }
        if self.bandwidth_model {
            self.cores[c].cur_lat = self.mem_latency(cur, c);
        }
        self.set_rate(c);
    }
}

/// The least whole number of ns at or above `x` (x >= 0), without a libm call.
#[inline]
fn ceil_ns(x: f64) -> u64 {
    let whole = x as u64;
    whole + ((whole as f64) < x) as u64
}
