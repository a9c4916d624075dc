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

mod apply;
mod observe;
mod summary;
mod threads;

use summary::Totals;
pub use summary::{Decisions, EngineSummary, FragmentSummary, ProcessSummary};

use crate::counters::{CounterPlan, Role, ThreadCounters};
use crate::journal::{Journal, Restored};
use crate::pages::PageMover;
use crate::procfs::{parse_stat, Proc};
use crate::stored::{StoreCounts, StoredSignatures};
use crate::sys::{self, CpuMap, OsMask, PackedMask, SysError};
use crate::tracker::{Found, PinWindow};
use hetsched_core::observe::{CoreObs, ThreadObs, ThreadState, View};
use hetsched_core::policy::{Hint, PageMove, Placement, Policy, Signal};
use hetsched_core::{AppId, CoreId, CpuSet, Signature, ThreadId, Topology};
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

/// Per managed thread: what the kernel calls it and what the engine did to it. The slot of an
/// exited thread (and its id) is given to the next new thread; what it did is folded into
/// [`Totals`] first.
struct Slot {
    /// Descriptors taken from the [`sys::FD_BUDGET`] for it.
    fds: u64,
    tid: u32,
    pid: u32,
    start_ticks: u64,
    stat: Option<File>,
    counters: Option<ThreadCounters>,
    /// The mask the thread had when found (or that it set itself since).
    original: PackedMask,
    /// The mask the engine set last.
    applied: Option<PackedMask>,
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

/// A process with managed threads.
struct LiveProcess {
    app: AppId,
    /// Its command name: its main thread's, followed through exec.
    name: String,
    /// Its threads managed now. A process none of whose threads we manage stays while it lives
    /// (its unmanaged threads may start managed ones), and is counted once it is gone.
    threads: u32,
    /// With the pid, a name no other process will have.
    start_ticks: u64,
    /// The signature of the program it runs, from the signature store (or `run --signature`):
    /// its threads carry it from their start.
    signature: Option<std::sync::Arc<Signature>>,
}

/// Most process names the summary keeps a row for; the processes of further names are counted
/// together under [`OTHER_PROCESSES`] (bounded memory whatever a daemon sees in a month).
pub const MAX_PROCESS_NAMES: usize = 256;

/// How long a policy that places by hints alone may wait for its first hint before the user is
/// told that none came (ours).
pub const HINT_GRACE_NS: u64 = 2_000_000_000;

/// Every this many intervals, processes without managed threads are checked for having ended.
pub const PROCESS_SWEEP_TICKS: u64 = 100;

/// The summary row of processes past [`MAX_PROCESS_NAMES`] names.
pub const OTHER_PROCESSES: &str = "(other)";

/// Exited slots are compacted away (and their memory given back) at the next interval once more
/// than this many are free and they outnumber the live threads.
pub const COMPACT_FREE_SLOTS: usize = 256;

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

/// Which placements [`Engine::apply`] takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Apply {
    /// New threads' first placements: exempt from the dwell rule and the move cap.
    First,
    /// The policy's decisions: held back by the dwell rule and the move cap, then tried again.
    Decided,
    /// Decisions held back earlier: not counted again.
    Retry,
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
    /// Ids of exited threads, for the next new ones.
    free: Vec<ThreadId>,
    live: usize,
    threads_seen: u64,
    threads_peak: usize,
    by_tid: HashMap<u32, ThreadId>,
    /// By process id.
    procs: HashMap<u32, LiveProcess>,
    next_app: u32,
    totals: Totals,
    cores: Vec<CoreObs>,
    now_ns: u64,
    /// Intervals so far.
    ticks: u64,
    next_rebalance_ns: u64,
    next_residency_ns: u64,
    moves_this_interval: usize,
    pending: Vec<Placement>,
    /// First placements of threads added since the last [`sync_journal`](Self::sync_journal).
    first_placements: Vec<Placement>,
    /// Placements held back by the dwell rule or the move cap, tried again each interval.
    deferred: Vec<Placement>,
    page_moves: Vec<PageMove>,
    decisions: Decisions,
    /// The journal has entries not on disk yet (inherited masks).
    journal_dirty: bool,
    /// A thread was left unmanaged for want of descriptors (noticed once).
    fd_limit_reached: bool,
    /// Hints received: signatures, data fragments.
    signatures_seen: bool,
    fragments_seen: bool,
    /// The policy's hint-borne signals were found missing (noticed once).
    hints_missing_noticed: bool,
    restored: Restored,
    notices: Vec<String>,
    /// Where programs' signatures come from when they start (policies that use signatures only).
    stored: Option<StoredSignatures>,
    /// Masks set on threads, each with the mask it replaced: a process created by a thread that
    /// held one inherits it, and may be seen only after its creator is gone.
    pins: Vec<Pin>,
}

/// A mask the engine set on threads whose mask before was `original`, and when it was held
/// (clock ticks after boot, the clock of the start times in /proc).
#[derive(Clone, Debug)]
struct Pin {
    applied: PackedMask,
    original: PackedMask,
    since_ticks: u64,
    /// When a thread last stopped holding it (it may be held still).
    released_ticks: u64,
}

/// Most pins remembered; past it, the one released longest ago is forgotten.
pub const MAX_PINS: usize = 1024;

/// A pin no thread holds is forgotten this long (clock ticks: 60 s at 100 Hz) after its release:
/// a process that inherited it is seen within an interval or a reconciling scan.
pub const PIN_MEMORY_S: u64 = 60;

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
            // Residency is read from /proc; signatures and data fragments are supplied by
            // applications through the hint socket.
            Signal::NodeResidency | Signal::Signatures | Signal::DataFragments => false,
        })
        .collect()
}

impl Slot {
    /// The mask the thread has as far as the engine knows: the one it set last, else the user's.
    fn expected_mask(&self) -> OsMask {
        self.applied.as_ref().unwrap_or(&self.original).unpack()
    }
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
            free: Vec::new(),
            live: 0,
            threads_seen: 0,
            threads_peak: 0,
            by_tid: HashMap::new(),
            procs: HashMap::new(),
            next_app: 0,
            totals: Totals::default(),
            cores: vec![CoreObs::default(); n],
            now_ns: 0,
            ticks: 0,
            next_rebalance_ns: period,
            next_residency_ns: 0,
            moves_this_interval: 0,
            pending: Vec::new(),
            first_placements: Vec::new(),
            deferred: Vec::new(),
            page_moves: Vec::new(),
            decisions: Decisions::default(),
            journal_dirty: false,
            fd_limit_reached: false,
            signatures_seen: false,
            fragments_seen: false,
            hints_missing_noticed: false,
            restored: Restored::default(),
            notices,
            stored: None,
            pins: Vec::new(),
        }
    }

    /// Give programs their stored signatures when they start: a new thread of a process whose
    /// executable has a store entry (or that `run --signature` names) carries that signature
    /// from its start, as a thread of the simulator does; the threads of a process that execs
    /// such a program get it as a signature hint. Only for a policy that uses signatures; for
    /// the others nothing is looked up.
    pub fn set_stored_signatures(&mut self, stored: StoredSignatures) {
        if self
            .policy
            .as_ref()
            .is_some_and(|p| p.needs().contains(&Signal::Signatures))
        {
            self.stored = Some(stored);
        }
    }

    /// Counts of signature store lookups, when the engine looks signatures up.
    pub fn stored_counts(&self) -> Option<StoreCounts> {
        self.stored.as_ref().map(|s| s.counts)
    }

    /// Process `pid`'s signature from the store, if the engine looks signatures up.
    fn stored_signature(&mut self, pid: u32) -> Option<std::sync::Arc<Signature>> {
        self.stored.as_mut()?.for_process(pid)
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
        self.live
    }

    /// Room for `n` more threads at once (a batch the tracker found): the tables grow to what is
    /// needed rather than to the next power of two.
    pub fn reserve(&mut self, n: usize) {
        let needed = n.saturating_sub(self.free.len());
        self.slots.reserve(needed);
        self.obs.reserve(needed);
    }

    /// The most threads managed at once so far.
    pub fn threads_peak(&self) -> usize {
        self.threads_peak
    }

    /// Thread slots held (live threads and exited ones whose slot awaits a new thread).
    pub fn slots_held(&self) -> usize {
        self.slots.len()
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
        self.deferred.clear();
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
            run_queues: None,
            resident_changed: None,
            lifecycle_changed: None,
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
                    .or_else(|| e.downcast_ref::<&str>().map(ToString::to_string))
                    .unwrap_or_else(|| "panic".into());
                self.disable(msg);
                None
            }
        }
    }

    /// A hint that passed the socket's checks.
    pub fn hint(&mut self, tid: u32, hint: &Hint) {
        let Some(&id) = self.by_tid.get(&tid) else {
            return;
        };
        match hint {
            Hint::DataFragment { next, .. } => {
                self.fragments_seen = true;
                self.obs[id.index()].data_fragment = *next;
                if let Some(df) = *next {
                    let pid = self.slots[id.index()].pid;
                    let name = self.procs.get(&pid).map_or("", |p| p.name.as_str());
                    self.totals.fragment(name, df, true, None);
                }
            }
            Hint::Signature(s) => {
                self.signatures_seen = true;
                self.obs[id.index()].signature = Some(s.clone());
            }
        }
        // The sender runs now (it just sent the hint) and is about to be placed: like a thread
        // the simulator places, it counts on no core until its placement puts it on one, so its
        // own load does not weigh against the core it was last seen on.
        self.uncount(id.index());
        let o = &mut self.obs[id.index()];
        o.state = ThreadState::Runnable;
        o.cpu = None;
        self.call(|p, v, out| p.on_hint(v, id, hint, out));
        self.apply(Apply::Decided);
    }

    pub fn tick(&mut self, now_ns: u64) {
        self.now_ns = now_ns;
        if now_ns >= HINT_GRACE_NS && !self.hints_missing_noticed {
            let missing = self.hint_signals_missing();
            if !missing.is_empty() {
                self.hints_missing_noticed = true;
                self.notices.push(format!(
                    "policy {} places threads by {} alone, which applications send through the hint socket (docs/live.md, Hints); none has arrived in {} s, so it places nothing",
                    self.policy_name,
                    missing.iter().map(|s| s.name()).collect::<Vec<_>>().join(" and "),
                    HINT_GRACE_NS / 1_000_000_000
                ));
            }
        }
        if self.ticks.is_multiple_of(PROCESS_SWEEP_TICKS) {
            self.sweep_processes();
            self.forget_old_pins();
        }
        if self.free.len() > COMPACT_FREE_SLOTS && self.free.len() > self.live {
            self.compact();
        }
        self.sync_journal();
        self.moves_this_interval = 0;
        self.refresh();
        self.retry_deferred();
        if self.policy.as_ref().is_some_and(|p| !p.is_baseline()) {
            for c in 0..self.cores.len() {
                let core = CoreId(c as u32);
                if self.cores[c].is_idle() && self.managed.contains(core) {
                    self.call(|p, v, out| p.on_core_idle(v, core, out));
                    // Applied before the next callback, which then sees it.
                    self.apply(Apply::Decided);
                }
            }
            if now_ns >= self.next_rebalance_ns {
                let period = self
                    .policy
                    .as_ref()
                    .map_or(1, |p| p.rebalance_period_ns().max(1));
                self.next_rebalance_ns = now_ns + period;
                self.call(|p, v, out| p.rebalance(v, out));
                self.apply(Apply::Decided);
            }
        }
        self.move_pages();
    }

    /// The signals of a policy that places by hints alone (its every need comes through the hint
    /// socket) that no application has sent yet.
    fn hint_signals_missing(&self) -> Vec<Signal> {
        let Some(needs) = self.policy.as_ref().map(|p| p.needs()) else {
            return Vec::new();
        };
        let hint_borne = |s: &Signal| matches!(s, Signal::Signatures | Signal::DataFragments);
        if needs.is_empty() || !needs.iter().all(hint_borne) {
            return Vec::new();
        }
        needs
            .iter()
            .copied()
            .filter(|s| match s {
                Signal::Signatures => !self.signatures_seen,
                _ => !self.fragments_seen,
            })
            .collect()
    }

    pub fn policy_name(&self) -> &str {
        &self.policy_name
    }
}

#[cfg(test)]
mod tests;

impl Drop for Engine {
    /// The descriptors of the threads still managed go back to the process's budget.
    fn drop(&mut self) {
        for s in self.slots.iter().filter(|s| s.alive) {
            sys::FD_BUDGET.give_back(s.fds);
        }
    }
}
