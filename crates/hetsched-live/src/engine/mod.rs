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

use crate::counters::{CounterPlan, Role, ThreadCounters};
use crate::journal::{Journal, Restored};
use crate::pages::PageMover;
use crate::procfs::{parse_stat, Proc};
use crate::stored::{StoreCounts, StoredSignatures};
use crate::sys::{self, CpuMap, OsMask, PackedMask, SysError};
use crate::tracker::Found;
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

/// What threads did, folded per core class and per process name: the threads that left, and at
/// the end those still here.
#[derive(Clone, Debug, Default)]
struct Totals {
    /// CPU ns per core class.
    class_ns: Vec<f64>,
    by_name: BTreeMap<String, NameTotals>,
    /// Per process name and data fragment: the hints entering it and the CPUs its threads were
    /// placed on (at most [`MAX_PROCESS_NAMES`] rows; further fragments are not kept).
    fragments: BTreeMap<(String, u64), (u64, CpuSet)>,
}

#[derive(Clone, Debug, Default)]
struct NameTotals {
    processes: u64,
    threads: u64,
    cpu_ns: f64,
    class_ns: Vec<f64>,
    placements_applied: u64,
}

impl Totals {
    fn row(&mut self, name: &str) -> &mut NameTotals {
        let key = if self.by_name.contains_key(name) || self.by_name.len() < MAX_PROCESS_NAMES {
            name
        } else {
            OTHER_PROCESSES
        };
        if !self.by_name.contains_key(key) {
            self.by_name.insert(key.to_string(), NameTotals::default());
        }
        self.by_name.get_mut(key).expect("inserted above")
    }

    /// A thread of a process named `name` entered fragment `df` (`cpus`: where it was placed, if
    /// it was).
    fn fragment(&mut self, name: &str, df: u64, entered: bool, cpus: Option<&CpuSet>) {
        let key = (name.to_string(), df);
        if !self.fragments.contains_key(&key) && self.fragments.len() >= MAX_PROCESS_NAMES {
            return;
        }
        let row = self.fragments.entry(key).or_default();
        row.0 += u64::from(entered);
        if let Some(c) = cpus {
            row.1.union_with(c);
        }
    }

    /// Fold in one thread of a process named `name`.
    fn thread(&mut self, name: &str, s: &Slot) {
        add_into(&mut self.class_ns, &s.class_ns);
        let row = self.row(name);
        row.threads += 1;
        row.cpu_ns += s.last_cpu_ns;
        add_into(&mut row.class_ns, &s.class_ns);
        row.placements_applied += u64::from(s.placements_applied);
    }
}

fn add_into(sum: &mut Vec<f64>, v: &[f64]) {
    if sum.len() < v.len() {
        sum.resize(v.len(), 0.0);
    }
    for (a, b) in sum.iter_mut().zip(v) {
        *a += b;
    }
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

/// The processes of one command name in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessSummary {
    /// The command name (`comm`), or [`OTHER_PROCESSES`].
    pub name: String,
    pub processes: u64,
    pub threads: u64,
    pub cpu_s: f64,
    /// CPU seconds on each core class.
    pub class_s: BTreeMap<String, f64>,
    pub placements_applied: u64,
}

/// One data fragment of one process name in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct FragmentSummary {
    pub process: String,
    pub fragment: u64,
    /// Hints of a thread entering it.
    pub entries: u64,
    /// The CPUs its threads were placed on (kernel cpulist).
    pub cpus: String,
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
    /// Threads managed over the session, and the most at once.
    pub threads_seen: u64,
    pub threads_peak: usize,
    /// CPU seconds of every managed thread on each core class.
    pub class_s: BTreeMap<String, f64>,
    /// Per command name, most CPU first.
    pub processes: Vec<ProcessSummary>,
    /// Per process name and data fragment (threads that hinted theirs): where they ran.
    pub fragments: Vec<FragmentSummary>,
    /// Signature store lookups, when the policy places by signatures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_signatures: Option<StoreCounts>,
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

    /// Process `pid` called exec: it goes by its new name from now on, and its threads get the
    /// new program's stored signature, if it has one, as a signature hint.
    pub fn process_renamed(&mut self, pid: u32) {
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        if let Some(stat) = self.proc.task_stat(pid, pid) {
            p.name = stat.comm;
        }
        if self.stored.is_none() {
            return;
        }
        let signature = self.stored_signature(pid);
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        let unchanged = match (&p.signature, &signature) {
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b) || a == b,
            _ => false,
        };
        p.signature = signature.clone();
        // The exec event can be read after the process was first seen already running the new
        // program: its threads carry this signature from their start.
        let Some(sig) = signature.filter(|_| !unchanged) else {
            return;
        };
        let tids: Vec<u32> = self
            .slots
            .iter()
            .filter(|s| s.alive && s.pid == pid)
            .map(|s| s.tid)
            .collect();
        for tid in tids {
            self.hint(tid, &Hint::Signature(sig.clone()));
        }
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

    /// A thread the tracker found. Returns false when it is not managed after all (gone, or only
    /// allowed on isolated CPUs).
    pub fn add(&mut self, f: Found) -> bool {
        if self.manages(f.tid) {
            return true;
        }
        let Ok(current) = sys::get_affinity(f.tid) else {
            return false;
        };
        // A thread or process started by one we had moved inherits our mask, not the user's: it
        // gets its creator's original, and a journal entry, so it is restored like its creator.
        let packed = PackedMask::pack(&current);
        let creator = self.slots.iter().find(|s| {
            s.alive && (s.pid == f.pid || s.pid == f.ppid) && s.applied.as_ref() == Some(&packed)
        });
        let (original, inherited) = match creator {
            Some(c) => (c.original.unpack(), true),
            None => (current, false),
        };
        let user = self.cpus.to_cores(&original).intersection(&self.managed);
        if user.is_empty() {
            return false;
        }
        // Its counters and its stat file, each while the process's descriptor budget allows:
        // past it a thread is watched through /proc alone (no counters, its stat opened at each
        // read), never left half-managed.
        let counter_fds = self.plan.fds_per_thread();
        let mut short = false;
        let counters = if counter_fds > 0 && sys::FD_BUDGET.take(counter_fds) {
            match self.plan.open(f.tid) {
                Ok(c) => Some(c),
                Err(e) => {
                    sys::FD_BUDGET.give_back(counter_fds);
                    if let SysError::Gone(_) = e {
                        return false;
                    }
                    tracing::debug!("counters: {e}");
                    None
                }
            }
        } else {
            short = counter_fds > 0;
            None
        };
        let stat = if sys::FD_BUDGET.take(1) {
            let f = File::open(self.proc.task_dir(f.pid, f.tid).join("stat")).ok();
            if f.is_none() {
                sys::FD_BUDGET.give_back(1);
            }
            f
        } else {
            short = true;
            None
        };
        let fds = counters.as_ref().map_or(0, |_| counter_fds) + u64::from(stat.is_some());
        if short && !self.fd_limit_reached {
            self.fd_limit_reached = true;
            self.notices.push(format!(
                "the open-file limit leaves {} descriptors for threads: from thread {} on, threads are watched through /proc alone (raise `ulimit -n` for counters on every thread)",
                sys::FD_BUDGET.limit(),
                self.live + 1
            ));
        }
        if self
            .procs
            .get(&f.pid)
            .is_some_and(|p| p.threads == 0 && !self.process_lives(f.pid, p.start_ticks))
        {
            // The pid is another process's now.
            self.retire_process(f.pid);
        }
        // A process seen for the first time: its program's stored signature, if any.
        let signature = if self.procs.contains_key(&f.pid) {
            None
        } else {
            self.stored_signature(f.pid)
        };
        let next_app = &mut self.next_app;
        let proc = &self.proc;
        let process = self.procs.entry(f.pid).or_insert_with(|| {
            let app = AppId(*next_app);
            *next_app = next_app.wrapping_add(1);
            // Named after its main thread (or this one, when the main thread is gone).
            let leader = proc.task_stat(f.pid, f.pid);
            LiveProcess {
                app,
                start_ticks: leader.as_ref().map_or(0, |s| s.start_ticks),
                name: leader
                    .or_else(|| proc.task_stat(f.pid, f.tid))
                    .map(|s| s.comm)
                    .unwrap_or_default(),
                threads: 0,
                signature,
            }
        });
        process.threads += 1;
        let app = process.app;
        let signature = process.signature.clone();
        let slot = Slot {
            fds,
            tid: f.tid,
            pid: f.pid,
            start_ticks: f.start_ticks,
            stat,
            counters,
            original: PackedMask::pack(&original),
            applied: inherited.then(|| PackedMask::pack(&current)),
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
        };
        let nodes = self.topology.nodes().len();
        // An exited thread's id is reused: policies take `on_thread_start` of an id as a new thread.
        let id = match self.free.pop() {
            Some(id) => {
                self.obs[id.index()] = ThreadObs::new(id, app, user, nodes);
                self.slots[id.index()] = slot;
                id
            }
            None => {
                let id = ThreadId(self.obs.len() as u32);
                self.obs.push(ThreadObs::new(id, app, user, nodes));
                self.slots.push(slot);
                id
            }
        };
        self.live += 1;
        self.threads_seen += 1;
        self.threads_peak = self.threads_peak.max(self.live);
        self.by_tid.insert(f.tid, id);
        if let Some(sig) = signature {
            // Known before the policy hears of the thread, as a signature in a workload file.
            self.signatures_seen = true;
            self.obs[id.index()].signature = Some(sig);
        }
        if inherited {
            self.obs[id.index()].allowed = self.cpus.to_cores(&current).intersection(&self.managed);
            if let Some(j) = self.journal.as_mut() {
                // Written with the next batch of changes, or at the next interval.
                j.record(f.tid, f.start_ticks, &original, &current, &current);
                self.journal_dirty = true;
            }
        }
        self.refresh_one(id.index());
        // Counted where it runs, as if it had been there at the last read: the cores' counts
        // and the threads' states stay one picture between reads.
        if let (ThreadState::Runnable | ThreadState::Running, Some(c)) =
            (self.obs[id.index()].state, self.obs[id.index()].cpu)
        {
            self.cores[c.index()].runnable += 1;
        }
        let placed = match self.call(|p, v, _| p.on_thread_start(v, id)) {
            Some(Some(cpus)) => Some(cpus),
            // Not placed by the policy: an inherited pin is not the thread's, so it gets its
            // user's mask back at once (never a sibling's or creator's placement).
            _ if inherited => Some(self.obs[id.index()].user_allowed.clone()),
            _ => None,
        };
        if let Some(cpus) = placed {
            // Counted at once on the least loaded core of its placement, as the simulator counts
            // a thread where it starts (a new thread found asleep is about to run): the next
            // thread of the same pass sees it there, so a burst of new threads spreads instead
            // of all taking the core that looked idlest at the last read. The next interval
            // reads the cores afresh.
            let o = &mut self.obs[id.index()];
            if o.state == ThreadState::Blocked {
                o.state = ThreadState::Runnable;
                o.cpu = None;
            }
            self.settle(id.index(), &cpus);
            // Applied with the rest of the batch, in [`sync_journal`](Self::sync_journal): one
            // journal write for a process that brings ten thousand threads, not one each.
            self.first_placements.push(Placement { thread: id, cpus });
        }
        true
    }

    /// A thread is gone: the policy is told, what it did is folded into the totals, and its
    /// slot and id wait for the next new thread.
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
        sys::FD_BUDGET.give_back(s.fds);
        let pid = s.pid;
        self.uncount(id.index());
        let o = &mut self.obs[id.index()];
        o.state = ThreadState::Exited;
        o.cpu = None;
        // Bounded memory: an exited thread keeps only its fixed-size record.
        o.resident_bytes = Vec::new();
        o.signature = None;
        if let Some(j) = self.journal.as_mut() {
            j.forget(tid);
        }
        self.call(|p, v, _| p.on_thread_exit(v, id));
        self.live -= 1;
        let s = &mut self.slots[id.index()];
        let name = self.procs.get(&pid).map_or("", |p| p.name.as_str());
        self.totals.thread(name, s);
        if let Some(p) = self.procs.get_mut(&pid) {
            p.threads -= 1;
            let start = p.start_ticks;
            if p.threads == 0 && !self.process_lives(pid, start) {
                self.retire_process(pid);
            }
        }
        self.free.push(id);
    }

    fn process_lives(&self, pid: u32, start_ticks: u64) -> bool {
        self.proc
            .process_stat(pid)
            .is_some_and(|s| s.start_ticks == start_ticks && !s.is_dead())
    }

    /// A process is gone: count it under its name.
    fn retire_process(&mut self, pid: u32) {
        if let Some(p) = self.procs.remove(&pid) {
            self.totals.row(&p.name).processes += 1;
        }
    }

    /// Retire the processes without managed threads that have ended since.
    fn sweep_processes(&mut self) {
        let gone: Vec<u32> = self
            .procs
            .iter()
            .filter(|(&pid, p)| p.threads == 0 && !self.process_lives(pid, p.start_ticks))
            .map(|(&pid, _)| pid)
            .collect();
        for pid in gone {
            self.retire_process(pid);
        }
    }

    /// Drop the exited slots at the end of the table and give back what churn left allocated:
    /// after a burst of threads the engine returns to the size of what it manages now.
    fn compact(&mut self) {
        let before = self.slots.len();
        while self.slots.last().is_some_and(|s| !s.alive) {
            self.slots.pop();
            self.obs.pop();
        }
        let n = self.slots.len();
        if n < before {
            self.free.retain(|id| id.index() < n);
        }
        // Lowest ids last, taken first: the table keeps shrinking from its end.
        self.free.sort_unstable_by(|a, b| b.cmp(a));
        fn oversized(capacity: usize, len: usize) -> bool {
            capacity > 2 * len + 64
        }
        let mut shrunk = n < before;
        if oversized(self.slots.capacity(), n) {
            self.slots.shrink_to_fit();
            self.obs.shrink_to_fit();
            shrunk = true;
        }
        if oversized(self.free.capacity(), self.free.len()) {
            self.free.shrink_to_fit();
        }
        if oversized(self.by_tid.capacity(), self.by_tid.len()) {
            self.by_tid.shrink_to_fit();
            shrunk = true;
        }
        self.sweep_processes();
        if oversized(self.procs.capacity(), self.procs.len()) {
            self.procs.shrink_to_fit();
        }
        if shrunk {
            sys::release_free_memory();
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
