//! `numa-amp`: the NUMA-aware scheduler for asymmetric multicores of Ding, Chang, Guo, Li and Chung
//! (J. Systems Architecture 2014).
//!
//! Processes, not threads, are the unit: a process runs whole on the fast cores or whole on the
//! slow ones (section 3.3.1, Fig. 5), and on the slow side whole in one NUMA domain when the NUMA
//! part places it.
//!
//! 1. **Profiler and data dealer** (Algorithms 1-2): every [`PROFILE_PERIOD_NS`] each process's LLC
//!    miss rate (misses per kilo-instruction over the period, summed over its threads) and eviction
//!    rate (equation 5) are updated from the counters. The metrics and the lists are recomputed
//!    only when an event asks for it:
//!    - **load imbalance**: a process appeared or left, or its thread count changed;
//!    - **behaviour change**: some process's cache-miss variation ratio since the last schedule
//!      (equation 2) is over [`CVR_THRESHOLD`];
//!    - **a fast core idle** while a slow core has work: the direct invocation of section 3.3.1
//!      ("schedule fast core first"), from [`Policy::on_core_idle`].
//! 2. **Schedule** (Algorithm 3): the AMP list sorted by the online AMP speedup factor (equation 1,
//!    [`metrics::amp_speedup_factor`], where the ambiguity about the constant is discussed); the
//!    fast cores' share of the threads under a fair load balance ([`metrics::fast_budget`]); whole
//!    processes from the top of the list while they fit ([`metrics::choose_fast`]). Threads move
//!    only when the chosen set differs from the one on the fast cores.
//! 3. **NUMA part** (Algorithm 3 lines 5-8, section 3.3.2): the slow processes' contention
//!    degradation per domain (equations 3-4, summed over every domain) is compared with that of a
//!    scatter: processes by contention degradation factor (equation 6), the heaviest first, each to
//!    the domain whose processes miss least so far among those with room for its threads. When the
//!    current degradation exceeds the scatter's by more than [`SCATTER_MARGIN`], the processes are
//!    bound to their domains and their sticky pages ([`PageMove`]) follow (Algorithm 3 line 7).
//!    Otherwise domains stay; a process without one (new, or back from the fast cores) goes to the
//!    domain holding most of its pages. Threads moved by the AMP part leave their pages where they
//!    are (section 3.3.2: "threads do not migrate between domains" but for contention). Without the NUMA part ([`NumaAmpConfig::
//!    numa_aware`] false: the paper's "w/o NUMA-aware"), slow processes may run on every slow core
//!    and no page moves.
//!
//! "Fast cores" are the fastest class ([`fast_side`]); every other class is slow (the paper has two
//! types). On a machine with one class only the NUMA part acts; on one node only the AMP part; the
//! policy says so once ([`Policy::take_notice`]).
//!
//! The best-static variant of section 4.3 is the same schedule with the AMP list ranked by each
//! program's speedup measured offline ([`NumaAmpConfig::static_speedups`], by the program's
//! signature name) and rescheduled only on load changes and idle fast cores: no profiling, no
//! phase detection, no NUMA part.

pub mod metrics;
#[cfg(test)]
mod tests;

use crate::cpuset::CpuSet;
use crate::ids::{AppId, CoreId, NodeId, ThreadId};
use crate::observe::{Counters, LlcTraffic, ThreadState, View};
use crate::policy::{PageMove, Placement, Policy};
use crate::topology::Topology;
use metrics::{
    amp_speedup_factor, cache_miss_variation_ratio, choose_fast, contention_degradation_factor,
    cpu_bound_factor, domain_degradation, eviction_rate, fast_budget,
};
use std::collections::BTreeMap;

/// The policy's name, as users pass it and as the registry lists it.
pub const NAME: &str = "numa-amp";

/// Profiling period (Algorithm 1's OPROFILE_PERIOD), ns. The paper gives no value; 100 ms is
/// Linux's and AMPS's order for such sampling and leaves a period ten thousand LLC misses to
/// measure even a thread missing once per 10,000 instructions at 1 GHz.
pub const PROFILE_PERIOD_NS: u64 = 1_000_000_000;

/// How often a new process's arrival is looked at between profiles, ns (ours). The paper's lazy
/// flag is served at the next profile, up to a second later; a process that starts meanwhile would
/// run that second on the slow cores while fast cores idle. AMPS's 4 ms balance period (AMPS
/// section 3) is the order at which placements follow load changes; 10 ms keeps a burst of
/// process starts to one schedule. Other events (threads starting and exiting in known processes,
/// behaviour changes) wait for the next profile, as in the paper: serving them sooner moves
/// threads on transient counts.
pub const CHECK_PERIOD_NS: u64 = 10_000_000;

/// Cache-miss variation ratio over which a process's behaviour has changed (equation 2, Fig. 7;
/// ours, the paper gives none): the miss rate grew or shrank by half of the smaller value. The
/// AMP list's order only changes when some process's rate crosses another's, which a change of
/// less than this rarely does with the miss rates of Fig. 4 an order of magnitude apart.
pub const CVR_THRESHOLD: f64 = 0.5;

/// How much the current contention degradation must exceed the scatter's before processes and
/// pages move (Algorithm 3 line 5, "too big"; ours): 20% over what a scatter achieves. Moving a
/// process's pages costs tens of milliseconds; a margin keeps a small, noisy difference from
/// moving them back and forth.
pub const SCATTER_MARGIN: f64 = 0.2;

/// Weight of the newest period in the averages the NUMA part decides on (ours): whether a process
/// is contention-heavy is a trait of the process, and moving it with its pages costs a copy of its
/// memory, so the NUMA part looks at miss and eviction rates averaged over about four periods,
/// where a program alternating between a compute and a memory phase shows its mix; the AMP part
/// follows the last period, as the paper's event triggers do.
pub const NUMA_RATE_WEIGHT: f64 = 0.25;

/// The cores the policy calls fast: the fastest class (the paper's machines have two types; every
/// other class is slow). Empty on a machine of one speed.
pub fn fast_side(topo: &Topology) -> CpuSet {
    let by_speed = topo.classes_by_speed();
    if by_speed.len() < 2 || !topo.is_asymmetric() {
        return CpuSet::new();
    }
    topo.class_cores(by_speed[0])
}

/// Settings.
#[derive(Clone, Debug, PartialEq)]
pub struct NumaAmpConfig {
    /// Run the NUMA part (Algorithm 3 lines 5-8).
    pub numa_aware: bool,
    pub period_ns: u64,
    pub cvr_threshold: f64,
    /// Rank by these offline speedups (signature name → speedup) instead of the online factor:
    /// section 4.3's best static. Programs not listed rank last.
    pub static_speedups: Option<BTreeMap<String, f64>>,
}

impl Default for NumaAmpConfig {
    fn default() -> Self {
        Self {
            numa_aware: true,
            period_ns: PROFILE_PERIOD_NS,
            cvr_threshold: CVR_THRESHOLD,
            static_speedups: None,
        }
    }
}

/// What the profiler keeps of a thread: its counters at the last sample.
#[derive(Clone, Copy, Debug, Default)]
struct Snapshot {
    counters: Counters,
    traffic: LlcTraffic,
}

/// A process as the data dealer sees it.
#[derive(Clone, Debug, Default)]
struct Process {
    /// LLC misses per kilo-instruction over the last period with instructions; `None` before one.
    mpki: Option<f64>,
    /// The rate the last schedule used (CVR's "old").
    mpki_at_schedule: Option<f64>,
    /// Eviction rate (equation 5) over the last period with instructions.
    er: f64,
    /// Averages of both over recent periods ([`NUMA_RATE_WEIGHT`]).
    mpki_avg: f64,
    er_avg: f64,
    /// Offline speedup, for the static variant.
    static_speedup: Option<f64>,
    /// Where the last schedule put it.
    on_fast: bool,
    domain: Option<NodeId>,
}

/// What a schedule needs of a process's threads, gathered in one pass over them.
#[derive(Clone, Debug, Default)]
struct Footprint<'a> {
    /// Live threads per node of the core they run (or last ran) on.
    threads_on_node: Vec<u32>,
    /// Resident bytes per node, every thread's (exited threads' pages stay the process's).
    resident: Vec<u64>,
    /// Resident bytes per node of the live threads.
    resident_live: Vec<u64>,
    /// The signature name of its first thread (the static variant's key).
    signature: Option<&'a str>,
}

/// Every process's footprint, from one pass over the view's threads.
fn footprints<'a>(view: &View<'a>) -> BTreeMap<AppId, Footprint<'a>> {
    let nodes = view.topology.nodes().len();
    let mut all: BTreeMap<AppId, Footprint<'a>> = BTreeMap::new();
    for t in view.threads {
        let f = all.entry(t.app).or_insert_with(|| Footprint {
            threads_on_node: vec![0; nodes],
            resident: vec![0; nodes],
            resident_live: vec![0; nodes],
            signature: t.signature.as_deref().map(|s| s.name.as_str()),
        });
        let live = t.state != ThreadState::Exited;
        if let (Some(c), true) = (t.cpu, live) {
            f.threads_on_node[view.topology.node_of(c).index()] += 1;
        }
        for (n, &b) in t.resident_bytes.iter().enumerate().take(nodes) {
            f.resident[n] += b;
            if live {
                f.resident_live[n] += b;
            }
        }
    }
    all
}

/// The numa-amp policy.
pub struct NumaAmp {
    cfg: NumaAmpConfig,
    fast: CpuSet,
    slow: CpuSet,
    /// Slow cores per node (empty for nodes without slow cores).
    slow_by_node: Vec<CpuSet>,
    known_machine: bool,
    snapshots: Vec<Snapshot>,
    processes: BTreeMap<AppId, Process>,
    /// Thread counts per process at the last schedule.
    counts_at_schedule: BTreeMap<AppId, u32>,
    /// An event asked for a schedule (the lazy flag of section 3.3.1).
    pending: bool,
    /// A process started that no schedule has placed yet.
    unplaced: bool,
    /// When the counters were last folded into the rates ([`NumaAmp::profile`]).
    profiled_at: Option<u64>,
    page_moves: Vec<PageMove>,
    notice: Option<String>,
}

impl NumaAmp {
    pub fn new(cfg: NumaAmpConfig) -> Self {
        NumaAmp {
            cfg,
            fast: CpuSet::new(),
            slow: CpuSet::new(),
            slow_by_node: Vec::new(),
            known_machine: false,
            snapshots: Vec::new(),
            processes: BTreeMap::new(),
            counts_at_schedule: BTreeMap::new(),
            pending: true,
            unplaced: false,
            profiled_at: None,
            page_moves: Vec::new(),
            notice: None,
        }
    }

    fn learn_machine(&mut self, view: &View<'_>) {
        if self.known_machine {
            return;
        }
        self.known_machine = true;
        let topo = view.topology;
        self.fast = fast_side(topo);
        let asymmetric = !self.fast.is_empty();
        self.slow = topo
            .cores()
            .iter()
            .map(|c| c.id)
            .filter(|&c| !self.fast.contains(c))
            .collect();
        self.slow_by_node = topo
            .nodes()
            .iter()
            .map(|n| topo.node_cores(n.id).intersection(&self.slow))
            .collect();
        let numa = topo.nodes().len() > 1 && self.cfg.numa_aware;
        self.notice = match (asymmetric, numa) {
            (false, false) => Some(format!(
                "numa-amp: {} has one core type and one NUMA node; nothing to place",
                topo.name()
            )),
            (false, true) => Some(format!(
                "numa-amp: {} has one core type; only the NUMA part acts",
                topo.name()
            )),
            (true, false) if self.cfg.numa_aware => Some(format!(
                "numa-amp: {} has one NUMA node; only the AMP part acts",
                topo.name()
            )),
            _ => None,
        };
    }

    fn is_static(&self) -> bool {
        self.cfg.static_speedups.is_some()
    }

    /// Live threads per process (running, runnable or blocked).
    fn thread_counts(view: &View<'_>) -> BTreeMap<AppId, u32> {
        let mut counts = BTreeMap::new();
        for t in view.threads {
            if t.state != ThreadState::Exited {
                *counts.entry(t.app).or_insert(0) += 1;
            }
        }
        counts
    }

    /// Algorithm 2 lines 2-3: fold the period's counters into each process's miss and eviction
    /// rates.
    fn profile(&mut self, view: &View<'_>) {
        if self.snapshots.len() < view.threads.len() {
            self.snapshots
                .resize(view.threads.len(), Snapshot::default());
        }
        #[derive(Default)]
        struct Sums {
            instructions: f64,
            misses: f64,
            refs: f64,
            evictions: f64,
            fills: f64,
        }
        let mut sums: BTreeMap<AppId, Sums> = BTreeMap::new();
        for t in view.threads {
            if t.state == ThreadState::Exited {
                continue;
            }
            let snap = &mut self.snapshots[t.id.index()];
            let d = t.counters.since(&snap.counters);
            let dt = t.llc_traffic.since(&snap.traffic);
            snap.counters = t.counters;
            snap.traffic = t.llc_traffic;
            let s = sums.entry(t.app).or_default();
            s.instructions += d.instructions;
            s.misses += d.llc_misses;
            s.refs += d.llc_refs;
            s.evictions += dt.evictions;
            s.fills += dt.fills;
        }
        for (app, s) in sums {
            let p = self.processes.entry(app).or_default();
            if s.instructions > 0.0 {
                let mpki = s.misses / s.instructions * 1000.0;
                let er = eviction_rate(s.evictions, s.fills, s.misses, s.refs);
                if p.mpki.is_none() {
                    (p.mpki_avg, p.er_avg) = (mpki, er);
                } else {
                    p.mpki_avg += NUMA_RATE_WEIGHT * (mpki - p.mpki_avg);
                    p.er_avg += NUMA_RATE_WEIGHT * (er - p.er_avg);
                }
                p.mpki = Some(mpki);
                p.er = er;
            }
        }
    }

    /// Algorithm 2 line 4: whether an event asks for a schedule.
    fn triggered(&self, counts: &BTreeMap<AppId, u32>) -> bool {
        if self.pending || *counts != self.counts_at_schedule {
            return true;
        }
        if self.is_static() {
            return false;
        }
        self.processes.iter().any(|(app, p)| {
            counts.contains_key(app)
                && match (p.mpki_at_schedule, p.mpki) {
                    (Some(old), Some(new)) => {
                        cache_miss_variation_ratio(old, new) > self.cfg.cvr_threshold
                    }
                    (None, Some(_)) => true,
                    _ => false,
                }
        })
    }

    /// Algorithm 3.
    fn schedule(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        self.pending = false;
        self.unplaced = false;
        let counts = Self::thread_counts(view);
        self.processes.retain(|app, _| counts.contains_key(app));
        let fast_cores = self.fast.len();
        // Lines 5-8 of Algorithm 2: the AMP list.
        let max_mpki = counts
            .keys()
            .filter_map(|a| self.processes.get(a).and_then(|p| p.mpki))
            .fold(0.0, f64::max);
        // A process not yet measured starts from a neutral estimate, the mean CPU-bound factor of
        // the measured ones (0.5 when none is), and is ranked by its own rate from its first
        // profile on.
        let measured: Vec<f64> = counts
            .keys()
            .filter_map(|a| self.processes.get(a).and_then(|p| p.mpki))
            .map(|m| cpu_bound_factor(m, max_mpki))
            .collect();
        let neutral = if measured.is_empty() {
            0.5
        } else {
            measured.iter().sum::<f64>() / measured.len() as f64
        };
        let speedups = self.cfg.static_speedups.as_ref();
        let prints = footprints(view);
        let mut list: Vec<(AppId, u32, f64)> = counts
            .iter()
            .map(|(&app, &n)| {
                let p = self.processes.entry(app).or_default();
                if let Some(map) = speedups {
                    if p.static_speedup.is_none() {
                        p.static_speedup = Some(
                            prints
                                .get(&app)
                                .and_then(|f| f.signature)
                                .and_then(|name| map.get(name).copied())
                                .unwrap_or(0.0),
                        );
                    }
                }
                let score = match p.static_speedup {
                    Some(s) => s,
                    None => amp_speedup_factor(
                        p.mpki.map_or(neutral, |m| cpu_bound_factor(m, max_mpki)),
                        n,
                        fast_cores,
                    ),
                };
                p.mpki_at_schedule = p.mpki;
                (app, n, score)
            })
            .collect();
        list.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        // Lines 1-2.
        let total: usize = list.iter().map(|e| e.1 as usize).sum();
        let budget = fast_budget(total, fast_cores, self.slow.len());
        let sizes: Vec<u32> = list.iter().map(|e| e.1).collect();
        let chosen_at = choose_fast(&sizes, budget);
        let chosen: Vec<AppId> = chosen_at.iter().map(|&i| list[i].0).collect();
        // What whole processes leave of the fast cores' share goes to the best-ranked process
        // that did not fit: that many of its threads run on the fast cores, the rest on the slow
        // ones. The paper passes over such a process (Fig. 5: a process split across core types
        // runs at its slow threads' pace), but the fast cores then idle while its threads queue
        // on the slow ones, which is slower still: a barrier job of 8 threads on 4 fast + 4 slow
        // cores runs one thread a core split, two a slow core whole.
        let taken: usize = chosen_at.iter().map(|&i| sizes[i] as usize).sum();
        let split: Option<(AppId, usize)> = if taken < budget {
            list.iter()
                .enumerate()
                .find(|(i, _)| !chosen_at.contains(i))
                .map(|(_, e)| (e.0, budget - taken))
        } else {
            None
        };
        let numa = self.cfg.numa_aware && !self.is_static() && self.slow_by_node.len() > 1;
        // Lines 3-4: migrate when the set on the fast cores changes.
        for (&app, p) in &mut self.processes {
            let want = chosen.contains(&app);
            if want != p.on_fast || !self.counts_at_schedule.contains_key(&app) {
                p.on_fast = want;
                if want {
                    p.domain = None;
                }
            }
        }
        // Lines 5-8.
        let mut page_targets: Vec<(AppId, NodeId)> = Vec::new();
        if numa {
            page_targets = self.place_domains(&counts, &prints);
        }
        // Placements for every live thread whose allowed set is not what its process's side says;
        // the split process's first threads (by id) take the fast cores' share left to it.
        let mut split_left = split.map_or(0, |(_, n)| n);
        for t in view.threads {
            if t.state == ThreadState::Exited {
                continue;
            }
            let want = if split.is_some_and(|(a, _)| a == t.app) && split_left > 0 {
                split_left -= 1;
                self.fast.clone()
            } else {
                self.cpus_for(t.app)
            };
            if !want.is_empty() && t.allowed != want.intersection(&t.user_allowed) {
                out.push(Placement::new(t.id, want));
            }
        }
        for (app, to) in page_targets {
            let remote: u64 = prints.get(&app).map_or(0, |f| {
                f.resident_live
                    .iter()
                    .enumerate()
                    .filter(|&(n, _)| n != to.index())
                    .map(|(_, &b)| b)
                    .sum()
            });
            if remote > 0 {
                self.page_moves.push(PageMove {
                    app,
                    to,
                    max_bytes: remote,
                });
            }
        }
        self.counts_at_schedule = counts;
    }

    /// The cores a process may use: the fast cores, its domain's slow cores, or every slow core.
    fn cpus_for(&self, app: AppId) -> CpuSet {
        let Some(p) = self.processes.get(&app) else {
            return self.slow.clone();
        };
        if p.on_fast {
            return self.fast.clone();
        }
        match p.domain {
            Some(d) => self.slow_by_node[d.index()].clone(),
            None => self.slow.clone(),
        }
    }

    /// Section 3.3.2: compare the slow processes' contention degradation now with a scatter's, and
    /// adopt the scatter when the current one is too big. Returns the page moves it implies.
    fn place_domains(
        &mut self,
        counts: &BTreeMap<AppId, u32>,
        prints: &BTreeMap<AppId, Footprint<'_>>,
    ) -> Vec<(AppId, NodeId)> {
        let domains: Vec<usize> = (0..self.slow_by_node.len())
            .filter(|&n| !self.slow_by_node[n].is_empty())
            .collect();
        let slow_procs: Vec<AppId> = self
            .processes
            .iter()
            .filter(|(a, p)| !p.on_fast && counts.contains_key(a))
            .map(|(&a, _)| a)
            .collect();
        if domains.len() < 2 || slow_procs.is_empty() {
            return Vec::new();
        }
        let rate = |a: &AppId| {
            let p = &self.processes[a];
            match p.mpki {
                Some(_) => (p.mpki_avg, p.er_avg),
                None => (0.0, 1.0),
            }
        };
        // Where each slow process is now: its domain, or the node most of its threads last ran on.
        let empty = Footprint::default();
        let mut current: BTreeMap<AppId, usize> = BTreeMap::new();
        for &a in &slow_procs {
            let node = match self.processes[&a].domain {
                Some(d) => d.index(),
                None => {
                    let per_node = &prints.get(&a).unwrap_or(&empty).threads_on_node;
                    (0..per_node.len())
                        .max_by_key(|&n| (per_node[n], usize::MAX - n))
                        .unwrap_or(0)
                }
            };
            current.insert(a, node);
        }
        // The node holding most of each slow process's pages.
        let mut pages_home: BTreeMap<AppId, usize> = BTreeMap::new();
        for &a in &slow_procs {
            let per_node = &prints.get(&a).unwrap_or(&empty).resident;
            if let Some(n) = (0..per_node.len())
                .filter(|&n| per_node[n] > 0)
                .max_by_key(|&n| (per_node[n], usize::MAX - n))
            {
                pages_home.insert(a, n);
            }
        }
        let degradation = |assign: &BTreeMap<AppId, usize>| -> f64 {
            (0..self.slow_by_node.len())
                .map(|n| {
                    let members: Vec<(f64, f64)> = assign
                        .iter()
                        .filter(|&(_, &d)| d == n)
                        .map(|(a, _)| rate(a))
                        .collect();
                    domain_degradation(&members)
                })
                .sum()
        };
        // The scatter: heaviest CDF first, each to the least-missing domain with room.
        let mut order = slow_procs.clone();
        order.sort_by(|a, b| {
            let (ma, ea) = rate(a);
            let (mb, eb) = rate(b);
            contention_degradation_factor(mb, eb)
                .total_cmp(&contention_degradation_factor(ma, ea))
                .then(a.cmp(b))
        });
        let slow_threads: usize = slow_procs.iter().map(|a| counts[a] as usize).sum();
        let slow_cores = self.slow.len().max(1);
        let nodes = self.slow_by_node.len();
        let room: Vec<usize> = (0..nodes)
            .map(|n| (slow_threads * self.slow_by_node[n].len()).div_ceil(slow_cores))
            .collect();
        let fits = |a: &AppId| -> Vec<usize> {
            domains
                .iter()
                .copied()
                .filter(|&d| counts[a] as usize <= self.slow_by_node[d].len())
                .collect()
        };
        // Greedy placement of `order` on top of the processes already in `assign`.
        let greedy = |order: &[AppId], mut assign: BTreeMap<AppId, usize>| {
            let mut load = vec![0usize; nodes];
            let mut misses = vec![0.0f64; nodes];
            for (a, &d) in &assign {
                load[d] += counts[a] as usize;
                misses[d] += rate(a).0;
            }
            for a in order {
                let n = counts[a] as usize;
                let fits = fits(a);
                if fits.is_empty() || assign.contains_key(a) {
                    continue;
                }
                let with_room: Vec<usize> = fits
                    .iter()
                    .copied()
                    .filter(|&d| load[d] + n <= room[d])
                    .collect();
                let candidates = if with_room.is_empty() {
                    &fits
                } else {
                    &with_room
                };
                let best = candidates
                    .iter()
                    .copied()
                    .min_by(|&x, &y| {
                        misses[x]
                            .total_cmp(&misses[y])
                            .then(load[x].cmp(&load[y]))
                            .then(x.cmp(&y))
                    })
                    .unwrap_or(domains[0]);
                load[best] += n;
                misses[best] += rate(a).0;
                assign.insert(*a, best);
            }
            assign
        };
        let scatter = self.relabel(greedy(&order, BTreeMap::new()), &pages_home, &current);
        let mut now_assign = current.clone();
        now_assign.retain(|a, _| scatter.contains_key(a));
        let too_big =
            degradation(&now_assign) > degradation(&scatter) * (1.0 + SCATTER_MARGIN) + 1e-9;
        let chosen = if too_big {
            scatter
        } else {
            // Keep the domains given; a process without one (new, or back from the fast cores)
            // goes where most of its pages are, if that domain has room ("threads do not migrate
            // between domains", section 3.3.2), else where the scatter rule says.
            let mut kept: BTreeMap<AppId, usize> = slow_procs
                .iter()
                .filter_map(|a| self.processes[a].domain.map(|d| (*a, d.index())))
                .filter(|(a, _)| !fits(a).is_empty())
                .collect();
            let mut load = vec![0usize; nodes];
            for (a, &d) in &kept {
                load[d] += counts[a] as usize;
            }
            for a in &order {
                if kept.contains_key(a) {
                    continue;
                }
                let n = counts[a] as usize;
                if let Some(&home) = pages_home.get(a) {
                    if fits(a).contains(&home) && load[home] + n <= room[home] {
                        load[home] += n;
                        kept.insert(*a, home);
                    }
                }
            }
            greedy(&order, kept)
        };
        // Algorithm 3 line 7: a scatter moves processes and their sticky pages; otherwise pages
        // stay where they are.
        let mut targets = Vec::new();
        for &a in &slow_procs {
            let want = chosen.get(&a).map(|&d| NodeId(d as u32));
            let p = self.processes.get_mut(&a).expect("a slow process");
            if p.domain != want {
                p.domain = want;
                if let (Some(node), true) = (want, too_big) {
                    targets.push((a, node));
                }
            }
        }
        targets
    }

    /// Domains of equal size are interchangeable: give the scatter's groups the domains that
    /// already hold them (their pages, else their threads), the largest overlaps first, so a
    /// scatter moves only the processes it regroups.
    fn relabel(
        &self,
        scatter: BTreeMap<AppId, usize>,
        pages_home: &BTreeMap<AppId, usize>,
        current: &BTreeMap<AppId, usize>,
    ) -> BTreeMap<AppId, usize> {
        let nodes = self.slow_by_node.len();
        let mut overlap = vec![vec![0usize; nodes]; nodes];
        for (a, &group) in &scatter {
            if let Some(&home) = pages_home.get(a).or_else(|| current.get(a)) {
                overlap[group][home] += 1;
            }
        }
        let mut pairs: Vec<(usize, usize, usize)> = Vec::new();
        for (g, row) in overlap.iter().enumerate() {
            for (n, &w) in row.iter().enumerate() {
                if self.slow_by_node[g].len() == self.slow_by_node[n].len()
                    && !self.slow_by_node[n].is_empty()
                {
                    pairs.push((w, g, n));
                }
            }
        }
        pairs.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
        let mut to: Vec<Option<usize>> = vec![None; nodes];
        let mut taken = vec![false; nodes];
        for (_, g, n) in pairs {
            if to[g].is_none() && !taken[n] {
                to[g] = Some(n);
                taken[n] = true;
            }
        }
        scatter
            .into_iter()
            .map(|(a, g)| (a, to[g].unwrap_or(g)))
            .collect()
    }

    /// Whether some slow core has work (a thread running or queued).
    fn slow_core_busy(&self, view: &View<'_>) -> bool {
        self.slow.iter().any(|c| view.core(c).runnable > 0)
    }
}

impl Policy for NumaAmp {
    fn needs(&self) -> &'static [crate::policy::Signal] {
        use crate::policy::Signal;
        &[
            Signal::Ipc,
            Signal::LlcMisses,
            Signal::LlcTraffic,
            Signal::NodeAccesses,
            Signal::NodeResidency,
        ]
    }

    fn name(&self) -> &str {
        NAME
    }

    fn rebalance_period_ns(&self) -> u64 {
        CHECK_PERIOD_NS.min(self.cfg.period_ns)
    }

    fn rebalance(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        self.learn_machine(view);
        let profile_due = self
            .profiled_at
            .is_none_or(|at| view.now_ns >= at.saturating_add(self.cfg.period_ns));
        if profile_due {
            self.profiled_at = Some(view.now_ns);
            if !self.is_static() {
                self.profile(view);
            }
        } else if !self.unplaced {
            // Between profiles only a new process is placed.
            return;
        }
        let counts = Self::thread_counts(view);
        if self.triggered(&counts) {
            self.schedule(view, out);
        }
    }

    fn on_thread_start(&mut self, view: &View<'_>, thread: ThreadId) -> Option<CpuSet> {
        self.learn_machine(view);
        // The id may be an exited thread's: its counters start again from zero.
        if let Some(s) = self.snapshots.get_mut(thread.index()) {
            *s = Snapshot::default();
        }
        let app = view.thread(thread).app;
        if !self.processes.contains_key(&app) {
            // A new process: load imbalance; until the schedule runs (within a check period) it
            // waits on the slow side.
            self.pending = true;
            self.unplaced = true;
            return (!self.slow.is_empty() && !self.fast.is_empty()).then(|| self.slow.clone());
        }
        self.pending = true;
        let cpus = self.cpus_for(app);
        (!cpus.is_empty()).then_some(cpus)
    }

    fn on_thread_exit(&mut self, _view: &View<'_>, _thread: ThreadId) {
        self.pending = true;
    }

    fn on_core_idle(&mut self, view: &View<'_>, core: CoreId, out: &mut Vec<Placement>) {
        self.learn_machine(view);
        // Section 3.3.1, the direct invocation: a fast core idles while a slow core has work.
        if self.fast.contains(core) && self.slow_core_busy(view) {
            let counts = Self::thread_counts(view);
            if self.triggered(&counts) {
                self.schedule(view, out);
            }
        }
    }

    fn take_page_moves(&mut self, out: &mut Vec<PageMove>) {
        out.append(&mut self.page_moves);
    }

    fn take_notice(&mut self) -> Option<String> {
        self.notice.take()
    }
}
