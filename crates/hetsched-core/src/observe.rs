//! What a policy observes: the `View`. Both backends fill it: the simulator from its model, the live
//! backend from perf counters and /proc. Counters are cumulative (a policy that wants a rate keeps
//! its previous snapshot and takes the difference, so no rate depends on when the backend sampled).

use crate::cpuset::CpuSet;
use crate::ids::{AppId, CoreId, ThreadId};
use crate::signature::Signature;
use crate::topology::Topology;
use std::sync::Arc;

/// Scheduling state of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    /// On a core now.
    Running,
    /// Waiting in a run queue.
    Runnable,
    /// Sleeping or waiting at a barrier.
    Blocked,
    /// Gone. Its slot stays so ids remain stable.
    Exited,
}

/// Cumulative per-thread counters, as a PMU and the kernel would show them. A backend updates them
/// for thousands of threads on its hot path, so they share one cache line with the thread's state
/// and CPU ([`ThreadObs`]): packed to 4-byte alignment (52 bytes), which x86 and Arm load
/// unaligned at no cost; read fields by value (`c.cycles`), not by reference.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, packed(4))]
pub struct Counters {
    /// Core cycles while the thread ran.
    pub cycles: f64,
    pub instructions: f64,
    /// Last-level-cache misses (demand misses plus refills after migrations and switches).
    pub llc_misses: f64,
    /// Last-level-cache references.
    pub llc_refs: f64,
    /// Cycles in which the FPU was busy with this thread's work (BulldOver equation 1 uses the
    /// complement, CYCLES_FPU_EMPTY).
    pub fp_busy_cycles: f64,
    /// CPU time, ns.
    pub cpu_time_ns: f64,
    /// Times the thread changed core.
    pub migrations: u32,
}

impl Counters {
    /// Instructions per cycle over the whole life, or 0.
    pub fn ipc(&self) -> f64 {
        if self.cycles > 0.0 {
            self.instructions / self.cycles
        } else {
            0.0
        }
    }

    /// Difference of two snapshots (self later than `earlier`).
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            cycles: self.cycles - earlier.cycles,
            instructions: self.instructions - earlier.instructions,
            llc_misses: self.llc_misses - earlier.llc_misses,
            llc_refs: self.llc_refs - earlier.llc_refs,
            fp_busy_cycles: self.fp_busy_cycles - earlier.fp_busy_cycles,
            cpu_time_ns: self.cpu_time_ns - earlier.cpu_time_ns,
            migrations: self.migrations - earlier.migrations,
        }
    }
}

/// Cumulative LLC traffic of a thread beyond [`Counters`] (Ding et al. equation 5: the eviction rate
/// `ER = N_e / N_fe`). Read at profiling periods, not at every switch, so it lives outside the
/// first cache line. A backend whose PMU has no such events leaves both at 0; a policy then falls
/// back to `llc_misses / llc_refs`, which equals `N_e / N_fe` in steady state.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LlcTraffic {
    /// `N_e`: lines of this thread evicted from the LLC.
    pub evictions: f64,
    /// `N_fe`: lines the thread's L2 evictions wrote into the LLC.
    pub fills: f64,
}

impl LlcTraffic {
    /// Difference of two snapshots (self later than `earlier`).
    pub fn since(&self, earlier: &LlcTraffic) -> LlcTraffic {
        LlcTraffic {
            evictions: self.evictions - earlier.evictions,
            fills: self.fills - earlier.fills,
        }
    }
}

/// One thread as a policy sees it. The first cache line holds what a backend writes at every
/// context switch: state, CPU and counters (12 + 52 bytes); the second, the LLC traffic written
/// beside them, the thread's process and data fragment, and its signature.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct ThreadObs {
    pub state: ThreadState,
    /// The core it runs on, or last ran on (or was queued on).
    pub cpu: Option<CoreId>,
    pub counters: Counters,
    /// What its LLC misses did to the cache (Ding et al. equation 5). Written at every bill beside
    /// the counters, so it follows them on the next cache line.
    pub llc_traffic: LlcTraffic,
    /// Who it is and what it works on share the second cache line too: a policy's pass over
    /// every thread (which process, which fragment) reads two lines a thread, not three.
    pub id: ThreadId,
    pub app: AppId,
    /// The data fragment the thread works on, when the application says (Pinter section 4).
    pub data_fragment: Option<u64>,
    /// The thread's architectural signature (HASS section 3), when its binary or the application
    /// supplied one. On the second line too: a pass over every thread that estimates each one's
    /// benefit from a faster core (`hetsched`) asks for it beside the counters' second half.
    pub signature: Option<Arc<Signature>>,
    /// Where it may run: the user's mask intersected with the policy's last placement.
    pub allowed: CpuSet,
    /// The mask the user gave it; a placement never widens beyond it.
    pub user_allowed: CpuSet,
    /// Resident bytes per NUMA node that this thread brought in (AMPS section 2.4.2). Empty when
    /// the backend counts none (the simulator running a workload that never allocates, the live
    /// backend for an exited thread): read as zero bytes on every node.
    pub resident_bytes: Vec<u64>,
}

impl Clone for ThreadObs {
    fn clone(&self) -> Self {
        ThreadObs {
            state: self.state,
            cpu: self.cpu,
            counters: self.counters,
            id: self.id,
            app: self.app,
            allowed: self.allowed.clone(),
            user_allowed: self.user_allowed.clone(),
            resident_bytes: self.resident_bytes.clone(),
            llc_traffic: self.llc_traffic,
            data_fragment: self.data_fragment,
            signature: self.signature.clone(),
        }
    }

    /// Reuses this observation's sets and vectors: a policy that keeps a copy of the threads (the
    /// `hetsched` parts' views) refreshes it without allocating.
    fn clone_from(&mut self, source: &Self) {
        self.state = source.state;
        self.cpu = source.cpu;
        self.counters = source.counters;
        self.id = source.id;
        self.app = source.app;
        self.allowed.clone_from(&source.allowed);
        self.user_allowed.clone_from(&source.user_allowed);
        self.resident_bytes.clone_from(&source.resident_bytes);
        self.llc_traffic = source.llc_traffic;
        self.data_fragment = source.data_fragment;
        self.signature.clone_from(&source.signature);
    }
}

impl ThreadObs {
    /// A thread that has just appeared: blocked, on no core yet, allowed on `user_allowed`, with
    /// zero counters, no resident pages on any of `nodes` nodes (with 0, an empty
    /// `resident_bytes`), no data fragment and no signature.
    pub fn new(id: ThreadId, app: AppId, user_allowed: CpuSet, nodes: usize) -> Self {
        ThreadObs {
            counters: Counters::default(),
            id,
            app,
            state: ThreadState::Blocked,
            cpu: None,
            allowed: user_allowed.clone(),
            user_allowed,
            resident_bytes: vec![0; nodes],
            llc_traffic: LlcTraffic::default(),
            data_fragment: None,
            signature: None,
        }
    }
}

/// One core as a policy sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreObs {
    /// Runnable threads on the core, the running one included.
    pub runnable: u32,
    /// The thread running now.
    pub current: Option<ThreadId>,
}

impl CoreObs {
    pub fn is_idle(&self) -> bool {
        self.current.is_none()
    }
}

/// The threads waiting in each core's run queue, from a backend that keeps run queues (the
/// simulator): a policy that wants them per core then reads a few per core instead of passing
/// over every thread.
pub trait RunQueues {
    /// Calls `f` with every thread waiting (runnable, not running) on `core`, in no particular
    /// order: exactly the threads whose state is [`ThreadState::Runnable`] and whose CPU is `core`.
    fn for_each_waiting(&self, core: CoreId, f: &mut dyn FnMut(ThreadId));
}

/// A read-only snapshot of the system for a policy decision.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// Time since the start of the run, ns.
    pub now_ns: u64,
    pub topology: &'a Topology,
    /// Every thread ever started, indexed by `ThreadId`.
    pub threads: &'a [ThreadObs],
    /// Every core, indexed by `CoreId`.
    pub cores: &'a [CoreObs],
    /// The waiting threads per core, when the backend keeps them; `None`: find them in `threads`.
    /// A view whose `threads` differ from the backend's (a part of a combined policy sees the
    /// other parts' threads as exited) has `None`.
    pub run_queues: Option<&'a dyn RunQueues>,
    /// The threads whose resident pages changed (in size or node) since the policy's `rebalance`
    /// was last called, each once, in no order, when the backend keeps such a log; `None`: any
    /// thread's may have. A policy that keeps per-thread state reads these instead of every
    /// thread. A view whose `threads` differ from the backend's has `None`.
    pub resident_changed: Option<&'a [ThreadId]>,
    /// The threads that started, blocked, woke, exited, or changed process or data fragment (not
    /// those only billed, queued or dispatched), under the same rules; `None`: any thread may
    /// have.
    pub lifecycle_changed: Option<&'a [ThreadId]>,
}

impl<'a> View<'a> {
    /// The same view without the backend's change logs: for a reader whose last look at the
    /// threads is not the backend's last balance, to which the logs date back.
    pub fn without_logs(&self) -> View<'a> {
        View {
            resident_changed: None,
            lifecycle_changed: None,
            ..*self
        }
    }

    pub fn thread(&self, id: ThreadId) -> &'a ThreadObs {
        &self.threads[id.index()]
    }
    pub fn core(&self, id: CoreId) -> &'a CoreObs {
        &self.cores[id.index()]
    }
    /// Threads that are running or runnable.
    pub fn live_threads(&self) -> impl Iterator<Item = &'a ThreadObs> + 'a {
        self.threads
            .iter()
            .filter(|t| matches!(t.state, ThreadState::Running | ThreadState::Runnable))
    }
}

/// A core of `only` (all cores with `None`) that idles while a thread waits
/// behind another thread on another core although its user mask allows the idle one and
/// `conserving` says the policy promised it would not: the work-conservation invariant of
/// [`crate::Policy::conserves_work_for`] broken. The first such pair, or `None`.
pub fn idle_beside_waiting(
    view: &View<'_>,
    only: Option<CoreId>,
    conserving: impl Fn(ThreadId, CoreId) -> bool,
) -> Option<(CoreId, ThreadId)> {
    idle_beside_waiting_among(view, only, view.threads.iter().map(|t| t.id), conserving)
}

/// [`idle_beside_waiting`] among `candidates` only, in their order: a backend that keeps run
/// queues passes the queued threads (no other thread can wait), which on a large machine with few
/// waiting threads is far fewer than every thread.
pub fn idle_beside_waiting_among(
    view: &View<'_>,
    only: Option<CoreId>,
    candidates: impl IntoIterator<Item = ThreadId>,
    conserving: impl Fn(ThreadId, CoreId) -> bool,
) -> Option<(CoreId, ThreadId)> {
    let idle: CpuSet = match only {
        Some(c) => std::iter::once(c)
            .filter(|&c| view.core(c).runnable == 0)
            .collect(),
        None => view
            .cores
            .iter()
            .enumerate()
            .filter(|(_, c)| c.runnable == 0)
            .map(|(i, _)| CoreId(i as u32))
            .collect(),
    };
    if idle.is_empty() {
        return None;
    }
    candidates
        .into_iter()
        .map(|t| view.thread(t))
        .filter(|t| {
            // Waiting behind another thread: a thread alone on its core's queue is about to run.
            let behind = t.cpu.is_some_and(|c| view.core(c).runnable >= 2);
            t.state == ThreadState::Runnable && behind
        })
        .find_map(|t| {
            t.user_allowed
                .iter_intersection(&idle)
                .find(|&c| conserving(t.id, c))
                .map(|c| (c, t.id))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a backend writes at every context switch fits one cache line.
    #[test]
    fn state_cpu_and_counters_share_the_first_cache_line() {
        let t = ThreadObs::new(ThreadId(0), AppId(0), CpuSet::all(4), 1);
        let base = &raw const t as usize;
        let end_of_counters = &raw const t.counters as usize + size_of::<Counters>();
        assert_eq!(base % 64, 0);
        assert!(end_of_counters - base <= 64, "{}", end_of_counters - base);
        assert!((&raw const t.state as usize) - base < 64);
        assert!((&raw const t.cpu as usize) - base < 64);
        let end_of_traffic = &raw const t.llc_traffic as usize + size_of::<LlcTraffic>();
        assert!(end_of_traffic - base <= 128, "{}", end_of_traffic - base);
        let end_of_fragment = &raw const t.data_fragment as usize + size_of::<Option<u64>>();
        assert!(end_of_fragment - base <= 128, "{}", end_of_fragment - base);
        assert!((&raw const t.app as usize) - base >= 64);
        let end_of_signature =
            &raw const t.signature as usize + size_of::<Option<Arc<Signature>>>();
        assert!(
            end_of_signature - base <= 128,
            "{}",
            end_of_signature - base
        );
    }
}
