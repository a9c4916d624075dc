//! Static assignments of applications to CPU partitions, the `static-best` oracle, and the two
//! composite metrics HASS is compared with (HASS section 5).
//!
//! - A **static assignment** binds every copy of every application to one partition for the whole
//!   run (restarted instances keep their copy's partition), the way the paper bound benchmarks to a
//!   core type. It is simulated as a workload whose copies carry CPU masks, under the
//!   `linux-default` balancer.
//! - Partitions get threads in proportion to their cores (exactly one per core when there are as
//!   many threads as cores, as in the paper's experiments); on an over-subscribed machine the
//!   share of threads each partition holds is searched too ([`partitions_and_quota_choices`]).
//!   Copies of one application are interchangeable, so an assignment is how many copies of each
//!   application each partition holds.
//! - **`static-best`** simulates every such assignment and keeps the best: here
//!   ([`run_assignments`]) the lowest geometric mean over applications of mean completion time
//!   ("obtained by testing all possible ones and picking the one with the best performance"), the
//!   paper's measure; `simulate` and the matrix keep the best speedup over the baseline's run. It
//!   refuses instances whose first share alone has more than [`STATIC_BEST_MAX_ASSIGNMENTS`]
//!   assignments, as the paper did not report one for AMD-4,4,2,2 "due to a large search space".
//! - The **default metric** of an application: the average, weighted by the share of cores of each
//!   class, of its completion time when bound to that class ("expected completion time of a
//!   benchmark if it randomly binds to a core at the start and never switches"). The **ideal-RR**
//!   metric: the completion time when its time on each class is proportional to that class's
//!   cores, `1 / Σ_k (w_k / T_k)`. The per-class times come from the static-assignment runs, which
//!   keep the experiment's load.

use hetsched_core::policies::linux_default::LinuxDefault;
use hetsched_core::policies::partitions::Partitions;
use hetsched_core::policies::STATIC_BEST;
use hetsched_core::rng::SeededRng;
use hetsched_core::Topology;
use hetsched_sim::batch::{run_jobs, Job};
use hetsched_sim::metrics::{speedup, AppResult, RunResult};
use hetsched_sim::splits::for_each_split;
use hetsched_sim::workload::{AppSpec, Workload};
use hetsched_sim::SimConfig;
use std::collections::{BTreeSet, HashSet};
use thiserror::Error;

/// Most static assignments `static-best` simulates (each is a full run). Our limit: 256 runs of a
/// 16-core experiment take seconds; AMD-12,4 with four copies of four benchmarks has 35.
pub const STATIC_BEST_MAX_ASSIGNMENTS: usize = 256;

/// Most static assignments counted for the error past the limit (counting goes on past the limit
/// to give the number; beyond this many, the error says "more than").
pub const STATIC_BEST_MAX_COUNTED: usize = 1_000_000;

/// Why static assignments cannot be made for a workload.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum StaticError {
    #[error("static-best binds single-threaded applications to partitions; {app:?} has {threads} threads")]
    MultiThreaded { app: String, threads: u32 },
    #[error("static-best: {count} static assignments of this workload to the {partitions} partitions of this machine exceed the limit of {limit} (each is a full simulation)")]
    TooMany {
        count: String,
        partitions: usize,
        limit: usize,
    },
}

/// How many copies of each application (workload order) each partition (fastest first) holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Assignment {
    pub copies: Vec<Vec<u32>>,
}

/// The exponents of the share search's first line ([`partitions_and_quota_choices`]), in steps of
/// 1/20: from -1 to 2, by capacity (1) at step 20 (ours: about a thread a step on the Intel
/// hybrid's build of 128 jobs).
const EXPONENT_STEPS: (i32, i32, i32) = (-20, 40, 20);

/// The machine's partitions (as HASS forms them) and the ways the bound threads may be shared out
/// among them, each a thread count per partition (fastest first), the first to be tried first.
/// While there are no more threads than cores there is one: in proportion to the cores (one a
/// core, as in the paper's experiments). Beyond, how many threads each partition holds is part of
/// a static assignment. The first share is in proportion to the computing capacity (cores ×
/// relative speed). Then the shares along two lines, ordered by how far their count of threads on
/// the fastest class is from the first share's: weights `cores × speed^e` for `e` from -1 to 2
/// (`e` = 0 is by cores), and every count of threads on the fastest class's partitions from 0 to
/// all of them, those in proportion to the partitions' cores and the rest in proportion to their
/// capacity. No one share is right
/// for every workload: by capacity suits CPU-bound jobs, a memory-bound job gains less than the
/// clock ratio on a faster core, and a slower core with a larger cache can be the better one (a
/// parallel build of 4 jobs a core on the Intel hybrid ran at 0.92x linux-6 bound by capacity,
/// 0.88x by cores, 0.996x with 73 or 74 of its 128 jobs on the P-cores).
pub fn partitions_and_quota_choices(topo: &Topology, threads: u32) -> (Partitions, Vec<Vec<u32>>) {
    let parts = Partitions::new(topo);
    let n = parts.len();
    let cores: u32 = (0..n).map(|p| parts.size(p)).sum();
    let size = |p: usize| f64::from(parts.size(p));
    if threads <= cores {
        let one = shares(threads, n, size);
        return (parts, vec![one]);
    }
    let speed = |p: usize| {
        parts
            .cores(p)
            .first()
            .map_or(1.0, |c| topo.relative_speed(c))
    };
    let capacity = |p: usize| size(p) * speed(p);
    let first = shares(threads, n, capacity);
    let top = (0..n).map(speed).fold(f64::MIN, f64::max);
    let fast: Vec<bool> = (0..n).map(|p| speed(p) >= top - 1e-9).collect();
    let mut choices = vec![first.clone()];
    if fast.iter().all(|&f| f) {
        // One speed: the capacity share is the share by cores, and the only one.
        return (parts, choices);
    }
    let on_fast = |q: &[u32]| -> u32 { (0..n).filter(|&p| fast[p]).map(|p| q[p]).sum() };
    let at = on_fast(&first);
    // Each candidate with its order: how far its count of threads on the fastest class is from
    // the first share's, then its line, then its place on the line.
    let mut candidates: Vec<((u32, u8, u32), Vec<u32>)> = Vec::new();
    // One line, weights `cores × speed^e` (by capacity at 1, by cores at 0), nearest `e` first.
    let mut exponents: Vec<i32> = (EXPONENT_STEPS.0..=EXPONENT_STEPS.1)
        .filter(|&i| i != EXPONENT_STEPS.2)
        .collect();
    exponents.sort_by_key(|&i| ((i - EXPONENT_STEPS.2).abs(), i));
    for (rank, i) in exponents.into_iter().enumerate() {
        let e = f64::from(i) / f64::from(EXPONENT_STEPS.2);
        let q = shares(threads, n, |p| size(p) * speed(p).powf(e));
        candidates.push(((on_fast(&q).abs_diff(at), 0, rank as u32), q));
    }
    // The other, every count of threads on the fastest class: those in proportion to its
    // partitions' cores, the rest in proportion to the others' capacity.
    for k in 0..=threads {
        let among_fast = shares(k, n, |p| if fast[p] { size(p) } else { 0.0 });
        let among_rest = shares(threads - k, n, |p| if fast[p] { 0.0 } else { capacity(p) });
        let q: Vec<u32> = (0..n).map(|p| among_fast[p] + among_rest[p]).collect();
        candidates.push(((k.abs_diff(at), 1, k), q));
    }
    candidates.sort_by_key(|c| c.0);
    // A set of the shares kept: the lines give about as many candidates as threads.
    let mut seen: HashSet<Vec<u32>> = choices.iter().cloned().collect();
    for (_, q) in candidates {
        if seen.insert(q.clone()) {
            choices.push(q);
        }
    }
    (parts, choices)
}

/// `threads` shared out among `n` partitions in proportion to `weight`, rounded down, what
/// rounding left over going one each to the fastest partitions of positive weight first (round
/// after round while any is left).
fn shares(threads: u32, n: usize, weight: impl Fn(usize) -> f64) -> Vec<u32> {
    let total: f64 = (0..n).map(&weight).sum();
    let mut quotas: Vec<u32> = (0..n)
        .map(|p| (f64::from(threads) * weight(p) / total.max(1e-12)).floor() as u32)
        .collect();
    let mut left = threads.saturating_sub(quotas.iter().sum::<u32>());
    let takers: Vec<usize> = (0..n).filter(|&p| weight(p) > 0.0).collect();
    while left > 0 && !takers.is_empty() {
        for &p in &takers {
            if left == 0 {
                break;
            }
            quotas[p] += 1;
            left -= 1;
        }
    }
    quotas
}

fn check_single_threaded(workload: &Workload) -> Result<(), StaticError> {
    match workload.apps.iter().find(|a| a.num_threads() != 1) {
        Some(a) => Err(StaticError::MultiThreaded {
            app: a.name.clone(),
            threads: a.num_threads(),
        }),
        None => Ok(()),
    }
}

/// Every static assignment, or an error when there are more than `limit`.
pub fn assignments(
    topo: &Topology,
    workload: &Workload,
    limit: usize,
) -> Result<Vec<Assignment>, StaticError> {
    check_single_threaded(workload)?;
    let copies: Vec<u32> = workload.apps.iter().map(|a| a.copies).collect();
    let (parts, choices) = partitions_and_quota_choices(topo, copies.iter().sum());
    // Partitions are filled exactly: a split counts only when no partition has room left. The
    // first share's splits are all kept, or the instance is refused: past the limit they are only
    // counted (up to [`STATIC_BEST_MAX_COUNTED`]), for the error. The further shares follow in
    // their order while all of a share's splits fit in what the limit leaves: the search widens
    // around the first share until the next share would not fit, and never refuses an instance
    // the first share alone fits. Splits of different shares differ in some partition's total,
    // so none is kept twice.
    let mut out = Vec::new();
    let (first, rest) = choices.split_first().expect("at least one share");
    let mut count: usize = 0;
    let complete = for_each_split(&copies, first, &mut |m, room| {
        if room.iter().any(|&r| r > 0) {
            return true;
        }
        count += 1;
        if count > STATIC_BEST_MAX_COUNTED {
            return false;
        }
        if count <= limit {
            out.push(Assignment { copies: m.to_vec() });
        }
        true
    });
    for quotas in rest {
        if count > limit {
            break;
        }
        let room_left = limit - out.len();
        let mut more = Vec::new();
        let fits = for_each_split(&copies, quotas, &mut |m, room| {
            if room.iter().any(|&r| r > 0) {
                return true;
            }
            more.push(Assignment { copies: m.to_vec() });
            more.len() <= room_left
        });
        if !fits {
            break;
        }
        out.extend(more);
    }
    if count > limit {
        return Err(StaticError::TooMany {
            count: if complete {
                count.to_string()
            } else {
                format!("more than {STATIC_BEST_MAX_COUNTED}")
            },
            partitions: parts.len(),
            limit,
        });
    }
    Ok(out)
}

/// Up to `n` distinct static assignments drawn at random (seeded): each copy in a random order
/// fills the partitions' quotas in turn (the first share [`partitions_and_quota_choices`] gives).
/// For instances too large to search.
pub fn sample_assignments(
    topo: &Topology,
    workload: &Workload,
    n: usize,
    seed: u64,
) -> Result<Vec<Assignment>, StaticError> {
    check_single_threaded(workload)?;
    let copies: Vec<u32> = workload.apps.iter().map(|a| a.copies).collect();
    let (parts, choices) = partitions_and_quota_choices(topo, copies.iter().sum());
    let quotas = &choices[0];
    let slots: Vec<usize> = copies
        .iter()
        .enumerate()
        .flat_map(|(a, &c)| std::iter::repeat_n(a, c as usize))
        .collect();
    let mut rng = SeededRng::new(seed);
    let mut seen = BTreeSet::new();
    for _ in 0..n * 20 {
        if seen.len() >= n {
            break;
        }
        let mut order = slots.clone();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut m = vec![vec![0; parts.len()]; copies.len()];
        let mut it = order.into_iter();
        for (p, &q) in quotas.iter().enumerate() {
            for a in it.by_ref().take(q as usize) {
                m[a][p] += 1;
            }
        }
        seen.insert(Assignment { copies: m });
    }
    Ok(seen.into_iter().collect())
}

/// The workload with every copy bound to its partition: one app entry per copy, with the CPU mask
/// of its partition. `binding[i]` is the partition of entry `i` (for [`per_class_times`]).
pub fn bind(topo: &Topology, workload: &Workload, a: &Assignment) -> (Workload, Vec<usize>) {
    let parts = Partitions::new(topo);
    let mut apps = Vec::new();
    let mut binding = Vec::new();
    for (spec, row) in workload.apps.iter().zip(&a.copies) {
        for (p, &k) in row.iter().enumerate() {
            for _ in 0..k {
                apps.push(AppSpec {
                    copies: 1,
                    cpus: Some(parts.cores(p).clone()),
                    ..spec.clone()
                });
                binding.push(p);
            }
        }
    }
    (
        Workload {
            name: workload.name.clone(),
            description: workload.description.clone(),
            apps,
        },
        binding,
    )
}

/// A run of a bound workload folded back onto the original workload's apps (copies pooled).
pub fn fold_copies(workload: &Workload, run: &RunResult) -> RunResult {
    let classes = run.apps.first().map_or(0, |a| a.cpu_s_by_class.len());
    let apps = workload
        .apps
        .iter()
        .map(|spec| {
            let mine: Vec<&AppResult> = run.apps.iter().filter(|a| a.name == spec.name).collect();
            let times: Vec<f64> = mine
                .iter()
                .flat_map(|a| a.completion_times_s.iter().copied())
                .collect();
            AppResult {
                name: spec.name.clone(),
                service: spec.service.clone(),
                completion_s: (!times.is_empty())
                    .then(|| times.iter().sum::<f64>() / times.len() as f64),
                completions: times.len() as u64,
                closed_loop: mine.iter().any(|a| a.closed_loop),
                completion_times_s: times,
                cpu_s_by_class: (0..classes)
                    .map(|k| mine.iter().map(|a| a.cpu_s_by_class[k]).sum())
                    .collect(),
                cpu_s_per_class: mine.iter().flat_map(|a| &a.cpu_s_per_class).fold(
                    std::collections::BTreeMap::new(),
                    |mut m, (class, s)| {
                        *m.entry(class.clone()).or_insert(0.0) += s;
                        m
                    },
                ),
                class_migrations: mine.iter().map(|a| a.class_migrations).sum(),
                fpu_usage: {
                    let u: Vec<f64> = mine.iter().filter_map(|a| a.fpu_usage).collect();
                    (!u.is_empty()).then(|| u.iter().sum::<f64>() / u.len() as f64)
                },
                l2_misses: mine.iter().map(|a| a.l2_misses).sum(),
                instructions: mine.iter().map(|a| a.instructions).sum(),
                llc_misses: mine.iter().map(|a| a.llc_misses).sum(),
                llc_evictions: mine.iter().map(|a| a.llc_evictions).sum(),
                llc_fills: mine.iter().map(|a| a.llc_fills).sum(),
            }
        })
        .collect();
    RunResult {
        apps,
        ..run.clone()
    }
}

/// Geometric mean over apps of mean completion time (lower is better); infinite when an app
/// never completed.
pub fn completion_geomean(run: &RunResult) -> f64 {
    let logs: Vec<f64> = run
        .apps
        .iter()
        .map(|a| a.completion_s.map_or(f64::INFINITY, f64::ln))
        .collect();
    (logs.iter().sum::<f64>() / logs.len().max(1) as f64).exp()
}

/// Every static assignment simulated, and which is best.
#[derive(Clone, Debug)]
pub struct StaticRuns {
    pub assignments: Vec<Assignment>,
    /// Per assignment: the run folded onto the original apps.
    pub runs: Vec<RunResult>,
    /// Per assignment: the raw run of the bound workload and each entry's partition.
    pub bound: Vec<(RunResult, Vec<usize>)>,
    /// Index of the best assignment.
    pub best: usize,
}

impl StaticRuns {
    /// The run of best speedup over `base` (the first of equally good ones; a NaN speedup never
    /// wins), or `None` when no speedup is a number.
    pub fn best_against(&self, base: &RunResult, finite: bool) -> Option<&RunResult> {
        self.runs
            .iter()
            .map(|r| (speedup(base, r, finite), r))
            .filter(|(s, _)| !s.is_nan())
            .reduce(|best, x| if x.0 > best.0 { x } else { best })
            .map(|(_, r)| r)
    }
}

/// Simulate every assignment of `list` with the baseline balancer inside the masks.
pub fn run_assignments(
    topo: &Topology,
    workload: &Workload,
    list: Vec<Assignment>,
    cfg: &SimConfig,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> StaticRuns {
    let bound: Vec<(Workload, Vec<usize>)> = list.iter().map(|a| bind(topo, workload, a)).collect();
    let jobs: Vec<Job<'_>> = bound
        .iter()
        .enumerate()
        .map(|(i, (w, _))| Job {
            topology: topo,
            workload: w,
            make_policy: Box::new(|| Box::new(LinuxDefault)),
            cfg: cfg.clone(),
            label: format!(
                "{} static assignment {}/{}",
                workload.name,
                i + 1,
                list.len()
            ),
        })
        .collect();
    let raw = run_jobs(&jobs, progress);
    drop(jobs);
    let runs: Vec<RunResult> = raw
        .iter()
        .map(|r| {
            let mut f = fold_copies(workload, r);
            f.policy = STATIC_BEST.into();
            f
        })
        .collect();
    let best = (0..runs.len())
        .min_by(|&a, &b| completion_geomean(&runs[a]).total_cmp(&completion_geomean(&runs[b])))
        .unwrap_or(0);
    StaticRuns {
        assignments: list,
        runs,
        bound: raw
            .into_iter()
            .zip(bound.into_iter().map(|(_, b)| b))
            .collect(),
        best,
    }
}

/// Mean completion time of each app (workload order) bound to each class (topology order), pooled
/// over every static run; `None` where no copy bound to that class completed.
pub fn per_class_times(
    topo: &Topology,
    workload: &Workload,
    runs: &StaticRuns,
) -> Vec<Vec<Option<f64>>> {
    let parts = Partitions::new(topo);
    let classes = topo.classes().len();
    let mut sums = vec![vec![(0.0, 0u64); classes]; workload.apps.len()];
    for (run, binding) in &runs.bound {
        for (entry, &p) in run.apps.iter().zip(binding) {
            let Some(a) = workload.apps.iter().position(|s| s.name == entry.name) else {
                continue;
            };
            let k = parts.class(p).index();
            for t in &entry.completion_times_s {
                sums[a][k].0 += t;
                sums[a][k].1 += 1;
            }
        }
    }
    sums.into_iter()
        .map(|row| {
            row.into_iter()
                .map(|(s, n)| (n > 0).then(|| s / n as f64))
                .collect()
        })
        .collect()
}

/// Share of the machine's cores in each class (topology order): the default metric's weights.
pub fn class_weights(topo: &Topology) -> Vec<f64> {
    let n = topo.num_cores() as f64;
    (0..topo.classes().len())
        .map(|k| topo.class_cores(hetsched_core::ClassId(k as u32)).len() as f64 / n)
        .collect()
}

/// The default metric (HASS section 5): `Σ_k w_k T_k` over classes with cores.
pub fn default_metric(times: &[Option<f64>], weights: &[f64]) -> Option<f64> {
    let mut sum = 0.0;
    for (t, &w) in times.iter().zip(weights) {
        if w > 0.0 {
            sum += w * (*t)?;
        }
    }
    Some(sum)
}

/// The ideal-RR metric (HASS section 5): time on each class proportional to its cores, so the
/// completion time is `1 / Σ_k (w_k / T_k)`.
pub fn ideal_rr_metric(times: &[Option<f64>], weights: &[f64]) -> Option<f64> {
    let mut rate = 0.0;
    for (t, &w) in times.iter().zip(weights) {
        if w > 0.0 {
            rate += w / (*t)?;
        }
    }
    (rate > 0.0).then(|| 1.0 / rate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::presets::machine_preset;
    use hetsched_sim::presets::workload_preset;

    fn machine(name: &str) -> Topology {
        machine_preset(name).unwrap().unwrap()
    }

    fn hh_times(copies: u32, topo: &Topology) -> Workload {
        let mut w = workload_preset("hass-hh-like", topo).unwrap().unwrap();
        for a in &mut w.apps {
            a.copies = copies;
        }
        w
    }

    #[test]
    fn metrics_follow_section_5() {
        // Half the cores fast: 10 s bound fast, 20 s bound slow.
        let t = [Some(10.0), Some(20.0)];
        let w = [0.5, 0.5];
        assert_eq!(default_metric(&t, &w), Some(15.0));
        // Half the time on each: rate 0.5/10 + 0.5/20 = 0.075 per s.
        assert!((ideal_rr_metric(&t, &w).unwrap() - 1.0 / 0.075).abs() < 1e-12);
        // A quarter fast (AMD-12,4).
        let w = [0.25, 0.75];
        assert_eq!(default_metric(&t, &w), Some(17.5));
        assert!((ideal_rr_metric(&t, &w).unwrap() - 1.0 / (0.025 + 0.0375)).abs() < 1e-12);
        // A class never measured: no metric.
        assert_eq!(default_metric(&[Some(1.0), None], &[0.5, 0.5]), None);
        // ideal-RR is never worse than default (harmonic <= arithmetic mean).
        assert!(ideal_rr_metric(&t, &w).unwrap() <= default_metric(&t, &w).unwrap());
    }

    #[test]
    fn assignments_of_hh_on_amd_2_2_are_the_six_pairs() {
        let topo = machine("hass-amd-2-2");
        let w = hh_times(1, &topo);
        let list = assignments(&topo, &w, 1000).unwrap();
        // Choose which 2 of the 4 benchmarks get the fast partition: C(4, 2) = 6.
        assert_eq!(list.len(), 6);
        for a in &list {
            assert_eq!(a.copies.iter().map(|r| r[0]).sum::<u32>(), 2);
            assert!(a.copies.iter().all(|r| r.iter().sum::<u32>() == 1));
        }
    }

    #[test]
    fn assignments_of_four_copies_on_amd_12_4_and_the_limit() {
        let topo = machine("hass-amd-12-4");
        let w = hh_times(4, &topo);
        // Copies of a benchmark are alike: split 4 fast cores among 4 benchmarks of 4 copies each,
        // the compositions of 4 into 4 parts: C(7, 3) = 35.
        assert_eq!(assignments(&topo, &w, 1000).unwrap().len(), 35);
        let err = assignments(&topo, &w, 10).unwrap_err();
        assert_eq!(
            err.to_string(),
            "static-best: 35 static assignments of this workload to the 2 partitions of this machine exceed the limit of 10 (each is a full simulation)"
        );
        let sampled = sample_assignments(&topo, &w, 10, 1).unwrap();
        assert_eq!(sampled.len(), 10);
        assert!(sampled
            .iter()
            .all(|a| a.copies.iter().map(|r| r[0]).sum::<u32>() == 4));
    }

    #[test]
    fn over_subscribed_shares_start_by_capacity_and_cover_every_split_of_two_classes() {
        let topo = machine("intel-hybrid-8p16e");
        // No more threads than cores: one a core, the only choice.
        let (parts, one) = partitions_and_quota_choices(&topo, 32);
        assert_eq!(parts.len(), 2);
        assert_eq!(one, vec![vec![16, 16]]);
        // 128 jobs: by capacity first (E-cores at 0.549), then its neighbours, and every split
        // between the two partitions once, from none on the P-cores to all of them.
        let (_, shares) = partitions_and_quota_choices(&topo, 128);
        assert_eq!(shares[0], vec![83, 45]);
        assert!(
            shares[1] == vec![82, 46] || shares[1] == vec![84, 44],
            "{:?}",
            shares[1]
        );
        assert_eq!(shares.len(), 129);
        let mut fast: Vec<u32> = shares.iter().map(|q| q[0]).collect();
        fast.sort_unstable();
        assert_eq!(fast, (0..=128).collect::<Vec<u32>>());
        assert!(shares.iter().all(|q| q.iter().sum::<u32>() == 128));
    }

    #[test]
    fn the_limit_keeps_the_first_share_whole_and_adds_shares_that_fit() {
        // Four benchmarks of two copies on AMD-2,2's four cores: 8 threads, over-subscribed.
        let topo = machine("hass-amd-2-2");
        let w = hh_times(2, &topo);
        let (_, shares) = partitions_and_quota_choices(&topo, 8);
        assert_eq!(shares[0], vec![6, 2]);
        let all = assignments(&topo, &w, 10_000).unwrap();
        // The first share's splits: which 2 of the 8 copies (at most 2 of a benchmark) go slow,
        // the compositions of 2 into 4 parts: 10.
        let first = all
            .iter()
            .filter(|a| a.copies.iter().map(|r| r[0]).sum::<u32>() == 6);
        assert_eq!(first.count(), 10);
        assert!(all.len() > 10);
        // A limit the first share fits: exactly its 10, no share cut in part.
        let ten = assignments(&topo, &w, 10).unwrap();
        assert_eq!(ten, all[..10].to_vec());
        let fifteen = assignments(&topo, &w, 15).unwrap();
        let totals: BTreeSet<u32> = fifteen
            .iter()
            .map(|a| a.copies.iter().map(|r| r[0]).sum::<u32>())
            .collect();
        for t in totals {
            let of = |l: &[Assignment]| {
                l.iter()
                    .filter(|a| a.copies.iter().map(|r| r[0]).sum::<u32>() == t)
                    .count()
            };
            assert_eq!(of(&fifteen), of(&all), "share with {t} fast cut in part");
        }
        // A limit the first share does not fit: refused, as before any search.
        let err = assignments(&topo, &w, 9).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("static-best: 10 static assignments"),
            "{err}"
        );
    }

    #[test]
    fn the_best_share_of_a_parallel_build_nears_the_kernel() {
        // One program in 4 jobs a core: bound by capacity (the first share) it ran at 0.92x
        // linux-6 on the Intel hybrid; some share runs within 1% of the kernel. On the dual-CCD
        // part, whose slower CCD has the larger cache, the best share puts more jobs on it.
        for (name, at_least) in [("intel-hybrid-8p16e", 0.99), ("amd-dual-ccd-vcache", 0.97)] {
            let topo = machine(name);
            let w = workload_preset("make-like", &topo).unwrap().unwrap();
            let cfg = SimConfig::default();
            let base = hetsched_sim::simulate(&topo, &w, Box::new(LinuxDefault), cfg.clone());
            let list = assignments(&topo, &w, STATIC_BEST_MAX_ASSIGNMENTS).unwrap();
            let runs = run_assignments(&topo, &w, list, &cfg, &|_, _, _| {});
            let speedups: Vec<f64> = runs.runs.iter().map(|r| speedup(&base, r, true)).collect();
            let best = speedups.iter().cloned().fold(f64::MIN, f64::max);
            assert!(best >= at_least, "{name}: {speedups:?}");
            assert!(speedups[0] < 0.95, "{name}: by capacity {}", speedups[0]);
        }
    }

    #[test]
    fn multi_threaded_apps_are_refused() {
        let topo = machine("amps-smp");
        let w = workload_preset("omp-ammp-like", &topo).unwrap().unwrap();
        assert!(matches!(
            assignments(&topo, &w, 10),
            Err(StaticError::MultiThreaded { .. })
        ));
    }

    #[test]
    fn bound_copies_run_only_in_their_partition_and_fold_back() {
        let topo = machine("hass-amd-2-2");
        let w = hh_times(1, &topo);
        let list = assignments(&topo, &w, 100).unwrap();
        let cfg = SimConfig {
            duration_ns: 60_000_000_000,
            ..Default::default()
        };
        let runs = run_assignments(&topo, &w, list, &cfg, &|_, _, _| {});
        for (a, run) in runs.assignments.iter().zip(&runs.runs) {
            for (row, app) in a.copies.iter().zip(&run.apps) {
                // Bound fast (partition 0 = class "fast", index 0): all CPU time there.
                let fast_class = 0;
                let on_fast = app.cpu_s_by_class[fast_class];
                if row[0] == 1 {
                    assert!((on_fast - app.cpu_s()).abs() < 1e-9, "{}", app.name);
                } else {
                    assert_eq!(on_fast, 0.0, "{}", app.name);
                }
            }
        }
        // The CPU-bound pair on the fast cores is the best of the six.
        let best = &runs.assignments[runs.best];
        assert_eq!(best.copies[0][0] + best.copies[1][0], 2, "{best:?}");
        let times = per_class_times(&topo, &w, &runs);
        // sixtrack-like: CPU-bound, about twice as fast on a core twice as fast.
        let six = &times[0];
        let r = six[1].unwrap() / six[0].unwrap();
        assert!(r > 1.8 && r < 2.05, "{r}");
    }
}
