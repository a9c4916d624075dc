//! `linux-6`: today's Linux (6.x) on an asymmetric machine. It time-shares each core as CFS does
//! and adds what the kernel does when core capacities differ (each rule named by the fair.c
//! function it models; docs/baselines.md lists them and what is left out):
//!
//! 1. **Capacity-aware placement** (`select_idle_capacity`, `asym_fits_cpu`): a new or waking
//!    thread goes to its previous core if idle and the thread's utilisation fits there, else to
//!    the first idle core (seeded scan order) where it fits, else to the idle core of the largest
//!    capacity. A thread fits a core when `util * 1280 < capacity * 1024` (`fits_capacity`, the
//!    80% margin). A new thread's utilisation is half a core (`post_init_entity_util_avg` on an
//!    idle CPU). With no idle core, the `linux-cfs` rules apply.
//! 2. **Capacity-weighted balance** (`update_sg_lb_stats`, `calculate_imbalance`): the periodic
//!    balance compares run-queue lengths divided by capacity, so a faster core takes more of the
//!    waiting threads.
//! 3. **Misfit migration** (`update_misfit_status`, `need_active_balance`): a running thread whose
//!    utilisation does not fit its core is pulled by an idle core of greater capacity
//!    (`capacity_greater`: more than ~5% larger), at the core's new-idle balance and at every
//!    periodic balance, the larger utilisation first.
//! 4. **Reduced capacity** (`check_cpu_capacity`, `need_active_balance`): a lone thread on a core
//!    whose capacity is cut by a duty cycle (the kernel sees the stolen time as RT pressure) moves
//!    to an idle core with more than `imbalance_pct` (117%) of its capacity, whatever its
//!    utilisation.
//!
//! 5. **Scope and locality** (`sd_asym_cpucapacity`, `migrate_degrades_locality`): a waking
//!    thread's scan for an idle core covers the lowest domain holding every capacity (its node
//!    when the node has each class); no wake-up or active migration takes a thread to another node
//!    when more of its memory is on its current one.
//!
//! Utilisation is PELT's: the running fraction, scaled by the capacity of the core run on,
//! averaged with a 32 ms half-life; it is brought up to date when the baseline looks at a thread.

use super::linux_cfs::{LinuxCfs, BALANCE_TICKS};
use super::{BalancePort, Baseline, RunQueueView};
use hetsched_core::prefetch::prefetch;
use hetsched_core::{CoreId, CpuSet, Id, ThreadId};

/// The baseline's name.
pub const NAME: &str = "linux-6";

/// `SCHED_CAPACITY_SCALE`: the fastest core's capacity.
const CAPACITY_SCALE: f64 = 1024.0;

/// `fits_capacity(cap, max)`: `cap * 1280 < max * 1024` (fair.c), the 80% margin.
const FITS_MARGIN: f64 = 1280.0 / 1024.0;

/// `capacity_greater(cap1, cap2)`: `cap1 * 1024 > cap2 * 1078` (fair.c), about 5% more.
const GREATER_MARGIN: f64 = 1078.0 / 1024.0;

/// `imbalance_pct` of a multi-core scheduling domain (`sd_init`, topology.c): 117.
const IMBALANCE_PCT: f64 = 1.17;

/// PELT's half-life: `y^32 = 0.5` with 1,024 µs periods (kernel/sched/pelt.c), about 32 ms.
const PELT_HALF_LIFE_NS: f64 = 32.0 * 1_024_000.0;

/// A thread's PELT utilisation and when it was last brought up to date.
#[derive(Clone, Copy, Debug, Default)]
struct Pelt {
    util: f64,
    cpu_ns: f64,
    at_ns: u64,
    seen: bool,
}

/// The per-core capacities, read from the machine at first use.
#[derive(Clone, Debug, Default)]
struct Capacities {
    of: Vec<f64>,
    /// The core's capacity is cut by a duty cycle (clock modulation, an emulated slow core).
    reduced: Vec<bool>,
    asymmetric: bool,
    /// Per core, the cores of the lowest scheduling domain around it that holds every capacity
    /// of the machine (`sd_asym_cpucapacity`, the `SD_ASYM_CPUCAPACITY_FULL` level): its node
    /// when the node has a core of each capacity, else the whole machine.
    asym_scope: Vec<CpuSet>,
}

/// The baseline: `linux-cfs`'s time sharing and tie-breaks, plus the capacity rules.
#[derive(Clone, Debug)]
pub struct Linux6 {
    cfs: LinuxCfs,
    caps: Capacities,
    util: Vec<Pelt>,
}

impl Linux6 {
    /// A balancer whose random tie-breaks follow `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            cfs: LinuxCfs::new(seed),
            caps: Capacities::default(),
            util: Vec::new(),
        }
    }

    fn learn_machine(&mut self, rq: &RunQueueView<'_>) {
        if self.caps.of.len() == rq.num_cores() {
            return;
        }
        let topo = rq.topology;
        self.caps.of = topo
            .cores()
            .iter()
            .map(|c| topo.class(c.class).capacity * CAPACITY_SCALE)
            .collect();
        self.caps.reduced = topo
            .cores()
            .iter()
            .map(|c| topo.class(c.class).duty < 1.0)
            .collect();
        let first = self.caps.of.first().copied().unwrap_or(CAPACITY_SCALE);
        self.caps.asymmetric = self.caps.of.iter().any(|&c| c != first);
        let all = topo.all_cores();
        let distinct = |set: &CpuSet| {
            let mut caps: Vec<u64> = set.iter().map(|c| self.caps.of[c.index()] as u64).collect();
            caps.sort_unstable();
            caps.dedup();
            caps.len()
        };
        let machine_caps = distinct(&all);
        self.caps.asym_scope = topo
            .cores()
            .iter()
            .map(|c| {
                let node = topo.node_cores(c.node);
                if distinct(&node) == machine_caps {
                    node
                } else {
                    all.clone()
                }
            })
            .collect();
    }

    /// Moving `t` from core `from` to core `to` would take it away from the node holding most of
    /// its memory (`migrate_degrades_locality`, fair.c, with NUMA balancing on, as it is by
    /// default on a NUMA machine): refused for active migrations across nodes, and for wake-ups,
    /// where the kernel may place a thread off its node but NUMA balancing brings it back to its
    /// preferred node (`numa_migrate_preferred`) while the model moves no pages for it.
    fn degrades_locality(rq: &RunQueueView<'_>, t: ThreadId, from: CoreId, to: CoreId) -> bool {
        let topo = rq.topology;
        let (src, dst) = (topo.core(from).node, topo.core(to).node);
        if src == dst {
            return false;
        }
        let bytes = &rq.threads[t].resident_bytes;
        let total: u64 = bytes.iter().sum();
        let on_src = bytes.get(src.index()).copied().unwrap_or(0);
        let on_dst = bytes.get(dst.index()).copied().unwrap_or(0);
        total > 0 && on_src > on_dst
    }

    fn capacity(&self, c: CoreId) -> f64 {
        self.caps.of[c.index()]
    }

    /// Thread `t`'s utilisation now.
    fn util(&mut self, rq: &RunQueueView<'_>, t: ThreadId) -> f64 {
        if self.util.len() <= t.index() {
            self.util.resize(t.index() + 1, Pelt::default());
        }
        let obs = &rq.threads[t];
        let cap = obs.cpu.map_or(CAPACITY_SCALE, |c| self.caps.of[c.index()]);
        let p = &mut self.util[t.index()];
        let cpu_ns = obs.counters.cpu_time_ns;
        if !p.seen {
            *p = Pelt {
                util: CAPACITY_SCALE / 2.0,
                cpu_ns,
                at_ns: rq.now_ns,
                seen: true,
            };
            return p.util;
        }
        let dt = rq.now_ns.saturating_sub(p.at_ns) as f64;
        if dt > 0.0 {
            let running = ((cpu_ns - p.cpu_ns) / dt).clamp(0.0, 1.0);
            let y = 0.5f64.powf(dt / PELT_HALF_LIFE_NS);
            p.util = p.util * y + (1.0 - y) * running * cap;
            p.cpu_ns = cpu_ns;
            p.at_ns = rq.now_ns;
        }
        p.util
    }

    fn fits(util: f64, capacity: f64) -> bool {
        util * FITS_MARGIN < capacity
    }

    /// `select_idle_capacity`: the first idle core (from a seeded start) where `util` fits, else
    /// the idle core of the largest capacity.
    /// The scan covers `sd_asym_cpucapacity` around the thread's previous core (the whole
    /// machine for a new thread).
    fn select_idle_capacity(
        &mut self,
        rq: &RunQueueView<'_>,
        t: ThreadId,
        util: f64,
    ) -> Option<CoreId> {
        // No idle core, no candidate: answered without the thread's allowed set, which on a
        // loaded machine is a cache miss or two at every wake-up for nothing.
        if rq.idle.is_empty() {
            return None;
        }
        let prev = rq.cpu(t);
        let scope = prev.map(|p| &self.caps.asym_scope[p.index()]);
        let free = || {
            rq.idle.iter_intersection(rq.allowed(t)).filter(move |&c| {
                rq.runnable(c) == 0
                    && scope.is_none_or(|s| s.contains(c))
                    && prev.is_none_or(|p| !Self::degrades_locality(rq, t, p, c))
            })
        };
        let n = free().count();
        if n == 0 {
            return None;
        }
        let start = self.cfs.rng().below(n);
        let scan = free().skip(start).chain(free().take(start));
        let mut best: Option<CoreId> = None;
        for c in scan {
            if Self::fits(util, self.capacity(c)) {
                return Some(c);
            }
            if best.is_none_or(|b| self.capacity(c) > self.capacity(b)) {
                best = Some(c);
            }
        }
        best
    }

    /// The running thread an idle core `to` pulls: a misfit, or a lone thread on a
    /// duty-cycled core, from a core of smaller capacity; the largest utilisation first.
    fn active_pull(&mut self, rq: &RunQueueView<'_>, to: CoreId) -> Option<ThreadId> {
        let cap_to = self.capacity(to);
        let mut best: Option<(f64, ThreadId)> = None;
        for b in (0..rq.num_cores()).map(CoreId::from_index) {
            let cap_b = self.capacity(b);
            if b == to || rq.runnable(b) != 1 || cap_to <= cap_b * GREATER_MARGIN {
                continue;
            }
            let Some(t) = rq.cores[b].current else {
                continue;
            };
            if !rq.may_run(t, to) || Self::degrades_locality(rq, t, b, to) {
                continue;
            }
            let util = self.util(rq, t);
            let reduced = self.caps.reduced[b.index()] && cap_to > cap_b * IMBALANCE_PCT;
            if (reduced || !Self::fits(util, cap_b)) && best.is_none_or(|(u, _)| util > u) {
                best = Some((util, t));
            }
        }
        best.map(|(_, t)| t)
    }
}

impl Baseline for Linux6 {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A wake-up reads the thread's utilisation record first.
    fn prefetch_wake(&self, t: ThreadId) {
        if let Some(p) = self.util.get(t.index()) {
            prefetch(p);
        }
    }

    fn place_new(&mut self, rq: &RunQueueView<'_>, t: ThreadId) -> CoreId {
        self.learn_machine(rq);
        if !self.caps.asymmetric {
            return self.cfs.place_new(rq, t);
        }
        let util = self.util(rq, t);
        self.select_idle_capacity(rq, t, util)
            .unwrap_or_else(|| self.cfs.random_least_loaded(rq, t))
    }

    fn place_wake(&mut self, rq: &RunQueueView<'_>, t: ThreadId) -> CoreId {
        self.learn_machine(rq);
        if !self.caps.asymmetric {
            return self.cfs.place_wake(rq, t);
        }
        let util = self.util(rq, t);
        if let Some(p) = rq.cpu(t) {
            if rq.may_run(t, p) && rq.runnable(p) == 0 && Self::fits(util, self.capacity(p)) {
                return p;
            }
        }
        match self.select_idle_capacity(rq, t, util) {
            Some(c) => c,
            None => self.cfs.place_wake(rq, t),
        }
    }

    fn newidle_pull(&mut self, rq: &RunQueueView<'_>, idle: CoreId) -> Option<ThreadId> {
        self.learn_machine(rq);
        if let Some(t) = self.cfs.newidle_pull(rq, idle) {
            return Some(t);
        }
        if !self.caps.asymmetric {
            return None;
        }
        self.active_pull(rq, idle)
    }

    fn on_tick(&mut self, tick: u64, port: &mut dyn BalancePort) {
        if !tick.is_multiple_of(BALANCE_TICKS) {
            return;
        }
        self.learn_machine(&port.view());
        self.cfs.periodic_balance(&self.caps.of, port);
        if !self.caps.asymmetric {
            return;
        }
        // Idle cores, the largest capacity first, each pull a misfit.
        let rq = port.view();
        let mut idle: Vec<CoreId> = rq.idle.iter().filter(|&c| rq.runnable(c) == 0).collect();
        idle.sort_by(|&x, &y| {
            self.capacity(y)
                .total_cmp(&self.capacity(x))
                .then(x.cmp(&y))
        });
        for c in idle {
            let rq = port.view();
            if rq.runnable(c) != 0 {
                continue;
            }
            if let Some(t) = self.active_pull(&rq, c) {
                port.move_thread(t, c);
            }
        }
    }
}
