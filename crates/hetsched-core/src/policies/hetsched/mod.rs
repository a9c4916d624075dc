//! `hetsched`: one policy that uses what each paper knows, each where it applies.
//!
//! The papers' policies each see one concern and ignore the others; run alone, each loses where
//! another's concern dominates (the `reproduce matrix` table in `docs/policies.md`). This policy
//! gives every thread to the *part* that answers its situation, and the parts share the machine's
//! load through the run-queue lengths every part observes.
//!
//! | part        | whose threads                                              | from                 |
//! |-------------|------------------------------------------------------------|----------------------|
//! | `fragments` | threads whose application names their data fragment, on a one-speed machine | Pinter section 4.1, groups split at arrival |
//! | `amps`      | every other thread on an asymmetric machine, of single- and multi-threaded processes alike | AMPS sections 2.2-2.4, plus HASS/Ding benefit swaps and cores held alone ([`solo`]) |
//! | `fpu`       | every other thread on a one-speed machine with shared FPUs | BulldOver section 5  |
//! | `backend`   | everything else: no placement, the backend balances        | (Linux)              |
//!
//! Why these boundaries:
//! - **Data fragments first, on one-speed machines.** A hint is the application's own statement of
//!   sharing, stronger than any counter: threads of one fragment run on one CPU in succession
//!   (Pinter), each group at most a fair share of a CPU's runnable threads (split at arrival, so a
//!   barrier job whose threads all name one fragment is not run one thread at a time on one CPU:
//!   a thread a core on 16 equal cores, 0.53x the kernel's balance unsplit, 0.73x split). Pinter
//!   designed for equal CPUs: on an asymmetric machine a group pinned to one CPU is held to that
//!   CPU's speed, and no capacity balance moves it; such a barrier job, a thread a core, ran at
//!   0.24-0.73x the baseline on eight asymmetric machines as a group and at 0.88-1.08x with AMPS,
//!   which takes fragment threads there.
//! - **No process placed whole.** Ding et al. (section 3.3) place each multi-threaded process whole
//!   on the fast or the slow side, ranked by its speedup factor, since a barrier-synchronised
//!   process split across the sides runs at its slow threads' pace. Against today's capacity-aware
//!   kernel that lost far more often than it won: on the 219 machine-and-workload pairs of the
//!   user files (`tests/user_files`), placing processes whole whenever two or more competed and
//!   one fitted the fast cores (as an earlier version did, in a part run by `numa-amp`, with
//!   further conditions each found on a loss:
//!   no process wider than a side, more busy cores than fast ones, no process blocked most of the
//!   time) left 82 pairs below the promise; AMPS's balance of their threads left 51 (among the
//!   losses this removes: request services held whole on fast cores they left idle, a memory-heavy
//!   barrier job held whole on the slow side and finishing last). AMPS's balance keeps every
//!   thread of a barrier job at the same pace by capacity (AMPS section 4.2, OpenMP), and its
//!   idle cores pull the threads that lag. On Ding's own PARSEC-like mix it gives 1.051x the
//!   baseline against `numa-amp`'s 1.040x (`reproduce matrix`). The same measurement on one-speed NUMA machines
//!   (below) had already kept whole processes off those.
//! - **Threads by AMPS, ranked by benefit**: every thread gets AMPS's scaled-load balance,
//!   faster-core-first and its NUMA migration rule. On top, the fast cores go to the
//!   single-threaded programs that gain most from them (a thread of a multi-threaded process
//!   waits for its siblings, so its own gain is not its process's) ([`benefit`]: HASS's signature
//!   estimate when a signature is known, the same model fed by online counters otherwise), by swaps
//!   that keep AMPS's balance, with a margin and a dwell time against the IPC-driven algorithm's
//!   thrashing, and across nodes only where AMPS's overhead prediction allows. Busy programs that
//!   the pinning left on cores that offer them less (a slow core, a shared one) take turns with
//!   the best served ones by the same swaps ([`benefit`], progress swaps), so no program is
//!   left behind for the whole run.
//! - **Single-threaded programs alone on the faster cores while threads outnumber cores**
//!   ([`solo`]): AMPS's balance says how many threads share each core, not which; a program that
//!   can use one core only finishes last when it shares one, while a wide process can use every
//!   core the others leave.
//! - **Shared FPUs on one-speed machines** (BulldOver): with one core type, capacity balance has
//!   nothing to add to the backend's; the co-location cost that remains is the shared FPU, so the
//!   most FP-intensive threads are bound one per module and the rest left to the backend.
//! - **One-speed NUMA machines: no whole processes.** Placed whole per NUMA domain (`numa-amp`'s
//!   NUMA part), processes lost to the kernel's balance on 57 of 80 one-speed NUMA machines and
//!   workloads of 2-4 multi-threaded processes (worst 0.65x: barrier jobs a little wider than a
//!   node, three equal processes on two nodes leaving one node twice as loaded, processes moved
//!   into domains while nothing competed for one, leaving their pages behind); left to the backend
//!   (or the FPU part), 11 did, all on machines with shared FPUs, worst 0.92x.
//!
//! Each part is the paper's policy itself ([`Amps`], [`Bulldover`], [`DataSharing`]), run on a
//! view in which the threads of the other parts have exited (it sees their load on the cores, not
//! the threads). A thread that changes part (its application names a data fragment or stops
//! naming one) leaves the old part as if it had exited and enters the new one as if it had
//! started. Every part keeps its own period. The parts degrade as their signals do: without
//! counters the benefit swaps and the FPU part see no difference between threads and place
//! nothing extra ([`Policy::needs`] lists every signal the parts use).

pub mod benefit;
mod counts;
mod live;
mod solo;
#[cfg(test)]
mod tests;

use crate::cpuset::CpuSet;
use crate::ids::{CoreId, ThreadId};
use crate::observe::{ThreadObs, ThreadState, View};
use crate::policies::amps::{Amps, AmpsConfig, NumaMode, AMPS_BALANCE_PERIOD_NS};
use crate::policies::bulldover::{Bulldover, BulldoverConfig, BULLDOVER_PERIOD_NS};
use crate::policies::data_sharing::{DataSharing, DS_BALANCE_PERIOD_NS};
use crate::policy::{Hint, PageMove, Placement, Policy, Signal};
use crate::topology::Topology;
use benefit::Benefit;
use counts::{Activity, ProcessCounts, WindowEnds};
use live::LiveThreads;
use solo::Solo;

/// The policy's name, as users pass it and as the registry lists it.
pub const NAME: &str = "hetsched";

/// The part of the policy that places a thread (module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    Backend,
    Amps,
    Fpu,
    Fragments,
}

impl Part {
    const ALL: [Part; 4] = [Part::Backend, Part::Amps, Part::Fpu, Part::Fragments];

    fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Part::Backend => "backend",
            Part::Amps => super::amps::NAME,
            Part::Fpu => "fpu",
            Part::Fragments => "fragments",
        }
    }
}

/// What decides the parts: the machine's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// More than one core speed.
    pub asymmetric: bool,
    /// Modules whose cores share an FPU.
    pub shared_fpu: bool,
}

impl Shape {
    pub fn of(topo: &Topology) -> Shape {
        Shape {
            asymmetric: topo.is_asymmetric(),
            shared_fpu: topo
                .modules()
                .iter()
                .any(|m| m.shares_fpu && m.cores.len() > 1),
        }
    }
}

/// The part for a live thread (module doc's table): on a one-speed machine a thread whose
/// application names its data fragment is the fragments part's; any other thread is AMPS's on an
/// asymmetric machine, the FPU part's on a one-speed machine with shared FPUs, and the backend's
/// otherwise.
pub fn part_for(shape: Shape, t: &ThreadObs) -> Part {
    part_by(shape, t.data_fragment.is_some())
}

/// [`part_for`] from what it reads of the thread: whether its application names its data
/// fragment.
fn part_by(shape: Shape, has_fragment: bool) -> Part {
    if has_fragment && !shape.asymmetric {
        Part::Fragments
    } else if shape.asymmetric {
        Part::Amps
    } else if shape.shared_fpu {
        Part::Fpu
    } else {
        Part::Backend
    }
}

/// How long after its CPU time last grew a blocked thread still counts as part of its process's
/// work (ours: twice the 1 s sampling period of BulldOver and Ding et al., so a thread that waits
/// at a barrier or for I/O between two samples keeps counting).
pub const ACTIVE_WINDOW_NS: u64 = 2_000_000_000;

/// Settings.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HetschedConfig {
    /// AMPS's running-thread migration policy; `None`: the paper's default for the machine.
    pub numa: Option<NumaMode>,
    /// Sampling period of the FPU part; `None`: BulldOver's 1 s.
    pub interval_ns: Option<u64>,
}

/// The `hetsched` policy.
pub struct Hetsched {
    amps: Amps,
    fpu: Bulldover,
    fragments: DataSharing,
    benefit: Benefit,
    /// Cores held alone by single-threaded processes of the AMPS part ([`solo`]).
    solo: Solo,
    /// The cores they may hold (learnt with the machine).
    faster_cores: Option<Vec<CoreId>>,
    shape: Option<Shape>,
    /// Per thread: its part while it lives.
    part: Vec<Option<Part>>,
    /// The threads a reassignment reads: those not yet known exited and released from their
    /// part.
    live: LiveThreads,
    /// Live threads per part.
    count: [usize; 4],
    /// When each part is next due.
    due: [u64; 4],
    periods: [u64; 4],
    /// The balance number at which each part last balanced: a part's log of changed threads is
    /// the backend's only if it balanced at the balance before too.
    balanced_in: [Option<u64>; 4],
    /// The view a part sees: the other parts' threads marked exited.
    masked: Vec<ThreadObs>,
    /// Per thread: when it last used CPU.
    activity: Vec<Activity>,
    /// Threads per process that compete for CPU, as of the last [`Hetsched::process_counts`]
    /// and the threads started since ([`Hetsched::count_start`]).
    counts: ProcessCounts,
    /// Blocked threads counted as competing, by when their window closes.
    window_ends: WindowEnds,
    /// Periodic balances so far (the backend's log of changed threads restarts at each).
    balances: u64,
    /// The balance number during or after which the last count was made.
    counted_in: Option<u64>,
    /// The logged threads in thread order, and a bit per thread to order them (reused by every
    /// count).
    log_order: Vec<ThreadId>,
    log_bits: Vec<u64>,
    /// When `counts` was last counted in full.
    counted_at: Option<u64>,
    /// A [`Hetsched::reassign`] gave every thread its part. While the threads' fragments and
    /// exits, and the parts themselves, stay as they were, every thread is in the part it would
    /// be given again.
    assigned: bool,
    /// A thread's process, fragment or exit changed since the last reassignment (seen by a full
    /// count).
    inputs_changed: bool,
    /// A thread changed part since the last reassignment.
    parts_touched: bool,
    /// Pages that follow a swapped thread to its new node.
    page_moves: Vec<PageMove>,
    notice: Option<String>,
}

impl Hetsched {
    pub fn new(cfg: HetschedConfig) -> Self {
        let slow_period = cfg.interval_ns;
        Hetsched {
            amps: Amps::new(AmpsConfig {
                numa: cfg.numa,
                keep_siblings_home: true,
                ..Default::default()
            }),
            fpu: Bulldover::new(BulldoverConfig {
                period_ns: slow_period.unwrap_or(BULLDOVER_PERIOD_NS),
                ..Default::default()
            }),
            fragments: DataSharing::splitting_at_arrival(),
            benefit: Benefit::default(),
            solo: Solo::default(),
            faster_cores: None,
            shape: None,
            part: Vec::new(),
            live: LiveThreads::default(),
            count: [0; 4],
            due: [0; 4],
            balanced_in: [None; 4],
            periods: [
                u64::MAX,
                AMPS_BALANCE_PERIOD_NS,
                slow_period.unwrap_or(BULLDOVER_PERIOD_NS),
                DS_BALANCE_PERIOD_NS,
            ],
            masked: Vec::new(),
            activity: Vec::new(),
            counts: ProcessCounts::default(),
            window_ends: WindowEnds::new(),
            balances: 0,
            counted_in: None,
            log_order: Vec::new(),
            log_bits: Vec::new(),
            counted_at: None,
            assigned: false,
            inputs_changed: false,
            parts_touched: false,
            page_moves: Vec::new(),
            notice: None,
        }
    }

    /// The part that places a thread now.
    pub fn part_of(&self, t: ThreadId) -> Option<Part> {
        self.part.get(t.index()).copied().flatten()
    }

    /// The core a single-threaded program holds alone ([`solo`]).
    pub fn held_core(&self, t: ThreadId) -> Option<CoreId> {
        self.solo.core_of(t)
    }

    /// The benefit estimate of a thread (a fast core's speedup over a slow one), once measured.
    pub fn benefit_of(&self, t: ThreadId) -> Option<f64> {
        self.benefit.estimate(t)
    }

    fn learn(&mut self, topo: &Topology) -> Shape {
        if let Some(s) = self.shape {
            return s;
        }
        let s = Shape::of(topo);
        self.shape = Some(s);
        if !s.asymmetric && !s.shared_fpu {
            self.notice = Some(format!(
                "hetsched: {} has one core type and no shared FPU; it places only \
                 threads whose application names their data fragment",
                topo.name()
            ));
        }
        s
    }

    /// Run `f` on `which`'s policy with a view of its threads only.
    fn with_part<R>(
        &mut self,
        view: &View<'_>,
        which: Part,
        f: impl FnOnce(&mut dyn Policy, &View<'_>) -> R,
    ) -> Option<R> {
        let Hetsched {
            amps,
            fpu,
            fragments,
            masked,
            part,
            count,
            solo,
            ..
        } = self;
        if which == Part::Amps {
            // The cores held alone are not the AMPS part's to balance.
            amps.close(&solo.closed(view), solo.holders());
        }
        let policy: &mut dyn Policy = match which {
            Part::Backend => return None,
            Part::Amps => amps,
            Part::Fpu => fpu,
            Part::Fragments => fragments,
        };
        let live: usize = count.iter().sum();
        if count[which.index()] == live {
            return Some(f(policy, view));
        }
        if masked.len() > view.threads.len() {
            masked.truncate(view.threads.len());
        }
        // A thread of another part shows as exited, with its CPU, counters and residency current;
        // no part reads an exited thread's CPU sets, so those are not copied again.
        for (i, t) in view.threads.iter().enumerate() {
            let mine = part.get(i).copied().flatten() == Some(which);
            if i >= masked.len() {
                masked.push(t.clone());
            } else if mine {
                masked[i].clone_from(t);
            } else {
                let m = &mut masked[i];
                m.id = t.id;
                m.app = t.app;
                m.cpu = t.cpu;
                m.counters = t.counters;
                m.resident_bytes.clone_from(&t.resident_bytes);
            }
            if !mine {
                masked[i].state = ThreadState::Exited;
            }
        }
        let v = View {
            threads: masked,
            // The backend's queues hold the other parts' threads too.
            run_queues: None,
            ..view.without_logs()
        };
        Some(f(policy, &v))
    }

    /// Thread `t` leaves its part (it exited, or moves to another part).
    fn release(&mut self, view: &View<'_>, t: ThreadId) {
        let Some(old) = self.part.get_mut(t.index()).and_then(Option::take) else {
            return;
        };
        self.parts_touched = true;
        self.count[old.index()] -= 1;
        match old {
            Part::Backend => {}
            Part::Amps => {
                self.amps.on_thread_exit(view, t);
                self.benefit.forget(t);
                self.solo.release(t);
            }
            Part::Fpu => self.fpu.on_thread_exit(view, t),
            Part::Fragments => self.fragments.on_thread_exit(view, t),
        }
    }

    /// Record that thread `t` (in no part now) belongs to part `p`.
    fn join(&mut self, t: ThreadId, p: Part) {
        self.parts_touched = true;
        if self.part.len() <= t.index() {
            self.part.resize(t.index() + 1, None);
        }
        self.part[t.index()] = Some(p);
        self.count[p.index()] += 1;
    }

    /// Thread `t` enters part `p`; the mask it should have, if the part says.
    fn enter(&mut self, view: &View<'_>, t: ThreadId, p: Part) -> Option<CpuSet> {
        self.join(t, p);
        // A part's start decision reads the thread and the cores' loads, never the other threads,
        // so it sees the whole view (a masked one per entering thread would cost O(threads) each).
        match p {
            Part::Backend => Some(view.thread(t).user_allowed.clone()),
            Part::Amps => {
                self.amps
                    .close(&self.solo.closed(view), self.solo.holders());
                self.amps.on_thread_start(view, t)
            }
            Part::Fpu => self.fpu.on_thread_start(view, t),
            Part::Fragments => self.fragments.on_thread_start(view, t),
        }
    }

    /// Cores of their own for the AMPS part's single-threaded processes while threads outnumber
    /// cores ([`solo`]), and the AMPS part's other threads off them.
    fn hold_cores(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        let topo = view.topology;
        let shape = self.learn(topo);
        let n = topo.num_cores();
        let total = self.counts.threads as usize;
        // Only where the AMPS part places every thread: another part's threads would share the
        // held cores.
        let live: usize = self.count.iter().sum();
        let all_amps = self.count[Part::Amps.index()] == live && live > 0;
        if !shape.asymmetric || total <= n || !all_amps {
            self.solo.release_all();
            return;
        }
        let given = self
            .faster_cores
            .get_or_insert_with(|| solo::faster_cores(topo));
        // Every competing single-threaded program is the AMPS part's here: none, or more of them
        // than cores to give, and none holds one (below), with no pass over the threads.
        let single = self.counts.single as usize;
        if single == 0 || single > given.len() {
            self.solo.release_all();
            return;
        }
        // The AMPS part's competing single-threaded programs, those that gain most first.
        let mut singles: Vec<(f64, ThreadId)> = Vec::new();
        for (i, a) in self.activity.iter().enumerate().take(view.threads.len()) {
            if a.counted && self.counts.get(a.app) == 1 && self.part[i] == Some(Part::Amps) {
                let id = ThreadId(i as u32);
                singles.push((self.benefit.estimate(id).unwrap_or(1.0), id));
                if singles.len() > given.len() {
                    break;
                }
            }
        }
        // All of them or none: a program left out would share the slowest cores with the rest
        // and finish last. And only while the other threads can keep every core busy once the
        // single-threaded programs are done.
        if singles.is_empty() || singles.len() > given.len() || total - singles.len() < n {
            self.solo.release_all();
            return;
        }
        singles.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let held: Vec<ThreadId> = singles.iter().map(|x| x.1).collect();
        self.solo.assign(view, &held, &given[..held.len()], out);
    }

    /// Give every live thread the part its situation calls for; threads that change part are
    /// placed by their new part at once. Leaves the threads per process that compete for CPU in
    /// `self.counts`.
    fn reassign(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        let shape = self.learn(view.topology);
        // Inside a balance the view's log dates from the previous balance.
        self.process_counts(view, self.balances - 1);
        if self.part.len() < view.threads.len() {
            self.part.resize(view.threads.len(), None);
        }
        let unchanged = !self.inputs_changed && !self.parts_touched && self.assigned;
        self.inputs_changed = false;
        if unchanged {
            // Every thread is in the part the loop below would give it.
            return;
        }
        self.assigned = true;
        // What the count just recorded of each thread decides its part; a thread's observation
        // is read again only if its part changes.
        let n = view.threads.len();
        let mut live = self.live.take(n);
        for &i in &live {
            let i = i as usize;
            if i >= n {
                continue;
            }
            let a = self.activity[i];
            let id = ThreadId(i as u32);
            if a.exited {
                if self.part[i].is_some() {
                    self.release(view, id);
                }
                continue;
            }
            let want = part_by(shape, a.has_fragment);
            let had = self.part[i];
            if had == Some(want) {
                continue;
            }
            let t = view.thread(id);
            if had.is_some() {
                self.release(view, t.id);
            }
            if let Some(set) = self.enter(view, t.id, want) {
                if t.allowed != set.intersection(&t.user_allowed) {
                    out.push(Placement::new(t.id, set));
                }
            }
        }
        // An exited thread out of every part is passed over above until it starts again.
        live.retain(|&i| {
            let i = i as usize;
            i >= n || !self.activity[i].exited || self.part[i].is_some()
        });
        self.live.put_back(live);
        self.parts_touched = false;
    }
}

impl Policy for Hetsched {
    fn name(&self) -> &str {
        NAME
    }

    fn needs(&self) -> &'static [Signal] {
        &[
            Signal::Ipc,
            Signal::LlcMisses,
            Signal::FpBusy,
            Signal::NodeAccesses,
            Signal::NodeResidency,
            Signal::Signatures,
            Signal::DataFragments,
        ]
    }

    fn rebalance_period_ns(&self) -> u64 {
        AMPS_BALANCE_PERIOD_NS
    }

    fn batches_by_data_fragment(&self) -> bool {
        true
    }

    fn rebalance(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        self.balances += 1;
        self.reassign(view, out);
        if view.now_ns >= self.due[Part::Amps.index()] {
            self.hold_cores(view, out);
        }
        let mut amps_moved = Vec::new();
        for p in Part::ALL {
            if p == Part::Backend || self.count[p.index()] == 0 || view.now_ns < self.due[p.index()]
            {
                continue;
            }
            self.due[p.index()] = view.now_ns + self.periods[p.index()];
            // The view's log holds the threads changed since the last balance; a part that did
            // not balance then must not take it for the changes since its own last balance.
            let continuous = self.balanced_in[p.index()] == Some(self.balances - 1);
            self.balanced_in[p.index()] = Some(self.balances);
            let unlogged = view.without_logs();
            let v = if continuous { view } else { &unlogged };
            let from = out.len();
            self.with_part(v, p, |pol, v| pol.rebalance(v, out));
            if p == Part::Amps {
                amps_moved.extend(out[from..].iter().map(|x| x.thread));
            }
        }
        let shape = self.learn(view.topology);
        if shape.asymmetric && self.count[Part::Amps.index()] > 0 && self.benefit.due(view.now_ns) {
            let (part, counts, solo) = (&self.part, &self.counts, &self.solo);
            let ours =
                |t: &ThreadObs| part.get(t.id.index()).copied().flatten() == Some(Part::Amps);
            // The threads AMPS just moved, for a binary search per thread (few: a vector over
            // every thread ever started cost more than the pass).
            amps_moved.sort_unstable();
            self.benefit.observe(
                view,
                ours,
                // A thread of a multi-threaded process waits for its siblings at every barrier:
                // its own gain from a faster core is not its process's, so only single-threaded
                // processes swap.
                |t| {
                    counts.get(t.app) == 1
                        && solo.core_of(t.id).is_none()
                        && amps_moved.binary_search(&t.id).is_err()
                },
            );
            self.benefit.swaps(
                view,
                |t| counts.get(t.app) == 1,
                |c| solo.holder_of(c).is_none(),
                out,
                &mut self.page_moves,
            );
        }
    }

    fn on_thread_start(&mut self, view: &View<'_>, thread: ThreadId) -> Option<CpuSet> {
        let shape = self.learn(view.topology);
        if let Some(a) = self.activity.get_mut(thread.index()) {
            // A thread already counted stays counted once.
            a.restart();
        }
        self.benefit.start(thread);
        self.live.restart(thread);
        self.count_start(view, thread);
        let t = view.thread(thread);
        if self.part_of(thread).is_some() {
            self.release(view, thread);
        }
        let p = part_for(shape, t);
        self.enter(view, thread, p)
            .filter(|set| *set != t.user_allowed)
    }

    fn on_thread_exit(&mut self, view: &View<'_>, thread: ThreadId) {
        self.release(view, thread);
    }

    fn on_core_idle(&mut self, view: &View<'_>, core: CoreId, out: &mut Vec<Placement>) {
        if self.count[Part::Amps.index()] > 0 {
            self.with_part(view, Part::Amps, |pol, v| pol.on_core_idle(v, core, out));
        }
    }

    fn on_hint(
        &mut self,
        view: &View<'_>,
        thread: ThreadId,
        hint: &Hint,
        out: &mut Vec<Placement>,
    ) {
        let Hint::DataFragment { next, .. } = hint else {
            // A signature lands in the thread's observation; the benefit estimate reads it there.
            return;
        };
        let shape = self.learn(view.topology);
        let fragments = part_by(shape, next.is_some()) == Part::Fragments;
        if fragments && self.part_of(thread) != Some(Part::Fragments) {
            // The part's hint handling places it (its start decision would place it twice).
            self.release(view, thread);
            self.join(thread, Part::Fragments);
        }
        if self.part_of(thread) == Some(Part::Fragments) {
            self.fragments.on_hint(view, thread, hint, out);
        }
    }

    /// The AMPS part's threads: the other parts restrict threads by design (a data fragment's
    /// threads in succession on one CPU, FPU groups).
    fn conserves_work_for(&self, view: &View<'_>, thread: ThreadId, core: CoreId) -> bool {
        self.part_of(thread) == Some(Part::Amps)
            && self.solo.core_of(thread).is_none()
            && !self.solo.closes(view, core)
            && self.amps.conserves_work_for(view, thread, core)
    }

    fn take_page_moves(&mut self, out: &mut Vec<PageMove>) {
        out.append(&mut self.page_moves);
    }

    fn take_notice(&mut self) -> Option<String> {
        self.notice.take()
    }
}
