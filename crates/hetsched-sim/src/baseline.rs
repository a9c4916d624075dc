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
use hetsched_core::{CoreId, CpuSet};

/// Counters of the balancer's work.
#[derive(Clone, Copy, Debug, Default)]
pub struct BalanceStats {
    pub moves: u64,
}

/// A uniformly chosen member of a set (seeded).
fn random_member(sim: &mut Simulation<'_>, set: &CpuSet) -> Option<usize> {
    let n = set.len();
    if n == 0 {
        return None;
    }
    let k = sim.rng().below(n);
    set.iter().nth(k).map(|c| c.index())
}

/// Core for a new thread: least loaded in its allowed set, seeded tie-break.
pub fn place_new(sim: &mut Simulation<'_>, t: usize) -> usize {
    let allowed = sim.obs[t].allowed.clone();
    let idle = sim.idle.intersection(&allowed);
    // Idle cores that also have nothing queued (new arrivals at the same instant).
    let free: CpuSet = idle.iter().filter(|c| sim.core_obs[c.index()].runnable == 0).collect();
    if let Some(c) = random_member(sim, &free) {
        return c;
    }
    let min = allowed.iter().map(|c| sim.core_obs[c.index()].runnable).min().unwrap_or(0);
    let ties: CpuSet = allowed.iter().filter(|c| sim.core_obs[c.index()].runnable == min).collect();
    random_member(sim, &ties).unwrap_or(0)
}

/// Core for a waking (or re-placed) thread.
pub fn place_wake(sim: &mut Simulation<'_>, t: usize) -> usize {
    let allowed = sim.obs[t].allowed.clone();
    let prev = sim.obs[t].cpu;
    let is_free = |sim: &Simulation<'_>, c: CoreId| sim.core_obs[c.index()].runnable == 0;
    if let Some(p) = prev {
        if allowed.contains(p) && is_free(sim, p) {
            return p.index();
        }
    }
    let free: CpuSet = sim.idle.intersection(&allowed).iter().filter(|&c| is_free(sim, c)).collect();
    if !free.is_empty() {
        let topo = sim.topology();
        if let Some(p) = prev {
            let llc = topo.core(p).llc;
            let near: CpuSet = free.iter().filter(|&c| llc.is_some() && topo.core(c).llc == llc).collect();
            if let Some(c) = random_member(sim, &near) {
                return c;
            }
        }
        if let Some(c) = random_member(sim, &free) {
            return c;
        }
    }
    if let Some(p) = prev {
        if allowed.contains(p) {
            return p.index();
        }
    }
    let min = allowed.iter().map(|c| sim.core_obs[c.index()].runnable).min().unwrap_or(0);
    let ties: CpuSet = allowed.iter().filter(|c| sim.core_obs[c.index()].runnable == min).collect();
    random_member(sim, &ties).unwrap_or(0)
}

/// A queued thread on core `from` that may run on `to` (the last such in the queue).
fn movable(sim: &Simulation<'_>, from: usize, to: usize) -> Option<usize> {
    sim.cores[from]
        .queue
        .iter()
        .rev()
        .map(|&(_, t)| t as usize)
        .find(|&t| sim.obs[t].allowed.contains(CoreId(to as u32)))
}

/// New-idle balance: idle core `c` pulls a waiting thread from the busiest core that has one it
/// may run.
pub fn newidle_pull(sim: &mut Simulation<'_>, c: usize) {
    let mut best: Option<(u32, usize, usize)> = None;
    for b in 0..sim.cores.len() {
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

/// Periodic balance over the whole machine.
pub fn periodic_balance(sim: &mut Simulation<'_>) {
    let n = sim.cores.len();
    let mut load: Vec<u32> = sim.core_obs.iter().map(|c| c.runnable).collect();
    let max = load.iter().copied().max().unwrap_or(0);
    let min = load.iter().copied().min().unwrap_or(0);
    if max < min + 2 {
        return;
    }
    // Least loaded first; seeded shuffle breaks ties.
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = sim.rng().below(i + 1);
        order.swap(i, j);
    }
    order.sort_by_key(|&c| load[c]);
    let topo = sim.topology();
    for &c in &order {
        loop {
            let max = load.iter().copied().max().unwrap_or(0);
            if max < load[c] + 2 {
                break;
            }
            // Busiest source with a thread allowed here; nearer sources first on equal load.
            let near = |b: usize| -> u32 {
                let (cb, cc) = (topo.core(CoreId(b as u32)), topo.core(CoreId(c as u32)));
                if cb.llc.is_some() && cb.llc == cc.llc {
                    0
                } else if cb.node == cc.node {
                    1
                } else {
                    2
                }
            };
            let mut best: Option<(u32, u32, usize, usize)> = None;
            for b in 0..n {
                if load[b] < load[c] + 2 || sim.cores[b].queue.is_empty() {
                    continue;
                }
                let key = (load[b], 2 - near(b));
                if best.is_some_and(|(l, k, _, _)| (l, k) >= key) {
                    continue;
                }
                if let Some(t) = movable(sim, b, c) {
                    best = Some((key.0, key.1, b, t));
                }
            }
            let Some((_, _, b, t)) = best else { break };
            sim.dequeue_waiting(t, b);
            sim.enqueue(t, c);
            load[b] -= 1;
            load[c] += 1;
            sim.balance_stats().moves += 1;
        }
    }
}
