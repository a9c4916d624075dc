//! HASS (Shelepov, Fedorova et al.) sections 5 and 6, on the
//! simulator.
//!
//! | experiment   | paper                      | checked                                                     |
//! |--------------|----------------------------|-------------------------------------------------------------|
//! | `hass`       | Figures 2-3, Tables 2-3    | speedups vs the default and ideal-RR metrics within the stated points (LH within ±2 of no gain on both; AMD-12,4 MH below ideal-RR); HASS within 1 point of static-best where the paper matches it; AMD-12,4 gains less than AMD-2,2; no gain on LH; CPU- and memory-bound benchmarks on the paper's side of each two-partition machine; assignment logic under 0.1% of CPU time |
//! | `ipc-driven` | Figure 2a, section 6.2     | IPC-driven's HH gain in [4, 12]%, below HASS and static-best; LH worse than default; more run-queue waiting than HASS |
//!
//! Methodology as in section 5: single-threaded benchmarks in a closed loop (a copy restarts when
//! it exits), one thread per core (the base workload multiplied by 4 on AMD-12,4 and by 3 on
//! AMD-4,4,2,2), five per core in the overloaded runs. Completion times are normalised per
//! benchmark to the *default* metric (completion times bound to each core type, weighted by the
//! type's share of cores) and averaged geometrically; "speedup" is 1 minus that average, in
//! percent, as the paper's Figure 2 reads (bars below 100% are speedups). The per-type times come
//! from simulating the static assignments ([`crate::static_best`]), which keep the experiment's
//! load; static-best is the best of them.

use super::{kernel, machine, mean, workload, Bar, BarGroup, Experiment, Figure, Row};
use crate::static_best::{
    assignments, class_weights, default_metric, ideal_rr_metric, per_class_times, run_assignments,
    sample_assignments, StaticError, StaticRuns, STATIC_BEST_MAX_ASSIGNMENTS,
};
use hetsched_core::policies::{hass::NAME as HASS, ipc_driven::NAME as IPC_DRIVEN};
use hetsched_core::policies::{policy_with_options, PolicyOptions, STATIC_BEST};
use hetsched_core::Topology;
use hetsched_sim::batch::{run_jobs, Job};
use hetsched_sim::engine::NS_PER_S;
use hetsched_sim::workload::Workload;
use hetsched_sim::{RunResult, SimConfig};

/// The kernel baseline of this paper's comparisons. HASS was compared with OpenSolaris's dispatcher, which, like Linux 2.6's O(1) scheduler, keeps a waking thread on its last CPU, lets idle CPUs steal waiting threads and knows nothing of core speed; `linux-2.6` is the nearest model.
const BASELINE: &str = hetsched_sim::baseline::linux_2_6::NAME;

const PAPER: &str = hetsched_core::policies::citations::HASS;

pub const EXPERIMENTS: &[(&str, &str)] = &[
    (
        HASS,
        "HASS Figures 2-3, Tables 2-3: HASS vs the default and ideal-RR metrics and static-best on four machines",
    ),
    (
        IPC_DRIVEN,
        "HASS section 6, Figure 2a: the IPC-driven algorithm on AMD-2,2 (HH, MH, LH)",
    ),
];

/// Closed-loop run length, s: every benchmark completes at least three times even alone on a
/// slow core ("at least three completion time value samples", section 5).
const RUN_S: f64 = 300.0;
/// Overloaded runs (five threads per core): each thread gets a fifth of a core.
const OVERLOADED_RUN_S: f64 = 600.0;
/// Threads per core in the overloaded runs (section 5: "five times as many threads ... as there
/// were cores").
const OVERLOAD: u32 = 5;
/// Seeds of each policy's runs (section 5: "at least three completion time value samples"); the
/// speedup rows are means over them and the figures show their range. Tables 2 and 3 read the
/// first seed's run.
const SEEDS: [u64; 3] = [1, 2, 3];
/// Static assignments simulated for the metrics when the search space is over the limit.
const METRIC_SAMPLE: usize = 48;

/// A test configuration of Table 1 and how many copies of the base workload it runs.
struct Config {
    label: &'static str,
    machine: &'static str,
    copies: u32,
}

const AMD_2_2: Config = Config {
    label: "AMD-2,2",
    machine: "hass-amd-2-2",
    copies: 1,
};
const INTEL_2_2: Config = Config {
    label: "Intel-2,2",
    machine: "hass-intel-2-2",
    copies: 1,
};
const AMD_12_4: Config = Config {
    label: "AMD-12,4",
    machine: "hass-amd-12-4",
    copies: 4,
};
const AMD_4_4_2_2: Config = Config {
    label: "AMD-4,4,2,2",
    machine: "hass-amd-4-4-2-2",
    copies: 3,
};

/// Table 2: % of time in each partition, slow to fast, per benchmark, for Intel-2,2, AMD-2,2,
/// AMD-12,4, AMD-4,4,2,2, AMD-2,2 overloaded and AMD-4,4,2,2 overloaded.
const TABLE_2: &[(&str, [&[f64]; 6])] = &[
    (
        "sixtrack-like",
        [
            &[0.9, 99.0],
            &[6.9, 93.0],
            &[1.2, 98.0],
            &[13.0, 5.8, 13.0, 67.0],
            &[0.0, 100.0],
            &[0.0, 0.0, 44.0, 56.0],
        ],
    ),
    (
        "crafty-like",
        [
            &[1.8, 98.0],
            &[8.5, 91.0],
            &[99.0, 1.0],
            &[60.0, 17.0, 21.0, 1.9],
            &[0.0, 100.0],
            &[0.0, 39.0, 36.0, 25.0],
        ],
    ),
    (
        "mcf-like",
        [
            &[98.0, 1.5],
            &[95.0, 4.4],
            &[99.0, 0.2],
            &[0.1, 8.5, 65.0, 26.0],
            &[100.0, 0.0],
            &[99.0, 1.2, 0.0, 0.0],
        ],
    ),
    (
        "equake-like",
        [
            &[98.0, 1.1],
            &[88.0, 12.0],
            &[99.0, 0.5],
            &[40.0, 36.0, 22.0, 0.5],
            &[90.0, 10.0],
            &[14.0, 86.0, 0.2, 0.1],
        ],
    ),
    (
        "fma3d-like",
        [
            &[94.0, 5.5],
            &[93.0, 7.0],
            &[98.0, 2.0],
            &[43.0, 28.0, 26.0, 2.5],
            &[77.0, 23.0],
            &[8.0, 66.0, 26.0, 0.2],
        ],
    ),
    (
        "art-like",
        [
            &[90.0, 9.1],
            &[89.0, 11.0],
            &[99.0, 0.2],
            &[23.0, 70.0, 6.3, 0.3],
            &[100.0, 0.0],
            &[99.0, 0.7, 0.2, 0.2],
        ],
    ),
    (
        "vortex-like",
        [
            &[7.5, 92.0],
            &[9.7, 90.0],
            &[2.9, 97.0],
            &[18.0, 10.0, 7.1, 64.0],
            &[0.1, 100.0],
            &[0.0, 0.0, 16.0, 84.0],
        ],
    ),
    (
        "twolf-like",
        [
            &[6.6, 93.0],
            &[8.2, 91.0],
            &[99.0, 0.6],
            &[49.0, 24.0, 25.0, 0.8],
            &[0.0, 100.0],
            &[7.4, 65.0, 28.0, 0.2],
        ],
    ),
];

/// Table 3: HASS assignment logic (% of CPU time) and partition migrations per thread per minute
/// of CPU time, HH and MH, for AMD-2,2, AMD-12,4, AMD-4,4,2,2 and the two overloaded runs.
const TABLE_3: &[(&str, [f64; 2], [f64; 2])] = &[
    ("AMD-2,2", [0.020, 0.021], [0.50, 0.45]),
    ("AMD-12,4", [0.011, 0.011], [0.29, 1.78]),
    ("AMD-4,4,2,2", [0.013, 0.014], [1.12, 8.19]),
    ("AMD-2,2 overloaded", [0.026, 0.026], [0.43, 0.17]),
    ("AMD-4,4,2,2 overloaded", [0.019, 0.028], [0.77, 0.84]),
];

/// Points (percent) within which a speedup matches the paper's.
const SPEEDUP_TOLERANCE_PP: f64 = 5.0;
/// Points within which a speedup against ideal-RR matches the paper's.
const IDEAL_RR_TOLERANCE_PP: f64 = 3.0;
/// Points by which HASS may trail static-best where the paper says it matches it (the paper:
/// "within 0.5%").
const MATCHES_STATIC_PP: f64 = 1.0;
/// Assignment logic above this share of CPU time would not be "insignificant" (Table 3's largest
/// value is 0.028%).
const MAX_LOGIC_PERCENT: f64 = 0.1;

pub fn run(name: &str, progress: &(dyn Fn(usize, usize, &str) + Sync)) -> Option<Experiment> {
    Some(match name {
        HASS => hass(progress),
        IPC_DRIVEN => ipc_driven(progress),
        _ => return None,
    })
}

/// The base workload with every benchmark run `copies` times at once.
fn base_workload(name: &str, topo: &Topology, copies: u32) -> Workload {
    let mut w = workload(name, topo);
    for a in &mut w.apps {
        a.copies *= copies;
    }
    w
}

fn cfg(seconds: f64) -> SimConfig {
    SimConfig {
        duration_ns: (seconds * NS_PER_S as f64) as u64,
        baseline: kernel(BASELINE),
        ..Default::default()
    }
}

/// One machine and workload: the static runs and their metrics, and each policy's run.
struct Evaluated {
    /// The configuration's name, e.g. "AMD-2,2".
    config: &'static str,
    /// Threads per core (5 in the overloaded runs).
    threads_per_core: u32,
    topo: Topology,
    workload: Workload,
    duration_s: f64,
    /// Number of static assignments when searched; `None` when over the limit (sampled).
    searched: Option<usize>,
    statics: Option<StaticRuns>,
    default_m: Vec<Option<f64>>,
    ideal_rr: Vec<Option<f64>>,
    /// Each policy's runs, one per seed of [`SEEDS`].
    policies: Vec<(&'static str, Vec<RunResult>)>,
}

impl Evaluated {
    /// "AMD-2,2 HH", "AMD-2,2 MH overloaded".
    fn label(&self) -> String {
        format!(
            "{} {}{}",
            self.config,
            short(&self.workload.name),
            if self.threads_per_core > 1 {
                " overloaded"
            } else {
                ""
            }
        )
    }

    /// The policy's runs, seed by seed.
    fn runs_of(&self, policy: &str) -> &[RunResult] {
        &self
            .policies
            .iter()
            .find(|(p, _)| *p == policy)
            .expect("policy was run")
            .1
    }

    /// The policy's run of the first seed.
    fn run_of(&self, policy: &str) -> &RunResult {
        &self.runs_of(policy)[0]
    }

    /// The policy's speedups vs the default metric, seed by seed, percent.
    fn speedups(&self, policy: &str) -> Vec<f64> {
        self.runs_of(policy)
            .iter()
            .map(|r| self.speedup(r))
            .collect()
    }

    /// The policy's speedups vs the ideal-RR metric, seed by seed, percent.
    fn speedups_rr(&self, policy: &str) -> Vec<f64> {
        self.runs_of(policy)
            .iter()
            .map(|r| self.speedup_rr(r))
            .collect()
    }

    /// Geometric mean over benchmarks of completion time over the metric.
    fn relative(&self, run: &RunResult, metric: &[Option<f64>]) -> f64 {
        let logs: Vec<f64> = run
            .apps
            .iter()
            .zip(metric)
            .filter_map(|(a, m)| Some((a.completion_s? / (*m)?).ln()))
            .collect();
        (logs.iter().sum::<f64>() / logs.len().max(1) as f64).exp()
    }

    /// Speedup vs the default metric, percent.
    fn speedup(&self, run: &RunResult) -> f64 {
        (1.0 - self.relative(run, &self.default_m)) * 100.0
    }

    /// Speedup vs the ideal-RR metric, percent.
    fn speedup_rr(&self, run: &RunResult) -> f64 {
        (1.0 - self.relative(run, &self.ideal_rr)) * 100.0
    }

    fn static_best(&self) -> Option<&RunResult> {
        let s = self.statics.as_ref()?;
        self.searched.map(|_| &s.runs[s.best])
    }

    /// % of a benchmark's CPU time in each class, slow to fast.
    fn shares(&self, run: &RunResult, app: &str) -> Option<Vec<f64>> {
        let a = run.apps.iter().find(|a| a.name == app)?;
        let total = a.cpu_s();
        let mut order = self.topo.classes_by_speed();
        order.reverse();
        Some(
            order
                .iter()
                .map(|k| 100.0 * a.cpu_s_by_class[k.index()] / total.max(1e-12))
                .collect(),
        )
    }

    /// Partition migrations per thread per minute of CPU time.
    fn migrations_per_cpu_minute(&self, run: &RunResult) -> f64 {
        let moves: u64 = run.apps.iter().map(|a| a.class_migrations).sum();
        let cpu_min: f64 = run
            .apps
            .iter()
            .map(hetsched_sim::metrics::AppResult::cpu_s)
            .sum::<f64>()
            / 60.0;
        moves as f64 / cpu_min.max(1e-12)
    }

    /// Assignment logic as a share of CPU time, percent.
    fn logic_percent(&self, run: &RunResult) -> f64 {
        let cpu: f64 = run
            .apps
            .iter()
            .map(hetsched_sim::metrics::AppResult::cpu_s)
            .sum();
        100.0 * run.policy_cpu_s / cpu.max(1e-12)
    }

    /// Share of the benchmarks' wall time spent waiting, not running, percent (each copy of a
    /// closed loop is alive for the whole run).
    fn waiting_percent(&self, run: &RunResult) -> f64 {
        let slots: u32 = self.workload.apps.iter().map(|a| a.copies).sum();
        let cpu: f64 = run
            .apps
            .iter()
            .map(hetsched_sim::metrics::AppResult::cpu_s)
            .sum();
        100.0 * (1.0 - cpu / (self.duration_s * slots as f64))
    }
}

/// Simulate a configuration: the static assignments (for the metrics and static-best) unless
/// `policies_only`, and each policy.
fn evaluate(
    config: &Config,
    workload_name: &str,
    threads_per_core: u32,
    policies: &[&'static str],
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Evaluated {
    let topo = machine(config.machine);
    let copies = config.copies * threads_per_core;
    let workload = base_workload(workload_name, &topo, copies);
    let duration_s = if threads_per_core > 1 {
        OVERLOADED_RUN_S
    } else {
        RUN_S
    };
    let sim = cfg(duration_s);
    let (searched, statics) = if threads_per_core > 1 {
        (None, None)
    } else {
        let (searched, list) = match assignments(&topo, &workload, STATIC_BEST_MAX_ASSIGNMENTS) {
            Ok(list) => (Some(list.len()), list),
            Err(StaticError::TooMany { .. }) => (
                None,
                sample_assignments(&topo, &workload, METRIC_SAMPLE, 1).expect("single-threaded"),
            ),
            Err(e) => panic!("{e}"),
        };
        (
            searched,
            Some(run_assignments(&topo, &workload, list, &sim, progress)),
        )
    };
    let weights = class_weights(&topo);
    let times = statics
        .as_ref()
        .map(|s| per_class_times(&topo, &workload, s))
        .unwrap_or_default();
    let default_m = times.iter().map(|t| default_metric(t, &weights)).collect();
    let ideal_rr = times.iter().map(|t| ideal_rr_metric(t, &weights)).collect();
    let jobs: Vec<Job<'_>> = policies
        .iter()
        .flat_map(|&p| SEEDS.iter().map(move |&seed| (p, seed)))
        .map(|(p, seed)| Job {
            topology: &topo,
            workload: &workload,
            make_policy: Box::new(move || {
                let options = PolicyOptions {
                    seed,
                    ..Default::default()
                };
                policy_with_options(p, &options).expect("a registered policy")
            }),
            cfg: SimConfig {
                seed,
                ..sim.clone()
            },
            label: format!("{} {} {p} seed {seed}", config.label, workload.name),
        })
        .collect();
    let mut runs = run_jobs(&jobs, progress).into_iter();
    drop(jobs);
    Evaluated {
        config: config.label,
        threads_per_core,
        policies: policies
            .iter()
            .map(|&p| (p, runs.by_ref().take(SEEDS.len()).collect()))
            .collect(),
        topo,
        workload,
        duration_s,
        searched,
        statics,
        default_m,
        ideal_rr,
    }
}

fn within(ours: f64, paper: f64, tol: f64) -> bool {
    (ours - paper).abs() <= tol
}

/// A checked row: our speedup against the paper's, within `tol` points.
fn speedup_row(label: String, paper: f64, ours: f64, tol: f64) -> Row {
    Row::checked(
        label,
        Some(paper),
        ours,
        "%",
        within(ours, paper, tol),
        format!("holds within ±{tol} points"),
    )
}

fn short(workload: &str) -> &str {
    match workload {
        "hass-hh-like" => "HH",
        "hass-mh-like" => "MH",
        "hass-lh-like" => "LH",
        w => w,
    }
}

fn hass(progress: &(dyn Fn(usize, usize, &str) + Sync)) -> Experiment {
    let pol = &[HASS];
    let amd22_hh = evaluate(&AMD_2_2, "hass-hh-like", 1, pol, progress);
    let amd22_mh = evaluate(&AMD_2_2, "hass-mh-like", 1, pol, progress);
    let amd22_lh = evaluate(&AMD_2_2, "hass-lh-like", 1, pol, progress);
    let intel_hh = evaluate(&INTEL_2_2, "hass-hh-like", 1, pol, progress);
    let intel_mh = evaluate(&INTEL_2_2, "hass-mh-like", 1, pol, progress);
    let amd124_hh = evaluate(&AMD_12_4, "hass-hh-like", 1, pol, progress);
    let amd124_mh = evaluate(&AMD_12_4, "hass-mh-like", 1, pol, progress);
    let amd4422_hh = evaluate(&AMD_4_4_2_2, "hass-hh-like", 1, pol, progress);
    let amd4422_mh = evaluate(&AMD_4_4_2_2, "hass-mh-like", 1, pol, progress);
    let ovl22_hh = evaluate(&AMD_2_2, "hass-hh-like", OVERLOAD, pol, progress);
    let ovl22_mh = evaluate(&AMD_2_2, "hass-mh-like", OVERLOAD, pol, progress);
    let ovl4422_hh = evaluate(&AMD_4_4_2_2, "hass-hh-like", OVERLOAD, pol, progress);
    let ovl4422_mh = evaluate(&AMD_4_4_2_2, "hass-mh-like", OVERLOAD, pol, progress);

    let mut rows = Vec::new();
    let h = |e: &Evaluated| mean(&e.speedups(HASS));
    let h_rr = |e: &Evaluated| mean(&e.speedups_rr(HASS));

    // Figure 2 and section 5's text: speedups against the two metrics.
    for (e, cfg, paper, paper_rr) in [
        (&amd22_hh, "AMD-2,2", Some(13.0), None),
        (&amd22_mh, "AMD-2,2", Some(9.2), Some(2.0)),
        (&intel_hh, "Intel-2,2", Some(7.0), Some(4.5)),
        (&intel_mh, "Intel-2,2", Some(2.5), Some(-1.0)),
    ] {
        let w = short(&e.workload.name);
        if let Some(p) = paper {
            rows.push(speedup_row(
                format!("{cfg} {w}: HASS speedup vs default"),
                p,
                h(e),
                SPEEDUP_TOLERANCE_PP,
            ));
        }
        match paper_rr {
            Some(p) => rows.push(speedup_row(
                format!("{cfg} {w}: HASS speedup vs ideal-RR"),
                p,
                h_rr(e),
                IDEAL_RR_TOLERANCE_PP,
            )),
            None => rows.push(Row::info(
                format!("{cfg} {w}: HASS speedup vs ideal-RR"),
                None,
                h_rr(e),
                "%",
                "the paper gives no number",
            )),
        }
    }
    // "within 0.5% of the speedup on the best static assignment" (HH), "matching the best static
    // assignment" (MH).
    for (e, w) in [(&amd22_hh, "HH"), (&amd22_mh, "MH")] {
        let best = e.static_best().expect("searched");
        let gap = e.speedup(best) - h(e);
        rows.push(Row::checked(
            format!("AMD-2,2 {w}: static-best speedup minus HASS's"),
            Some(0.5),
            gap,
            "points",
            gap <= MATCHES_STATIC_PP,
            format!(
                "holds when HASS trails static-best by at most {MATCHES_STATIC_PP} point (paper: within 0.5%); static-best {:.1}% over {} assignments",
                e.speedup(best),
                e.searched.unwrap_or(0)
            ),
        ));
    }
    // AMD-12,4: a smaller gain than AMD-2,2 (a quarter of the cores fast).
    let g124 = h(&amd124_hh);
    rows.push(Row::checked(
        "AMD-12,4 HH: HASS speedup vs default",
        None,
        g124,
        "%",
        g124 > 0.0 && g124 < h(&amd22_hh),
        format!(
            "holds when positive and below AMD-2,2's ({:.1}%), as Figure 2b; the paper's other HH mixes: 9.5%",
            h(&amd22_hh)
        ),
    ));
    let rr124 = h_rr(&amd124_mh);
    rows.push(Row::checked(
        "AMD-12,4 MH: HASS speedup vs ideal-RR",
        Some(-2.9),
        rr124,
        "%",
        rr124 < 0.0,
        "holds when negative, the paper's sign (twolf would gain from a less contended cache, which HASS cannot see)",
    ));
    if let Some(best) = amd124_hh.static_best() {
        rows.push(Row::info(
            "AMD-12,4 HH: static-best speedup vs default",
            None,
            amd124_hh.speedup(best),
            "%",
            format!("{} assignments searched", amd124_hh.searched.unwrap_or(0)),
        ));
    }
    // AMD-4,4,2,2: no better than default in the paper; static-best not reported (search space).
    for (e, w, paper) in [(&amd4422_hh, "HH", -1.0), (&amd4422_mh, "MH", 0.6)] {
        rows.push(Row::info(
            format!("AMD-4,4,2,2 {w}: HASS speedup vs default"),
            Some(paper),
            h(e),
            "%",
            "paper: no better than default (simplified optimistic assignment, shared caches); its number is for the other mixes",
        ));
    }
    rows.push(Row::info(
        "AMD-4,4,2,2 HH: static-best searched",
        None,
        amd4422_hh.searched.map_or(0.0, |n| n as f64),
        "assignments",
        match amd4422_hh.searched {
            Some(_) => "searched exhaustively".to_string(),
            None => format!(
                "refused: over {STATIC_BEST_MAX_ASSIGNMENTS} assignments (the paper: \"a large search space\"); metrics from {METRIC_SAMPLE} sampled assignments"
            ),
        },
    ));
    // LH: four copies of one benchmark, nothing to gain. Against the default metric a closed loop
    // always looks faster: copies on fast cores finish more often, so the mean over completions
    // leans to the fast time (section 5: the default metric "is too pessimistic for sustained
    // loads"); for a static split that mean is exactly the ideal-RR metric, the fair comparison.
    let lh = h_rr(&amd22_lh);
    rows.push(Row::checked(
        "AMD-2,2 LH: HASS speedup vs ideal-RR",
        Some(0.0),
        lh,
        "%",
        lh.abs() <= 2.0,
        "holds within ±2 points (\"HASS ... did not deliver any performance improvements\")",
    ));
    let lh_default = h(&amd22_lh);
    rows.push(Row::checked(
        "AMD-2,2 LH: HASS speedup vs default",
        Some(0.0),
        lh_default,
        "%",
        lh_default.abs() <= 2.0,
        "holds within ±2 points (\"HASS ... did not deliver any performance improvements\")",
    ));

    // Table 2: where HASS kept each benchmark.
    let columns: [(&Evaluated, &Evaluated, &str); 6] = [
        (&intel_hh, &intel_mh, "Intel-2,2"),
        (&amd22_hh, &amd22_mh, "AMD-2,2"),
        (&amd124_hh, &amd124_mh, "AMD-12,4"),
        (&amd4422_hh, &amd4422_mh, "AMD-4,4,2,2"),
        (&ovl22_hh, &ovl22_mh, "AMD-2,2 overloaded"),
        (&ovl4422_hh, &ovl4422_mh, "AMD-4,4,2,2 overloaded"),
    ];
    for (bench, paper_cols) in TABLE_2 {
        for ((hh, mh, cfg), paper) in columns.iter().zip(paper_cols) {
            let e = if hh.workload.apps.iter().any(|a| a.name == *bench) {
                hh
            } else {
                mh
            };
            let Some(ours) = e.shares(e.run_of(HASS), bench) else {
                continue;
            };
            let split = ours
                .iter()
                .map(|v| format!("{v:.1}"))
                .collect::<Vec<_>>()
                .join(" / ");
            let paper_split = paper
                .iter()
                .map(|v| format!("{v}"))
                .collect::<Vec<_>>()
                .join(" / ");
            let label = format!("Table 2 {cfg} {bench}: % of time in the fast partition(s)");
            if paper.len() == 2 {
                let (p, o) = (paper[1], ours[1]);
                rows.push(Row::checked(
                    label,
                    Some(p),
                    o,
                    "%",
                    (p >= 50.0) == (o >= 50.0),
                    format!("holds on the paper's side of 50%; slow / fast: ours {split}, paper {paper_split}"),
                ));
            } else {
                let half = paper.len() / 2;
                let p: f64 = paper[half..].iter().sum();
                let o: f64 = ours[half..].iter().sum();
                rows.push(Row::info(
                    label,
                    Some(p),
                    o,
                    "%",
                    format!(
                        "the two fastest of four; slow to fast: ours {split}, paper {paper_split}"
                    ),
                ));
            }
        }
    }

    // Table 3: overheads.
    let table3: [(&Evaluated, &Evaluated); 5] = [
        (&amd22_hh, &amd22_mh),
        (&amd124_hh, &amd124_mh),
        (&amd4422_hh, &amd4422_mh),
        (&ovl22_hh, &ovl22_mh),
        (&ovl4422_hh, &ovl4422_mh),
    ];
    for ((cfg, logic, moves), (hh, mh)) in TABLE_3.iter().zip(table3) {
        for (i, e) in [hh, mh].into_iter().enumerate() {
            let w = short(&e.workload.name);
            let run = e.run_of(HASS);
            let l = e.logic_percent(run);
            rows.push(Row::checked(
                format!("Table 3 {cfg} {w}: assignment logic, % of CPU time"),
                Some(logic[i]),
                l,
                "%",
                l <= MAX_LOGIC_PERCENT,
                format!("holds below {MAX_LOGIC_PERCENT}% (insignificant); our policy's wall time in the simulator over the threads' simulated CPU time"),
            ));
            rows.push(Row::info(
                format!("Table 3 {cfg} {w}: partition migrations per thread per CPU minute"),
                Some(moves[i]),
                e.migrations_per_cpu_minute(run),
                "per min",
                "moves between core classes over the threads' CPU minutes",
            ));
        }
    }
    let mut e = Experiment::new(
        HASS,
        PAPER,
        kernel(BASELINE),
        "HASS section 5: speedups vs the default and ideal-RR metrics, static-best, Tables 2 and 3",
        rows,
    );
    // Figure 2: speedup vs the default metric per machine and workload, static-best beside HASS
    // where the search space was searched.
    let fig2: [(&Evaluated, Option<f64>); 9] = [
        (&amd22_hh, Some(13.0)),
        (&amd22_mh, Some(9.2)),
        (&amd22_lh, None),
        (&intel_hh, Some(7.0)),
        (&intel_mh, Some(2.5)),
        (&amd124_hh, None),
        (&amd124_mh, None),
        (&amd4422_hh, Some(-1.0)),
        (&amd4422_mh, Some(0.6)),
    ];
    let groups = fig2
        .iter()
        .map(|(ev, paper)| {
            let mut bars = vec![Bar::of(HASS, &ev.speedups(HASS), *paper)];
            if let Some(best) = ev.static_best() {
                bars.push(Bar::of(STATIC_BEST, &[ev.speedup(best)], None));
            }
            BarGroup::new(ev.label(), bars)
        })
        .collect();
    e.figures.push(
        Figure::new(
            "HASS Figure 2",
            "Speedup over the default metric (completion times bound to each core type)",
            "speedup vs the default metric, %",
            groups,
        )
        .with_reference(0.0),
    );
    let fig3: [(&Evaluated, Option<f64>); 6] = [
        (&amd22_hh, None),
        (&amd22_mh, Some(2.0)),
        (&amd22_lh, Some(0.0)),
        (&intel_hh, Some(4.5)),
        (&intel_mh, Some(-1.0)),
        (&amd124_mh, Some(-2.9)),
    ];
    let groups = fig3
        .iter()
        .map(|(ev, paper)| {
            BarGroup::new(
                ev.label(),
                vec![Bar::of(HASS, &ev.speedups_rr(HASS), *paper)],
            )
        })
        .collect();
    e.figures.push(
        Figure::new(
            "HASS Figure 3",
            "Speedup over the ideal round-robin metric",
            "speedup vs ideal round-robin, %",
            groups,
        )
        .with_reference(0.0),
    );
    // Table 2 for the two-partition machines: % of each benchmark's time on the fast cores.
    let two_partition: [(&Evaluated, &Evaluated, usize); 4] = [
        (&intel_hh, &intel_mh, 0),
        (&amd22_hh, &amd22_mh, 1),
        (&amd124_hh, &amd124_mh, 2),
        (&ovl22_hh, &ovl22_mh, 4),
    ];
    let groups = TABLE_2
        .iter()
        .map(|(bench, paper_cols)| {
            let bars = two_partition
                .iter()
                .filter_map(|(hh, mh, col)| {
                    let ev = if hh.workload.apps.iter().any(|a| a.name == *bench) {
                        hh
                    } else {
                        mh
                    };
                    let fast: Vec<f64> = ev
                        .runs_of(HASS)
                        .iter()
                        .filter_map(|r| ev.shares(r, bench).map(|s| s[1]))
                        .collect();
                    (!fast.is_empty()).then(|| {
                        Bar::of(columns_label(*col), &fast, paper_cols[*col].get(1).copied())
                    })
                })
                .collect();
            BarGroup::new(bench.trim_end_matches("-like"), bars)
        })
        .collect();
    e.figures.push(Figure::new(
        "HASS Table 2",
        "Share of each benchmark's CPU time on the fast cores under HASS, two-type machines",
        "time on the fast cores, %",
        groups,
    ));
    e
}

/// The column of Table 2 (and of its figure) by index.
fn columns_label(col: usize) -> &'static str {
    [
        "Intel-2,2",
        "AMD-2,2",
        "AMD-12,4",
        "AMD-4,4,2,2",
        "AMD-2,2 overloaded",
        "AMD-4,4,2,2 overloaded",
    ][col]
}

fn ipc_driven(progress: &(dyn Fn(usize, usize, &str) + Sync)) -> Experiment {
    let pol = &[HASS, IPC_DRIVEN];
    let hh = evaluate(&AMD_2_2, "hass-hh-like", 1, pol, progress);
    let mh = evaluate(&AMD_2_2, "hass-mh-like", 1, pol, progress);
    let lh = evaluate(&AMD_2_2, "hass-lh-like", 1, pol, progress);
    let ipc = |e: &Evaluated| mean(&e.speedups(IPC_DRIVEN));
    let mut rows = vec![
        {
            let ours = ipc(&hh);
            Row::checked(
                "AMD-2,2 HH: IPC-driven speedup vs default",
                Some(8.0),
                ours,
                "%",
                (4.0..=12.0).contains(&ours),
                "holds in [4, 12]% (the paper: about 8%)",
            )
        },
        speedup_row(
            "AMD-2,2 HH: IPC-driven speedup vs ideal-RR".into(),
            1.5,
            mean(&hh.speedups_rr(IPC_DRIVEN)),
            IDEAL_RR_TOLERANCE_PP,
        ),
    ];
    let hass_hh = mean(&hh.speedups(HASS));
    rows.push(Row::checked(
        "AMD-2,2 HH: HASS speedup minus IPC-driven's",
        None,
        hass_hh - ipc(&hh),
        "points",
        hass_hh > ipc(&hh),
        format!("holds when positive (\"IPC-driven achieves a smaller speedup than both HASS and the best static assignment\"); HASS {hass_hh:.1}%"),
    ));
    let best = hh.static_best().expect("searched");
    rows.push(Row::checked(
        "AMD-2,2 HH: static-best speedup minus IPC-driven's",
        None,
        hh.speedup(best) - ipc(&hh),
        "points",
        hh.speedup(best) > ipc(&hh),
        "holds when positive",
    ));
    rows.push(Row::checked(
        "AMD-2,2 LH: IPC-driven speedup vs default",
        None,
        ipc(&lh),
        "%",
        ipc(&lh) < 0.0,
        "holds when negative (\"causing LH workload to perform worse than default\")",
    ));
    rows.push(Row::info(
        "AMD-2,2 MH: IPC-driven speedup vs default",
        None,
        ipc(&mh),
        "%",
        "paper: migration overhead particularly large (fma3d changes phase every 500-600 ms)",
    ));
    for e in [&hh, &mh, &lh] {
        let w = short(&e.workload.name);
        let (wi, wh) = (
            e.waiting_percent(e.run_of(IPC_DRIVEN)),
            e.waiting_percent(e.run_of(HASS)),
        );
        rows.push(Row::checked(
            format!("AMD-2,2 {w}: IPC-driven run-queue waiting, % of wall time"),
            None,
            wi,
            "%",
            wi > wh,
            format!(
                "holds when above HASS's ({wh:.2}%): forced migrations make pinned threads wait"
            ),
        ));
        rows.push(Row::info(
            format!("AMD-2,2 {w}: IPC-driven partition migrations per thread per CPU minute"),
            None,
            e.migrations_per_cpu_minute(e.run_of(IPC_DRIVEN)),
            "per min",
            format!("HASS: {:.2}", e.migrations_per_cpu_minute(e.run_of(HASS))),
        ));
    }
    if let Some(s) = hh.shares(hh.run_of(IPC_DRIVEN), "mcf-like") {
        rows.push(Row::info(
            "AMD-2,2 HH: mcf-like's % of time on the fast partition under IPC-driven",
            Some(51.0),
            s[1],
            "%",
            "paper: 51%, though its high-IPC phases are only 25% of its time (ratios from mismatched phases)",
        ));
    }
    let mut e = Experiment::new(
        IPC_DRIVEN,
        PAPER,
        kernel(BASELINE),
        "HASS section 6: the IPC-driven algorithm against HASS, static-best and the default metric",
        rows,
    );
    let groups = [(&hh, Some(8.0)), (&mh, None), (&lh, None)]
        .iter()
        .map(|(ev, paper)| {
            let mut bars = vec![
                Bar::of(IPC_DRIVEN, &ev.speedups(IPC_DRIVEN), *paper),
                Bar::of(HASS, &ev.speedups(HASS), None),
            ];
            if let Some(best) = ev.static_best() {
                bars.push(Bar::of(STATIC_BEST, &[ev.speedup(best)], None));
            }
            BarGroup::new(ev.label(), bars)
        })
        .collect();
    e.figures.push(
        Figure::new(
            "HASS Figure 2a",
            "The IPC-driven algorithm beside HASS and static-best on AMD-2,2",
            "speedup vs the default metric, %",
            groups,
        )
        .with_reference(0.0),
    );
    e
}
