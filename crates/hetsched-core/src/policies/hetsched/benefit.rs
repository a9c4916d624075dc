//! How much a thread gains from a faster core, and the swaps that give the fast cores to the threads
//! that gain most (the HASS and Ding observation that memory-bound threads gain least), with the
//! hysteresis the IPC-driven algorithm lacks.
//!
//! The estimate is the ratio of a thread's time on the slowest class to its time on the fastest,
//! for the same instructions:
//! - **from a signature** (HASS section 3, [`estimated_ns`]): execution at a fixed CPI plus the
//!   signature's misses at each class's LLC times the memory latency;
//! - **from online counters** otherwise (the same model, HASS section 3, fed with what the thread
//!   did over the last period): its CPU time splits into stall time, LLC misses times the memory
//!   latency of the node it ran on, and compute time, the rest. Compute time scales with the clock
//!   and the pipeline's CPI factor; stall time does not (Ding et al. equation 1's premise: a thread
//!   bound by memory gains little from a faster core). A machine without LLC-miss counters shows
//!   no stall, so every thread gains alike and nothing is swapped: AMPS's balance alone decides.
//!
//! A swap exchanges the cores of a thread on a faster core and a thread on a slower one, so the
//! run-queue lengths, and with them the AMPS balance, stay as they were. It happens only when the
//! slow thread's estimate exceeds the fast thread's by [`SWAP_MARGIN`], both estimates smoothed
//! over periods ([`BENEFIT_WEIGHT`]) and both threads settled on their cores for
//! [`MIN_DWELL_NS`]: HASS section 6 found the IPC-driven algorithm's swaps on noisy, phase-changing
//! ratios cost more than they won; a margin and a dwell time make a swap need a sustained
//! difference.
//!
//! **Progress swaps** (ours). AMPS's balance says how many threads each core runs, not which, and
//! it pins them: a program that shares a core, or runs on a slow one, stays there for the whole
//! run while others have a fast core to themselves, and finishes long after them (60 programs on
//! 54 cores of four speeds: three shared fast cores to the end, 0.82x `hass`, whose partitions
//! let Linux rotate threads). So the threads take turns. Each thread's received capacity is its
//! CPU time weighted by the capacity of the core it ran on, summed since it began; a busy thread
//! (one that used at least half of what its core offered it over the last period, so not a
//! request service waiting for work) that received the least for its time alive swaps with the
//! best served busy thread, when that one received more by [`SWAP_MARGIN`] and sits on a core that
//! offers each of its threads more (capacity over run-queue length) by the same margin. A swap
//! keeps every run-queue length, as a benefit swap does, and waits out the same dwell time; it
//! never pairs threads the benefit rule would swap back (the one going to the faster class must
//! not gain less by the margin), so the benefit swaps keep their placement. Over a run every
//! busy program receives about the same share of the machine, as under Linux's fair scheduler,
//! and programs of equal length finish together.
//!
//! **Promotions across nodes** (ours): an idle faster core in another node takes a
//! single-threaded program from a slower core, its pages following, where AMPS's overhead
//! prediction keeps AMPS's own idle pull from moving it (`Benefit::promotions`).

use super::live::LiveThreads;
use crate::ids::{CoreId, ThreadId};
use crate::observe::{Counters, ThreadObs, ThreadState, View};
use crate::policies::amps::numa::{self, NumaMode};
use crate::policies::hass::estimate::{estimated_ns, ClassModel};
use crate::policies::partitions::is_runnable;
use crate::policy::{PageMove, Placement};
use crate::signature::Signature;
use crate::topology::Topology;
use std::sync::Arc;

/// How often estimates are updated and swaps considered, ns (ours: ten of AMPS's 4 ms balances
/// would see phase noise; Ding's 1 s reacts to a phase change late; 100 ms is Linux's order for
/// such sampling, see `numa-amp`'s profiling period).
pub const BENEFIT_PERIOD_NS: u64 = 100_000_000;

/// Weight of the newest period in a thread's smoothed estimate (ours): about two periods of memory.
pub const BENEFIT_WEIGHT: f64 = 0.5;

/// How much larger the slow thread's estimate must be than the fast thread's for a swap (ours):
/// the two threads' estimates must differ by 10%, well over the few percent a steady thread's
/// estimate moves between periods.
pub const SWAP_MARGIN: f64 = 0.10;

/// How long both threads of a swap must have stayed on their cores, ns (ours): three estimate
/// periods, so a thread that was just moved is judged on its new core before it moves again.
pub const MIN_DWELL_NS: u64 = 3 * BENEFIT_PERIOD_NS;

/// The benefit rule swaps a thread on a faster core whose estimate is `on_faster` with one on a
/// slower core whose estimate is `on_slower` (module doc): only past the margin.
fn gains_more(on_slower: f64, on_faster: f64) -> bool {
    on_slower > on_faster * (1.0 + SWAP_MARGIN)
}

/// Thread `t`, its process's only one, moves from core `from` to core `to`: when that crosses
/// nodes, its pages elsewhere follow it (Ding et al. section 3.3.2's sticky pages).
fn follow_pages(
    topo: &Topology,
    t: &ThreadObs,
    from: CoreId,
    to: CoreId,
    pages: &mut Vec<PageMove>,
) {
    let (a, b) = (topo.node_of(from), topo.node_of(to));
    let elsewhere: u64 = t
        .resident_bytes
        .iter()
        .enumerate()
        .filter(|&(n, _)| n != b.index())
        .map(|(_, &x)| x)
        .sum();
    if a != b && elsewhere > 0 {
        pages.push(PageMove {
            app: t.app,
            to: b,
            max_bytes: elsewhere,
        });
    }
}

/// AMPS's overhead prediction (`rss`, AMPS section 2.4.2) lets running thread `t` move from core
/// `from` to core `to`.
fn cheap_move(topo: &Topology, t: &ThreadObs, from: CoreId, to: CoreId) -> bool {
    numa::running_move_allowed(NumaMode::Rss, topo, &t.resident_bytes, false, from, to)
}

/// How many of the best served threads a progress swap tries as partners for one thread (ours:
/// enough for every class of a machine, few enough that a round stays linear in the threads).
const PARTNERS_TRIED: usize = 16;

/// A thread's speedup on a core of class `fast` over one of class `slow`, from its signature
/// (HASS section 3).
pub fn signature_benefit(sig: &Signature, fast: &ClassModel, slow: &ClassModel) -> f64 {
    estimated_ns(sig, slow) / estimated_ns(sig, fast)
}

/// A thread's speedup on class `fast` over class `slow` from what it did over one period on a core
/// of class `ran`: `d` its counter differences, `latency_ns` the memory latency it saw. `None` when
/// it did not run.
pub fn counter_benefit(
    d: &Counters,
    latency_ns: f64,
    ran: &ClassModel,
    fast: &ClassModel,
    slow: &ClassModel,
) -> Option<f64> {
    let cpu_ns = d.cpu_time_ns;
    if cpu_ns <= 0.0 {
        return None;
    }
    let stall = (d.llc_misses.max(0.0) * latency_ns).min(cpu_ns);
    let compute = cpu_ns - stall;
    // Compute time on class k: the same cycles at k's clock, times k's CPI over the class it ran on.
    let on = |k: &ClassModel| compute * (ran.ghz / k.ghz) * (k.cpi_factor / ran.cpi_factor) + stall;
    let t_fast = on(fast);
    (t_fast > 0.0).then(|| on(slow) / t_fast)
}

/// What the benefit pass keeps of a thread: one cache line (the pass reads every thread's each
/// period), so the fields that may be absent are marked in place rather than by an `Option`'s
/// tag (`NOT_BORN`, `has_estimate`, `NO_CORE`), read through the methods below.
#[derive(Clone, Debug)]
#[repr(align(64))]
struct Tracked {
    /// Its CPU time and LLC misses at the last look (all the estimate reads of its counters).
    last_cpu_ns: f64,
    last_llc_misses: f64,
    /// CPU time it received, each period's weighted by the capacity of the core it ran on
    /// (fastest class = 1), ns.
    service_ns: f64,
    /// When it was first looked at; `NOT_BORN` before.
    born_ns: u64,
    /// Smoothed estimate, once measured (`has_estimate`).
    estimate: f64,
    /// The signature the estimate was last worked out from (a thread keeps its signature, so
    /// the estimate is worked out once, not every period).
    signed: Option<Arc<Signature>>,
    /// Since when it has been on `core`.
    since_ns: u64,
    /// The core it was on at the last look; `NO_CORE` for none.
    core: u32,
    /// Over the last period it used at least half of what its core offered it (it was busy, not
    /// sleeping).
    busy: bool,
    /// `estimate` holds one.
    has_estimate: bool,
}

// One cache line a thread.
const _: () = assert!(size_of::<Tracked>() == 64);

/// [`Tracked::born_ns`] of a thread not looked at yet.
const NOT_BORN: u64 = u64::MAX;
/// [`Tracked::core`] of a thread on no core.
const NO_CORE: u32 = u32::MAX;

impl Default for Tracked {
    fn default() -> Self {
        Tracked {
            last_cpu_ns: 0.0,
            last_llc_misses: 0.0,
            service_ns: 0.0,
            born_ns: NOT_BORN,
            estimate: 0.0,
            signed: None,
            since_ns: 0,
            core: NO_CORE,
            busy: false,
            has_estimate: false,
        }
    }
}

impl Tracked {
    fn born(&self) -> Option<u64> {
        (self.born_ns != NOT_BORN).then_some(self.born_ns)
    }

    fn estimate(&self) -> Option<f64> {
        self.has_estimate.then_some(self.estimate)
    }

    fn set_estimate(&mut self, e: Option<f64>) {
        self.estimate = e.unwrap_or(0.0);
        self.has_estimate = e.is_some();
    }

    fn core(&self) -> Option<CoreId> {
        (self.core != NO_CORE).then_some(CoreId(self.core))
    }

    fn set_core(&mut self, c: Option<CoreId>) {
        self.core = c.map_or(NO_CORE, |c| c.0);
    }
}

/// Estimates per thread and the swap decision.
#[derive(Clone, Debug, Default)]
pub struct Benefit {
    classes: Vec<ClassModel>,
    fastest: usize,
    slowest: usize,
    /// Per core, what the pass over every thread reads of it: read from the topology, each a
    /// cache miss in a core's record on a large machine.
    cores: Vec<CoreFacts>,
    threads: Vec<Tracked>,
    /// The threads [`Benefit::observe`] reads: those not seen exited.
    live: LiveThreads,
    next_ns: u64,
    /// When the last period began.
    last_ns: u64,
    /// The threads the last [`Benefit::observe`] found settled for a swap: (estimate, the core
    /// it is pinned to, thread), in thread order.
    candidates: Vec<(f64, CoreId, ThreadId)>,
}

/// What [`Benefit::observe`] reads of a core for every thread on it.
#[derive(Clone, Copy, Debug)]
struct CoreFacts {
    /// Its class's capacity.
    capacity: f64,
    /// Its class (index into the topology's classes).
    class: usize,
    /// The latency of its own node's memory, ns.
    local_latency_ns: f64,
}

impl Benefit {
    fn learn(&mut self, topo: &Topology) {
        if !self.classes.is_empty() && self.cores.len() == topo.num_cores() {
            return;
        }
        self.classes = ClassModel::of_machine(topo);
        let by_speed = topo.classes_by_speed();
        self.fastest = by_speed[0].index();
        self.slowest = by_speed.last().expect("a machine has a class").index();
        self.cores = topo
            .cores()
            .iter()
            .map(|c| CoreFacts {
                capacity: topo.class_of(c.id).capacity,
                class: c.class.index(),
                local_latency_ns: topo.latency_ns(c.id, c.node),
            })
            .collect();
    }

    /// The smoothed estimate of a thread, once it has one.
    pub fn estimate(&self, t: ThreadId) -> Option<f64> {
        self.threads.get(t.index()).and_then(Tracked::estimate)
    }

    /// Whether a period has passed since the last update.
    pub fn due(&self, now_ns: u64) -> bool {
        now_ns >= self.next_ns
    }

    /// Fold the last period of every thread `owned` accepts into its estimate, and note those of
    /// them `swappable` accepts that are settled for [`Benefit::swaps`]: runnable, pinned to
    /// the core they are on and there for [`MIN_DWELL_NS`], with an estimate (one pass over the
    /// threads for both).
    pub fn observe(
        &mut self,
        view: &View<'_>,
        owned: impl Fn(&ThreadObs) -> bool,
        swappable: impl Fn(&ThreadObs) -> bool,
    ) {
        self.learn(view.topology);
        let period_ns = view.now_ns.saturating_sub(self.last_ns) as f64;
        self.last_ns = view.now_ns;
        self.next_ns = view.now_ns + BENEFIT_PERIOD_NS;
        if self.threads.len() < view.threads.len() {
            self.threads.resize(view.threads.len(), Tracked::default());
        }
        let mut live = self.live.take(view.threads.len());
        let fast = &self.classes[self.fastest];
        let slow = &self.classes[self.slowest];
        let candidates = &mut self.candidates;
        candidates.clear();
        for &i in &live {
            let (Some(t), Some(x)) = (
                view.threads.get(i as usize),
                self.threads.get_mut(i as usize),
            ) else {
                continue;
            };
            if t.state == ThreadState::Exited {
                continue;
            }
            let d = Counters {
                cpu_time_ns: t.counters.cpu_time_ns - x.last_cpu_ns,
                llc_misses: t.counters.llc_misses - x.last_llc_misses,
                ..Counters::default()
            };
            x.last_cpu_ns = t.counters.cpu_time_ns;
            x.last_llc_misses = t.counters.llc_misses;
            if x.born_ns == NOT_BORN {
                x.born_ns = view.now_ns;
            }
            let born = x.born_ns;
            if let Some(c) = x.core().or(t.cpu) {
                x.service_ns += d.cpu_time_ns * self.cores[c.index()].capacity;
                let offered = period_ns / view.core(c).runnable.max(1) as f64;
                x.busy = born < view.now_ns && d.cpu_time_ns >= 0.5 * offered;
            }
            if t.cpu != x.core() {
                x.set_core(t.cpu);
                x.since_ns = view.now_ns;
            }
            if !owned(t) {
                continue;
            }
            let now = match (&t.signature, t.cpu) {
                (Some(sig), _)
                    if x.estimate().is_some()
                        && x.signed.as_ref().is_some_and(|s| Arc::ptr_eq(s, sig)) =>
                {
                    x.estimate()
                }
                (Some(sig), _) => {
                    x.signed = Some(Arc::clone(sig));
                    Some(signature_benefit(sig, fast, slow))
                }
                (None, Some(c)) => {
                    let facts = self.cores[c.index()];
                    let ran = &self.classes[facts.class];
                    counter_benefit(&d, facts.local_latency_ns, ran, fast, slow)
                }
                (None, None) => None,
            };
            if let Some(b) = now {
                x.set_estimate(Some(match x.estimate() {
                    Some(e) if t.signature.is_none() => e + BENEFIT_WEIGHT * (b - e),
                    _ => b,
                }));
            }
            // Its core is the one it is on now (`x.core` just followed it).
            if let (Some(c), Some(estimate)) = (t.cpu, x.estimate()) {
                let dwelt = view.now_ns >= x.since_ns + MIN_DWELL_NS;
                // The cheap tests first: this runs for every thread each period.
                if is_runnable(t.state) && dwelt && swappable(t) && t.allowed.is_only(c) {
                    candidates.push((estimate, c, t.id));
                }
            }
        }
        live.retain(|&i| {
            view.threads
                .get(i as usize)
                .is_some_and(|t| t.state != ThreadState::Exited)
        });
        self.live.put_back(live);
    }

    /// Swap threads pinned to faster cores that gain less with threads pinned to slower cores that
    /// gain more (module doc), among those the last [`Benefit::observe`] found settled. A move
    /// across nodes must pass AMPS's overhead prediction (`rss`, AMPS section 2.4.2), unless the
    /// thread is its process's only one (`alone`): then its pages follow it (Ding et al. section
    /// 3.3.2's sticky pages, a [`PageMove`] to its new node), and what would have made the move
    /// costly moves with it.
    ///
    /// Then a single-threaded program left on a slower core in another node than an idle faster
    /// core moves there with its pages (`Benefit::promotions`).
    pub fn swaps(
        &mut self,
        view: &View<'_>,
        alone: impl Fn(&ThreadObs) -> bool,
        open_core: impl Fn(CoreId) -> bool,
        out: &mut Vec<Placement>,
        pages: &mut Vec<PageMove>,
    ) {
        let candidates = std::mem::take(&mut self.candidates);
        if candidates.len() >= 2 {
            self.swaps_among(view, &alone, &open_core, &candidates, out, pages);
        }
        self.candidates = candidates;
    }

    /// [`Benefit::swaps`] among `candidates`.
    fn swaps_among(
        &mut self,
        view: &View<'_>,
        alone: &impl Fn(&ThreadObs) -> bool,
        open_core: &impl Fn(CoreId) -> bool,
        candidates: &[(f64, CoreId, ThreadId)],
        out: &mut Vec<Placement>,
        pages: &mut Vec<PageMove>,
    ) {
        let topo = view.topology;
        let speed = |c: CoreId| topo.class_of(c).capacity;
        // Every class against every slower one, fastest class first: at each class's speed, its
        // threads of least gain first against the threads on slower cores of most gain first. A
        // thread swaps at most once a round (its dwell time starts again).
        let mut levels: Vec<f64> = candidates.iter().map(|x| speed(x.1)).collect();
        levels.sort_by(|a, b| b.total_cmp(a));
        levels.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
        // Per thread: it swapped this round (indexed by thread, so a test costs nothing however
        // many swapped).
        let mut swapped = vec![false; view.threads.len()];
        let mut on_fast: Vec<(f64, CoreId, ThreadId)> = Vec::new();
        let mut slower: Vec<(f64, CoreId, ThreadId)> = Vec::new();
        for &level in levels.iter().take(levels.len().saturating_sub(1)) {
            on_fast.clear();
            slower.clear();
            for &x in candidates.iter().filter(|x| !swapped[x.2.index()]) {
                let s = speed(x.1);
                if (s - level).abs() < 1e-9 {
                    on_fast.push(x);
                } else if s < level {
                    slower.push(x);
                }
            }
            on_fast.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
            slower.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.2.cmp(&b.2)));
            self.swap_pairs(view, alone, &on_fast, &slower, &mut swapped, out, pages);
        }
        self.progress_swaps(view, alone, candidates, &mut swapped, out, pages);
        self.promotions(view, alone, open_core, candidates, &swapped, out, pages);
    }

    /// An idle core of a faster class takes a single-threaded program (`alone`) running on a
    /// slower core of another node, its pages following, where AMPS's overhead prediction keeps
    /// it from moving the thread itself (AMPS's idle cores pull across nodes only what the
    /// prediction allows, section 2.4.2). A benefit swap can leave such a program in a node
    /// without fast cores, and once the threads that took the fast cores are done no swap brings
    /// it back: nothing on the fast cores to swap with. Programs that gain most go first, each to
    /// the fastest such core, the nearest first; `open_core` says which idle cores may take one
    /// (not a core held for another program).
    #[allow(clippy::too_many_arguments)]
    fn promotions(
        &mut self,
        view: &View<'_>,
        alone: &impl Fn(&ThreadObs) -> bool,
        open_core: &impl Fn(CoreId) -> bool,
        candidates: &[(f64, CoreId, ThreadId)],
        swapped: &[bool],
        out: &mut Vec<Placement>,
        pages: &mut Vec<PageMove>,
    ) {
        let topo = view.topology;
        let speed = |c: CoreId| topo.class_of(c).capacity;
        let mut idle: Vec<CoreId> = view
            .cores
            .iter()
            .enumerate()
            .map(|(i, _)| CoreId(i as u32))
            .filter(|&c| view.core(c).runnable == 0 && open_core(c))
            .collect();
        if idle.is_empty() {
            return;
        }
        idle.sort_by(|&a, &b| speed(b).total_cmp(&speed(a)).then(a.cmp(&b)));
        let mut order: Vec<(f64, CoreId, ThreadId)> = candidates
            .iter()
            .copied()
            .filter(|x| !swapped[x.2.index()] && speed(x.1) + 1e-9 < speed(idle[0]))
            .collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.2.cmp(&b.2)));
        for (_, from, t) in order {
            let obs = view.thread(t);
            if !alone(obs) {
                continue;
            }
            let node = topo.node_of(from);
            // The fastest idle core the thread may run on, the nearest among equals; only where
            // AMPS would not move it itself.
            let Some(at) = idle
                .iter()
                .enumerate()
                .filter(|&(_, &d)| {
                    speed(d) > speed(from) + 1e-9
                        && obs.user_allowed.contains(d)
                        && topo.node_of(d) != node
                        && !cheap_move(topo, obs, from, d)
                })
                .min_by(|&(_, &a), &(_, &b)| {
                    speed(b)
                        .total_cmp(&speed(a))
                        .then(
                            topo.latency_ns(a, node)
                                .total_cmp(&topo.latency_ns(b, node)),
                        )
                        .then(a.cmp(&b))
                })
                .map(|(i, _)| i)
            else {
                continue;
            };
            let to = idle.remove(at);
            out.push(Placement::pin(t, to));
            follow_pages(topo, obs, from, to, pages);
            let x = &mut self.threads[t.index()];
            x.set_core(Some(to));
            x.since_ns = view.now_ns;
            if idle.is_empty() {
                return;
            }
        }
    }

    /// Even out what the busy threads receive (module doc, "Progress swaps"): the thread that
    /// has received the least capacity for its time alive, on a core that offers each of its
    /// threads little, swaps with the best served thread on a core that offers more, both by
    /// [`SWAP_MARGIN`], unless the benefit rule would swap them back.
    fn progress_swaps(
        &mut self,
        view: &View<'_>,
        alone: &impl Fn(&ThreadObs) -> bool,
        candidates: &[(f64, CoreId, ThreadId)],
        swapped: &mut [bool],
        out: &mut Vec<Placement>,
        pages: &mut Vec<PageMove>,
    ) {
        let topo = view.topology;
        let speed = |c: CoreId| topo.class_of(c).capacity;
        // What the core gives each of its threads: a swap keeps every run-queue length.
        let offer = |c: CoreId| speed(c) / view.core(c).runnable.max(1) as f64;
        // (received capacity per ns alive, estimate, core, thread), least served first.
        let mut busy: Vec<(f64, f64, CoreId, ThreadId)> = candidates
            .iter()
            .filter(|x| !swapped[x.2.index()])
            .filter_map(|&(b, c, t)| {
                let x = self.threads.get(t.index())?;
                let alive = view.now_ns.saturating_sub(x.born()?) as f64;
                (x.busy && alive > 0.0).then(|| (x.service_ns / alive, b, c, t))
            })
            .collect();
        busy.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.3.cmp(&b.3)));
        let mut used = vec![false; busy.len()];
        let best = busy.last().map_or(0.0, |x| x.0);
        // The best served thread not yet swapped is below this.
        let mut top = busy.len();
        for i in 0..busy.len() {
            let (rp, bp, cp, tp) = busy[i];
            // Nobody received enough more than this thread, nor than any after it.
            if best <= rp * (1.0 + SWAP_MARGIN) {
                break;
            }
            if used[i] {
                continue;
            }
            while top > i + 1 && used[top - 1] {
                top -= 1;
            }
            // Best served first, among the first few that received enough more: a round's cost
            // stays linear in the threads.
            let partner = (i + 1..top)
                .rev()
                .take_while(|&j| busy[j].0 > rp * (1.0 + SWAP_MARGIN))
                .take(PARTNERS_TRIED)
                .filter(|&j| !used[j])
                .find(|&j| {
                    let (_, br, cr, tr) = busy[j];
                    // After the swap the thread on the faster class must not gain less than the
                    // other by the benefit margin, or the benefit rule would swap them back.
                    let (on_faster, on_slower) = if speed(cr) > speed(cp) + 1e-9 {
                        (bp, br)
                    } else {
                        (br, bp)
                    };
                    let kept =
                        (speed(cr) - speed(cp)).abs() <= 1e-9 || !gains_more(on_slower, on_faster);
                    offer(cr) > offer(cp) * (1.0 + SWAP_MARGIN)
                        && kept
                        && self.try_swap(view, alone, (tr, cr), (tp, cp), out, pages)
                });
            if let Some(j) = partner {
                used[i] = true;
                used[j] = true;
                swapped[tp.index()] = true;
                swapped[busy[j].3.index()] = true;
            }
        }
    }

    /// Swap the threads of `on_fast` (least gain first) with those of `slower` (most gain first)
    /// pairwise while the slower one gains more by [`SWAP_MARGIN`] (module doc).
    #[allow(clippy::too_many_arguments)]
    fn swap_pairs(
        &mut self,
        view: &View<'_>,
        alone: &impl Fn(&ThreadObs) -> bool,
        on_fast: &[(f64, CoreId, ThreadId)],
        slower: &[(f64, CoreId, ThreadId)],
        swapped: &mut [bool],
        out: &mut Vec<Placement>,
        pages: &mut Vec<PageMove>,
    ) {
        for (&(bf, cf, tf), &(bs, cs, ts)) in on_fast.iter().zip(slower) {
            if !gains_more(bs, bf) {
                break;
            }
            if self.try_swap(view, alone, (tf, cf), (ts, cs), out, pages) {
                swapped[tf.index()] = true;
                swapped[ts.index()] = true;
            }
        }
    }

    /// Swap the cores of threads `a` and `b` (each with the core it is pinned to) if their masks
    /// allow and each move passes AMPS's overhead prediction or takes the thread's pages along
    /// ([`Benefit::swaps`]); both start a new dwell time. Returns whether they swapped.
    fn try_swap(
        &mut self,
        view: &View<'_>,
        alone: &impl Fn(&ThreadObs) -> bool,
        (ta, ca): (ThreadId, CoreId),
        (tb, cb): (ThreadId, CoreId),
        out: &mut Vec<Placement>,
        pages: &mut Vec<PageMove>,
    ) -> bool {
        let topo = view.topology;
        let (oa, ob) = (view.thread(ta), view.thread(tb));
        let fits = oa.user_allowed.contains(cb) && ob.user_allowed.contains(ca);
        if !fits
            || !(cheap_move(topo, oa, ca, cb) || alone(oa))
            || !(cheap_move(topo, ob, cb, ca) || alone(ob))
        {
            return false;
        }
        out.push(Placement::pin(ta, cb));
        out.push(Placement::pin(tb, ca));
        for (t, from, to) in [(oa, ca, cb), (ob, cb, ca)] {
            if alone(t) {
                follow_pages(topo, t, from, to, pages);
            }
        }
        for (t, c) in [(ta, cb), (tb, ca)] {
            let x = &mut self.threads[t.index()];
            x.set_core(Some(c));
            x.since_ns = view.now_ns;
        }
        true
    }

    /// A new thread has id `t` (an id may be an exited thread's): nothing of the old one is kept.
    pub fn start(&mut self, t: ThreadId) {
        if let Some(x) = self.threads.get_mut(t.index()) {
            *x = Tracked::default();
        }
        self.live.restart(t);
    }

    /// The threads [`Benefit::observe`] reads, ascending.
    #[cfg(test)]
    pub fn live_threads(&self) -> &[u32] {
        self.live.ids()
    }

    /// Forget a thread (it exited or another part of the policy took it).
    pub fn forget(&mut self, t: ThreadId) {
        if let Some(x) = self.threads.get_mut(t.index()) {
            x.set_estimate(None);
        }
    }
}
