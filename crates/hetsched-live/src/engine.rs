//! The live engine: one policy over a set of real threads. Each interval it reads what the threads
//! did (counters, /proc), builds the same [`View`] the simulator builds, calls the policy, and
//! applies its placements with `sched_setaffinity`, within the rules:
//!
//! - a placement is intersected with the mask the thread had when found (the user's), and with
//!   the CPUs the kernel does not isolate; never widened;
//! - hysteresis: a thread moved less than `min_dwell` ago stays (its first placement excepted), and
//!   at most `max_moves` threads move per interval;
//! - every change is in the journal on disk before it is made; a thread that changed its own mask
//!   since our last change is the program's again (its new mask becomes the user's);
//! - a vanished thread (ESRCH) is normal;
//! - a policy that panics is disabled: affinities restored, the program keeps running.
//!
//! The engine owns no clock: the caller passes the time since the start to [`Engine::tick`].

use crate::counters::{CounterPlan, Role, ThreadCounters};
use crate::journal::{Journal, Restored};
use crate::pages::PageMover;
use crate::procfs::{parse_stat, Proc};
use crate::sys::{self, CpuMap, OsMask, SysError};
use crate::tracker::Found;
use hetsched_core::observe::{CoreObs, ThreadObs, ThreadState, View};
use hetsched_core::policy::{Hint, PageMove, Placement, Policy, Signal};
use hetsched_core::{AppId, CoreId, CpuSet, ThreadId, Topology};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// How the engine acts.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Between observations.
    pub interval: Duration,
    /// Decide and log, change nothing.
    pub dry_run: bool,
    /// A thread moved more recently than this stays where it is.
    pub min_dwell: Duration,
    /// Most threads moved in one interval.
    pub max_moves: usize,
    /// Time spent moving pages per interval, at most.
    pub page_budget: Duration,
    /// How often per-node residency is read (numa_maps is costly on large processes).
    pub residency_period: Duration,
    /// Let a thread placed on slower cores also run on the faster cores of the same nodes
    /// ([`widen_upward`]), so the kernel keeps fast cores busy between intervals.
    pub work_conserving: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            interval: Duration::from_millis(100),
            dry_run: false,
            min_dwell: Duration::from_millis(200),
            max_moves: 16,
            page_budget: Duration::from_millis(10),
            residency_period: Duration::from_secs(1),
            work_conserving: true,
        }
    }
}

/// Per managed thread: what the kernel calls it and what the engine did to it.
struct Slot {
    tid: u32,
    pid: u32,
    start_ticks: u64,
    comm: String,
    stat: Option<File>,
    counters: Option<ThreadCounters>,
    /// The mask the thread had when found (or that it set itself since).
    original: OsMask,
    /// The mask the engine set last.
    applied: Option<OsMask>,
    last_move_ns: Option<u64>,
    /// CPU time per core class, ns (attributed to the class of the CPU seen at each interval).
    class_ns: Vec<f64>,
    last_cpu_ns: f64,
    last_processor: Option<u32>,
    placements_applied: u32,
    alive: bool,
    /// Consecutive reads that found the thread asleep and without new CPU time.
    idle_streak: u32,
    /// The interval at which it is read next.
    next_read: u64,
    last_read_ns: u64,
    reads: u32,
}

/// A sleeping thread that used less than this share of a CPU since its last read counts as idle
/// for [`MAX_IDLE_READ_GAP`].
pub const IDLE_CPU_SHARE: f64 = 0.01;

/// A thread last seen asleep that used under [`IDLE_CPU_SHARE`] since is taken to be asleep still,
/// on the CPU it slept on, without reading its stat; every this many reads the stat is read anyway.
pub const STAT_EVERY_READS: u32 = 8;

/// Longest gap between two reads of a sleeping thread, intervals: a thread that slept through
/// its last reads is read after 1, 2, 4, 8, then every 10 intervals (1 s at the default), so a
/// thousand idle threads cost a hundred reads a second, not ten thousand. A thread that wakes is
/// seen at its next read.
pub const MAX_IDLE_READ_GAP: u64 = 10;

/// Counts of the engine's decisions.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Decisions {
    /// Placements the policy asked for.
    pub placements: u64,
    /// Applied (or, in a dry run, that would have been).
    pub applied: u64,
    /// The thread already had that mask.
    pub unchanged: u64,
    pub held_by_dwell: u64,
    pub held_by_cap: u64,
    /// Nothing left after intersecting with the user's mask.
    pub outside_user_mask: u64,
    /// The thread was gone when acted on.
    pub vanished: u64,
    /// The program had changed the thread's mask itself; the engine adopted it.
    pub adopted_user_changes: u64,
    pub page_moves_requested: u64,
}

/// One thread in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct ThreadSummary {
    pub tid: u32,
    pub pid: u32,
    pub comm: String,
    pub cpu_s: f64,
    /// CPU seconds on each core class.
    pub class_s: BTreeMap<String, f64>,
    pub placements_applied: u32,
}

/// What the engine reports at the end.
#[derive(Clone, Debug, Serialize)]
pub struct EngineSummary {
    pub policy: String,
    pub dry_run: bool,
    pub counters: Vec<&'static str>,
    pub hardware_counters: bool,
    /// Signals the policy uses that this machine cannot give.
    pub policy_missing: Vec<&'static str>,
    pub policy_disabled: Option<String>,
    pub decisions: Decisions,
    pub pages_moved_bytes: u64,
    pub threads_seen: usize,
    pub threads: Vec<ThreadSummary>,
    pub restore: Restored,
}

/// The engine.
pub struct Engine {
    topology: Topology,
    cpus: CpuMap,
    managed: CpuSet,
    policy: Option<Box<dyn Policy>>,
    policy_name: String,
    disabled: Option<String>,
    plan: CounterPlan,
    config: EngineConfig,
    proc: Proc,
    journal: Option<Journal>,
    pages: PageMover,
    ns_per_tick: f64,
    obs: Vec<ThreadObs>,
    slots: Vec<Slot>,
    by_tid: HashMap<u32, ThreadId>,
    apps: HashMap<u32, AppId>,
    cores: Vec<CoreObs>,
    now_ns: u64,
    /// Intervals so far.
    ticks: u64,
    next_rebalance_ns: u64,
    next_residency_ns: u64,
    moves_this_interval: usize,
    pending: Vec<Placement>,
    page_moves: Vec<PageMove>,
    decisions: Decisions,
    /// The journal has entries not on disk yet (inherited masks).
    journal_dirty: bool,
    restored: Restored,
    notices: Vec<String>,
}

/// A placement made work-conserving for a kernel that time-shares between our intervals: `cpus`
/// plus every core on the same NUMA nodes that is faster than the slowest core of `cpus`.
///
/// In the simulator a policy's `on_core_idle` runs the instant a core idles, so a faster-core-first
/// policy (AMPS section 3.2: a fast core never idles while a slow one has work) pulls a thread from
/// a slow core at once. Live, the engine sees the machine once an interval (100 ms), far slower than
/// a program's barriers and phases; a thread pinned to a slow core would wait there while a fast core
/// idles. Widening upward lets the kernel make the pull: it runs the thread on a faster core when
/// one is free, and the policy's preferred core keeps it otherwise. A placement onto the fastest
/// class, or on a machine of one class, is unchanged.
pub fn widen_upward(topology: &Topology, cpus: &CpuSet) -> CpuSet {
    let slowest = cpus
        .iter()
        .map(|c| topology.relative_speed(c))
        .fold(f64::INFINITY, f64::min);
    let nodes: Vec<_> = cpus.iter().map(|c| topology.node_of(c)).collect();
    let mut out = cpus.clone();
    for c in topology.all_cores().iter() {
        if topology.relative_speed(c) > slowest && nodes.contains(&topology.node_of(c)) {
            out.insert(c);
        }
    }
    out
}

/// The signals of `policy` that `plan` (and a live backend) cannot supply.
pub fn missing_signals(needs: &[Signal], plan: &CounterPlan, nodes: usize) -> Vec<Signal> {
    needs
        .iter()
        .copied()
        .filter(|s| match s {
            Signal::Ipc => !(plan.has(Role::Cycles) && plan.has(Role::Instructions)),
            Signal::LlcMisses => !(plan.has(Role::LlcMisses) && plan.has(Role::LlcRefs)),
            Signal::FpBusy => !(plan.has(Role::FpBusy) || plan.has(Role::FpEmpty)),
            // No portable PMU event gives these per thread; policies fall back (documented).
            // On one node there is nothing NUMA to know.
            Signal::LlcTraffic => true,
            Signal::NodeAccesses => nodes > 1,
            Signal::NodeResidency => false,
            // Supplied by applications through the hint socket.
            Signal::Signatures | Signal::DataFragments => false,
        })
        .collect()
}

impl Engine {
    /// An engine running `policy` on `topology`. `cpus` maps its cores to kernel CPUs; `isolated`
    /// cores are never given to a thread. `journal`: `None` only in a dry run.
    pub fn new(
        topology: Topology,
        cpus: CpuMap,
        isolated: &CpuSet,
        policy: Box<dyn Policy>,
        plan: CounterPlan,
        config: EngineConfig,
        journal: Option<Journal>,
    ) -> Engine {
        let managed: CpuSet = topology
            .all_cores()
            .iter()
            .filter(|c| !isolated.contains(*c))
            .collect();
        let n = topology.num_cores();
        let name = policy.name().to_string();
        let period = policy.rebalance_period_ns();
        let missing = missing_signals(policy.needs(), &plan, topology.nodes().len());
        let mut notices = Vec::new();
        if !missing.is_empty() {
            notices.push(format!(
                "policy {name} uses {} which this machine does not offer; it sees zeros there",
                missing
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Engine {
            topology,
            cpus,
            managed,
            policy: Some(policy),
            policy_name: name,
            disabled: None,
            plan,
            config,
            proc: Proc::default(),
            journal,
            pages: PageMover::new(),
            ns_per_tick: 1e9 / crate::procfs::clock_ticks_per_s() as f64,
            obs: Vec::new(),
            slots: Vec::new(),
            by_tid: HashMap::new(),
            apps: HashMap::new(),
            cores: vec![CoreObs::default(); n],
            now_ns: 0,
            ticks: 0,
            next_rebalance_ns: period,
            next_residency_ns: 0,
            moves_this_interval: 0,
            pending: Vec::new(),
            page_moves: Vec::new(),
            decisions: Decisions::default(),
            journal_dirty: false,
            restored: Restored::default(),
            notices,
        }
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Whether thread `tid` is managed now.
    pub fn manages(&self, tid: u32) -> bool {
        self.by_tid
            .get(&tid)
            .is_some_and(|id| self.slots[id.index()].alive)
    }

    /// Live threads managed now.
    pub fn live_threads(&self) -> usize {
        self.slots.iter().filter(|s| s.alive).count()
    }

    /// Messages for the user since the last call (once each).
    pub fn take_notices(&mut self) -> Vec<String> {
        if let Some(p) = self.policy.as_mut() {
            while let Some(n) = p.take_notice() {
                self.notices.push(n);
            }
        }
        std::mem::take(&mut self.notices)
    }

    fn disable(&mut self, why: String) {
        tracing::error!(
            "policy {} failed ({why}); disabled, affinities restored, the program keeps running",
            self.policy_name
        );
        self.policy = None;
        self.disabled = Some(why);
        self.pending.clear();
        self.restore_all();
    }

    /// Call the policy; a panic disables it.
    fn call<R>(
        &mut self,
        f: impl FnOnce(&mut dyn Policy, &View<'_>, &mut Vec<Placement>) -> R,
    ) -> Option<R> {
        let policy = self.policy.as_mut()?;
        let view = View {
            now_ns: self.now_ns,
            topology: &self.topology,
            threads: &self.obs,
            cores: &self.cores,
        };
        let pending = &mut self.pending;
        let r = catch_unwind(AssertUnwindSafe(|| f(policy.as_mut(), &view, pending)));
        match r {
            Ok(r) => {
                if let Some(p) = self.policy.as_mut() {
                    let before = self.page_moves.len();
                    p.take_page_moves(&mut self.page_moves);
                    self.decisions.page_moves_requested += (self.page_moves.len() - before) as u64;
                }
                Some(r)
            }
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into());
                self.disable(msg);
                None
            }
        }
    }

    /// A thread the tracker found. Returns false when it is not managed after all (gone, or only
    /// allowed on isolated CPUs).
    pub fn add(&mut self, f: Found) -> bool {
        if self.manages(f.tid) {
            return true;
        }
        let current = match sys::get_affinity(f.tid) {
            Ok(m) => m,
            Err(_) => return false,
        };
        // A thread or process started by one we had moved inherits our mask, not the user's: it
        // gets its creator's original, and a journal entry, so it is restored like its creator.
        let creator = self
            .slots
            .iter()
            .find(|s| s.alive && (s.pid == f.pid || s.pid == f.ppid) && s.applied == Some(current));
        let (original, inherited) = match creator {
            Some(c) => (c.original, true),
            None => (current, false),
        };
        let user = self.cpus.to_cores(&original).intersection(&self.managed);
        if user.is_empty() {
            return false;
        }
        let stat = File::open(self.proc.task_dir(f.pid, f.tid).join("stat")).ok();
        let counters = match self.plan.open(f.tid) {
            Ok(c) => Some(c),
            Err(SysError::Gone(_)) => return false,
            Err(e) => {
                tracing::debug!("counters: {e}");
                None
            }
        };
        let comm = self
            .proc
            .task_stat(f.pid, f.tid)
            .map(|s| s.comm)
            .unwrap_or_default();
        let next_app = self.apps.len() as u32;
        let app = *self.apps.entry(f.pid).or_insert(AppId(next_app));
        let id = ThreadId(self.obs.len() as u32);
        self.obs
            .push(ThreadObs::new(id, app, user, self.topology.nodes().len()));
        self.slots.push(Slot {
            tid: f.tid,
            pid: f.pid,
            start_ticks: f.start_ticks,
            comm,
            stat,
            counters,
            original,
            applied: inherited.then_some(current),
            last_move_ns: None,
            class_ns: vec![0.0; self.topology.classes().len()],
            last_cpu_ns: 0.0,
            last_processor: None,
            placements_applied: 0,
            alive: true,
            idle_streak: 0,
            next_read: 0,
            last_read_ns: self.now_ns,
            reads: 0,
        });
        self.by_tid.insert(f.tid, id);
        if inherited {
            self.obs[id.index()].allowed = self.cpus.to_cores(&current).intersection(&self.managed);
            if let Some(j) = self.journal.as_mut() {
                // Written with the next batch of changes, or at the next interval.
                j.record(f.tid, f.start_ticks, &original, &current, &current);
                self.journal_dirty = true;
            }
        }
        self.refresh_one(id.index());
        if let Some(Some(cpus)) = self.call(|p, v, _| p.on_thread_start(v, id)) {
            self.pending.push(Placement { thread: id, cpus });
            self.apply(true);
        }
        true
    }

    /// A thread is gone.
    pub fn remove(&mut self, tid: u32) {
        let Some(id) = self.by_tid.remove(&tid) else {
            return;
        };
        let s = &mut self.slots[id.index()];
        if !s.alive {
            return;
        }
        s.alive = false;
        s.stat = None;
        s.counters = None;
        let o = &mut self.obs[id.index()];
        o.state = ThreadState::Exited;
        // Bounded memory: an exited thread keeps only its fixed-size record.
        o.resident_bytes = Vec::new();
        o.node_accesses = Vec::new();
        o.signature = None;
        if let Some(j) = self.journal.as_mut() {
            j.forget(tid);
        }
        self.call(|p, v, _| p.on_thread_exit(v, id));
    }

    /// A hint that passed the socket's checks.
    pub fn hint(&mut self, tid: u32, hint: &Hint) {
        let Some(&id) = self.by_tid.get(&tid) else {
            return;
        };
        match hint {
            Hint::DataFragment { next, .. } => self.obs[id.index()].data_fragment = *next,
            Hint::Signature(s) => self.obs[id.index()].signature = Some(s.clone()),
        }
        self.call(|p, v, out| p.on_hint(v, id, hint, out));
        self.apply(false);
    }

    /// Read one thread: its counters, and its stat (state, CPU) unless the counters show that a
    /// thread last seen asleep has had no CPU since: then it still sleeps where it slept, and the
    /// costlier stat read is skipped.
    fn refresh_one(&mut self, i: usize) {
        let s = &mut self.slots[i];
        let o = &mut self.obs[i];
        let counted = s.counters.as_ref().and_then(|c| c.read());
        let task_clock = self.plan.has(Role::TaskClock) && counted.is_some();
        let mut c = counted.unwrap_or_default();
        s.reads += 1;
        let used = c.cpu_time_ns - s.last_cpu_ns;
        let since = self.now_ns.saturating_sub(s.last_read_ns) as f64;
        let nearly_idle = used == 0.0
            || (used <= IDLE_CPU_SHARE * since && !s.reads.is_multiple_of(STAT_EVERY_READS));
        if task_clock && o.state == ThreadState::Blocked && nearly_idle {
            if let Some(core) = s.last_processor.and_then(|p| self.cpus.core_of(p)) {
                if !self.plan.has(Role::Migrations) {
                    c.migrations = o.counters.migrations;
                }
                if used > 0.0 {
                    s.class_ns[self.topology.core(core).class.index()] += used;
                    s.last_cpu_ns = c.cpu_time_ns;
                }
                o.counters = c;
                return;
            }
        }
        let mut buf = [0u8; 1024];
        let stat = s
            .stat
            .as_ref()
            .and_then(|f| f.read_at(&mut buf, 0).ok())
            .and_then(|n| std::str::from_utf8(&buf[..n]).ok())
            .and_then(parse_stat);
        let Some(stat) = stat else {
            o.state = ThreadState::Blocked; // gone: the tracker reports it at the next scan
            return;
        };
        let cpu = self.cpus.core_of(stat.processor);
        if !task_clock {
            c.cpu_time_ns = stat.cpu_ticks as f64 * self.ns_per_tick;
        }
        if !self.plan.has(Role::Migrations) {
            let moved = s.last_processor.is_some_and(|p| p != stat.processor);
            c.migrations = o.counters.migrations + u32::from(moved);
        }
        s.last_processor = Some(stat.processor);
        let delta = c.cpu_time_ns - s.last_cpu_ns;
        if delta > 0.0 {
            if let Some(core) = cpu {
                s.class_ns[self.topology.core(core).class.index()] += delta;
            }
            s.last_cpu_ns = c.cpu_time_ns;
        }
        o.counters = c;
        o.cpu = cpu;
        o.state = match stat.state {
            'R' => ThreadState::Runnable,
            _ => ThreadState::Blocked,
        };
    }

    /// Read the threads due for a read, and the cores' load from them.
    fn refresh(&mut self) {
        self.ticks += 1;
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if !s.alive || s.next_read > self.ticks {
                continue;
            }
            let (cpu_before, read_before) = (s.last_cpu_ns, s.last_read_ns);
            self.refresh_one(i);
            let s = &mut self.slots[i];
            s.last_read_ns = self.now_ns;
            // Asleep now, and used under 1% of a CPU since the last read: idle for reading.
            let used = s.last_cpu_ns - cpu_before;
            let slept = self.obs[i].state == ThreadState::Blocked
                && used <= IDLE_CPU_SHARE * (self.now_ns - read_before) as f64;
            if slept {
                s.idle_streak = (s.idle_streak + 1).min(16);
                s.next_read = self.ticks + (1u64 << (s.idle_streak - 1)).min(MAX_IDLE_READ_GAP);
            } else {
                s.idle_streak = 0;
                s.next_read = self.ticks + 1;
            }
        }
        if self.topology.nodes().len() > 1 && self.now_ns >= self.next_residency_ns {
            self.next_residency_ns = self.now_ns + self.config.residency_period.as_nanos() as u64;
            self.refresh_residency();
        }
        for c in self.cores.iter_mut() {
            *c = CoreObs::default();
        }
        for o in self.obs.iter_mut() {
            if o.state != ThreadState::Runnable {
                continue;
            }
            if let Some(cpu) = o.cpu {
                let core = &mut self.cores[cpu.index()];
                core.runnable += 1;
                if core.current.is_none() {
                    core.current = Some(o.id);
                    o.state = ThreadState::Running;
                }
            }
        }
    }

    /// Per-node resident bytes from numa_maps, per process, split evenly over its live threads
    /// (the kernel does not say which thread touched a page).
    fn refresh_residency(&mut self) {
        let nodes = self.topology.nodes().len();
        let mut per_pid: HashMap<u32, (Vec<u64>, u64)> = HashMap::new();
        for s in self.slots.iter().filter(|s| s.alive) {
            per_pid.entry(s.pid).or_insert_with(|| (Vec::new(), 0)).1 += 1;
        }
        for (pid, v) in per_pid.iter_mut() {
            v.0 = self
                .proc
                .numa_bytes(*pid, nodes)
                .unwrap_or_else(|| vec![0; nodes]);
        }
        for (i, s) in self.slots.iter().enumerate() {
            if let (true, Some((bytes, n))) = (s.alive, per_pid.get(&s.pid)) {
                self.obs[i].resident_bytes = bytes.iter().map(|b| b / n.max(&1)).collect();
            }
        }
    }

    /// One interval: observe, let the policy decide, act. `now_ns`: time since the start.
    /// Write journal entries recorded since the last write (masks new threads inherited). Call
    /// after a batch of [`add`](Self::add)s.
    pub fn sync_journal(&mut self) {
        if self.journal_dirty {
            self.journal_dirty = false;
            if let Some(Err(e)) = self.journal.as_ref().map(|j| j.flush()) {
                tracing::error!("cannot write the affinity journal: {e}");
            }
        }
    }

    pub fn tick(&mut self, now_ns: u64) {
        self.now_ns = now_ns;
        self.sync_journal();
        self.moves_this_interval = 0;
        self.refresh();
        if self.policy.as_ref().is_some_and(|p| !p.is_baseline()) {
            for c in 0..self.cores.len() {
                let core = CoreId(c as u32);
                if self.cores[c].is_idle() && self.managed.contains(core) {
                    self.call(|p, v, out| p.on_core_idle(v, core, out));
                }
            }
            if now_ns >= self.next_rebalance_ns {
                let period = self
                    .policy
                    .as_ref()
                    .map_or(1, |p| p.rebalance_period_ns().max(1));
                self.next_rebalance_ns = now_ns + period;
                self.call(|p, v, out| p.rebalance(v, out));
            }
            self.apply(false);
        }
        self.move_pages();
    }

    fn move_pages(&mut self) {
        let moves = std::mem::take(&mut self.page_moves);
        for m in moves {
            let Some((&pid, _)) = self.apps.iter().find(|(_, &a)| a == m.app) else {
                continue;
            };
            tracing::info!(
                "{}: move up to {} MiB of pid {pid} to node {}",
                self.policy_name,
                m.max_bytes >> 20,
                m.to.0
            );
            if !self.config.dry_run {
                self.pages.submit(pid, m.to.0, m.max_bytes);
            }
        }
        if self.pages.pending() > 0 {
            self.pages.run(self.config.page_budget);
        }
    }

    /// Apply pending placements. `first`: placements of new threads, exempt from hysteresis.
    fn apply(&mut self, first: bool) {
        let pending = std::mem::take(&mut self.pending);
        let mut todo: Vec<(usize, OsMask)> = Vec::new();
        for p in pending {
            self.decisions.placements += 1;
            let i = p.thread.index();
            if i >= self.slots.len() || !self.slots[i].alive {
                self.decisions.vanished += 1;
                continue;
            }
            let cpus = if self.config.work_conserving {
                widen_upward(&self.topology, &p.cpus)
            } else {
                p.cpus.clone()
            };
            let target = cpus.intersection(&self.obs[i].user_allowed);
            if target.is_empty() {
                self.decisions.outside_user_mask += 1;
                continue;
            }
            let mask = self.cpus.to_os(&target);
            let s = &self.slots[i];
            let current = s.applied.unwrap_or(s.original);
            if mask == current || todo.iter().any(|(j, m)| *j == i && *m == mask) {
                self.decisions.unchanged += 1;
                continue;
            }
            if !first {
                let dwell = self.config.min_dwell.as_nanos() as u64;
                if s.last_move_ns.is_some_and(|t| self.now_ns < t + dwell) {
                    self.decisions.held_by_dwell += 1;
                    continue;
                }
                if self.moves_this_interval >= self.config.max_moves {
                    self.decisions.held_by_cap += 1;
                    continue;
                }
            }
            self.moves_this_interval += 1;
            todo.retain(|(j, _)| *j != i);
            todo.push((i, mask));
        }
        if todo.is_empty() {
            return;
        }
        if self.config.dry_run {
            for (i, mask) in todo {
                let s = &mut self.slots[i];
                tracing::info!(
                    "dry run: thread {} ({}) -> CPUs {}",
                    s.tid,
                    s.comm,
                    mask.to_list()
                );
                s.applied = Some(mask);
                s.last_move_ns = Some(self.now_ns);
                self.decisions.applied += 1;
            }
            return;
        }
        // A thread whose mask is not what we left is the program's again.
        todo.retain(|&(i, _)| {
            let s = &mut self.slots[i];
            let expected = s.applied.unwrap_or(s.original);
            match sys::get_affinity(s.tid) {
                Ok(now) if now == expected => true,
                Ok(now) => {
                    s.original = now;
                    s.applied = None;
                    self.obs[i].user_allowed = self.cpus.to_cores(&now).intersection(&self.managed);
                    self.obs[i].allowed = self.obs[i].user_allowed.clone();
                    self.decisions.adopted_user_changes += 1;
                    false
                }
                Err(_) => {
                    self.decisions.vanished += 1;
                    false
                }
            }
        });
        // Journal first, then act.
        if let Some(j) = self.journal.as_mut() {
            for &(i, mask) in &todo {
                let s = &self.slots[i];
                j.record(
                    s.tid,
                    s.start_ticks,
                    &s.original,
                    &s.applied.unwrap_or(s.original),
                    &mask,
                );
            }
            if let Err(e) = j.flush() {
                tracing::error!(
                    "cannot write the affinity journal {}: {e}; not moving threads",
                    j.path().display()
                );
                return;
            }
        }
        for (i, mask) in todo {
            let s = &mut self.slots[i];
            match sys::set_affinity(s.tid, &mask) {
                Ok(()) => {
                    s.applied = Some(mask);
                    s.last_move_ns = Some(self.now_ns);
                    s.placements_applied += 1;
                    self.decisions.applied += 1;
                    let cores = self.cpus.to_cores(&mask);
                    self.obs[i].allowed = cores.intersection(&self.obs[i].user_allowed);
                }
                Err(SysError::Gone(_)) => self.decisions.vanished += 1,
                Err(e) => tracing::warn!("{e}"),
            }
        }
    }

    /// Give every thread back the mask it had (where it still has ours).
    pub fn restore_all(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            let r = j.restore_all(&self.proc);
            self.restored.restored += r.restored;
            self.restored.gone += r.gone;
            self.restored.changed_by_others += r.changed_by_others;
        }
        for (s, o) in self.slots.iter_mut().zip(self.obs.iter_mut()) {
            s.applied = None;
            o.allowed = o.user_allowed.clone();
        }
    }

    /// Stop: restore every affinity and report.
    pub fn finish(&mut self) -> EngineSummary {
        self.restore_all();
        let class_names: Vec<String> = self
            .topology
            .classes()
            .iter()
            .map(|c| c.name.clone())
            .collect();
        let threads = self
            .slots
            .iter()
            .map(|s| ThreadSummary {
                tid: s.tid,
                pid: s.pid,
                comm: s.comm.clone(),
                cpu_s: s.last_cpu_ns * 1e-9,
                class_s: class_names
                    .iter()
                    .cloned()
                    .zip(s.class_ns.iter().map(|ns| ns * 1e-9))
                    .collect(),
                placements_applied: s.placements_applied,
            })
            .collect();
        let missing = self
            .policy
            .as_ref()
            .map(|p| missing_signals(p.needs(), &self.plan, self.topology.nodes().len()))
            .unwrap_or_default();
        EngineSummary {
            policy: self.policy_name.clone(),
            dry_run: self.config.dry_run,
            counters: self.plan.roles().iter().map(|r| r.name()).collect(),
            hardware_counters: self.plan.has_hardware(),
            policy_missing: missing.iter().map(|s| s.name()).collect(),
            policy_disabled: self.disabled.clone(),
            decisions: self.decisions,
            pages_moved_bytes: self.pages.moved_bytes,
            threads_seen: self.slots.len(),
            threads,
            restore: self.restored,
        }
    }

    /// CPU seconds of live threads per core class, and their count per class of the CPU they
    /// were last seen on (for the daemon's metrics: per class, never per thread).
    pub fn class_totals(&self) -> Vec<(String, f64, u32)> {
        let mut v: Vec<(String, f64, u32)> = self
            .topology
            .classes()
            .iter()
            .map(|c| (c.name.clone(), 0.0, 0))
            .collect();
        for (s, o) in self.slots.iter().zip(&self.obs) {
            for (k, ns) in s.class_ns.iter().enumerate() {
                v[k].1 += ns * 1e-9;
            }
            if let (true, Some(cpu)) = (s.alive, o.cpu) {
                v[self.topology.core(cpu).class.index()].2 += 1;
            }
        }
        v
    }

    pub fn decisions(&self) -> Decisions {
        self.decisions
    }

    pub fn policy_name(&self) -> &str {
        &self.policy_name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tracker::Found;
    use hetsched_core::policy::Policy;
    use std::sync::mpsc;

    /// A policy that pins every live thread to `core` at each rebalance, or panics when asked.
    struct Scripted {
        core: std::sync::Arc<std::sync::atomic::AtomicU32>,
        panic: std::sync::Arc<std::sync::atomic::AtomicBool>,
    }

    impl Policy for Scripted {
        fn name(&self) -> &str {
            "scripted"
        }
        fn rebalance_period_ns(&self) -> u64 {
            1
        }
        fn rebalance(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
            assert!(
                !self.panic.load(std::sync::atomic::Ordering::Relaxed),
                "scripted failure"
            );
            let core = CoreId(self.core.load(std::sync::atomic::Ordering::Relaxed));
            for t in view
                .threads
                .iter()
                .filter(|t| t.state != ThreadState::Exited)
            {
                out.push(Placement::pin(t.id, core));
            }
        }
    }

    /// Threads of this test process that sleep until told to end.
    struct Sleepers {
        tids: Vec<u32>,
        stop: Vec<mpsc::Sender<()>>,
        handles: Vec<std::thread::JoinHandle<()>>,
    }

    impl Sleepers {
        fn new(n: usize) -> Sleepers {
            let mut s = Sleepers {
                tids: Vec::new(),
                stop: Vec::new(),
                handles: Vec::new(),
            };
            for _ in 0..n {
                let (tx, rx) = mpsc::channel();
                let (stop_tx, stop_rx) = mpsc::channel::<()>();
                s.handles.push(std::thread::spawn(move || {
                    tx.send(sys::gettid()).unwrap();
                    let _ = stop_rx.recv();
                }));
                s.tids.push(rx.recv().unwrap());
                s.stop.push(stop_tx);
            }
            s
        }
        fn end(self) {
            drop(self.stop);
            for h in self.handles {
                h.join().unwrap();
            }
        }
    }

    fn two_class_machine() -> Topology {
        let n = crate::discover(std::path::Path::new("/"))
            .topology
            .num_cores();
        hetsched_core::machine_file::parse_machine(
            &format!(
                "name = \"t\"\nmemory_latency_ns = 90.0\n[[classes]]\nname = \"fast\"\ncapacity = 1.0\n\
                 [[classes]]\nname = \"slow\"\ncapacity = 0.5\n[[cores]]\ncpus = \"0\"\nclass = \"fast\"\n\
                 [[cores]]\ncpus = \"1-{}\"\nclass = \"slow\"\n",
                n - 1
            ),
            "test",
        )
        .unwrap()
    }

    fn engine_for(
        threads: &Sleepers,
        config: EngineConfig,
        dir: &std::path::Path,
    ) -> (
        Engine,
        std::sync::Arc<std::sync::atomic::AtomicU32>,
        std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) {
        let topology = two_class_machine();
        let cpus = CpuMap::new(&crate::discover(std::path::Path::new("/")).topology);
        let core = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(1));
        let panic = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let policy = Box::new(Scripted {
            core: core.clone(),
            panic: panic.clone(),
        });
        let journal = if config.dry_run {
            None
        } else {
            Some(Journal::create(dir).unwrap())
        };
        let mut e = Engine::new(
            topology,
            cpus,
            &CpuSet::new(),
            policy,
            CounterPlan::none(),
            config,
            journal,
        );
        let proc = Proc::default();
        let pid = std::process::id();
        for &tid in &threads.tids {
            let st = proc.task_stat(pid, tid).unwrap();
            assert!(e.add(Found {
                pid,
                tid,
                start_ticks: st.start_ticks,
                group: 0,
                ppid: st.ppid,
            }));
        }
        (e, core, panic)
    }

    fn needs_two_cpus() -> bool {
        let n = crate::discover(std::path::Path::new("/"))
            .topology
            .num_cores();
        n >= 2 && sys::get_affinity(sys::gettid()).is_ok_and(|m| m.cpus().count() >= 2)
    }

    #[test]
    fn dwell_and_the_move_cap_hold_threads_back_and_finish_restores() {
        if !needs_two_cpus() {
            return;
        }
        let dir = std::env::temp_dir().join(format!("hs-engine-dwell-{}", std::process::id()));
        let th = Sleepers::new(3);
        let original = sys::get_affinity(th.tids[0]).unwrap();
        let config = EngineConfig {
            min_dwell: Duration::from_millis(500),
            max_moves: 2,
            work_conserving: false,
            ..Default::default()
        };
        let (mut e, core, _) = engine_for(&th, config, &dir);
        e.tick(1_000_000);
        // Three threads want core 1; the cap lets two move.
        let d = e.decisions();
        assert_eq!((d.applied, d.held_by_cap), (2, 1), "{d:?}");
        let on = |tid: u32| sys::get_affinity(tid).unwrap().to_list();
        let slow_os = e.cpus.os_cpu(CoreId(1)).to_string();
        let moved: Vec<u32> = th
            .tids
            .iter()
            .copied()
            .filter(|&t| on(t) == slow_os)
            .collect();
        assert_eq!(moved.len(), 2);
        // Next interval: the third moves; the two moved ones now asked for core 0 are held by
        // their dwell time.
        e.tick(2_000_000);
        assert_eq!(e.decisions().applied, 3);
        core.store(0, std::sync::atomic::Ordering::Relaxed);
        e.tick(3_000_000);
        assert!(e.decisions().held_by_dwell >= 2, "{:?}", e.decisions());
        // After the dwell they move (two an interval).
        e.tick(600_000_000);
        e.tick(601_000_000);
        let fast_os = e.cpus.os_cpu(CoreId(0)).to_string();
        assert!(th.tids.iter().all(|&t| on(t) == fast_os));
        let summary = e.finish();
        assert_eq!(summary.restore.restored, 3);
        assert!(th
            .tids
            .iter()
            .all(|&t| sys::get_affinity(t).unwrap() == original));
        th.end();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_panicking_policy_is_disabled_and_affinities_restored() {
        if !needs_two_cpus() {
            return;
        }
        let dir = std::env::temp_dir().join(format!("hs-engine-panic-{}", std::process::id()));
        let th = Sleepers::new(2);
        let original = sys::get_affinity(th.tids[0]).unwrap();
        let config = EngineConfig {
            work_conserving: false,
            ..Default::default()
        };
        let (mut e, _, panic) = engine_for(&th, config, &dir);
        e.tick(1_000_000);
        assert_eq!(e.decisions().applied, 2);
        assert_ne!(sys::get_affinity(th.tids[0]).unwrap(), original);
        panic.store(true, std::sync::atomic::Ordering::Relaxed);
        e.tick(2_000_000);
        assert!(th
            .tids
            .iter()
            .all(|&t| sys::get_affinity(t).unwrap() == original));
        let s = e.finish();
        assert!(s
            .policy_disabled
            .as_deref()
            .is_some_and(|m| m.contains("scripted failure")));
        // Further intervals do nothing.
        th.end();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_mask_the_program_set_itself_is_adopted_not_overwritten() {
        if !needs_two_cpus() {
            return;
        }
        let dir = std::env::temp_dir().join(format!("hs-engine-adopt-{}", std::process::id()));
        let th = Sleepers::new(1);
        let tid = th.tids[0];
        let config = EngineConfig {
            min_dwell: Duration::ZERO,
            work_conserving: false,
            ..Default::default()
        };
        let (mut e, core, _) = engine_for(&th, config, &dir);
        e.tick(1_000_000);
        assert_eq!(e.decisions().applied, 1);
        // The program pins its thread to CPU 0 itself.
        let own = OsMask::from_cpus([e.cpus.os_cpu(CoreId(0))]);
        sys::set_affinity(tid, &own).unwrap();
        // The policy asks for a change: the engine finds the program's mask, adopts it as the
        // user's and leaves it.
        core.store(0, std::sync::atomic::Ordering::Relaxed);
        e.tick(2_000_000);
        assert_eq!(e.decisions().adopted_user_changes, 1);
        assert_eq!(sys::get_affinity(tid).unwrap(), own);
        core.store(1, std::sync::atomic::Ordering::Relaxed);
        e.tick(3_000_000);
        // Core 1 is outside the program's mask now.
        assert!(e.decisions().outside_user_mask >= 1, "{:?}", e.decisions());
        let s = e.finish();
        assert_eq!(s.restore.restored, 0);
        assert_eq!(sys::get_affinity(tid).unwrap(), own);
        th.end();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn widening_adds_faster_cores_of_the_same_node_only() {
        // Two nodes, each with one fast core (0, 2) and one slow core (1, 3).
        let t = hetsched_core::machine_file::parse_machine(
            r#"
name = "two-by-two"
[[classes]]
name = "fast"
capacity = 1.0
[[classes]]
name = "slow"
capacity = 0.5
[[cores]]
cpus = "0,2"
class = "fast"
[[cores]]
cpus = "1,3"
class = "slow"
[[nodes]]
cpus = "0-1"
distance = [10, 20]
latency_ns = [80.0, 140.0]
[[nodes]]
cpus = "2-3"
distance = [20, 10]
latency_ns = [140.0, 80.0]
"#,
            "test",
        )
        .unwrap();
        let w = widen_upward(&t, &CpuSet::single(CoreId(3)));
        assert_eq!(w.to_list(), "2-3");
        let w = widen_upward(&t, &[CoreId(1), CoreId(3)].into_iter().collect());
        assert_eq!(w.to_list(), "0-3");
        // A placement onto a fast core stays as it is.
        assert_eq!(widen_upward(&t, &CpuSet::single(CoreId(0))).to_list(), "0");
    }
}
