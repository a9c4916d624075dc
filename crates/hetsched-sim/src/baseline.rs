//! The `linux-default` baseline: how the engine balances threads within their allowed sets, as
//! stock Linux's CFS balancer would, knowing nothing of core speed (issue 3):
//!
//! 1. A new thread goes to the least-loaded core of its allowed set (an idle one when there is
//!    one); ties are broken by the seeded generator, so runs differ across seeds, as the papers'
//!    repeatability results require (AMPS section 4.2, Figure 7).
//! 2. A waking thread goes back to its previous core if idle, else to an idle core sharing its
//!    LLC (`select_idle_sibling`), else to any idle core it may use (the nohz idle-balance kick),
//!    else to its previous core.
//! 3. A core going idle pulls a waiting thread from the busiest core (new-idle balance).
//! 4. Every [`crate::engine::BALANCE_TICKS`] ticks, waiting threads move from the busiest cores to
//!    the least loaded while the run-queue lengths differ by two or more; nearer cores (same LLC,
//!    then same node) are preferred as sources.
//! 5. A lone running thread is never migrated: only waiting threads move.
//!
//! Policies restrict allowed sets; the balancer keeps working inside them, as the kernel does
//! under CPU affinity.

use crate::engine::Simulation;
use hetsched_core::CoreId;

/// Counters of the balancer's work.
#[derive(Clone, Copy, Debug, Default)]
pub struct BalanceStats {
    pub moves: u64,
}

/// A uniformly chosen core of `allowed` that is idle with nothing queued, preferring (when
/// `near` is given) those sharing that core's LLC. Seeded; allocates nothing.
fn random_free(sim: &mut Simulation<'_>, t: usize, near: Option<CoreId>) -> Option<usize> {
    let topo = sim.topology();
    let llc = near.and_then(|c| topo.core(c).llc);
    let ok = |sim: &Simulation<'_>, c: CoreId, want_near: bool| {
        sim.core_obs[c.index()].runnable == 0 && (!want_near || topo.core(c).llc == llc)
    };
    for want_near in [llc.is_some(), false] {
        let n = sim
            .idle
            .iter_intersection(&sim.obs[t].allowed)
            .filter(|&c| ok(sim, c, want_near))
            .count();
        if n == 0 {
            if want_near {
                continue;
            }
            return None;
        }
        let k = sim.rng().below(n);
        return sim
            .idle
            .iter_intersection(&sim.obs[t].allowed)
            .filter(|&c| ok(sim, c, want_near))
            .nth(k)
            .map(|c| c.index());
    }
    None
}

/// A uniformly chosen least-loaded core of the thread's allowed set (seeded).
fn random_least_loaded(sim: &mut Simulation<'_>, t: usize) -> usize {
    let allowed = &sim.obs[t].allowed;
    let min = allowed
        .iter()
        .map(|c| sim.core_obs[c.index()].runnable)
        .min()
        .unwrap_or(0);
    let n = allowed
        .iter()
        .filter(|c| sim.core_obs[c.index()].runnable == min)
        .count();
    let k = sim.rng().below(n.max(1));
    let allowed = &sim.obs[t].allowed;
    allowed
        .iter()
        .filter(|c| sim.core_obs[c.index()].runnable == min)
        .nth(k)
        .map_or(0, |c| c.index())
}

/// Core for a new thread: an idle core with nothing queued, else the least loaded of its allowed
/// set; seeded tie-break.
pub fn place_new(sim: &mut Simulation<'_>, t: usize) -> usize {
    if let Some(c) = random_free(sim, t, None) {
        return c;
    }
    random_least_loaded(sim, t)
}

/// Core for a waking (or re-placed) thread.
pub fn place_wake(sim: &mut Simulation<'_>, t: usize) -> usize {
    let prev = sim.obs[t].cpu;
    if let Some(p) = prev {
        if sim.obs[t].allowed.contains(p) && sim.core_obs[p.index()].runnable == 0 {
            return p.index();
        }
    }
    if let Some(c) = random_free(sim, t, prev) {
        return c;
    }
    if let Some(p) = prev {
        if sim.obs[t].allowed.contains(p) {
            return p.index();
        }
    }
    random_least_loaded(sim, t)
}

/// A queued thread on core `from` that may run on `to` (the last such in the queue).
fn movable(sim: &Simulation<'_>, from: usize, to: usize) -> Option<usize> {
    sim.cores[from]
        .queue
        .threads()
        .rev()
        .map(|t| t as usize)
        .find(|&t| sim.obs[t].allowed.contains(CoreId(to as u32)))
}

/// New-idle balance: idle core `c` pulls a waiting thread from the busiest core that has one it
/// may run.
pub fn newidle_pull(sim: &mut Simulation<'_>, c: usize) {
    let mut best: Option<(u32, usize, usize)> = None;
    // Only cores with a waiting thread can give one (ascending order, as a scan of all would).
    for b in sim.queued.iter().map(|b| b.index()) {
        if b == c || sim.cores[b].queue.is_empty() {
            continue;
        }
        let load = sim.core_obs[b].runnable;
        if best.is_some_and(|(l, _, _)| l >= load) {
            continue;
        }
        if let Some(t) = movable(sim, b, c) {
            best = Some((load, b, t));
        }
    }
    if let Some((_, b, t)) = best {
        sim.dequeue_waiting(t, b);
        sim.enqueue(t, c);
        sim.balance_stats().moves += 1;
    }
}

/// Most source cores a destination tries before the balancer gives up on it (threads pinned
/// elsewhere can make every source useless; this bounds the work).
const MAX_SOURCES_TRIED: usize = 8;

/// Most destinations that may find nothing to pull in one balance before it stops.
const MAX_FAILED_DESTINATIONS: usize = 16;

/// Periodic balance over the whole machine: the least loaded core pulls one waiting thread from
/// one of the most loaded (run-queue lengths differing by two or more), again and again. Among
/// equally loaded sources a nearer one (same LLC, then same node) is tried first. Each step is
/// O(n); destinations that find nothing they may run are skipped, at most
/// [`MAX_FAILED_DESTINATIONS`] of them, so a balance is O(n × (moves + 16)).
pub fn periodic_balance(sim: &mut Simulation<'_>) {
    let n = sim.cores.len();
    let mut load: Vec<u32> = sim.core_obs.iter().map(|c| c.runnable).collect();
    let max = load.iter().copied().max().unwrap_or(0);
    let min = load.iter().copied().min().unwrap_or(0);
    if max < min + 2 {
        return;
    }
    // Seeded shuffle: ties between equally loaded destinations go by this order.
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = sim.rng().below(i + 1);
        order.swap(i, j);
    }
    let topo = sim.topology();
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
        let cc = topo.core(CoreId(c as u32));
        let near = |b: usize| -> u32 {
            let cb = topo.core(CoreId(b as u32));
            if cb.llc.is_some() && cb.llc == cc.llc {
                0
            } else if cb.node == cc.node {
                1
            } else {
                2
            }
        };
        let mut candidates: Vec<usize> = (0..n)
            .filter(|&b| load[b] >= load[c] + 2 && !sim.cores[b].queue.is_empty())
            .collect();
        if candidates.is_empty() {
            break;
        }
        candidates.sort_by_key(|&b| (std::cmp::Reverse(load[b]), near(b), b));
        candidates.truncate(MAX_SOURCES_TRIED);
        let mut moved = false;
        for b in candidates {
            if let Some(t) = movable(sim, b, c) {
                sim.dequeue_waiting(t, b);
                sim.enqueue(t, c);
                load[b] -= 1;
                load[c] += 1;
                sim.balance_stats().moves += 1;
                moves += 1;
                moved = true;
                break;
            }
        }
        if !moved {
            failed[c] = true;
            failures += 1;
        }
    }
}
