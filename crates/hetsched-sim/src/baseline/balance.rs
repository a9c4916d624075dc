//! The periodic balance both Linux baselines share: the least loaded core pulls one waiting thread
//! from one of the most loaded, again and again, while a move lowers the busier core's load. Load
//! is run-queue length, divided by the core's capacity when the baseline knows capacities (the
//! kernel's `avg_load = load * SCHED_CAPACITY_SCALE / group_capacity`, `update_sg_lb_stats`).

use super::BalancePort;
use hetsched_core::rng::SeededRng;
use hetsched_core::{CoreId, CpuSet, Id, LlcId, NodeId, ThreadId, Topology};

/// Most source cores a destination tries before the balancer gives up on it (threads pinned
/// elsewhere can make every source useless; this bounds the work).
const MAX_SOURCES_TRIED: usize = 8;

/// Most destinations that may find nothing to pull in one balance before it stops.
const MAX_FAILED_DESTINATIONS: usize = 16;

/// One periodic balance over the whole machine. `capacity[c]` weighs core `c`'s load (all 1 for a
/// balancer blind to core speed). A waiting thread moves from `b` to `c` when `b`'s load per
/// capacity exceeds `c`'s after the move; with equal capacities, when the run-queue lengths differ
/// by two or more. Among equally loaded sources a nearer one (same LLC, then same node) is tried
/// first. Each step is O(n); destinations that find nothing they may run are skipped, at most
/// [`MAX_FAILED_DESTINATIONS`] of them, so a balance is O(n × (moves + 16)).
pub(super) fn periodic_balance(
    rng: &mut SeededRng,
    scratch: &mut Scratch,
    capacity: &[f64],
    port: &mut dyn BalancePort,
) {
    let Scratch {
        places,
        load,
        pc,
        order,
        failed,
    } = scratch;
    load.clear();
    load.extend(port.view().cores.iter().map(|c| c.runnable));
    let n = load.len();
    let per_cap = |load: &[u32], c: usize| f64::from(load[c]) / capacity[c];
    let after_pull = |load: &[u32], c: usize| f64::from(load[c] + 1) / capacity[c];
    // Each core's load per capacity, updated move by move (the scans below read it n times a
    // step).
    pc.clear();
    pc.extend((0..n).map(|c| per_cap(load, c)));
    let busiest = pc.iter().copied().fold(f64::MIN, f64::max);
    let idlest = (0..n).map(|c| after_pull(load, c)).fold(f64::MAX, f64::min);
    if busiest <= idlest {
        return;
    }
    // Seeded shuffle: ties between equally loaded destinations go by this order.
    order.clear();
    order.extend(0..n);
    for i in (1..n).rev() {
        let j = rng.below(i + 1);
        order.swap(i, j);
    }
    // Only waiting threads move, and only those allowed elsewhere: with every waiting thread
    // pinned to its core (a policy that places each thread), every destination would fail. The
    // shuffle above still draws, so the seeded tie-breaks that follow are those of a full pass.
    if port.view().waiting_may_move == 0 {
        return;
    }
    // Where each core is, read once a run: the nearness of every candidate source is asked for
    // every destination tried.
    let places = match places {
        Some(p) if p.place.len() == n => p,
        _ => places.insert(Places::of(port.view().topology)),
    };
    failed.clear();
    failed.resize(n, false);
    let mut failures = 0;
    let mut moves = 0;
    // The cores with a waiting thread, most loaded first, then by index ([`by_load`]): the order
    // of the candidate sources a destination finds outside its node and LLC, kept move by move.
    let mut sources = sources_by_load(pc, port.view().queued);
    while failures < MAX_FAILED_DESTINATIONS && moves < 2 * n {
        let Some(&c) = order
            .iter()
            .filter(|&&c| !failed[c])
            .min_by(|&&x, &&y| pc[x].total_cmp(&pc[y]))
        else {
            break;
        };
        let rq = port.view();
        let candidates = candidate_sources(places, pc, rq.queued, &sources, c, after_pull(load, c));
        if candidates.is_empty() {
            break;
        }
        let to = CoreId::from_index(c);
        let pick = candidates
            .into_iter()
            .map(|k| k as u32 as usize)
            .find_map(|b| {
                movable(rq.waiting(CoreId::from_index(b)), |t| rq.may_run(t, to)).map(|t| (b, t))
            });
        match pick {
            Some((b, t)) => {
                port.move_thread(t, to);
                for k in [by_load(pc, b), by_load(pc, c)] {
                    if let Ok(i) = sources.binary_search(&k) {
                        sources.remove(i);
                    }
                }
                load[b] -= 1;
                load[c] += 1;
                pc[b] = per_cap(load, b);
                pc[c] = per_cap(load, c);
                let queued = port.view().queued;
                for k in [b, c] {
                    if queued.contains(CoreId::from_index(k)) {
                        let key = by_load(pc, k);
                        let at = sources.partition_point(|&x| x < key);
                        sources.insert(at, key);
                    }
                }
                moves += 1;
            }
            None => {
                failed[c] = true;
                failures += 1;
            }
        }
    }
}

/// What one periodic balance keeps for the next: where each core is (a run's machine does not
/// change) and its working vectors, so that a balance of a large machine allocates nothing.
#[derive(Clone, Debug, Default)]
pub(super) struct Scratch {
    places: Option<Places>,
    load: Vec<u32>,
    pc: Vec<f64>,
    order: Vec<usize>,
    failed: Vec<bool>,
}

/// Where each core is: its LLC and node, and the cores of each node and of each LLC in index
/// order.
#[derive(Clone, Debug)]
struct Places {
    place: Vec<(Option<LlcId>, NodeId)>,
    node_cores: Vec<Vec<usize>>,
    llc_cores: Vec<Vec<usize>>,
}

impl Places {
    fn of(topo: &Topology) -> Self {
        let place: Vec<(Option<LlcId>, NodeId)> = (0..topo.num_cores())
            .map(|b| {
                let core = topo.core(CoreId::from_index(b));
                (core.llc, core.node)
            })
            .collect();
        Self::from_places(place)
    }

    fn from_places(place: Vec<(Option<LlcId>, NodeId)>) -> Self {
        let mut node_cores: Vec<Vec<usize>> = Vec::new();
        let mut llc_cores: Vec<Vec<usize>> = Vec::new();
        for (b, &(llc, node)) in place.iter().enumerate() {
            let at = |lists: &mut Vec<Vec<usize>>, i: usize| {
                if lists.len() <= i {
                    lists.resize_with(i + 1, Vec::new);
                }
                lists[i].push(b);
            };
            at(&mut node_cores, node.index());
            if let Some(l) = llc {
                at(&mut llc_cores, l.index());
            }
        }
        Places {
            place,
            node_cores,
            llc_cores,
        }
    }

    /// How far source `b` is from destination `c`: 0 in its LLC, 1 in its node, 2 elsewhere.
    fn near(&self, b: usize, c: usize) -> u32 {
        let ((llc_b, node_b), (llc_c, node_c)) = (self.place[b], self.place[c]);
        if llc_b.is_some() && llc_b == llc_c {
            0
        } else if node_b == node_c {
            1
        } else {
            2
        }
    }
}

/// The sources destination `c` tries, in order: the first [`MAX_SOURCES_TRIED`] cores with a
/// waiting thread (`queued`) whose load per capacity exceeds `target`, by load descending, then
/// nearness, then index ([`source_key`]). `sources` holds the queued cores in [`by_load`] order. Those of the destination's node and LLC are all looked at; of the others,
/// all equally far, only the first few in `sources` can be among the first few candidates.
fn candidate_sources(
    places: &Places,
    pc: &[f64],
    queued: &CpuSet,
    sources: &[u128],
    c: usize,
    target: f64,
) -> Vec<u128> {
    let (llc_c, node_c) = places.place[c];
    let key = |b: usize| source_key(pc, places.near(b, c), b);
    let llc_elsewhere = llc_c
        .map_or(&[][..], |l| &places.llc_cores[l.index()][..])
        .iter()
        .filter(|&&b| places.place[b].1 != node_c);
    let mut candidates: Vec<u128> = places.node_cores[node_c.index()]
        .iter()
        .chain(llc_elsewhere)
        .copied()
        .filter(|&b| queued.contains(CoreId::from_index(b)) && pc[b] > target)
        .map(key)
        .collect();
    candidates.extend(
        sources
            .iter()
            .map(|&k| k as u32 as usize)
            .take_while(|&b| pc[b] > target)
            .filter(|&b| places.near(b, c) == 2)
            .take(MAX_SOURCES_TRIED)
            .map(key),
    );
    // The first few of a total order: selecting them before sorting gives the sorted list's
    // head without sorting every candidate.
    if candidates.len() > MAX_SOURCES_TRIED {
        candidates.select_nth_unstable(MAX_SOURCES_TRIED - 1);
        candidates.truncate(MAX_SOURCES_TRIED);
    }
    candidates.sort_unstable();
    candidates
}

/// Source `b` at nearness `near` from a destination as one integer in (load per capacity
/// descending, nearness, index) order: loads are non-negative, so their bits order as the loads
/// do and their complement reverses it.
fn source_key(pc: &[f64], near: u32, b: usize) -> u128 {
    u128::from(!pc[b].to_bits()) << 64 | u128::from(near) << 32 | b as u128
}

/// Core `b`'s place among sources regardless of a destination: its load per capacity descending,
/// then its index.
fn by_load(pc: &[f64], b: usize) -> u128 {
    source_key(pc, 0, b)
}

/// The cores of `queued` in [`by_load`] order. Loads per capacity take few distinct values (a
/// run-queue length over one of the machine's few capacities), so the cores, listed in index
/// order, are counted into one run per distinct load: a sort's comparisons cost more, at every
/// balance.
fn sources_by_load(pc: &[f64], queued: &CpuSet) -> Vec<u128> {
    let mut loads: Vec<u64> = Vec::new();
    for b in queued.iter() {
        let bits = !pc[b.index()].to_bits();
        if let Err(at) = loads.binary_search(&bits) {
            loads.insert(at, bits);
        }
    }
    // Where each load's run starts.
    let mut start = vec![0usize; loads.len() + 1];
    let rank = |b: usize| loads.binary_search(&!pc[b].to_bits()).unwrap_or(0);
    for b in queued.iter() {
        start[rank(b.index()) + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut sorted = vec![0u128; queued.len()];
    for b in queued.iter() {
        let r = rank(b.index());
        sorted[start[r]] = by_load(pc, b.index());
        start[r] += 1;
    }
    sorted
}

/// The last thread of a queue that `may_run` accepts.
pub(super) fn movable(
    queue: impl DoubleEndedIterator<Item = ThreadId>,
    may_run: impl Fn(ThreadId) -> bool,
) -> Option<ThreadId> {
    queue.rev().find(|&t| may_run(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::rng::SeededRng;

    /// The counted order is the order a sort of the same keys gives, on random loads of a few
    /// distinct values and random sets of queued cores.
    #[test]
    fn sources_by_load_are_in_sorted_order() {
        let mut rng = SeededRng::new(5);
        for _ in 0..200 {
            let n = 1 + rng.below(300);
            let pc: Vec<f64> = (0..n)
                .map(|_| rng.below(20) as f64 / [1.0, 2.55, 0.7][rng.below(3)])
                .collect();
            let queued: CpuSet = (0..n)
                .filter(|_| rng.below(3) > 0)
                .map(CoreId::from_index)
                .collect();
            let mut want: Vec<u128> = queued.iter().map(|b| by_load(&pc, b.index())).collect();
            want.sort_unstable();
            assert_eq!(sources_by_load(&pc, &queued), want);
        }
    }

    /// The sources a destination tries are those of the definition: every queued core loaded
    /// beyond the target, by (load descending, nearness, index), the first few. On random
    /// placements, including LLCs that span nodes and cores without an LLC.
    #[test]
    fn candidate_sources_are_the_first_of_all_queued_cores() {
        let mut rng = SeededRng::new(9);
        for _ in 0..500 {
            let n = 1 + rng.below(120);
            let (nodes, llcs) = (1 + rng.below(4), 1 + rng.below(8));
            let places = Places::from_places(
                (0..n)
                    .map(|_| {
                        let llc = (rng.below(5) > 0).then(|| LlcId(rng.below(llcs) as u32));
                        (llc, NodeId(rng.below(nodes) as u32))
                    })
                    .collect(),
            );
            let pc: Vec<f64> = (0..n).map(|_| rng.below(12) as f64 / 2.0).collect();
            let queued: CpuSet = (0..n)
                .filter(|_| rng.below(4) > 0)
                .map(CoreId::from_index)
                .collect();
            let sources = sources_by_load(&pc, &queued);
            let c = rng.below(n);
            let target = rng.below(12) as f64 / 2.0 + 0.25;
            let mut want: Vec<u128> = queued
                .iter()
                .map(CoreId::index)
                .filter(|&b| pc[b] > target)
                .map(|b| source_key(&pc, places.near(b, c), b))
                .collect();
            want.sort_unstable();
            want.truncate(MAX_SOURCES_TRIED);
            assert_eq!(
                candidate_sources(&places, &pc, &queued, &sources, c, target),
                want
            );
        }
    }
}
