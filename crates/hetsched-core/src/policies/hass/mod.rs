//! `hass`: the Heterogeneity-Aware Signature-Supported scheduler of Shelepov, Fedorova et al.
//! (ACM SIGOPS OSR 2009, section 4).
//!
//! 1. **Processor classes and partitions**: cores of one class form one partition, or several when
//!    the class is large ([`MAX_PARTITION_CORES`]); a thread is assigned to one partition and the
//!    backend schedules it inside (the kernel live, the simulator's fair queues simulated).
//! 2. **Base ratings**: when a thread appears (or its application sends a signature hint), its
//!    expected performance on every class is estimated once from its signature ([`estimate`]).
//! 3. **Regular assignment**: the thread goes to the partition where its expected performance,
//!    base rating times the share of a core it would get (`cores / runnable`, at most 1), is
//!    highest. Ties keep the current partition, then go to the faster one.
//! 4. **Refresh**: regular assignment is repeated every [`REFRESH_CPU_NS`] of the thread's CPU time
//!    (not wall time, so the number of refreshes does not grow with the load factor).
//! 5. **Underload protection**: while any partition is underloaded (fewer runnable threads than
//!    cores, not counting the mover), a thread may not move to a partition without a free core.
//! 6. **Optimistic assignment**: when a refresh keeps the thread where it is, it looks for a swap
//!    partner in the one partition of highest expected performance (as the paper's implementation
//!    did), probing at most [`OPTIMISTIC_PROBES`] of its threads at random (seeded); the swap is
//!    made only when it raises both the initiator's expected performance and the system's.
//!    Optimistic swaps ignore underload protection (a swap cannot unbalance the load).
//!
//! The system's expected performance in a swap is the sum of the two threads' expected speedups
//! (rating over the thread's own rating on the slowest class): with absolute instruction rates a
//! thread of naturally low IPC would never win a fast core however much it gains there, while the
//! paper's metric, completion time normalised per benchmark, weighs every benchmark alike.
//!
//! A thread without a signature is left to the backend and not counted (HASS rates only threads
//! whose binary carries a signature). Runnable counters are recomputed from the view at each
//! decision time and updated as this policy moves threads, as the paper's real-time counters are.

pub mod estimate;

use crate::cpuset::CpuSet;
use crate::ids::ThreadId;
use crate::observe::{ThreadObs, View};
use crate::policies::partitions::{is_runnable, runnable_counts, Partitions};
use crate::policy::{Hint, Placement, Policy};
use crate::rng::SeededRng;
use crate::signature::Signature;
use crate::topology::Topology;
use estimate::{base_ratings, ClassModel};

pub use crate::policies::partitions::MAX_PARTITION_CORES;

/// The policy's name, as users pass it and as the registry lists it.
pub const NAME: &str = "hass";

/// CPU time between two refreshes of a thread's assignment, ns. HASS section 4 ties refresh to
/// "a certain amount of CPU time" without giving it; 100 ms is ten Solaris time-sharing quanta at
/// the default priority: rare enough that assignment logic stays far below 0.1% of CPU time
/// (Table 3), frequent enough to follow a change in the mix within a second.
pub const REFRESH_CPU_NS: f64 = 100e6;

/// How often the policy looks for threads due a refresh, ns (our choice: a tenth of the refresh
/// period, so a refresh is late by at most 10% of it).
pub const HASS_CHECK_PERIOD_NS: u64 = 10_000_000;

/// Threads probed for an optimistic swap partner (HASS section 4: "randomized search with a
/// limited amount of probing"; the number is ours).
pub const OPTIMISTIC_PROBES: usize = 4;

/// Relative margin an expected-performance gain must clear, so that rounding never moves a thread.
const GAIN_EPS: f64 = 1e-9;

/// What HASS knows of one thread.
#[derive(Clone, Debug)]
struct Member {
    partition: usize,
    /// Base rating per class (instructions per ns alone on a core of the class).
    base: Vec<f64>,
    /// Base rating over the rating on the slowest class: the expected speedup per class.
    speedup: Vec<f64>,
    /// CPU time at the last (re)assignment, ns.
    cpu_at_assignment: f64,
}

/// Counts of HASS's decisions, for overhead reports (HASS Table 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HassStats {
    pub refreshes: u64,
    /// Moves by regular assignment.
    pub regular_moves: u64,
    /// Swaps by optimistic assignment (each moves two threads).
    pub optimistic_swaps: u64,
}

/// The HASS policy.
pub struct Hass {
    parts: Partitions,
    classes: Vec<ClassModel>,
    /// The slowest class (by clock), where expected speedups are 1.
    slowest: usize,
    members: Vec<Option<Member>>,
    rng: SeededRng,
    /// Runnable threads per partition, valid at `counts_at`.
    counts: Vec<u32>,
    counts_at: Option<u64>,
    /// Runnable threads per partition as of `counts_at` (swap candidates; a thread moved since is
    /// skipped when probed).
    runnable_in: Vec<Vec<ThreadId>>,
    pub stats: HassStats,
}

impl Hass {
    /// A HASS policy; it learns the machine from the first view it sees. `seed` drives the
    /// randomized partner search.
    pub fn new(seed: u64) -> Self {
        Hass {
            parts: Partitions::default(),
            classes: Vec::new(),
            slowest: 0,
            members: Vec::new(),
            rng: SeededRng::new(seed),
            counts: Vec::new(),
            counts_at: None,
            runnable_in: Vec::new(),
            stats: HassStats::default(),
        }
    }

    /// Learn the machine: partitions and class models (once).
    fn know_machine(&mut self, topo: &Topology) {
        if !self.classes.is_empty() {
            return;
        }
        self.parts = Partitions::new(topo);
        self.classes = ClassModel::of_machine(topo);
        let classes = &self.classes;
        self.slowest = (0..classes.len())
            .min_by(|&a, &b| classes[a].ghz.total_cmp(&classes[b].ghz))
            .unwrap_or(0);
        self.counts = vec![0; self.parts.len()];
    }

    fn member(&self, t: ThreadId) -> Option<&Member> {
        self.members.get(t.index()).and_then(|m| m.as_ref())
    }

    /// The partition a thread is assigned to, if HASS manages it.
    pub fn partition_of(&self, t: ThreadId) -> Option<usize> {
        self.member(t).map(|m| m.partition)
    }

    /// Runnable counts for this instant: recomputed once per decision time, then kept current by
    /// this policy's own moves.
    fn refresh_counts(&mut self, view: &View<'_>) {
        self.know_machine(view.topology);
        if self.counts_at != Some(view.now_ns) {
            let members = &self.members;
            let partition_of = |t: ThreadId| {
                members
                    .get(t.index())
                    .and_then(|m| m.as_ref())
                    .map(|m| m.partition)
            };
            self.counts = runnable_counts(view, &self.parts, partition_of);
            self.runnable_in = vec![Vec::new(); self.parts.len()];
            for t in view.threads.iter().filter(|t| is_runnable(t.state)) {
                if let Some(p) = partition_of(t.id) {
                    self.runnable_in[p].push(t.id);
                }
            }
            self.counts_at = Some(view.now_ns);
        }
    }

    fn rate(&self, sig: &Signature, cpu_ns: f64) -> Member {
        let base = base_ratings(sig, &self.classes);
        let slow = base[self.slowest];
        let speedup = base.iter().map(|b| b / slow).collect();
        Member {
            partition: 0,
            base,
            speedup,
            cpu_at_assignment: cpu_ns,
        }
    }

    /// Expected performance of `m` in partition `p` holding `n` runnable threads (itself included).
    fn expected(&self, m: &Member, p: usize, n: u32) -> f64 {
        let class = self.parts.class(p).index();
        m.base[class] * share(self.parts.size(p), n)
    }

    /// Regular assignment (HASS section 4): the partition of highest expected performance among
    /// those the underload rule allows. `current` is the thread's partition when it is counted
    /// there as runnable.
    fn regular_choice(&self, m: &Member, current: Option<usize>, obs: &ThreadObs) -> usize {
        let without_me = |p: usize| self.counts[p] - u32::from(current == Some(p));
        let underloaded = (0..self.parts.len()).any(|q| without_me(q) < self.parts.size(q));
        // Partitions come fastest first: on a tie the earlier one wins, except that the current
        // partition wins every tie (no move without a gain).
        let mut best: Option<(usize, f64)> = None;
        for p in 0..self.parts.len() {
            if !self.parts.usable(p, &obs.user_allowed) {
                continue;
            }
            let stays = current == Some(p);
            if !stays && underloaded && without_me(p) >= self.parts.size(p) {
                continue;
            }
            let perf = self.expected(m, p, without_me(p) + 1);
            let wins = match best {
                None => true,
                Some((_, bp)) if stays => perf >= bp * (1.0 - GAIN_EPS),
                Some((_, bp)) => perf > bp * (1.0 + GAIN_EPS),
            };
            if wins {
                best = Some((p, perf));
            }
        }
        best.map(|(p, _)| p).or(current).unwrap_or(0)
    }

    /// Optimistic assignment (HASS section 4): a swap with a thread of the partition where the
    /// initiator would do best. Returns the partner.
    fn optimistic_partner(
        &mut self,
        view: &View<'_>,
        me: ThreadId,
        current: usize,
    ) -> Option<(ThreadId, usize)> {
        let m = self.member(me)?;
        let obs = view.thread(me);
        let here = self.expected(m, current, self.counts[current]);
        let target = (0..self.parts.len())
            .filter(|&p| p != current && self.parts.usable(p, &obs.user_allowed))
            .map(|p| (p, self.expected(m, p, self.counts[p])))
            .filter(|&(_, perf)| perf > here * (1.0 + GAIN_EPS))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))?
            .0;
        let n = self.runnable_in[target].len();
        if n == 0 {
            return None;
        }
        let (cc, tc) = (
            self.parts.class(current).index(),
            self.parts.class(target).index(),
        );
        let (sc, st) = (
            share(self.parts.size(current), self.counts[current]),
            share(self.parts.size(target), self.counts[target]),
        );
        for _ in 0..OPTIMISTIC_PROBES.min(n) {
            let partner = self.runnable_in[target][self.rng.below(n)];
            let Some(p) = self.member(partner) else {
                continue;
            };
            let obs = view.thread(partner);
            if partner == me
                || p.partition != target
                || !is_runnable(obs.state)
                || !self.parts.usable(current, &obs.user_allowed)
            {
                continue;
            }
            let m = self.member(me)?;
            let before = m.speedup[cc] * sc + p.speedup[tc] * st;
            let after = m.speedup[tc] * st + p.speedup[cc] * sc;
            if after > before * (1.0 + GAIN_EPS) {
                return Some((partner, target));
            }
        }
        None
    }

    fn assign(&mut self, t: ThreadId, p: usize, cpu_ns: f64, out: &mut Vec<Placement>) {
        if let Some(Some(m)) = self.members.get_mut(t.index()) {
            m.partition = p;
            m.cpu_at_assignment = cpu_ns;
        }
        out.push(Placement::new(t, self.parts.cores(p).clone()));
    }

    /// A refresh of one runnable, managed thread.
    fn refresh(&mut self, view: &View<'_>, t: ThreadId, out: &mut Vec<Placement>) {
        let obs = view.thread(t);
        let Some(m) = self.member(t) else {
            return;
        };
        let current = m.partition;
        let choice = self.regular_choice(m, Some(current), obs);
        self.stats.refreshes += 1;
        let cpu = obs.counters.cpu_time_ns;
        if choice != current {
            self.counts[current] -= 1;
            self.counts[choice] += 1;
            self.stats.regular_moves += 1;
            self.assign(t, choice, cpu, out);
            return;
        }
        if let Some(Some(m)) = self.members.get_mut(t.index()) {
            m.cpu_at_assignment = cpu;
        }
        if let Some((partner, target)) = self.optimistic_partner(view, t, current) {
            self.stats.optimistic_swaps += 1;
            self.assign(t, target, cpu, out);
            let pcpu = view.thread(partner).counters.cpu_time_ns;
            self.assign(partner, current, pcpu, out);
        }
    }

    /// Rate a thread from its signature and give it a partition by regular assignment.
    fn admit(&mut self, view: &View<'_>, t: ThreadId, sig: &Signature) -> CpuSet {
        self.refresh_counts(view);
        let obs = view.thread(t);
        let mut m = self.rate(sig, obs.counters.cpu_time_ns);
        // A new thread is about to run; a known one counts where it is if it is runnable. The
        // counts are this instant's: a thread whose state changed since they were taken (a
        // backend shows a thread that just sent a hint as runnable) may not be in them, and is
        // then taken as not counted rather than subtracted from a partition that holds no one.
        let known = self.member(t).map(|old| old.partition);
        let counted = known.filter(|&p| is_runnable(obs.state) && self.counts[p] > 0);
        let p = self.regular_choice(&m, counted, obs);
        m.partition = p;
        if let Some(old) = counted {
            self.counts[old] -= 1;
        }
        if counted.is_some() || known.is_none() {
            self.counts[p] += 1;
        }
        if self.members.len() <= t.index() {
            self.members.resize(t.index() + 1, None);
        }
        self.members[t.index()] = Some(m);
        self.parts.cores(p).clone()
    }
}

/// The share of a core each of `n` runnable threads gets in a partition of `cores` cores.
fn share(cores: u32, n: u32) -> f64 {
    if n <= cores {
        1.0
    } else {
        cores as f64 / n as f64
    }
}

impl Policy for Hass {
    fn needs(&self) -> &'static [crate::policy::Signal] {
        use crate::policy::Signal;
        &[Signal::Signatures]
    }

    fn name(&self) -> &str {
        NAME
    }

    fn rebalance_period_ns(&self) -> u64 {
        HASS_CHECK_PERIOD_NS
    }

    fn on_thread_start(&mut self, view: &View<'_>, thread: ThreadId) -> Option<CpuSet> {
        let sig = view.thread(thread).signature.clone()?;
        Some(self.admit(view, thread, &sig))
    }

    fn on_thread_exit(&mut self, _view: &View<'_>, thread: ThreadId) {
        if let Some(slot) = self.members.get_mut(thread.index()) {
            *slot = None;
        }
        // The exited thread no longer counts: recompute at the next decision.
        self.counts_at = None;
    }

    fn on_hint(
        &mut self,
        view: &View<'_>,
        thread: ThreadId,
        hint: &Hint,
        out: &mut Vec<Placement>,
    ) {
        if let Hint::Signature(sig) = hint {
            let cpus = self.admit(view, thread, sig);
            out.push(Placement::new(thread, cpus));
        }
    }

    fn rebalance(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        self.refresh_counts(view);
        for i in 0..self.members.len() {
            let t = ThreadId(i as u32);
            let Some(m) = self.member(t) else {
                continue;
            };
            let obs = view.thread(t);
            if !is_runnable(obs.state) {
                continue;
            }
            if obs.counters.cpu_time_ns - m.cpu_at_assignment >= REFRESH_CPU_NS {
                self.refresh(view, t, out);
            }
        }
    }
}

#[cfg(test)]
mod tests;
