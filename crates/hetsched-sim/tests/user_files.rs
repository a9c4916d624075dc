//! `hetsched` on machine and workload files written as a new user writes them, by someone who had
//! not read the policies' code: 14 machines (1 fast + 7 slow at 3.5x, a phone's 1 + 3 + 4, unequal
//! NUMA nodes, four classes up to 4x, 48 cores in 4 nodes, shared-FPU modules, 2 cores, SMT,
//! classes spread unevenly over 3 nodes, duty-cycled slow cores, explicit capacities with a
//! bandwidth limit, classes 1.1x apart, one speed, a pipeline-only difference) and 10 workloads
//! (batch programs of unequal length that allocate, a lone barrier job, two jobs beside
//! programs, request services, phase changers, over- and under-subscription, staggered arrivals,
//! a closed loop, FP-heavy programs). The files are in `tests/user_files/`; ratios compare mean
//! makespans over [`SEEDS`] seeds, as the random survey (`policy_properties.rs`) does, whose
//! generator draws none of these shapes.
//!
//! A second set (`tests/user_files/second/`: 10 machines and 8 workloads, 80 pairs) was written
//! the same way, by someone else, to check a change from outside: services that mostly sleep and
//! ones near that line, barrier jobs with sleep phases or uneven work, duty-cycled cores with SMT,
//! four classes over unequal nodes, bandwidth limits.
//!
//! A third set (`tests/user_files/third/`: 8 machines and 8 workloads, 64 pairs) was written by a
//! third person to check the combined policy from outside once more: a phone's three classes with
//! a pipeline difference, duty-cycled cores on a one-speed machine, unequal NUMA nodes, fast cores
//! in two of four nodes, SMT on a hybrid part, shared-FPU modules of two speeds, 64 cores of three
//! classes, one big core beside private caches; programs of unequal length, barrier jobs alone
//! and several at once, services beside programs, phase changers, over- and under-subscription,
//! staggered arrivals with a data-sharing job.
//!
//! A fourth set (`tests/user_files/numa/`: 8 machines and 6 workloads, 48 pairs) was written by
//! someone who had not read the policies, to check from outside how barrier jobs fare on NUMA
//! machines: 2-4 nodes, equal and unequal, fast cores in one node, in some or spread over all,
//! duty-cycled classes, capacities given; a barrier job alone, two of them, beside batch programs,
//! with a written shared fragment, over-subscribed, and a control without barriers.
//!
//! `cargo test --release -p hetsched-sim --test user_files grid -- --ignored --nocapture` prints
//! every pair of every set against the baseline and the best other policy.

mod promise;

use hetsched_core::machine_file::parse_machine;
use hetsched_core::Topology;
use hetsched_sim::Workload;
use promise::{mean_makespan, OTHERS, SEEDS, VS_BASELINE, VS_BEST_OTHER};
use std::path::{Path, PathBuf};

/// The sets of files, each a directory of `tests/user_files` with `machines/` and `workloads/`,
/// and its name in reports.
const SETS: [(&str, &str); 4] = [
    (".", "first set"),
    ("second", "second set"),
    ("third", "third set"),
    ("numa", "NUMA barrier set"),
];

/// The `.toml` files of `tests/user_files/{dir}`, by name.
fn files(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/user_files")
        .join(dir);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    out.sort();
    out
}

fn stem(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

fn machine(p: &Path) -> Topology {
    let text = std::fs::read_to_string(p).unwrap();
    parse_machine(&text, &stem(p)).unwrap_or_else(|e| panic!("{e}"))
}

/// Every pair of a set the workload resolves on (a workload of `cores/4` threads does not on 2
/// cores).
fn pairs(set: &str) -> Vec<(String, String, Topology, Workload)> {
    let mut out = Vec::new();
    for m in files(&format!("{set}/machines")) {
        let topo = machine(&m);
        for w in files(&format!("{set}/workloads")) {
            let text = std::fs::read_to_string(&w).unwrap();
            if let Ok(wl) = Workload::parse(&text, &stem(&w), &topo) {
                out.push((stem(&m), stem(&w), topo.clone(), wl));
            }
        }
    }
    out
}

/// Every file parses, and nearly every pair resolves: a grid that silently lost its files would
/// report nothing.
#[test]
fn every_file_parses() {
    assert_eq!(files("machines").len(), 14);
    assert_eq!(files("workloads").len(), 10);
    // Only the workload of `cores/4`-thread jobs does not fit the 2-core machine.
    assert_eq!(pairs(".").len(), 139);
    assert_eq!(files("second/machines").len(), 10);
    assert_eq!(files("second/workloads").len(), 8);
    assert_eq!(pairs("second").len(), 80);
    assert_eq!(files("third/machines").len(), 8);
    assert_eq!(files("third/workloads").len(), 8);
    assert_eq!(pairs("third").len(), 64);
    assert_eq!(files("numa/machines").len(), 8);
    assert_eq!(files("numa/workloads").len(), 6);
    assert_eq!(pairs("numa").len(), 48);
}

/// Request services whose threads compute briefly and sleep, beside a batch program, on 4 big and
/// 4 little cores: placed whole on the big cores, the 4-thread web service left them idle while
/// the memory-bound database ran on the little ones (0.875x the baseline); balanced thread by
/// thread by AMPS, the promise holds (0.995x).
#[test]
fn a_service_that_mostly_sleeps_does_not_hold_the_fast_cores_whole() {
    assert_keeps_the_promise(".", "m14-cpi-only", "w04-services");
}

/// A long phase changer among short programs, on 32 cores whose 8 fast ones are in two of four
/// nodes: a benefit swap moved it, with its pages, to a slow core of a node without fast cores,
/// and once the programs on the fast cores were done nothing brought it back (AMPS's idle cores
/// may not pull a thread with a resident set across nodes; no swap partner was left): 5.1 of its
/// 5.4 s on a slow core while fast cores idled, 0.889x the baseline. An idle faster core now takes
/// such a program with its pages (1.134x).
#[test]
fn a_program_left_in_a_node_without_fast_cores_takes_an_idle_fast_core() {
    assert_keeps_the_promise("third", "m4-numa4-fastin2-32", "w5-phase-changers");
}

/// A lone barrier job, one thread a core, on 24 cores whose 4 fast ones are in the larger of two
/// nodes: near each phase's end AMPS's balance moved the threads still running in the other node
/// to the idle fast cores (their resident sets fit the LLC, so the overhead prediction allowed
/// it); at the next barrier each took a core at home from a sibling, which then ran away from its
/// pages: 0.878x the baseline. A periodic balance now keeps a running thread of a multi-threaded
/// process in the node holding most of its memory (1.010x).
#[test]
fn a_barrier_jobs_threads_stay_in_the_node_of_their_memory() {
    assert_keeps_the_promise("third", "m3-numa2-unequal24", "w2-barrier-alone");
}

/// `hetsched` is at least [`VS_BASELINE`] times the baseline's speed on the pair of `machine` and
/// `workload` of set `set` (means of the promise's seeds).
fn assert_keeps_the_promise(set: &str, machine: &str, workload: &str) {
    let (_, _, topo, w) = pairs(set)
        .into_iter()
        .find(|(m, w, _, _)| m == machine && w == workload)
        .expect("the pair resolves");
    let ratio = mean_makespan(&topo, &w, "linux-default") / mean_makespan(&topo, &w, "hetsched");
    assert!(ratio >= VS_BASELINE, "{ratio:.3}x the baseline");
}

/// Every pair against the baseline and the best other policy, printed (no assertion).
#[test]
#[ignore = "a survey for reports, not a check"]
fn grid() {
    for (set, name) in SETS {
        grid_of(set, name);
    }
}

/// [`grid`] of one set, reported as `name`.
fn grid_of(set: &str, name: &str) {
    let (mut below_base, mut below_other, mut either, mut log_sum) = (0, 0, 0, 0.0);
    let (mut worst_base, mut worst_other) = (f64::MAX, f64::MAX);
    let all = pairs(set);
    for (machine, workload, topo, w) in &all {
        let base = mean_makespan(topo, w, "linux-default");
        let ours = mean_makespan(topo, w, "hetsched");
        let (best, best_ms) = OTHERS
            .iter()
            .map(|&p| (p, mean_makespan(topo, w, p)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        let (b, o) = (base / ours, best_ms / ours);
        let flag = if b < VS_BASELINE || o < VS_BEST_OTHER {
            "  <-"
        } else {
            ""
        };
        println!(
            "{machine:24} {workload:28} vs baseline {b:.3}, vs best other ({best}) {o:.3}{flag}"
        );
        below_base += usize::from(b < VS_BASELINE);
        below_other += usize::from(o < VS_BEST_OTHER);
        either += usize::from(b < VS_BASELINE || o < VS_BEST_OTHER);
        worst_base = worst_base.min(b);
        worst_other = worst_other.min(o);
        log_sum += b.ln();
    }
    println!(
        "{name}: {} pairs, means of {SEEDS} seeds: below {VS_BASELINE}x the baseline {below_base} (worst \
         {worst_base:.3}), below {VS_BEST_OTHER}x the best other {below_other} (worst \
         {worst_other:.3}), either {either}; geometric mean against the baseline {:.3}",
        all.len(),
        (log_sum / all.len() as f64).exp()
    );
}
