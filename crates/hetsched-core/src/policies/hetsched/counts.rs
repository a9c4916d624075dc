//! Which threads compete for CPU, per process: what decides the parts.
//!
//! A thread competes while it runs or waits to, and for [`ACTIVE_WINDOW_NS`] after its CPU time
//! last grew: a thread blocked at a barrier still belongs to its process's work; a main thread
//! that only waits for its workers to finish, or a runtime's idle helper, does not make a
//! single-threaded computation multi-threaded.
//!
//! The counts are kept up to date thread by thread. When the backend logs the threads whose
//! observation changed ([`View::changed`]), a count reads only those, plus the blocked threads
//! whose window closed since (a queue ordered by when it closes); otherwise it reads every thread.
//! Both give the same counts, and the CPU time used sums in thread order either way, so the
//! smoothed demand is the same to the bit: on 16,384 threads, of which about 2,000 change between
//! two balances, a count read every thread's two observation lines, a fifth of the policy's run.

use super::{
    Competition, Hetsched, ACTIVE_WINDOW_NS, AMPS_BALANCE_PERIOD_NS, BUSY_BAND, DEMAND_WINDOW_NS,
};
use crate::ids::{AppId, ThreadId};
use crate::observe::{ThreadObs, ThreadState, View};
use crate::policies::numa_amp::metrics::fast_budget;
use crate::policies::partitions::is_runnable;
use crate::prefetch::prefetch;
use std::cmp::Reverse;
use std::collections::HashMap;

/// Competing threads per process, and how many processes have two or more. Process ids are small
/// dense integers in both backends (one counter per process), so the counts are a vector indexed
/// by id; an id far beyond the number of threads goes to a map instead, so no id can make it
/// large.
#[derive(Clone, Debug, Default)]
pub(super) struct ProcessCounts {
    /// Counts of ids below `limit`, as long as the largest such id counted.
    dense: Vec<u32>,
    limit: usize,
    sparse: HashMap<AppId, u32>,
    /// Processes with two or more competing threads.
    pub(super) grouped: u32,
    /// Competing threads of those processes.
    pub(super) grouped_threads: u32,
    /// Competing threads of every process.
    pub(super) threads: u32,
}

impl ProcessCounts {
    /// Ids below a bound from `threads` (the view's thread count) are dense: the bound only grows,
    /// and counts of ids it now covers move from the map to the vector.
    fn widen(&mut self, threads: usize) {
        let limit = 4 * threads + 1024;
        if limit <= self.limit {
            return;
        }
        self.limit = limit;
        let moving: Vec<(AppId, u32)> = self
            .sparse
            .iter()
            .filter(|(app, _)| app.index() < limit)
            .map(|(&app, &n)| (app, n))
            .collect();
        for (app, n) in moving {
            self.sparse.remove(&app);
            if app.index() >= self.dense.len() {
                self.dense.resize(app.index() + 1, 0);
            }
            self.dense[app.index()] = n;
        }
    }

    /// The count of process `app`, to change.
    fn slot(&mut self, app: AppId) -> &mut u32 {
        let i = app.index();
        if i < self.limit {
            if i >= self.dense.len() {
                self.dense.resize(i + 1, 0);
            }
            &mut self.dense[i]
        } else {
            self.sparse.entry(app).or_insert(0)
        }
    }

    /// One more competing thread of process `app`.
    fn add(&mut self, app: AppId) {
        let n = self.slot(app);
        let before = *n;
        *n += 1;
        self.follow(before, before + 1);
    }

    /// One competing thread of process `app` fewer.
    fn remove(&mut self, app: AppId) {
        let n = self.slot(app);
        let before = *n;
        debug_assert!(
            before > 0,
            "process {} has no competing thread to remove",
            app.0
        );
        *n = before.saturating_sub(1);
        let after = *n;
        if after == 0 && app.index() >= self.limit {
            self.sparse.remove(&app);
        }
        self.follow(before, after);
    }

    /// The totals after a process's count went from `before` to `after`.
    fn follow(&mut self, before: u32, after: u32) {
        self.threads = self.threads + after - before;
        // A process with two or more counts all its threads as grouped.
        let grouped = |n: u32| if n >= 2 { n } else { 0 };
        match (before >= 2, after >= 2) {
            (false, true) => self.grouped += 1,
            (true, false) => self.grouped -= 1,
            _ => {}
        }
        self.grouped_threads = self.grouped_threads + grouped(after) - grouped(before);
    }

    /// The same count of competing threads for every process.
    pub(super) fn same_as(&self, other: &ProcessCounts) -> bool {
        fn counted(c: &ProcessCounts) -> &[u32] {
            let end = c.dense.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
            &c.dense[..end]
        }
        counted(self) == counted(other) && self.sparse == other.sparse
    }

    /// Each process with two competing threads or more, and their number.
    fn groups(&self) -> impl Iterator<Item = (AppId, u32)> + '_ {
        let dense = (self.dense.iter().enumerate()).map(|(i, &n)| (AppId(i as u32), n));
        let sparse = self.sparse.iter().map(|(&app, &n)| (app, n));
        dense.chain(sparse).filter(|&(_, n)| n >= 2)
    }

    /// How the multi-threaded processes compete on a machine of `fast` fastest cores and `slow`
    /// others; processes whose threads mostly sleep ([`Duties`]) compete in none of it.
    pub(super) fn competition(&self, fast: usize, slow: usize, duties: &Duties) -> Competition {
        // The competing threads of each process that is not intermittent.
        let steady = || {
            (self.groups())
                .filter(|&(app, _)| !duties.is_intermittent(app))
                .map(|(_, n)| n)
        };
        let (apps, threads) = if duties.intermittent == 0 {
            (self.grouped, self.grouped_threads)
        } else {
            steady().fold((0, 0), |(a, t), n| (a + 1, t + n))
        };
        // The widest and narrowest are read only when two processes or more compete (`part_by`):
        // no pass over the processes at each thread start otherwise.
        let budget = fast_budget(threads as usize, fast, slow);
        Competition {
            grouped_apps: apps,
            each_fits_a_side: apps < 2 || steady().max().unwrap_or(0) as usize <= fast.max(slow),
            busy_beyond_fast: true,
            one_fits_fast: apps >= 2 && steady().min().is_some_and(|n| n as usize <= budget),
        }
    }

    /// Competing threads of process `app` (0 for one with none, or none live).
    pub(super) fn get(&self, app: AppId) -> u32 {
        let i = app.index();
        if i < self.limit {
            self.dense.get(i).copied().unwrap_or(0)
        } else {
            self.sparse.get(&app).copied().unwrap_or(0)
        }
    }
}

/// What a count remembers of a thread: its CPU time, and what the parts are decided on, so that
/// the decision reads this array rather than every thread's observation again.
#[derive(Clone, Copy, Debug)]
pub(super) struct Activity {
    pub(super) cpu_ns: f64,
    pub(super) until_ns: u64,
    /// Its process, as of its last count.
    pub(super) app: AppId,
    pub(super) seen: bool,
    /// In `Hetsched::counts` now, under `counted_as`.
    pub(super) counted: bool,
    pub(super) counted_as: AppId,
    /// Exited, as of its last count.
    pub(super) exited: bool,
    /// Its application names its data fragment, as of its last count.
    pub(super) has_fragment: bool,
    /// Has an entry in `Hetsched::window_ends`.
    window_queued: bool,
    /// Counted as blocked or waiting for a core in the duties, under this process.
    counted_duty: Option<(AppId, DutyState)>,
}

impl Default for Activity {
    /// Not seen yet.
    fn default() -> Self {
        Activity {
            cpu_ns: 0.0,
            until_ns: 0,
            app: AppId(0),
            seen: false,
            counted: false,
            counted_as: AppId(0),
            exited: false,
            has_fragment: false,
            window_queued: false,
            counted_duty: None,
        }
    }
}

impl Activity {
    /// A thread that starts again: not seen, its place in the counts and the window queue kept
    /// (they follow it until its next count).
    pub(super) fn restart(&mut self) {
        *self = Activity {
            counted: self.counted,
            counted_as: self.counted_as,
            window_queued: self.window_queued,
            counted_duty: self.counted_duty,
            ..Activity::default()
        };
    }
}

/// Threads whose competing window closes, by when: blocked threads counted as competing.
pub(super) type WindowEnds = std::collections::BinaryHeap<Reverse<(u64, ThreadId)>>;

/// Below this fraction of its competing threads runnable (running or waiting for a core, not
/// blocked), a multi-threaded process is intermittent (ours: request services that compute a
/// millisecond or two and sleep five measure 0.2-0.3; the PARSEC-like barrier processes on
/// `ding-4f12s` 0.4-0.6, the ones whose lagging thread keeps the others waiting crossing the line
/// now and then).
pub const INTERMITTENT_DUTY: f64 = 0.4;

/// How often the duties are sampled (ours: every fifth AMPS balance; a sample reads every
/// multi-threaded process, 4,096 of them in the 16k-thread scale test, too many for every 4 ms
/// balance).
pub const DUTY_SAMPLE_NS: u64 = 20_000_000;

/// Over how long a process's duty is smoothed (ours: ten samples; a 4-thread process's sample
/// moves by a quarter with each thread, so one sample must not decide).
pub const DUTY_WINDOW_NS: u64 = 200_000_000;

/// A multi-threaded process's duty: how many of its competing threads are runnable.
#[derive(Clone, Copy, Debug, Default)]
struct Duty {
    /// The fraction of its competing threads runnable, smoothed over [`DUTY_WINDOW_NS`]
    /// (unmeasured: all of them).
    runnable: f64,
    /// It is below [`INTERMITTENT_DUTY`].
    intermittent: bool,
    /// The sample that last read it; older than the last sample, it was not multi-threaded then
    /// and starts afresh.
    sample: u64,
}

/// Whether each process with two competing threads or more keeps its threads runnable or mostly
/// blocked. Placed whole on the fast cores, a process whose threads are blocked most of the time
/// (a request service's threads compute briefly and sleep; a barrier process waits for a lagging
/// thread) leaves them idle while the other processes wait on the slow ones: a web service of 3-8
/// threads beside a 3-thread database and a batch program on machines of 6-16 cores ran at
/// 0.74-0.93x the kernel's balance placed whole. Such a process is balanced thread by thread
/// instead (the `amps` part).
///
/// A sample reads each such process: the fraction of its threads not blocked, smoothed. While one
/// of them waits in a run queue its sample is skipped: its siblings may be blocked at a barrier
/// waiting for it, and so for the core it waits for, not for their own work (on a crowded machine
/// every thread of a barrier process waits its turn). The live backend, which reads `R` in `/proc`
/// for both, calls one runnable thread a core running and the others on it waiting.
#[derive(Clone, Debug, Default)]
pub(super) struct Duties {
    /// Competing threads of each process that are blocked (asleep, at a barrier, waiting for
    /// I/O), and that wait in a run queue, kept up to date thread by thread like the competing
    /// counts.
    blocked: ProcessCounts,
    waiting: ProcessCounts,
    /// Per process, by id where the counts keep ids in a vector, in a map beyond.
    dense: Vec<Duty>,
    sparse: std::collections::BTreeMap<AppId, Duty>,
    /// Samples so far.
    samples: u64,
    /// When the last sample was taken.
    sampled_at: Option<u64>,
    /// Processes intermittent at the last sample.
    intermittent: u32,
}

/// What a competing thread that does not run is doing, for its process's duty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DutyState {
    Blocked,
    Waiting,
}

impl Duties {
    fn counts_mut(&mut self, state: DutyState) -> &mut ProcessCounts {
        match state {
            DutyState::Blocked => &mut self.blocked,
            DutyState::Waiting => &mut self.waiting,
        }
    }

    fn duty(&self, app: AppId) -> Option<&Duty> {
        if app.index() < self.blocked.limit {
            self.dense.get(app.index())
        } else {
            self.sparse.get(&app)
        }
    }

    fn duty_mut(&mut self, app: AppId) -> &mut Duty {
        if app.index() < self.blocked.limit {
            if app.index() >= self.dense.len() {
                self.dense.resize(app.index() + 1, Duty::default());
            }
            &mut self.dense[app.index()]
        } else {
            self.sparse.entry(app).or_default()
        }
    }

    /// Each measured process's smoothed runnable fraction (its bits) and whether it is
    /// intermittent, to compare two counts.
    #[cfg(test)]
    fn figures(&self, counts: &ProcessCounts) -> Vec<(AppId, u64, bool)> {
        let measured = counts.groups().filter_map(|(app, _)| {
            let d = self
                .duty(app)
                .filter(|d| d.sample == self.samples && self.samples > 0)?;
            Some((app, d.runnable.to_bits(), d.intermittent))
        });
        measured.collect()
    }

    /// Whether process `app`'s threads mostly sleep (unmeasured: no).
    pub(super) fn is_intermittent(&self, app: AppId) -> bool {
        self.intermittent > 0
            && self
                .duty(app)
                .is_some_and(|d| d.intermittent && d.sample == self.samples)
    }

    /// At a count at `now`, when a sample is due: each multi-threaded process's runnable fraction
    /// of its `counts` competing threads, smoothed. Whether some process became intermittent or
    /// stopped being.
    fn count(&mut self, counts: &ProcessCounts, now: u64) -> bool {
        let dt = match self.sampled_at {
            Some(at) if now < at.saturating_add(DUTY_SAMPLE_NS) => return false,
            Some(at) => now - at,
            None => DUTY_SAMPLE_NS,
        };
        self.sampled_at = Some(now);
        let weight = (dt as f64 / DUTY_WINDOW_NS as f64).min(1.0);
        let (last, this) = (self.samples, self.samples + 1);
        self.samples = this;
        let (before, mut after, mut flipped) = (self.intermittent, 0, false);
        for (app, n) in counts.groups() {
            let (blocked, waiting) = (self.blocked.get(app), self.waiting.get(app));
            let d = self.duty_mut(app);
            if d.sample != last || last == 0 {
                flipped |= d.intermittent;
                *d = Duty {
                    runnable: 1.0,
                    intermittent: false,
                    sample: last,
                };
            }
            d.sample = this;
            // While a thread waits for a core its siblings may be blocked waiting for it at a
            // barrier, not asleep: the figure stays as it was.
            if waiting == 0 {
                let runnable = 1.0 - f64::from(blocked) / f64::from(n);
                d.runnable += weight * (runnable - d.runnable);
            }
            // Once intermittent, a process must rise the band above the line to count as steady
            // again, so that a duty at the line does not move it back and forth.
            let band = if d.intermittent { 1.0 + BUSY_BAND } else { 1.0 };
            let now = d.runnable < INTERMITTENT_DUTY * band;
            flipped |= now != d.intermittent;
            d.intermittent = now;
            after += u32::from(now);
        }
        // Processes no longer multi-threaded drop out with their flags.
        flipped |= before > 0 && after != before;
        self.intermittent = after;
        if self.sparse.len() > 2 * counts.grouped as usize + 64 {
            let stale = self.samples;
            self.sparse.retain(|_, d| d.sample == stale);
        }
        flipped
    }
}

impl Hetsched {
    /// Count the threads per process that compete for CPU, and the number of processes with two
    /// or more, and smooth the cores' worth of CPU time they used. `log_since` is the balance
    /// number from whose start a view's log of changed threads dates (this balance's predecessor
    /// inside a balance, the current one between balances): the log serves if a count was made
    /// since.
    pub(super) fn process_counts(&mut self, view: &View<'_>, log_since: u64) {
        let n = view.threads.len();
        self.room_for(n);
        let now = view.now_ns;
        let mut used = 0.0;
        let mut changed = false;
        let log = view
            .changed
            .filter(|_| self.counted_in.is_some_and(|e| e >= log_since));
        match log {
            Some(log) => {
                // In thread order: the CPU time used sums as a full count sums it. The ids are
                // ordered through a bitmap of all threads (a bit a thread, a sort's comparisons
                // cost more).
                let mut order = std::mem::take(&mut self.log_order);
                order.clear();
                let bits = &mut self.log_bits;
                bits.clear();
                bits.resize(n.div_ceil(64), 0);
                for &id in log {
                    bits[id.index() / 64] |= 1 << (id.index() % 64);
                }
                for (w, &word) in bits.iter().enumerate() {
                    let mut word = word;
                    while word != 0 {
                        order.push(ThreadId((w * 64) as u32 + word.trailing_zeros()));
                        word &= word - 1;
                    }
                }
                // The logged threads are scattered over the observations: their lines (two a
                // thread) and activities are fetched a few threads ahead.
                for (i, &id) in order.iter().enumerate() {
                    if let Some(&ahead) = order.get(i + PREFETCH_AHEAD) {
                        let t = view.thread(ahead);
                        prefetch(&t.counters);
                        prefetch(&t.llc_traffic);
                        prefetch(&self.activity[ahead.index()]);
                    }
                    changed |= self.recount(id, view.thread(id), now, &mut used);
                }
                self.log_order = order;
            }
            None => {
                for t in view.threads {
                    changed |= self.recount(t.id, t, now, &mut used);
                }
            }
        }
        // Blocked threads whose window closed, unless their CPU time grew since (then they were
        // in the log, and their window moved on).
        while let Some(&Reverse((end, id))) = self.window_ends.peek() {
            if end > now {
                break;
            }
            self.window_ends.pop();
            self.activity[id.index()].window_queued = false;
            let mut none = 0.0;
            changed |= self.recount(id, view.thread(id), now, &mut none);
            debug_assert_eq!(none, 0.0, "thread {} used CPU outside the log", id.0);
        }
        if let Some(at) = self.counted_at.filter(|&at| now > at) {
            let dt = (now - at) as f64;
            let busy = used / dt;
            let weight = (dt / DEMAND_WINDOW_NS as f64).min(1.0);
            self.busy_cores = Some(match self.busy_cores {
                Some(b) => b + weight * (busy - b),
                None => busy,
            });
        }
        changed |= self.duties.count(&self.counts, now);
        self.inputs_changed |= changed;
        self.counted_at = Some(now);
        self.counted_in = Some(self.balances);
        if cfg!(debug_assertions) && n <= CHECK_COUNTS_MAX_THREADS {
            self.check_counts(view);
        }
    }

    /// Bring thread `t`'s activity and count up to date; its CPU time used since its last count
    /// is added to `used`. Whether its process, fragment or exit changed.
    fn recount(&mut self, id: ThreadId, t: &ThreadObs, now: u64, used: &mut f64) -> bool {
        let a = &mut self.activity[id.index()];
        let exited = t.state == ThreadState::Exited;
        let mut changed = exited != a.exited;
        a.exited = exited;
        let runs = is_runnable(t.state);
        let competing = !exited && {
            let has_fragment = t.data_fragment.is_some();
            changed |= (t.app, has_fragment) != (a.app, a.has_fragment);
            a.app = t.app;
            a.has_fragment = has_fragment;
            let cpu = t.counters.cpu_time_ns;
            if !a.seen || cpu > a.cpu_ns {
                if a.seen {
                    *used += cpu - a.cpu_ns;
                }
                a.seen = true;
                a.cpu_ns = cpu;
                a.until_ns = now + ACTIVE_WINDOW_NS;
            }
            runs || now < a.until_ns
        };
        let counts = &mut self.counts;
        if a.counted && (!competing || a.counted_as != t.app) {
            counts.remove(a.counted_as);
            a.counted = false;
        }
        if competing && !a.counted {
            counts.add(t.app);
            a.counted = true;
            a.counted_as = t.app;
        }
        let duty = match t.state {
            _ if !competing => None,
            ThreadState::Blocked => Some(DutyState::Blocked),
            ThreadState::Runnable => Some(DutyState::Waiting),
            _ => None,
        };
        if let Some((app, was)) = a
            .counted_duty
            .filter(|&(app, was)| Some(was) != duty || app != t.app)
        {
            self.duties.counts_mut(was).remove(app);
            a.counted_duty = None;
        }
        if let (Some(d), None) = (duty, a.counted_duty) {
            self.duties.counts_mut(d).add(t.app);
            a.counted_duty = Some((t.app, d));
        }
        if competing && !runs && !a.window_queued {
            a.window_queued = true;
            self.window_ends.push(Reverse((a.until_ns, id)));
        }
        changed
    }

    /// Room in `activity` and the counts for `threads` threads.
    pub(super) fn room_for(&mut self, threads: usize) {
        if self.activity.len() < threads {
            self.activity.resize(threads, Activity::default());
        }
        self.counts.widen(threads);
        self.duties.blocked.widen(threads);
        self.duties.waiting.widen(threads);
    }

    /// The counts for a thread's start: counted in full if the last full count is a balance
    /// period old or more; otherwise that count plus the starting thread (new, it competes for
    /// [`ACTIVE_WINDOW_NS`]). A count at every start read every thread (or the log, which holds
    /// every thread started since the last balance), O(threads²) while a program's threads
    /// started. Between two balances, 4 ms apart, such a count differs from a full one only by
    /// threads whose state changed since (exited, stopped competing or competing again), which
    /// the next balance's count takes in.
    pub(super) fn count_start(&mut self, view: &View<'_>, thread: ThreadId) {
        let fresh = self
            .counted_at
            .is_some_and(|at| view.now_ns < at.saturating_add(AMPS_BALANCE_PERIOD_NS));
        if !fresh {
            self.process_counts(view, self.balances);
            return;
        }
        self.room_for(view.threads.len());
        let t = view.thread(thread);
        let Some(a) = self.activity.get_mut(thread.index()) else {
            return;
        };
        if a.counted || t.state == ThreadState::Exited {
            return;
        }
        a.seen = true;
        a.cpu_ns = t.counters.cpu_time_ns;
        a.until_ns = view.now_ns + ACTIVE_WINDOW_NS;
        a.counted = true;
        a.counted_as = t.app;
        self.counts.add(t.app);
    }

    /// Debug builds: the counts are what a count of every thread from its observation gives, and
    /// every thread's activity follows its observation (a change missing from the backend's log
    /// shows here).
    fn check_counts(&self, view: &View<'_>) {
        let mut expected = ProcessCounts::default();
        expected.widen(view.threads.len());
        let (mut blocked, mut waiting) = (expected.clone(), expected.clone());
        for t in view.threads {
            let a = &self.activity[t.id.index()];
            let exited = t.state == ThreadState::Exited;
            assert_eq!(a.exited, exited, "thread {}: exit not counted", t.id.0);
            if exited {
                assert!(!a.counted, "thread {}: counted after its exit", t.id.0);
                continue;
            }
            assert!(a.seen, "thread {}: never counted", t.id.0);
            assert_eq!(a.app, t.app, "thread {}: process not counted", t.id.0);
            assert_eq!(
                a.cpu_ns.to_bits(),
                t.counters.cpu_time_ns.to_bits(),
                "thread {}: CPU time not counted",
                t.id.0
            );
            let runs = is_runnable(t.state);
            let competing = runs || view.now_ns < a.until_ns;
            assert_eq!(a.counted, competing, "thread {}: competing", t.id.0);
            if competing {
                expected.add(t.app);
                match t.state {
                    ThreadState::Blocked => blocked.add(t.app),
                    ThreadState::Runnable => waiting.add(t.app),
                    _ => {}
                }
            }
        }
        assert!(
            expected.same_as(&self.counts),
            "counts differ from a full count"
        );
        assert!(
            blocked.same_as(&self.duties.blocked) && waiting.same_as(&self.duties.waiting),
            "blocked or waiting threads differ from a full count"
        );
        assert_eq!(
            (expected.grouped, expected.grouped_threads, expected.threads),
            (
                self.counts.grouped,
                self.counts.grouped_threads,
                self.counts.threads
            )
        );
    }
}

/// How many logged threads ahead a count fetches a thread's observation and activity.
const PREFETCH_AHEAD: usize = 8;

/// Debug builds check the counts against a count of every thread after each count, on views of
/// at most this many threads (the check reads every thread).
const CHECK_COUNTS_MAX_THREADS: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::CoreObs;
    use crate::policies::fixture;
    use crate::policies::hetsched::HetschedConfig;
    use crate::presets::machine_preset;
    use crate::rng::SeededRng;

    /// Adding and removing threads one by one keeps every process's count and the totals a
    /// recount from scratch gives, including ids that start in the map and move to the vector
    /// when the thread count grows.
    #[test]
    fn process_counts_follow_adds_and_removes() {
        let mut rng = SeededRng::new(7);
        let mut counts = ProcessCounts::default();
        counts.widen(4);
        let mut naive: HashMap<AppId, u32> = HashMap::new();
        for step in 0..3000 {
            if step == 1500 {
                counts.widen(400);
            }
            let app = AppId([1, 2, 3, 1500, 2000, 5000][rng.below(6)]);
            let had = naive.get(&app).copied().unwrap_or(0);
            if had == 0 || rng.below(2) == 0 {
                counts.add(app);
                *naive.entry(app).or_insert(0) += 1;
            } else {
                counts.remove(app);
                *naive.entry(app).or_insert(0) -= 1;
            }
            let grouped: Vec<u32> = naive.values().copied().filter(|&n| n >= 2).collect();
            assert_eq!(
                (counts.grouped, counts.grouped_threads, counts.threads),
                (
                    grouped.len() as u32,
                    grouped.iter().sum::<u32>(),
                    naive.values().sum::<u32>()
                ),
                "step {step}"
            );
            for (&a, &n) in &naive {
                assert_eq!(counts.get(a), n, "step {step}, process {}", a.0);
            }
        }
    }

    /// Counts from a log of changed threads equal counts of every thread at every balance: the
    /// counts, the smoothed demand to the bit, and what they say changed. Threads run, block,
    /// use CPU, change process or fragment and exit at random; time jumps past the competing
    /// window now and then; one balance in thirty makes no count, so the next log does not cover
    /// the time since the last count and a count of every thread must be made.
    #[test]
    fn a_count_from_the_log_equals_a_count_of_every_thread() {
        let topo = machine_preset("ding-4f12s").unwrap().unwrap();
        let cores = vec![CoreObs::default(); topo.num_cores()];
        let n = 48;
        let mut threads: Vec<ThreadObs> = (0..n)
            .map(|i| ThreadObs::new(ThreadId(i), AppId(i % 7), topo.all_cores(), 1))
            .collect();
        let mut rng = SeededRng::new(11);
        let mut logged = Hetsched::new(HetschedConfig::default());
        let mut full = Hetsched::new(HetschedConfig::default());
        let mut log: Vec<ThreadId> = threads.iter().map(|t| t.id).collect();
        let mut now = 0;
        let mut full_counts = 0;
        for step in 0..3000 {
            now += if step % 97 == 0 {
                ACTIVE_WINDOW_NS + 1
            } else {
                AMPS_BALANCE_PERIOD_NS
            };
            for _ in 0..rng.below(8) {
                let i = rng.below(n as usize);
                let t = &mut threads[i];
                if t.state == ThreadState::Exited {
                    continue;
                }
                match rng.below(12) {
                    0..=2 => t.state = ThreadState::Running,
                    3 => t.state = ThreadState::Runnable,
                    4..=5 => t.state = ThreadState::Blocked,
                    6..=8 => t.counters.cpu_time_ns += 1e6 * (1 + rng.below(4)) as f64,
                    9 => t.app = AppId(rng.below(7) as u32),
                    10 => t.data_fragment = t.data_fragment.xor(Some(1)),
                    _ => t.state = ThreadState::Exited,
                }
                if !log.contains(&t.id) {
                    log.push(t.id);
                }
            }
            // The backend's log restarts at every balance, counted or not.
            logged.balances += 1;
            full.balances += 1;
            if step % 30 == 29 {
                log.clear();
                continue;
            }
            let before = logged.counted_in;
            let v = View {
                changed: Some(&log),
                ..fixture::view(&topo, &threads, &cores, now)
            };
            logged.process_counts(&v, logged.balances - 1);
            full_counts += usize::from(before.is_none_or(|e| e + 1 < logged.balances));
            full.process_counts(&fixture::view(&topo, &threads, &cores, now), 0);
            log.clear();
            assert!(logged.counts.same_as(&full.counts), "step {step}");
            assert_eq!(
                (
                    logged.counts.grouped,
                    logged.counts.grouped_threads,
                    logged.counts.threads
                ),
                (
                    full.counts.grouped,
                    full.counts.grouped_threads,
                    full.counts.threads
                ),
                "step {step}"
            );
            assert_eq!(
                logged.busy_cores.map(f64::to_bits),
                full.busy_cores.map(f64::to_bits),
                "step {step}"
            );
            assert_eq!(
                logged.duties.figures(&logged.counts),
                full.duties.figures(&full.counts),
                "step {step}"
            );
            assert_eq!(logged.inputs_changed, full.inputs_changed, "step {step}");
            logged.inputs_changed = false;
            full.inputs_changed = false;
        }
        // The first count, and one after each balance without a count but the last (steps 29,
        // 59, ..., 2969).
        assert_eq!(full_counts, 1 + 99);
    }

    /// A process whose threads are mostly blocked turns intermittent once its smoothed runnable
    /// fraction falls under the line, and steady again only above the band; a sample at which one
    /// of its threads waits for a core leaves its figure as it was; samples come every
    /// [`DUTY_SAMPLE_NS`] whatever the counts between.
    #[test]
    fn a_process_mostly_blocked_is_intermittent_with_a_band() {
        let (app, other, far) = (AppId(3), AppId(9), AppId(100_000));
        let mut counts = ProcessCounts::default();
        counts.widen(16);
        let mut duties = Duties::default();
        duties.blocked.widen(16);
        duties.waiting.widen(16);
        for _ in 0..4 {
            counts.add(app);
            counts.add(other);
            counts.add(far);
        }
        // `app` and `far` (an id kept in the map): 3 of 4 blocked; `other`: 3 blocked, 1 waiting.
        for _ in 0..3 {
            duties.blocked.add(app);
            duties.blocked.add(far);
            duties.blocked.add(other);
        }
        duties.waiting.add(other);
        let step = DUTY_SAMPLE_NS / 5;
        let mut flips = Vec::new();
        for i in 0..1000u64 {
            if duties.count(&counts, i * step) {
                flips.push(i);
            }
        }
        // A sample every fifth count, from the first; 1 - 0.75 (1 - 0.9^k) < 0.4 first at the 16th
        // (count 75).
        assert_eq!(flips, vec![75]);
        assert!(duties.is_intermittent(app) && duties.is_intermittent(far));
        // Skipped at every sample: unmeasured, steady.
        assert!(!duties.is_intermittent(other));
        // Half runnable: above the line but within the band it stays intermittent until the
        // figure passes it.
        duties.blocked.remove(app);
        let mut t = 1000 * step;
        let mut samples = 0;
        while duties.is_intermittent(app) {
            let figure = duties.duty(app).unwrap().runnable;
            assert!(figure < INTERMITTENT_DUTY * (1.0 + BUSY_BAND), "{figure}");
            t += DUTY_SAMPLE_NS;
            duties.count(&counts, t);
            samples += 1;
        }
        assert!(samples > 2, "{samples}");
        assert!(duties.is_intermittent(far));
        // A process no longer multi-threaded drops out, its flag with it, and starts afresh.
        for _ in 0..3 {
            counts.remove(far);
        }
        t += DUTY_SAMPLE_NS;
        assert!(duties.count(&counts, t));
        assert!(!duties.is_intermittent(far));
        assert_eq!(duties.figures(&counts).len(), 2);
        for _ in 0..3 {
            counts.add(far);
        }
        t += DUTY_SAMPLE_NS;
        duties.count(&counts, t);
        assert_eq!(duties.duty(far).unwrap().runnable, 1.0 + 0.1 * (0.25 - 1.0));
    }
}
