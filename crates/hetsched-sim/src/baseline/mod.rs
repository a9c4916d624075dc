//! Baselines: the operating system's own balancer, which runs under every policy.
//!
//! A policy only restricts where threads may run (their allowed sets); inside those sets the
//! simulated kernel still places new and waking threads, lets idle cores pull waiting ones and
//! balances periodically, as Linux does under CPU affinity. Each baseline is one model of that
//! kernel, chosen by name from [`BASELINES`] through [`crate::SimConfig::baseline`].
//!
//! The seam is narrow on purpose: a baseline sees the run queues read-only
//! ([`RunQueueView`]) and acts through one command ([`BalancePort::move_thread`]); it never sees
//! the engine's own state, so a second baseline cannot depend on the first one's internals.

mod balance;
pub mod linux_2_6;
pub mod linux_6;
pub mod linux_cfs;

use crate::runqueue::RunQueue;
use hetsched_core::{CoreId, CoreObs, CpuSet, IdVec, ThreadId, ThreadObs, Topology};

/// What a baseline sees of the machine: the run queues and each thread's placement, read-only.
#[derive(Clone, Copy)]
pub struct RunQueueView<'a> {
    /// Simulated time now, ns.
    pub now_ns: u64,
    /// The machine.
    pub topology: &'a Topology,
    /// Every thread's observation (allowed set, state, current core).
    pub threads: &'a IdVec<ThreadId, ThreadObs>,
    /// Every core's observation (running thread, runnable count).
    pub cores: &'a IdVec<CoreId, CoreObs>,
    /// Every core's waiting threads.
    pub queues: &'a IdVec<CoreId, RunQueue>,
    /// Cores running nothing.
    pub idle: &'a CpuSet,
    /// Cores with a waiting thread.
    pub queued: &'a CpuSet,
    /// Waiting threads allowed on two cores or more: with none, no balance can move a waiting
    /// thread.
    pub waiting_may_move: u32,
    /// Per thread: its allowed set in 64 bits, bit `k` set when it holds a core of the `k`-th run
    /// of `summary_span` cores ([`summarise`]). A clear bit answers "may it run there?" from a
    /// dense array, without the thread's set: the balancer asks it of every waiting thread of
    /// the sources it tries.
    pub allowed_summary: &'a IdVec<ThreadId, u64>,
    /// Cores per bit of `allowed_summary`.
    pub summary_span: u32,
    /// Per thread: whether its allowed set holds every core or a single one ([`Reach`]), so that
    /// "may it run there?" is answered without a look at the set for a thread allowed anywhere
    /// or pinned (a wake-up asks it of the previous core, and the set is a cache miss away).
    pub allowed_reach: &'a IdVec<ThreadId, Reach>,
}

/// How far a thread's allowed set reaches on a machine, in four bytes: every core, exactly one
/// core (a thread a policy pins), or some other set, which then has to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reach(u32);

impl Reach {
    const EVERYWHERE: u32 = u32::MAX;
    const SOME: u32 = u32::MAX - 1;

    /// The reach of `allowed` on a machine of `cores` cores.
    pub fn of(allowed: &CpuSet, cores: usize) -> Reach {
        if holds_every_core(allowed, cores) {
            return Reach(Self::EVERYWHERE);
        }
        let mut ids = allowed.iter();
        match (ids.next(), ids.next()) {
            (Some(only), None) if only.0 < Self::SOME => Reach(only.0),
            _ => Reach(Self::SOME),
        }
    }

    /// Whether the set holds core `c`, when the reach alone says (a core of the machine for a set
    /// of every core, any core for a set of one): `None` when the set must be read.
    #[inline]
    pub fn holds(self, c: CoreId, cores: usize) -> Option<bool> {
        match self.0 {
            Self::EVERYWHERE if c.index() < cores => Some(true),
            Self::EVERYWHERE | Self::SOME => None,
            only => Some(c.0 == only),
        }
    }
}

/// Cores per bit of a [`RunQueueView::allowed_summary`] on a machine of `cores` cores.
pub fn summary_span(cores: usize) -> u32 {
    cores.div_ceil(64).max(1) as u32
}

/// `allowed` in 64 bits: bit `k` set when it holds one of the cores `k × span ..< (k + 1) × span`.
/// Each run is looked at once, whatever the number of cores in it: a thread of a 1,024-core
/// machine allowed everywhere costs 64 steps, not 1,024.
pub fn summarise(allowed: &CpuSet, span: u32) -> u64 {
    let mut bits = 0u64;
    for (i, &word) in allowed.words().iter().enumerate() {
        let base = i as u32 * 64;
        let mut rest = word;
        while rest != 0 {
            let run = ((base + rest.trailing_zeros()) / span).min(63);
            bits |= 1 << run;
            if run == 63 {
                // Every later core falls in the last run too.
                return bits;
            }
            // The next run's first core; the rest of this run adds nothing.
            let next = (run + 1).saturating_mul(span);
            if next >= base + 64 {
                break;
            }
            rest &= !0u64 << (next - base);
        }
    }
    bits
}

/// Whether `allowed` holds every core of a machine of `cores` cores (a word compare per 64 cores).
pub fn holds_every_core(allowed: &CpuSet, cores: usize) -> bool {
    let words = allowed.words();
    let (full, rest) = (cores / 64, cores % 64);
    words.len() >= full + (rest > 0) as usize
        && words[..full].iter().all(|&w| w == u64::MAX)
        && (rest == 0 || words[full] & ((1u64 << rest) - 1) == (1u64 << rest) - 1)
}

impl<'a> RunQueueView<'a> {
    /// Running plus waiting threads of core `c`.
    #[inline]
    pub fn runnable(&self, c: CoreId) -> u32 {
        self.cores[c].runnable
    }

    /// The cores thread `t` may run on.
    #[inline]
    pub fn allowed(&self, t: ThreadId) -> &'a CpuSet {
        &self.threads[t].allowed
    }

    /// Whether thread `t` may run on core `c`: from its reach when it is allowed everywhere or on
    /// one core, else its summary first and its set only if the summary allows it.
    #[inline]
    pub fn may_run(&self, t: ThreadId, c: CoreId) -> bool {
        if let Some(holds) = self.allowed_reach[t].holds(c, self.num_cores()) {
            return holds;
        }
        let bit = (c.0 / self.summary_span).min(63);
        self.allowed_summary[t] >> bit & 1 == 1 && self.threads[t].allowed.contains(c)
    }

    /// The core thread `t` last ran or waited on.
    #[inline]
    pub fn cpu(&self, t: ThreadId) -> Option<CoreId> {
        self.threads[t].cpu
    }

    /// The threads waiting on core `c`, in queue order.
    #[inline]
    pub fn waiting(&self, c: CoreId) -> impl DoubleEndedIterator<Item = ThreadId> + 'a {
        self.queues[c].threads()
    }

    /// Number of cores.
    #[inline]
    pub fn num_cores(&self) -> usize {
        self.cores.len()
    }
}

/// How a baseline acts on the machine during a balance pass: it reads the queues as they are after
/// each of its own moves, and moves threads one at a time.
pub trait BalancePort {
    /// The run queues now.
    fn view(&self) -> RunQueueView<'_>;
    /// Move thread `t` (waiting or running) to core `to`'s queue.
    fn move_thread(&mut self, t: ThreadId, to: CoreId);
}

/// One model of the kernel's balancer.
pub trait Baseline {
    /// The baseline's name, as in [`BASELINES`].
    fn name(&self) -> &'static str;
    /// The core a new thread is queued on.
    fn place_new(&mut self, rq: &RunQueueView<'_>, t: ThreadId) -> CoreId;
    /// The core a waking (or re-placed) thread is queued on.
    fn place_wake(&mut self, rq: &RunQueueView<'_>, t: ThreadId) -> CoreId;
    /// Core `idle` has nothing to run: the waiting thread it pulls, if any.
    fn newidle_pull(&mut self, rq: &RunQueueView<'_>, idle: CoreId) -> Option<ThreadId>;
    /// A scheduler tick (`tick` counts from 1): periodic balancing on the baseline's own period.
    fn on_tick(&mut self, tick: u64, port: &mut dyn BalancePort);
    /// Thread `t` is about to wake: bring into cache what placing it reads of the baseline's own
    /// state (a hint; no effect on results).
    fn prefetch_wake(&self, _t: ThreadId) {}
}

/// A baseline by name: what the CLI, the experiments and [`crate::SimConfig`] choose from.
#[derive(Clone, Copy, Debug)]
pub struct BaselineEntry {
    /// The name users pass.
    pub name: &'static str,
    /// One line on what it models.
    pub description: &'static str,
    /// A new instance whose random tie-breaks follow `seed`.
    pub make: fn(seed: u64) -> Box<dyn Baseline>,
}

/// Every baseline; the first, today's kernel, is the default.
pub const BASELINES: &[BaselineEntry] = &[
    BaselineEntry {
        name: linux_6::NAME,
        description: "today's Linux on asymmetric machines: capacity-aware wake-up placement, capacity-weighted balance, misfit and reduced-capacity migration of running threads to idle bigger cores",
        make: |seed| Box::new(linux_6::Linux6::new(seed)),
    },
    BaselineEntry {
        name: linux_cfs::NAME,
        description: "Linux CFS of 2.6.32-3.x with symmetric capacities: idle-first placement, wake to the previous or an idle core, newly-idle pulls, periodic balance of run-queue lengths; blind to core speed",
        make: |seed| Box::new(linux_cfs::LinuxCfs::new(seed)),
    },
    BaselineEntry {
        name: linux_2_6::NAME,
        description: "Linux 2.6.16's O(1) scheduler with scheduling domains: fork to the idlest core, wake-ups on the previous core, idle cores pull, busy cores balance every 64 ms; blind to core speed",
        make: |seed| Box::new(linux_2_6::Linux26::new(seed)),
    },
];

/// The default baseline.
pub fn default_baseline() -> &'static BaselineEntry {
    &BASELINES[0]
}

/// The baseline called `name`.
pub fn baseline_by_name(name: &str) -> Option<&'static BaselineEntry> {
    BASELINES.iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary bit stands for a run of `span` cores, the last bit for every core beyond 63
    /// runs: a set is summarised with every run it touches and no other.
    #[test]
    fn a_summary_has_the_bits_of_the_runs_a_set_touches() {
        assert_eq!(summary_span(8), 1);
        assert_eq!(summary_span(64), 1);
        assert_eq!(summary_span(65), 2);
        assert_eq!(summary_span(1024), 16);
        let set: CpuSet = [0, 5, 199].into_iter().map(CoreId).collect();
        assert_eq!(summarise(&set, 4), 1 | 1 << 1 | 1 << 49);
        // Beyond 64 runs (a span too small for the machine) the last bit takes the rest.
        let far: CpuSet = [300, 900].into_iter().map(CoreId).collect();
        assert_eq!(summarise(&far, 4), 1 << 63);
        assert_eq!(summarise(&CpuSet::new(), 16), 0);
    }

    /// The run-by-run summary equals the definition, a bit per core's run, on random sets and
    /// spans that do and do not divide a 64-core word.
    #[test]
    fn a_summary_equals_the_bits_of_every_core() {
        let mut rng = hetsched_core::rng::SeededRng::new(3);
        for _ in 0..2000 {
            let n = 1 + rng.below(1500);
            let span = 1 + rng.below(70) as u32;
            let density = 1 + rng.below(8);
            let set: CpuSet = (0..n)
                .filter(|_| rng.below(density) == 0)
                .map(|c| CoreId(c as u32))
                .collect();
            let want = set
                .iter()
                .fold(0u64, |bits, c| bits | 1u64 << (c.0 / span).min(63));
            assert_eq!(
                summarise(&set, span),
                want,
                "span {span}, set {}",
                set.to_list()
            );
        }
    }

    /// A set holds every core exactly when each core of the machine is in it, whatever it holds
    /// beyond the machine, on machines that do and do not fill their last word.
    #[test]
    fn every_core_means_each_core_of_the_machine() {
        let mut rng = hetsched_core::rng::SeededRng::new(5);
        for _ in 0..2000 {
            let n = 1 + rng.below(300);
            let mut set = CpuSet::all(n);
            if rng.below(2) == 0 {
                set.remove(CoreId(rng.below(n) as u32));
            }
            if rng.below(2) == 0 {
                set.insert(CoreId((n + rng.below(100)) as u32));
            }
            let want = (0..n).all(|c| set.contains(CoreId(c as u32)));
            assert_eq!(
                holds_every_core(&set, n),
                want,
                "{n} cores, set {}",
                set.to_list()
            );
        }
        assert!(!holds_every_core(&CpuSet::new(), 1));
    }

    /// A reach answers for every core exactly as the set it was made from, when it answers at
    /// all, and it answers for sets of every core and of one core.
    #[test]
    fn a_reach_answers_as_its_set() {
        let mut rng = hetsched_core::rng::SeededRng::new(9);
        for _ in 0..2000 {
            let n = 1 + rng.below(200);
            let mut set = match rng.below(3) {
                0 => CpuSet::all(n),
                1 => CpuSet::single(CoreId(rng.below(n) as u32)),
                _ => (0..n)
                    .filter(|_| rng.below(2) == 0)
                    .map(|c| CoreId(c as u32))
                    .collect(),
            };
            if rng.below(4) == 0 {
                set.insert(CoreId((n + rng.below(50)) as u32));
            }
            let reach = Reach::of(&set, n);
            for c in (0..n + 60).map(|c| CoreId(c as u32)) {
                let every = holds_every_core(&set, n);
                let known = if every { c.index() < n } else { set.len() == 1 };
                match reach.holds(c, n) {
                    Some(holds) => {
                        assert_eq!(holds, set.contains(c), "{n}, {}, {c:?}", set.to_list());
                    }
                    None => assert!(!known, "{n} cores, {}, {c:?}: no answer", set.to_list()),
                }
            }
        }
    }
}
