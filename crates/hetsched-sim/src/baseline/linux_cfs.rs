//! `linux-cfs`: the balancing of stock Linux's CFS as it runs on a machine it believes symmetric,
//! knowing nothing of core speed:
//!
//! 1. A new thread goes to the least-loaded core of its allowed set (an idle one when there is
//!    one); ties are broken by the seeded generator, so runs differ across seeds, as the papers'
//!    repeatability results require (AMPS section 4.2, Figure 7).
//! 2. A waking thread goes back to its previous core if idle, else to an idle core sharing its
//!    LLC (`select_idle_sibling`), else to any idle core it may use (the nohz idle-balance kick),
//!    else to its previous core.
//! 3. A core going idle pulls a waiting thread from the busiest core (new-idle balance).
//! 4. Every [`BALANCE_TICKS`] ticks, waiting threads move from the busiest cores to the least
//!    loaded while the run-queue lengths differ by two or more; nearer cores (same LLC, then same
//!    node) are preferred as sources.
//! 5. A lone running thread is never migrated: only waiting threads move.
//!
//! Policies restrict allowed sets; the balancer keeps working inside them, as the kernel does
//! under CPU affinity.

use super::{BalancePort, Baseline, RunQueueView};
use hetsched_core::rng::SeededRng;
use hetsched_core::{CoreId, Id, ThreadId};

/// The baseline's name.
pub const NAME: &str = "linux-cfs";

/// The periodic balance runs every this many ticks (Linux's busy balance interval on a small
/// domain is a few ms, `sd->balance_interval`; 2 ticks of 4 ms is 8 ms).
pub const BALANCE_TICKS: u64 = 2;

/// Most source cores a destination tries before the balancer gives up on it (threads pinned
/// elsewhere can make every source useless; this bounds the work).
const MAX_SOURCES_TRIED: usize = 8;

/// Most destinations that may find nothing to pull in one balance before it stops.
const MAX_FAILED_DESTINATIONS: usize = 16;

/// The balancer, with its seeded tie-breaking generator.
#[derive(Clone, Debug)]
pub struct LinuxCfs {
    rng: SeededRng,
}

impl LinuxCfs {
    /// A balancer whose random tie-breaks follow `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: SeededRng::new(seed),
        }
    }

    /// A uniformly chosen core of `t`'s allowed set that is idle with nothing queued, preferring
    /// (when `near` is given) those sharing that core's LLC. Seeded; allocates nothing.
    fn random_free(
        &mut self,
        rq: &RunQueueView<'_>,
        t: ThreadId,
        near: Option<CoreId>,
    ) -> Option<CoreId> {
        let topo = rq.topology;
        let llc = near.and_then(|c| topo.core(c).llc);
        let ok = |c: CoreId, want_near: bool| {
            rq.runnable(c) == 0 && (!want_near || topo.core(c).llc == llc)
        };
        for want_near in [llc.is_some(), false] {
            let free = || {
                rq.idle
                    .iter_intersection(rq.allowed(t))
                    .filter(move |&c| ok(c, want_near))
            };
            let n = free().count();
            if n == 0 {
                if want_near {
                    continue;
                }
                return None;
            }
            let k = self.rng.below(n);
            return free().nth(k);
        }
        None
    }

    /// A uniformly chosen least-loaded core of the thread's allowed set (seeded).
    fn random_least_loaded(&mut self, rq: &RunQueueView<'_>, t: ThreadId) -> CoreId {
        let allowed = rq.allowed(t);
        let min = allowed.iter().map(|c| rq.runnable(c)).min().unwrap_or(0);
        let n = allowed.iter().filter(|&c| rq.runnable(c) == min).count();
        let k = self.rng.below(n.max(1));
        allowed
            .iter()
            .filter(|&c| rq.runnable(c) == min)
            .nth(k)
            .unwrap_or(CoreId(0))
    }

    /// Periodic balance over the whole machine: the least loaded core pulls one waiting thread
    /// from one of the most loaded (run-queue lengths differing by two or more), again and again.
    /// Among equally loaded sources a nearer one (same LLC, then same node) is tried first. Each
    /// step is O(n); destinations that find nothing they may run are skipped, at most
    /// [`MAX_FAILED_DESTINATIONS`] of them, so a balance is O(n × (moves + 16)).
    fn periodic_balance(&mut self, port: &mut dyn BalancePort) {
        let mut load: Vec<u32> = port.view().cores.iter().map(|c| c.runnable).collect();
        let n = load.len();
        let max = load.iter().copied().max().unwrap_or(0);
        let min = load.iter().copied().min().unwrap_or(0);
        if max < min + 2 {
            return;
        }
        // Seeded shuffle: ties between equally loaded destinations go by this order.
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.rng.below(i + 1);
            order.swap(i, j);
        }
        let mut failed = vec![false; n];
        let mut failures = 0;
        let mut moves = 0;
        while failures < MAX_FAILED_DESTINATIONS && moves < 2 * n {
            let Some(&c) = order
                .iter()
                .filter(|&&c| !failed[c])
                .min_by_key(|&&c| load[c])
            else {
                break;
            };
            let rq = port.view();
            let topo = rq.topology;
            let cc = topo.core(CoreId::from_index(c));
            let near = |b: usize| -> u32 {
                let cb = topo.core(CoreId::from_index(b));
                if cb.llc.is_some() && cb.llc == cc.llc {
                    0
                } else if cb.node == cc.node {
                    1
                } else {
                    2
                }
            };
            let mut candidates: Vec<usize> = (0..n)
                .filter(|&b| load[b] >= load[c] + 2 && !rq.queues[CoreId::from_index(b)].is_empty())
                .collect();
            if candidates.is_empty() {
                break;
            }
            candidates.sort_by_key(|&b| (std::cmp::Reverse(load[b]), near(b), b));
            candidates.truncate(MAX_SOURCES_TRIED);
            let to = CoreId::from_index(c);
            let pick = candidates
                .into_iter()
                .find_map(|b| movable(&rq, CoreId::from_index(b), to).map(|t| (b, t)));
            match pick {
                Some((b, t)) => {
                    port.move_thread(t, to);
                    load[b] -= 1;
                    load[c] += 1;
                    moves += 1;
                }
                None => {
                    failed[c] = true;
                    failures += 1;
                }
            }
        }
    }
}

/// A queued thread on core `from` that may run on `to` (the last such in the queue).
fn movable(rq: &RunQueueView<'_>, from: CoreId, to: CoreId) -> Option<ThreadId> {
    rq.waiting(from).rev().find(|&t| rq.allowed(t).contains(to))
}

impl Baseline for LinuxCfs {
    fn name(&self) -> &'static str {
        NAME
    }

    /// An idle core with nothing queued, else the least loaded of its allowed set; seeded
    /// tie-break.
    fn place_new(&mut self, rq: &RunQueueView<'_>, t: ThreadId) -> CoreId {
        if let Some(c) = self.random_free(rq, t, None) {
            return c;
        }
        self.random_least_loaded(rq, t)
    }

    fn place_wake(&mut self, rq: &RunQueueView<'_>, t: ThreadId) -> CoreId {
        let prev = rq.cpu(t);
        if let Some(p) = prev {
            if rq.allowed(t).contains(p) && rq.runnable(p) == 0 {
                return p;
            }
        }
        if let Some(c) = self.random_free(rq, t, prev) {
            return c;
        }
        if let Some(p) = prev {
            if rq.allowed(t).contains(p) {
                return p;
            }
        }
        self.random_least_loaded(rq, t)
    }

    /// New-idle balance: the idle core pulls a waiting thread from the busiest core that has one
    /// it may run.
    fn newidle_pull(&mut self, rq: &RunQueueView<'_>, idle: CoreId) -> Option<ThreadId> {
        let mut best: Option<(u32, ThreadId)> = None;
        // Only cores with a waiting thread can give one (ascending order, as a scan of all would).
        for b in rq.queued.iter() {
            if b == idle || rq.queues[b].is_empty() {
                continue;
            }
            let load = rq.runnable(b);
            if best.is_some_and(|(l, _)| l >= load) {
                continue;
            }
            if let Some(t) = movable(rq, b, idle) {
                best = Some((load, t));
            }
        }
        best.map(|(_, t)| t)
    }

    fn on_tick(&mut self, tick: u64, port: &mut dyn BalancePort) {
        if tick.is_multiple_of(BALANCE_TICKS) {
            self.periodic_balance(port);
        }
    }
}
