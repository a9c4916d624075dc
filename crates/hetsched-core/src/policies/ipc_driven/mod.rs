//! `ipc-driven`: the IPC-driven algorithm of Becchi and Crowley as the HASS paper implemented it
//! (HASS section 6.1), generalised to n core classes.
//!
//! - Cores form partitions by class, as in HASS; each thread has a *home* partition it is pinned
//!   to, and the backend schedules it inside.
//! - A thread's performance in each partition (instructions per ns: IPC times the class's clock)
//!   is measured by **forced migrations**: the thread runs in every other partition for
//!   [`REFRESH_PERIOD_NS`] (30 ms), then returns home. While it does, it is *refreshing*; at home and
//!   eligible for swapping, it is *pinned*.
//! - A thread is refreshed when it is new (no ratios yet) and whenever it enters a new IPC phase:
//!   the moving average of its IPC at home ([`IPC_AVERAGE_SAMPLES`] samples) moves more than
//!   [`IPC_THRESHOLD`] (10%) from its value when the thread settled.
//! - After any move a thread must stay [`SWAP_INACTIVITY_NS`] (1.5 s) before another forced
//!   migration or swap.
//! - **Swap rule**, for every pair of partitions (faster F, slower S): the highest ratio
//!   perf(F)/perf(S) among S's pinned threads against the lowest among F's; if the former exceeds
//!   the latter, the two threads swap homes. A slower partition's thread also moves up, without a
//!   partner, when F has fewer threads at home than cores.
//! - A new thread's home is the fastest partition with a free core (fast cores are never left
//!   idle), or when all are full the one with the fewest threads at home per core.
//!
//! The ratios come from IPCs measured at different times; when a phase change is still under way
//! they compare different phases, which is the inaccuracy the paper found (section 6.2). A thread
//! refreshing in a partition competes with the threads pinned there (the overhead of section 6.2).

use crate::cpuset::CpuSet;
use crate::ids::ThreadId;
use crate::observe::{Counters, ThreadObs, View};
use crate::policies::hass::estimate::ClassModel;
use crate::policies::partitions::{is_runnable, Partitions};
use crate::policy::{Placement, Policy};
use crate::topology::Topology;
use std::collections::VecDeque;

/// The policy's name, as users pass it and as the registry lists it.
pub const NAME: &str = "ipc-driven";

/// Time a refreshing thread spends in each other partition (HASS section 6.1: `refresh_period`
/// 30 ms, the best of the authors' parameter search).
pub const REFRESH_PERIOD_NS: u64 = 30_000_000;

/// Relative change of the moving-average IPC that marks a new phase (HASS section 6.1:
/// `ipc_threshold` 10%).
pub const IPC_THRESHOLD: f64 = 0.10;

/// Time a thread stays after a move before it may be migrated again (HASS section 6.1:
/// `swap_inactivity` 1.5 s).
pub const SWAP_INACTIVITY_NS: u64 = 1_500_000_000;

/// How often IPC is sampled and the swap rule applied, ns (ours; the paper does not say: a third of
/// the refresh period, so a refresh ends at most 10 ms late).
pub const IPC_SAMPLE_PERIOD_NS: u64 = 10_000_000;

/// Samples in the moving average of IPC (ours: 50 ms, shorter than the 500-600 ms phases the paper
/// reports for fma3d and wupwise, longer than one sample's noise).
pub const IPC_AVERAGE_SAMPLES: usize = 5;

/// What a thread is doing.
#[derive(Clone, Debug, PartialEq)]
enum Mode {
    /// At home, eligible for swapping once inactive long enough.
    Pinned,
    /// Measuring: in partition `visiting` since `since_ns`, then the rest of `to_visit`.
    Refreshing {
        visiting: usize,
        to_visit: Vec<usize>,
        since_ns: u64,
        instructions: f64,
        cycles: f64,
    },
}

#[derive(Clone, Debug)]
struct Tracked {
    home: usize,
    mode: Mode,
    /// Measured performance per partition (instructions per ns), this phase.
    perf: Vec<Option<f64>>,
    /// Counters at the previous sample.
    last: Counters,
    /// Recent IPC samples at home.
    window: VecDeque<f64>,
    /// Moving-average IPC when the thread settled at home.
    reference: Option<f64>,
    /// When the thread last moved (None: never).
    last_move_ns: Option<u64>,
}

impl Tracked {
    fn moving_average(&self) -> Option<f64> {
        (self.window.len() >= IPC_AVERAGE_SAMPLES)
            .then(|| self.window.iter().sum::<f64>() / self.window.len() as f64)
    }
    fn inactive(&self, now: u64) -> bool {
        self.last_move_ns
            .is_none_or(|t| now.saturating_sub(t) >= SWAP_INACTIVITY_NS)
    }
    /// perf(fast) / perf(slow) when both are known.
    fn ratio(&self, fast: usize, slow: usize) -> Option<f64> {
        match (self.perf[fast], self.perf[slow]) {
            (Some(f), Some(s)) if s > 0.0 => Some(f / s),
            _ => None,
        }
    }
}

/// Counts of the algorithm's actions (HASS section 6.2 overheads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpcDrivenStats {
    /// Forced migrations: moves into a partition to measure there (returns home not counted).
    pub forced_migrations: u64,
    /// Refreshes started because of a phase change (not counting a new thread's first one).
    pub phase_changes: u64,
    pub swaps: u64,
    /// Moves up to a partition with a free core.
    pub promotions: u64,
}

/// The IPC-driven policy.
#[derive(Default)]
pub struct IpcDriven {
    parts: Partitions,
    /// Clock of each partition's class, GHz.
    ghz: Vec<f64>,
    threads: Vec<Option<Tracked>>,
    /// Threads at home per partition at `homes_at` (thread starts).
    homes: Vec<u32>,
    homes_at: Option<u64>,
    pub stats: IpcDrivenStats,
}

impl IpcDriven {
    pub fn new() -> Self {
        Self::default()
    }

    fn know_machine(&mut self, topo: &Topology) {
        if !self.ghz.is_empty() {
            return;
        }
        self.parts = Partitions::new(topo);
        let classes = ClassModel::of_machine(topo);
        self.ghz = (0..self.parts.len())
            .map(|p| classes[self.parts.class(p).index()].ghz)
            .collect();
    }

    /// The partition a thread calls home, if tracked.
    pub fn home_of(&self, t: ThreadId) -> Option<usize> {
        self.tracked(t).map(|x| x.home)
    }

    /// Whether a thread is being measured in other partitions.
    pub fn is_refreshing(&self, t: ThreadId) -> bool {
        self.tracked(t)
            .is_some_and(|x| matches!(x.mode, Mode::Refreshing { .. }))
    }

    /// The measured perf(fast) / perf(slow) ratio of a thread between two partitions.
    pub fn ratio(&self, t: ThreadId, fast: usize, slow: usize) -> Option<f64> {
        self.tracked(t).and_then(|x| x.ratio(fast, slow))
    }

    fn tracked(&self, t: ThreadId) -> Option<&Tracked> {
        self.threads.get(t.index()).and_then(|x| x.as_ref())
    }

    /// Threads at home per partition (refreshing threads count at home).
    fn home_counts(&self, view: &View<'_>) -> Vec<u32> {
        let mut n = vec![0; self.parts.len()];
        for (i, t) in self.threads.iter().enumerate() {
            if let Some(t) = t {
                if is_runnable(view.threads[i].state) {
                    n[t.home] += 1;
                }
            }
        }
        n
    }

    fn place(&self, t: ThreadId, p: usize, out: &mut Vec<Placement>) {
        out.push(Placement::new(t, self.parts.cores(p).clone()));
    }

    /// Start measuring thread `t` in every usable partition but its home.
    fn begin_refresh(&mut self, t: ThreadId, obs: &ThreadObs, now: u64, out: &mut Vec<Placement>) {
        let parts = &self.parts;
        let Some(Some(x)) = self.threads.get_mut(t.index()) else {
            return;
        };
        let mut to_visit: Vec<usize> = (0..parts.len())
            .rev()
            .filter(|&p| p != x.home && parts.usable(p, &obs.user_allowed))
            .collect();
        let Some(first) = to_visit.pop() else {
            return;
        };
        for (p, perf) in x.perf.iter_mut().enumerate() {
            if p != x.home {
                *perf = None;
            }
        }
        x.mode = Mode::Refreshing {
            visiting: first,
            to_visit,
            since_ns: now,
            instructions: 0.0,
            cycles: 0.0,
        };
        self.stats.forced_migrations += 1;
        self.place(t, first, out);
    }

    /// One sample of one thread: measurement, phase detection, refresh progress.
    fn sample(&mut self, view: &View<'_>, t: ThreadId, out: &mut Vec<Placement>) {
        let obs = view.thread(t);
        let now = view.now_ns;
        let ran_in = obs.cpu.map(|c| self.parts.of_core(c));
        let Some(Some(x)) = self.threads.get_mut(t.index()) else {
            return;
        };
        let d = obs.counters.since(&x.last);
        x.last = obs.counters;
        let ghz = &self.ghz;
        let go_to = match &mut x.mode {
            Mode::Refreshing {
                visiting,
                to_visit,
                since_ns,
                instructions,
                cycles,
            } => {
                if ran_in == Some(*visiting) {
                    *instructions += d.instructions;
                    *cycles += d.cycles;
                }
                if now.saturating_sub(*since_ns) < REFRESH_PERIOD_NS || *cycles <= 0.0 {
                    return;
                }
                x.perf[*visiting] = Some(*instructions / *cycles * ghz[*visiting]);
                if let Some(next) = to_visit.pop() {
                    *visiting = next;
                    *since_ns = now;
                    *instructions = 0.0;
                    *cycles = 0.0;
                    self.stats.forced_migrations += 1;
                    next
                } else {
                    x.mode = Mode::Pinned;
                    x.last_move_ns = Some(now);
                    x.window.clear();
                    x.reference = None;
                    x.home
                }
            }
            Mode::Pinned => {
                if d.cycles <= 0.0 || ran_in != Some(x.home) {
                    return;
                }
                x.window.push_back(d.instructions / d.cycles);
                if x.window.len() > IPC_AVERAGE_SAMPLES {
                    x.window.pop_front();
                }
                let Some(ma) = x.moving_average() else {
                    return;
                };
                x.perf[x.home] = Some(ma * ghz[x.home]);
                let unmeasured = x.perf.iter().any(Option::is_none);
                let phase_change = match x.reference {
                    None => {
                        x.reference = Some(ma);
                        false
                    }
                    Some(r) => r > 0.0 && ((ma - r) / r).abs() > IPC_THRESHOLD,
                };
                if !((unmeasured || phase_change) && x.inactive(now)) {
                    return;
                }
                if phase_change {
                    self.stats.phase_changes += 1;
                }
                x.reference = None;
                x.window.clear();
                self.begin_refresh(t, obs, now, out);
                return;
            }
        };
        self.place(t, go_to, out);
    }

    /// Pinned, inactive-long-enough, runnable threads by home partition.
    fn eligible_by_home(&self, view: &View<'_>) -> Vec<Vec<ThreadId>> {
        let mut by_home = vec![Vec::new(); self.parts.len()];
        for (i, x) in self.threads.iter().enumerate() {
            let Some(x) = x else {
                continue;
            };
            if x.mode == Mode::Pinned
                && is_runnable(view.threads[i].state)
                && x.inactive(view.now_ns)
            {
                by_home[x.home].push(ThreadId(i as u32));
            }
        }
        by_home
    }

    /// Threads of `list` still at home in `p` and eligible, with their ratio between `fast` and
    /// `slow`.
    fn ratios(
        &self,
        view: &View<'_>,
        list: &[ThreadId],
        p: usize,
        fast: usize,
        slow: usize,
    ) -> Vec<(ThreadId, f64)> {
        list.iter()
            .filter_map(|&t| {
                let x = self.tracked(t)?;
                (x.home == p && x.inactive(view.now_ns)).then_some(())?;
                Some((t, x.ratio(fast, slow)?))
            })
            .collect()
    }

    fn move_home(&mut self, t: ThreadId, p: usize, now: u64, out: &mut Vec<Placement>) {
        if let Some(Some(x)) = self.threads.get_mut(t.index()) {
            x.home = p;
            x.last_move_ns = Some(now);
            x.window.clear();
            x.reference = None;
        }
        self.place(t, p, out);
    }

    /// The swap rule over every pair of partitions of different speed.
    fn swaps(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        let now = view.now_ns;
        let by_home = self.eligible_by_home(view);
        let mut homes = self.home_counts(view);
        for fast in 0..self.parts.len() {
            for slow in fast + 1..self.parts.len() {
                if self.ghz[fast] <= self.ghz[slow] {
                    continue;
                }
                let up = self.ratios(view, &by_home[slow], slow, fast, slow);
                let Some(&(riser, r_up)) = up
                    .iter()
                    .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
                else {
                    continue;
                };
                if !self.parts.usable(fast, &view.thread(riser).user_allowed) {
                    continue;
                }
                if homes[fast] < self.parts.size(fast) {
                    self.stats.promotions += 1;
                    homes[fast] += 1;
                    homes[slow] -= 1;
                    self.move_home(riser, fast, now, out);
                    continue;
                }
                let down = self.ratios(view, &by_home[fast], fast, fast, slow);
                let Some(&(faller, r_down)) = down
                    .iter()
                    .filter(|(t, _)| self.parts.usable(slow, &view.thread(*t).user_allowed))
                    .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
                else {
                    continue;
                };
                if r_up > r_down {
                    self.stats.swaps += 1;
                    self.move_home(riser, fast, now, out);
                    self.move_home(faller, slow, now, out);
                }
            }
        }
    }
}

impl Policy for IpcDriven {
    fn needs(&self) -> &'static [crate::policy::Signal] {
        use crate::policy::Signal;
        &[Signal::Ipc]
    }

    fn name(&self) -> &str {
        NAME
    }

    fn rebalance_period_ns(&self) -> u64 {
        IPC_SAMPLE_PERIOD_NS
    }

    fn on_thread_start(&mut self, view: &View<'_>, thread: ThreadId) -> Option<CpuSet> {
        self.know_machine(view.topology);
        let obs = view.thread(thread);
        // Threads at home per partition, counted once per instant (many threads start together)
        // and kept current by this call's own assignments.
        if self.homes_at != Some(view.now_ns) {
            self.homes = self.home_counts(view);
            self.homes_at = Some(view.now_ns);
        }
        let homes = &self.homes;
        let usable = |p: &usize| self.parts.usable(*p, &obs.user_allowed);
        let home = (0..self.parts.len())
            .filter(usable)
            .find(|&p| homes[p] < self.parts.size(p))
            .or_else(|| {
                (0..self.parts.len()).filter(usable).min_by(|&a, &b| {
                    let la = homes[a] as f64 / self.parts.size(a) as f64;
                    let lb = homes[b] as f64 / self.parts.size(b) as f64;
                    la.total_cmp(&lb).then(a.cmp(&b))
                })
            })?;
        self.homes[home] += 1;
        if self.threads.len() <= thread.index() {
            self.threads.resize(thread.index() + 1, None);
        }
        self.threads[thread.index()] = Some(Tracked {
            home,
            mode: Mode::Pinned,
            perf: vec![None; self.parts.len()],
            last: obs.counters,
            window: VecDeque::with_capacity(IPC_AVERAGE_SAMPLES + 1),
            reference: None,
            last_move_ns: None,
        });
        Some(self.parts.cores(home).clone())
    }

    fn on_thread_exit(&mut self, _view: &View<'_>, thread: ThreadId) {
        if let Some(slot) = self.threads.get_mut(thread.index()) {
            *slot = None;
        }
        // The exited thread no longer counts at home: recount at the next start.
        self.homes_at = None;
    }

    fn rebalance(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        self.know_machine(view.topology);
        self.homes_at = None;
        for i in 0..self.threads.len() {
            if self.threads[i].is_some() {
                self.sample(view, ThreadId(i as u32), out);
            }
        }
        self.swaps(view, out);
    }
}

#[cfg(test)]
mod tests;
