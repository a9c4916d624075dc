//! AMPS NUMA-aware migration of running threads (AMPS section 2.4).
//!
//! When faster-core-first picks a *running* thread to migrate, one of three policies decides
//! (section 2.4.3):
//!
//! | policy      | allows a running thread to move from core A to core B when                  |
//! |-------------|------------------------------------------------------------------------------|
//! | `always`    | always (the default on SMP machines, where all three behave alike)            |
//! | `same-node` | A and B are in the same node                                                  |
//! | `rss`       | the overhead is not predicted high, and the thread is not allocating memory   |
//!
//! The prediction (section 2.4.2, "Prediction algorithm") says *high* when all three hold:
//! 1. A and B are in different nodes;
//! 2. A's node holds the thread's largest per-node resident set;
//! 3. that resident set is larger than B's last-level cache.
//!
//! The allocation phase (section 2.4.3, last paragraph): at each timer interrupt the thread's total
//! resident set is compared with the previous one; if it grew, the thread is allocating.

use crate::ids::{CoreId, ThreadId};
use crate::observe::View;
use crate::prefetch::prefetch;
use crate::topology::Topology;
use std::fmt;
use std::str::FromStr;

/// Which running threads may migrate (AMPS section 2.4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NumaMode {
    Always,
    SameNode,
    Rss,
}

impl NumaMode {
    pub const ALL: [NumaMode; 3] = [NumaMode::Always, NumaMode::SameNode, NumaMode::Rss];

    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            NumaMode::Always => "always",
            NumaMode::SameNode => "same-node",
            NumaMode::Rss => "rss",
        }
    }

    /// The paper's defaults: `always` on SMP ("the default policy in AMPS for SMP systems"), and on
    /// NUMA the policy its evaluation found best, `rss` (section 4.3).
    pub fn default_for(topology: &Topology) -> NumaMode {
        if topology.nodes().len() > 1 {
            NumaMode::Rss
        } else {
            NumaMode::Always
        }
    }
}

impl fmt::Display for NumaMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NumaMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        NumaMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("{s:?}: not a NUMA policy (always, same-node, rss)"))
    }
}

/// The three-condition prediction of section 2.4.2: is moving a thread with these per-node resident
/// bytes from core `from` to core `to` likely to cost many remote misses?
pub fn high_overhead(
    topology: &Topology,
    resident_bytes: &[u64],
    from: CoreId,
    to: CoreId,
) -> bool {
    let (a, b) = (topology.node_of(from), topology.node_of(to));
    // (1) different nodes.
    if a == b {
        return false;
    }
    let on_a = resident_bytes.get(a.index()).copied().unwrap_or(0);
    // (2) A's node has the maximum resident set of the thread's nodes.
    let max = resident_bytes.iter().copied().max().unwrap_or(0);
    if on_a < max {
        return false;
    }
    // (3) that resident set exceeds B's last-level cache.
    let llc_b = topology.llc_of(to).map_or(0, |c| c.size_bytes);
    on_a > llc_b
}

/// Whether a move from core `from` to core `to` takes a thread away from the node that holds the
/// largest of its resident sets: conditions (1) and (2) of [`high_overhead`], whatever the size.
/// The kernel's balancer treats such a move as cache-hot and makes it only once balancing has
/// failed repeatedly (`migrate_degrades_locality`, called from `can_migrate_task` in
/// kernel/sched/fair.c).
pub fn leaves_home(topology: &Topology, resident_bytes: &[u64], from: CoreId, to: CoreId) -> bool {
    let (a, b) = (topology.node_of(from), topology.node_of(to));
    let on_a = resident_bytes.get(a.index()).copied().unwrap_or(0);
    a != b && on_a > 0 && resident_bytes.iter().all(|&r| r <= on_a)
}

/// Whether `mode` lets a running thread move from `from` to `to`. `allocating` is the thread's
/// allocation-phase flag (only the `rss` policy reads it, and only for a move across nodes).
///
/// Section 2.4.3 has `rss` keep a thread in its allocation phase where it is, so that it does not
/// "migrate to other nodes where it continues to allocate memory, causing its resident set to
/// spread across nodes". A move within the node cannot spread it (first touch places the pages
/// on the same node either way), and the overhead prediction of section 2.4.2 is never high
/// within a node; so we apply the condition to moves across nodes only. Applied to every move, it
/// kept a thread that allocates throughout its run (a growing heap, a streaming program) on a
/// slow core for good while a fast core of its own node idled.
pub fn running_move_allowed(
    mode: NumaMode,
    topology: &Topology,
    resident_bytes: &[u64],
    allocating: bool,
    from: CoreId,
    to: CoreId,
) -> bool {
    match mode {
        NumaMode::Always => true,
        NumaMode::SameNode => topology.node_of(from) == topology.node_of(to),
        NumaMode::Rss => {
            topology.node_of(from) == topology.node_of(to)
                || (!allocating && !high_overhead(topology, resident_bytes, from, to))
        }
    }
}

/// The allocation-phase heuristic's memory: the total resident bytes a thread had at the last timer
/// interrupt that found it running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocationPhase {
    previous_rss: u64,
    allocating: bool,
}

impl AllocationPhase {
    /// A timer interrupt found the thread running with this total resident set: it is allocating
    /// if the set grew since the last such interrupt.
    pub fn observe(&mut self, total_rss: u64) {
        self.allocating = total_rss > self.previous_rss;
        self.previous_rss = total_rss;
    }

    pub fn allocating(&self) -> bool {
        self.allocating
    }
}

/// The allocation-phase heuristic for every thread, at each timer interrupt.
///
/// Observing every interrupted thread sums its resident set over the nodes, a cache miss or more
/// a core: with 1,024 cores that was a tenth of `amps`'s run. But a thread's resident set is the
/// one last observed unless it changed since, so when the backend logs the threads whose resident
/// pages changed since the last interrupt ([`View::resident_changed`]), only those need their sum;
/// every other interrupted thread is not allocating. The flags are those that observing every
/// interrupted thread gives (checked in debug builds).
#[derive(Clone, Debug, Default)]
pub struct AllocationWatch {
    phases: Vec<AllocationPhase>,
    /// Per thread: [`PENDING`], [`GROWING`], [`SEEN_NOW`].
    flags: Vec<u8>,
    /// Threads whose resident set may differ from the one last observed: changed since, and not
    /// interrupted at an interrupt yet.
    pending: Vec<ThreadId>,
    /// Threads whose flag may say allocating.
    growing: Vec<ThreadId>,
    /// `pending` names every thread whose resident set may have changed since it was last observed
    /// (false until an interrupt with a log, and again after one without).
    tracking: bool,
}

/// In [`AllocationWatch::pending`].
const PENDING: u8 = 1;
/// In [`AllocationWatch::growing`].
const GROWING: u8 = 2;
/// Observed at this interrupt.
const SEEN_NOW: u8 = 4;

impl AllocationWatch {
    /// Each thread's state, by id.
    pub fn phases(&self) -> &[AllocationPhase] {
        &self.phases
    }

    fn room_for(&mut self, threads: usize) {
        if self.phases.len() < threads {
            self.phases.resize(threads, AllocationPhase::default());
            self.flags.resize(threads, 0);
        }
    }

    /// Thread `t` starts (again) under the policy: nothing observed of it yet.
    pub fn restart(&mut self, t: ThreadId) {
        self.room_for(t.index() + 1);
        self.phases[t.index()] = AllocationPhase::default();
        self.mark(t, PENDING);
    }

    fn mark(&mut self, t: ThreadId, flag: u8) {
        let f = &mut self.flags[t.index()];
        if *f & flag == 0 {
            *f |= flag;
            match flag {
                PENDING => self.pending.push(t),
                GROWING => self.growing.push(t),
                _ => {}
            }
        }
    }

    /// A timer interrupt: every interrupted thread (each core's current one) observed.
    pub fn interrupt(&mut self, view: &View<'_>) {
        self.room_for(view.threads.len());
        let expected =
            (cfg!(debug_assertions) && view.threads.len() <= CHECK_MAX_THREADS).then(|| {
                let mut every = self.phases.clone();
                observe_every_core(&mut every, view);
                every
            });
        match (view.resident_changed, self.tracking) {
            (Some(log), true) => self.observe_changed(view, log),
            (log, _) => {
                observe_every_core(&mut self.phases, view);
                for t in view.cores.iter().filter_map(|c| c.current) {
                    if self.phases[t.index()].allocating() {
                        self.mark(t, GROWING);
                    }
                }
                // With a log from here on, the threads pending are those not observed now: their
                // sets may have changed unseen.
                for t in std::mem::take(&mut self.pending) {
                    self.flags[t.index()] &= !PENDING;
                }
                self.tracking = log.is_some();
                if self.tracking {
                    for t in view.threads.iter().map(|t| t.id) {
                        if !interrupted(view, t) {
                            self.mark(t, PENDING);
                        }
                    }
                }
            }
        }
        if let Some(every) = expected {
            assert!(
                every == self.phases,
                "the allocation flags differ from observing every interrupted thread"
            );
        }
    }

    /// [`Self::interrupt`] from the log of threads whose resident set changed since the last one.
    fn observe_changed(&mut self, view: &View<'_>, log: &[ThreadId]) {
        for &t in log {
            if t.index() < self.flags.len() {
                self.mark(t, PENDING);
            }
        }
        let mut seen = Vec::new();
        let mut i = 0;
        while i < self.pending.len() {
            let t = self.pending[i];
            if interrupted(view, t) {
                let total = total_rss(&view.thread(t).resident_bytes);
                self.phases[t.index()].observe(total);
                self.flags[t.index()] = (self.flags[t.index()] & !PENDING) | SEEN_NOW;
                seen.push(t);
                if self.phases[t.index()].allocating() {
                    self.mark(t, GROWING);
                }
                self.pending.swap_remove(i);
            } else {
                i += 1;
            }
        }
        // An interrupted thread not observed now has the resident set it had when last observed.
        let (phases, flags) = (&mut self.phases, &mut self.flags);
        self.growing.retain(|&t| {
            let p = &mut phases[t.index()];
            if p.allocating && flags[t.index()] & SEEN_NOW == 0 && interrupted(view, t) {
                p.allocating = false;
            }
            if !p.allocating {
                flags[t.index()] &= !GROWING;
            }
            p.allocating
        });
        for t in seen {
            self.flags[t.index()] &= !SEEN_NOW;
        }
    }
}

/// Debug builds check the log-driven observation against observing every interrupted thread, on
/// views of at most this many threads.
const CHECK_MAX_THREADS: usize = 4096;

/// Thread `t` is its core's current thread (the one a timer interrupt interrupts).
fn interrupted(view: &View<'_>, t: ThreadId) -> bool {
    view.threads
        .get(t.index())
        .and_then(|o| o.cpu)
        .and_then(|c| view.cores.get(c.index()))
        .is_some_and(|c| c.current == Some(t))
}

/// Observe every core's current thread, in core order. Each step reads a thread, then its resident
/// set through a pointer; with a thousand cores those are cache misses, so the thread is fetched
/// sixteen cores ahead and what it points to eight ahead.
fn observe_every_core(phases: &mut [AllocationPhase], view: &View<'_>) {
    let current = |i: usize| view.cores.get(i).and_then(|c| c.current);
    for (i, core) in view.cores.iter().enumerate() {
        if let Some(t) = current(i + 16) {
            prefetch(&view.thread(t).resident_bytes);
        }
        if let Some(t) = current(i + 8) {
            let rss = &view.thread(t).resident_bytes;
            rss.iter().step_by(8).for_each(prefetch);
            prefetch(&phases[t.index()]);
        }
        if let Some(t) = core.current {
            let total = total_rss(&view.thread(t).resident_bytes);
            phases[t.index()].observe(total);
        }
    }
}

/// Total resident bytes over every node.
pub fn total_rss(resident_bytes: &[u64]) -> u64 {
    resident_bytes.iter().sum()
}
