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

use super::{balance, BalancePort, Baseline, RunQueueView};
use hetsched_core::rng::SeededRng;
use hetsched_core::{CoreId, ThreadId};

/// The baseline's name.
pub const NAME: &str = "linux-cfs";

/// The periodic balance runs every this many ticks (Linux's busy balance interval on a small
/// domain is a few ms, `sd->balance_interval`; 2 ticks of 4 ms is 8 ms).
pub const BALANCE_TICKS: u64 = 2;

/// The balancer, with its seeded tie-breaking generator.
#[derive(Clone, Debug)]
pub struct LinuxCfs {
    rng: SeededRng,
    /// What the periodic balance keeps between runs of it (a baseline built on this one uses it
    /// too).
    balance: balance::Scratch,
    /// One per core: the balance weighs every core alike.
    equal_capacity: Vec<f64>,
    /// The candidate cores of one placement (the free ones, or the least loaded), in the allowed
    /// set's order, one of which the seeded generator picks.
    candidates: Vec<CoreId>,
}

impl LinuxCfs {
    /// A balancer whose random tie-breaks follow `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: SeededRng::new(seed),
            balance: balance::Scratch::default(),
            equal_capacity: Vec::new(),
            candidates: Vec::new(),
        }
    }

    /// The generator of the seeded tie-breaks (a baseline built on this one shares it).
    pub(super) fn rng(&mut self) -> &mut SeededRng {
        &mut self.rng
    }

    /// One periodic balance, `capacity[c]` weighing core `c`'s load
    /// ([`balance::periodic_balance`]).
    pub(super) fn periodic_balance(&mut self, capacity: &[f64], port: &mut dyn BalancePort) {
        balance::periodic_balance(&mut self.rng, &mut self.balance, capacity, port);
    }

    /// A uniformly chosen core of `t`'s allowed set that is idle with nothing queued, preferring
    /// (when `near` is given) those sharing that core's LLC. Seeded; allocates nothing.
    pub(super) fn random_free(
        &mut self,
        rq: &RunQueueView<'_>,
        t: ThreadId,
        near: Option<CoreId>,
    ) -> Option<CoreId> {
        // No idle core, no candidate (and no draw): answered without the thread's allowed set.
        if rq.idle.is_empty() {
            return None;
        }
        let topo = rq.topology;
        let llc = near.and_then(|c| topo.core(c).llc);
        let ok = |c: CoreId, want_near: bool| {
            rq.runnable(c) == 0 && (!want_near || topo.core(c).llc == llc)
        };
        for want_near in [llc.is_some(), false] {
            let free = &mut self.candidates;
            free.clear();
            free.extend(
                rq.idle
                    .iter_intersection(rq.allowed(t))
                    .filter(|&c| ok(c, want_near)),
            );
            if free.is_empty() {
                if want_near {
                    continue;
                }
                return None;
            }
            let k = self.rng.below(free.len());
            return Some(free[k]);
        }
        None
    }

    /// A uniformly chosen least-loaded core of the thread's allowed set (seeded).
    pub(super) fn random_least_loaded(&mut self, rq: &RunQueueView<'_>, t: ThreadId) -> CoreId {
        // The cores of the least load so far, in one pass (a second pass over the allowed cores
        // to find the chosen one was a third of this function's instructions when 16,384 threads
        // start on 1,024 cores).
        let least = &mut self.candidates;
        least.clear();
        let mut min = u32::MAX;
        for c in rq.allowed(t).iter() {
            let r = rq.runnable(c);
            if r < min {
                min = r;
                least.clear();
            }
            if r == min {
                least.push(c);
            }
        }
        let k = self.rng.below(least.len().max(1));
        least.get(k).copied().unwrap_or(CoreId(0))
    }
}

/// A queued thread on core `from` that may run on `to` (the last such in the queue).
fn movable(rq: &RunQueueView<'_>, from: CoreId, to: CoreId) -> Option<ThreadId> {
    balance::movable(rq.waiting(from), |t| rq.may_run(t, to))
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
            if rq.may_run(t, p) && rq.runnable(p) == 0 {
                return p;
            }
        }
        if let Some(c) = self.random_free(rq, t, prev) {
            return c;
        }
        if let Some(p) = prev {
            if rq.may_run(t, p) {
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
            let n = port.view().num_cores();
            self.equal_capacity.resize(n, 1.0);
            balance::periodic_balance(&mut self.rng, &mut self.balance, &self.equal_capacity, port);
        }
    }
}
