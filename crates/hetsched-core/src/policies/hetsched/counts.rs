//! Which threads compete for CPU, per process: which programs are single-threaded (the cores held
//! alone and the benefit swaps are theirs) and how many threads compete in all; and what a
//! thread's part is decided on (its fragment, its exit).
//!
//! A thread competes while it runs or waits to, and for [`ACTIVE_WINDOW_NS`] after its CPU time
//! last grew: a thread blocked at a barrier still belongs to its process's work; a main thread
//! that only waits for its workers to finish, or a runtime's idle helper, does not make a
//! single-threaded computation multi-threaded.
//!
//! The counts are kept up to date thread by thread. When the backend logs the threads that
//! started, blocked, woke, exited or changed process or fragment ([`View::lifecycle_changed`]), a
//! count reads only those, plus the blocked threads whose window closed since (a queue ordered by
//! when it closes); otherwise it reads every thread. Both give the same counts: a runnable thread
//! competes whatever its CPU time, and one that blocks is in the log, its CPU time read then (it
//! ran since it last blocked, so its window starts at that count, as a count of every thread
//! starts it). On 16,384 threads a count of every thread read two observation lines a thread, a
//! fifth of the policy's run; a log of every thread whose observation changed (about 2,000
//! between two balances, since every preemption and bill is a change) still cost 6% of it.

use super::{Hetsched, ACTIVE_WINDOW_NS, AMPS_BALANCE_PERIOD_NS};
use crate::ids::{AppId, ThreadId};
use crate::observe::{ThreadObs, ThreadState, View};
use crate::policies::partitions::is_runnable;
use crate::prefetch::prefetch;
use std::cmp::Reverse;
use std::collections::HashMap;

/// Competing threads per process, in all, and how many processes have exactly one. Process ids are
/// small dense integers in both backends (one counter per process), so the counts are a vector indexed
/// by id; an id far beyond the number of threads goes to a map instead, so no id can make it
/// large.
#[derive(Clone, Debug, Default)]
pub(super) struct ProcessCounts {
    /// Counts of ids below `limit`, as long as the largest such id counted.
    dense: Vec<u32>,
    limit: usize,
    sparse: HashMap<AppId, u32>,
    /// Competing threads of every process.
    pub(super) threads: u32,
    /// Processes with exactly one competing thread.
    pub(super) single: u32,
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

    /// The total after a process's count went from `before` to `after`.
    fn follow(&mut self, before: u32, after: u32) {
        self.threads = self.threads + after - before;
        self.single = self.single + u32::from(after == 1) - u32::from(before == 1);
    }

    /// The same count of competing threads for every process.
    pub(super) fn same_as(&self, other: &ProcessCounts) -> bool {
        fn counted(c: &ProcessCounts) -> &[u32] {
            let end = c.dense.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
            &c.dense[..end]
        }
        counted(self) == counted(other) && self.sparse == other.sparse
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
            ..Activity::default()
        };
    }
}

/// A log of changed threads is sorted rather than marked in a bitmap of every thread when it
/// holds fewer entries than the bitmap's words over this (a sort costs about this many steps an
/// entry; the bitmap, a step a word).
const SORT_LOG_BELOW: usize = 16;

/// The threads of `log` (ids below `n`) in ascending order, each once, into `order`: sorted
/// (`by_sort`) or through a bitmap of `n` bits in `bits`.
fn log_in_order(
    log: &[ThreadId],
    n: usize,
    by_sort: bool,
    bits: &mut Vec<u64>,
    order: &mut Vec<ThreadId>,
) {
    order.clear();
    if by_sort {
        order.extend_from_slice(log);
        order.sort_unstable();
        order.dedup();
        return;
    }
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
}

/// Threads whose competing window closes, by when: blocked threads counted as competing.
pub(super) type WindowEnds = std::collections::BinaryHeap<Reverse<(u64, ThreadId)>>;

impl Hetsched {
    /// Count the threads per process that compete for CPU. `log_since` is the balance
    /// number from whose start a view's log of changed threads dates (this balance's predecessor
    /// inside a balance, the current one between balances): the log serves if a count was made
    /// since.
    pub(super) fn process_counts(&mut self, view: &View<'_>, log_since: u64) {
        let n = view.threads.len();
        self.room_for(n);
        let now = view.now_ns;
        let mut changed = false;
        let log = view
            .lifecycle_changed
            .filter(|_| self.counted_in.is_some_and(|e| e >= log_since));
        match log {
            Some(log) => {
                // In thread order, each thread once (the log may name a thread twice): the
                // observations are read in the order they lie in memory. Through a bitmap of all
                // threads (a bit a thread; a sort's comparisons cost more) unless the log is
                // small beside the threads ever started (a service's requests come and go, and
                // the bitmap's words grew with the run): then sorted.
                let mut order = std::mem::take(&mut self.log_order);
                let by_sort = log.len().saturating_mul(SORT_LOG_BELOW) < n.div_ceil(64);
                log_in_order(log, n, by_sort, &mut self.log_bits, &mut order);
                // The logged threads are scattered over the observations: their lines (two a
                // thread) and activities are fetched a few threads ahead.
                for (i, &id) in order.iter().enumerate() {
                    if let Some(&ahead) = order.get(i + PREFETCH_AHEAD) {
                        let t = view.thread(ahead);
                        prefetch(&t.counters);
                        prefetch(&t.llc_traffic);
                        prefetch(&self.activity[ahead.index()]);
                    }
                    changed |= self.recount(id, view.thread(id), now);
                }
                self.log_order = order;
            }
            None => {
                for t in view.threads {
                    changed |= self.recount(t.id, t, now);
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
            changed |= self.recount(id, view.thread(id), now);
        }
        self.inputs_changed |= changed;
        self.counted_at = Some(now);
        self.counted_in = Some(self.balances);
        if cfg!(debug_assertions) && n <= CHECK_COUNTS_MAX_THREADS {
            self.check_counts(view);
        }
    }

    /// Bring thread `t`'s activity and count up to date. Whether its process, fragment or exit
    /// changed.
    fn recount(&mut self, id: ThreadId, t: &ThreadObs, now: u64) -> bool {
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
            let runs = is_runnable(t.state);
            // A runnable thread competes whatever its CPU time; its time is read again when it
            // blocks (its window starts then).
            if !runs {
                assert_eq!(
                    a.cpu_ns.to_bits(),
                    t.counters.cpu_time_ns.to_bits(),
                    "thread {}: CPU time not counted",
                    t.id.0
                );
            }
            let competing = runs || view.now_ns < a.until_ns;
            assert_eq!(a.counted, competing, "thread {}: competing", t.id.0);
            if competing {
                expected.add(t.app);
            }
        }
        assert!(
            expected.same_as(&self.counts),
            "counts differ from a full count"
        );
        assert_eq!(
            (expected.threads, expected.single),
            (self.counts.threads, self.counts.single)
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

    /// A log of changed threads comes out in ascending order, each thread once, sorted or through
    /// the bitmap alike, for logs with repeats, empty ones, and ids at both ends of the range.
    #[test]
    fn a_log_sorted_or_marked_gives_the_same_order() {
        let mut rng = SeededRng::new(11);
        let (mut bits, mut a, mut b) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..500 {
            let n = 1 + rng.below(5000);
            let len = rng.below(40);
            let mut log: Vec<ThreadId> = (0..len).map(|_| ThreadId(rng.below(n) as u32)).collect();
            if round % 7 == 0 {
                log.extend([ThreadId(0), ThreadId(n as u32 - 1), ThreadId(0)]);
            }
            log_in_order(&log, n, true, &mut bits, &mut a);
            log_in_order(&log, n, false, &mut bits, &mut b);
            assert_eq!(a, b, "round {round}: n {n}, log {log:?}");
            assert!(a.windows(2).all(|w| w[0] < w[1]), "round {round}");
            assert!(log.iter().all(|t| a.contains(t)), "round {round}");
        }
    }

    /// Adding and removing threads one by one keeps every process's count and the total a
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
            assert_eq!(counts.threads, naive.values().sum::<u32>(), "step {step}");
            let single = naive.values().filter(|&&n| n == 1).count() as u32;
            assert_eq!(counts.single, single, "step {step}");
            for (&a, &n) in &naive {
                assert_eq!(counts.get(a), n, "step {step}, process {}", a.0);
            }
        }
    }

    /// Counts from a log of threads that started, blocked, woke, exited or changed process or
    /// fragment equal counts of every thread at every balance: the counts and what they say
    /// changed. Threads run, block, use CPU, change process or fragment and exit at random (a
    /// runnable thread's CPU time grows unlogged; one that blocks has run since it last did, as
    /// in a backend); time jumps past the competing window now and then; one balance in thirty
    /// makes no count, so the next log does not cover the time since the last count and a count
    /// of every thread must be made.
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
                let was_runnable = is_runnable(t.state);
                let lifecycle = match rng.below(12) {
                    0..=2 => {
                        t.state = ThreadState::Running;
                        !was_runnable
                    }
                    3 => {
                        t.state = ThreadState::Runnable;
                        !was_runnable
                    }
                    4..=5 => {
                        if was_runnable {
                            // It ran up to its block.
                            t.counters.cpu_time_ns += 1e5;
                        }
                        t.state = ThreadState::Blocked;
                        was_runnable
                    }
                    6..=8 => {
                        if was_runnable {
                            t.counters.cpu_time_ns += 1e6 * (1 + rng.below(4)) as f64;
                        }
                        false
                    }
                    9 => {
                        t.app = AppId(rng.below(7) as u32);
                        true
                    }
                    10 => {
                        t.data_fragment = t.data_fragment.xor(Some(1));
                        true
                    }
                    _ => {
                        t.state = ThreadState::Exited;
                        true
                    }
                };
                if lifecycle && !log.contains(&t.id) {
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
                lifecycle_changed: Some(&log),
                ..fixture::view(&topo, &threads, &cores, now)
            };
            logged.process_counts(&v, logged.balances - 1);
            full_counts += usize::from(before.is_none_or(|e| e + 1 < logged.balances));
            full.process_counts(&fixture::view(&topo, &threads, &cores, now), 0);
            log.clear();
            assert!(logged.counts.same_as(&full.counts), "step {step}");
            assert_eq!(
                (logged.counts.threads, logged.counts.single),
                (full.counts.threads, full.counts.single),
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
}
