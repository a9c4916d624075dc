//! `hetsched simulate` and `hetsched workloads`.

use crate::machine::{is_inline, resolve_machine, INLINE_WORKLOAD};
use crate::provenance::Provenance;
use crate::topo::{print_named, NamedJson};
use crate::{bad_input, report};
use clap::Args;
use hetsched_core::policies::amps::NumaMode;
use hetsched_core::policies::linux_default::LinuxDefault;
use hetsched_core::policies::linux_default::NAME as LINUX_DEFAULT;
use hetsched_core::policies::{entry, policy_names, policy_with_options, PolicyOptions, REGISTRY};
use hetsched_core::Topology;
use hetsched_experiments::static_best::{
    assignments, run_assignments, Assignment, STATIC_BEST_MAX_ASSIGNMENTS,
};
use hetsched_sim::baseline::{baseline_by_name, BASELINES};
use hetsched_sim::batch::{default_threads, run_jobs_on, Job};
use hetsched_sim::engine::NS_PER_S;
use hetsched_sim::metrics::speedup;
use hetsched_sim::presets::{workload_names, workload_preset, DEFAULT_WORKLOAD, WORKLOAD_PRESETS};
use hetsched_sim::{RunResult, SimConfig, Workload};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The machine of the embedded default scenario.
pub const DEFAULT_MACHINE: &str = "amps-smp";

/// Simulated-time limit for a workload that ends by itself, s.
pub const FINITE_LIMIT_S: f64 = 3600.0;
/// Simulated time for a workload that runs forever (closed loop), s.
pub const OPEN_ENDED_S: f64 = 60.0;

/// Most seeds one `simulate` runs (each is a run of every policy; the runs are kept until the
/// table is made).
pub const MAX_SEEDS: u32 = 10_000;

#[derive(Args, Debug, Default)]
pub struct SimulateArgs {
    /// Machine preset or machine file (default: amps-smp).
    #[arg(long)]
    pub machine: Option<String>,
    /// Workload preset or workload file (default: mixed-default).
    #[arg(long)]
    pub workload: Option<String>,
    /// Policies to compare, comma-separated (default: every implemented policy). The baseline
    /// linux-default always runs, for the speedups. `static-best` (the HASS paper's oracle: every
    /// static assignment of single-threaded apps to core-class partitions simulated, the best
    /// kept) runs only when named.
    #[arg(long, value_delimiter = ',')]
    pub policy: Vec<String>,
    /// The simulated kernel's balancer under every policy (docs/baselines.md): linux-6, today's
    /// kernel (capacity-aware), or linux-cfs, the papers' era (blind to core speed).
    #[arg(long, default_value = hetsched_sim::baseline::linux_6::NAME, value_parser = baseline_names())]
    pub baseline: String,
    /// AMPS running-thread migration policy: always, same-node or rss (default: rss on NUMA
    /// machines, always on SMP; AMPS section 2.4.3).
    #[arg(long)]
    pub numa: Option<String>,
    /// Sampling period of counter-driven policies, ms (bulldover: default 1000, BulldOver
    /// section 4).
    #[arg(long, allow_negative_numbers = true)]
    pub interval: Option<f64>,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of seeds (seed, seed+1, ...; at most 10000); results give mean and spread.
    #[arg(long, default_value_t = 1)]
    pub seeds: u32,
    /// Simulated seconds to run (default: until the work is done, at most 3600 s; 60 s for a
    /// workload that restarts forever).
    #[arg(long, allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Scheduler tick and time slice, ms.
    #[arg(long, default_value_t = 4.0, allow_negative_numbers = true)]
    pub quantum_ms: f64,
    /// Print one JSON document on stdout.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV on stdout: a header, then one row per policy, app and seed (docs/json.md).
    #[arg(long)]
    pub csv: bool,
    /// Write report.html (Gantt chart, completion bars) and results.json into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Check the engine's invariants after every step (slow).
    #[arg(long, hide = true)]
    pub check: bool,
    /// Threads the runs spread over (`None`: one per core). Not a flag: a sweep runs its cells in
    /// parallel and each cell's runs on one thread.
    #[arg(skip)]
    pub threads: Option<usize>,
    /// No progress bar (not a flag: a sweep draws its own, and the Python package none).
    #[arg(skip)]
    pub quiet: bool,
}

/// Checked arguments, before anything is built.
struct Plan {
    topology: Topology,
    workload: Workload,
    policies: Vec<String>,
    options: PolicyOptions,
    seeds: Vec<u64>,
    cfg: SimConfig,
    /// Every static assignment, when the oracle (static-best) was asked for.
    static_assignments: Option<Vec<Assignment>>,
    /// See [`SimulateArgs::threads`].
    threads: Option<usize>,
    /// See [`SimulateArgs::quiet`].
    quiet: bool,
}

/// The names `--baseline` accepts.
fn baseline_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(BASELINES.iter().map(|b| b.name))
}

/// A policy that needs the whole workload in advance: run by its own runner, not as a policy
/// object (the registry's oracle flag).
fn is_oracle(name: &str) -> bool {
    entry(name).is_some_and(|e| e.oracle)
}

/// A workload preset by name, a workload file, or workload-file text ([`is_inline`]), resolved
/// against the machine it will run on.
pub fn resolve_workload(spec: &str, topo: &Topology) -> anyhow::Result<Workload> {
    if is_inline(spec) {
        return Workload::parse(spec, INLINE_WORKLOAD, topo).map_err(|e| bad_input(e.to_string()));
    }
    if let Some(w) = workload_preset(spec, topo) {
        return w.map_err(|e| anyhow::anyhow!("{e}"));
    }
    let path = Path::new(spec);
    if spec.ends_with(".toml") || path.exists() {
        return Workload::load(path, topo).map_err(|e| bad_input(e.to_string()));
    }
    Err(bad_input(format!(
        "--workload {spec:?}: no such preset or file (presets: {})",
        workload_names().collect::<Vec<_>>().join(", ")
    )))
}

fn plan(args: &SimulateArgs) -> anyhow::Result<Plan> {
    let mut policies: Vec<String> = if args.policy.is_empty() {
        policy_names().map(String::from).collect()
    } else {
        args.policy
            .iter()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect()
    };
    if policies.is_empty() {
        return Err(bad_input(format!(
            "--policy {:?}: names no policy (policies: {})",
            args.policy.join(","),
            implemented_policies()
        )));
    }
    for p in &policies {
        if entry(p).is_none() {
            return Err(bad_input(format!(
                "--policy {p:?}: unknown policy (implemented: {})",
                implemented_policies()
            )));
        }
    }
    policies.retain(|p| p != LINUX_DEFAULT);
    policies.insert(0, LINUX_DEFAULT.into());
    let numa = match &args.numa {
        None => None,
        Some(m) => Some(
            m.parse::<NumaMode>()
                .map_err(|e| bad_input(format!("--numa {e}")))?,
        ),
    };
    let interval_ns = match args.interval {
        None => None,
        Some(ms) if ms.is_finite() && (1.0..=3_600_000.0).contains(&ms) => Some((ms * 1e6) as u64),
        Some(ms) => {
            return Err(bad_input(format!(
                "--interval {ms}: must be between 1 and 3600000 ms"
            )))
        }
    };
    if args.seeds == 0 {
        return Err(bad_input("--seeds 0: need at least one seed"));
    }
    if args.seeds > MAX_SEEDS {
        return Err(bad_input(format!(
            "--seeds {}: at most {MAX_SEEDS}",
            args.seeds
        )));
    }
    if args.seed.checked_add(u64::from(args.seeds) - 1).is_none() {
        return Err(bad_input(format!(
            "--seed {} --seeds {}: the last seed would be past {}",
            args.seed,
            args.seeds,
            u64::MAX
        )));
    }
    if !(args.quantum_ms.is_finite() && args.quantum_ms >= 0.1 && args.quantum_ms <= 1000.0) {
        return Err(bad_input(format!(
            "--quantum-ms {}: must be between 0.1 and 1000",
            args.quantum_ms
        )));
    }
    if let Some(d) = args.duration {
        if !(d.is_finite() && d > 0.0 && d <= 1e6) {
            return Err(bad_input(format!(
                "--duration {d}: must be a positive number of seconds (at most 1e6)"
            )));
        }
    }
    let topology = resolve_machine(args.machine.as_deref().unwrap_or(DEFAULT_MACHINE))?;
    let workload = resolve_workload(
        args.workload.as_deref().unwrap_or(DEFAULT_WORKLOAD),
        &topology,
    )?;
    let duration_s = args.duration.unwrap_or(if workload.is_finite() {
        FINITE_LIMIT_S
    } else {
        OPEN_ENDED_S
    });
    let cfg = SimConfig {
        seed: args.seed,
        duration_ns: (duration_s * NS_PER_S as f64) as u64,
        quantum_ns: (args.quantum_ms * 1e6) as u64,
        record_gantt: args.out.is_some(),
        check_invariants: args.check,
        baseline: baseline_by_name(&args.baseline).ok_or_else(|| {
            bad_input(format!(
                "--baseline {:?}: unknown (baselines: {})",
                args.baseline,
                BASELINES
                    .iter()
                    .map(|b| b.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?,
    };
    let seeds = (0..args.seeds as u64).map(|i| args.seed + i).collect();
    let oracle = policies.iter().find(|p| is_oracle(p)).cloned();
    let static_assignments = if let Some(oracle) = oracle {
        Some(
            assignments(&topology, &workload, STATIC_BEST_MAX_ASSIGNMENTS)
                .map_err(|e| bad_input(format!("--policy {oracle}: {e}")))?,
        )
    } else {
        None
    };
    Ok(Plan {
        static_assignments,
        topology,
        workload,
        policies,
        options: PolicyOptions {
            numa,
            interval_ns,
            ..Default::default()
        },
        seeds,
        cfg,
        threads: args.threads,
        quiet: args.quiet,
    })
}

/// Every policy's name, comma-separated, for error messages.
pub fn implemented_policies() -> String {
    REGISTRY
        .iter()
        .map(|e| e.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Check `simulate`'s arguments as a run would (machine, workload, policies, numbers in range),
/// running nothing.
pub fn check_args(args: &SimulateArgs) -> anyhow::Result<()> {
    plan(args).map(|_| ())
}

/// Per-app figures over seeds.
#[derive(Serialize, Clone)]
pub struct AppSummary {
    pub name: String,
    /// Mean completion time over every completion of every seed, s.
    pub completion_s: Option<f64>,
    /// Completions per seed (mean).
    pub completions: f64,
}

/// One policy over every seed.
#[derive(Serialize, Clone)]
pub struct PolicySummary {
    pub policy: String,
    /// Mean over seeds, s.
    pub makespan_s: f64,
    pub makespan_min_s: f64,
    pub makespan_max_s: f64,
    /// Mean over seeds of the per-seed speedup against the baseline of the same seed.
    pub speedup_vs_baseline: f64,
    pub speedup_min: f64,
    pub speedup_max: f64,
    pub apps: Vec<AppSummary>,
    /// Mean over seeds.
    pub migrations: f64,
    /// Mean over seeds of the coefficient of variation of per-thread progress rate.
    pub fairness: f64,
    /// Mean over seeds.
    pub llc_misses: f64,
    /// Mean over seeds.
    pub policy_cpu_s: f64,
    /// True when every seed finished its work.
    pub finished: bool,
}

#[derive(Serialize, Default, Clone, Copy)]
pub struct EngineTotals {
    pub events: u64,
    pub wall_s: f64,
    pub events_per_s: f64,
    /// Runs simulated.
    pub runs: usize,
}

#[derive(Serialize)]
pub struct SimulateJson {
    /// What produced this document (docs/json.md).
    #[serde(flatten)]
    pub provenance: Provenance,
    pub machine: String,
    pub workload: String,
    pub seed: u64,
    pub seeds: usize,
    /// How speedups are computed for this workload.
    pub speedup_basis: &'static str,
    /// The simulated kernel's balancer every policy ran under (docs/baselines.md).
    pub kernel_baseline: &'static str,
    /// The scheduler tick and time slice, ms.
    pub quantum_ms: f64,
    pub baseline: PolicySummary,
    pub results: Vec<PolicySummary>,
    pub engine: EngineTotals,
    /// Every run, policy-major, seed-minor.
    pub runs: Vec<RunResult>,
}

fn summarize(
    policy: &str,
    runs: &[&RunResult],
    bases: &[&RunResult],
    finite: bool,
) -> PolicySummary {
    let n = runs.len() as f64;
    let makespans: Vec<f64> = runs.iter().map(|r| r.makespan_s).collect();
    let speedups: Vec<f64> = runs
        .iter()
        .zip(bases)
        .map(|(r, b)| speedup(b, r, finite))
        .collect();
    let apps = runs[0]
        .apps
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let all: Vec<f64> = runs
                .iter()
                .flat_map(|r| r.apps[i].completion_times_s.iter().copied())
                .collect();
            AppSummary {
                name: a.name.clone(),
                completion_s: if all.is_empty() {
                    None
                } else {
                    Some(all.iter().sum::<f64>() / all.len() as f64)
                },
                completions: all.len() as f64 / n,
            }
        })
        .collect();
    let mean = |f: &dyn Fn(&RunResult) -> f64| runs.iter().map(|r| f(r)).sum::<f64>() / n;
    PolicySummary {
        policy: policy.to_string(),
        makespan_s: makespans.iter().sum::<f64>() / n,
        makespan_min_s: makespans.iter().cloned().fold(f64::MAX, f64::min),
        makespan_max_s: makespans.iter().cloned().fold(f64::MIN, f64::max),
        speedup_vs_baseline: speedups.iter().sum::<f64>() / n,
        speedup_min: speedups.iter().cloned().fold(f64::MAX, f64::min),
        speedup_max: speedups.iter().cloned().fold(f64::MIN, f64::max),
        apps,
        migrations: mean(&|r| r.migrations as f64),
        fairness: mean(&|r| r.fairness),
        llc_misses: mean(&|r| r.llc_misses),
        policy_cpu_s: mean(&|r| r.policy_cpu_s),
        finished: runs.iter().all(|r| r.finished),
    }
}

/// Run every (policy, seed) pair, in parallel on the machine's cores; results in plan order.
fn run_all(plan: &Plan) -> Vec<RunResult> {
    let statics = plan.static_assignments.as_ref().map_or(0, Vec::len);
    let policies: Vec<&String> = plan.policies.iter().filter(|p| !is_oracle(p)).collect();
    let jobs: Vec<Job<'_>> = policies
        .iter()
        .map(|p| (*p).clone())
        .flat_map(|p| plan.seeds.iter().map(move |&s| (p.clone(), s)))
        .map(|(p, seed)| Job {
            topology: &plan.topology,
            workload: &plan.workload,
            label: format!("{p} seed {seed}"),
            make_policy: Box::new(move || {
                let options = PolicyOptions {
                    seed,
                    ..plan.options
                };
                policy_with_options(&p, &options).unwrap_or_else(|| Box::new(LinuxDefault))
            }),
            cfg: SimConfig {
                seed,
                ..plan.cfg.clone()
            },
        })
        .collect();
    let bar = if plan.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        progress_bar(jobs.len() + statics * plan.seeds.len())
    };
    let tick = |_: usize, _: usize, label: &str| {
        bar.set_message(label.to_string());
        bar.inc(1);
    };
    let threads = plan.threads.unwrap_or_else(default_threads);
    let mut runs = run_jobs_on(&jobs, threads, &tick).into_iter();
    let mut out = Vec::new();
    for p in &plan.policies {
        if !is_oracle(p) {
            out.extend(runs.by_ref().take(plan.seeds.len()));
            continue;
        }
        // The oracle's run on a seed is the assignment with the best speedup over the baseline's
        // run on that seed (the baseline runs first, `plan`), the figure every policy is shown by.
        let finite = plan.workload.is_finite();
        for (i, &seed) in plan.seeds.iter().enumerate() {
            let list = plan.static_assignments.clone().unwrap_or_default();
            let cfg = SimConfig {
                seed,
                ..plan.cfg.clone()
            };
            let found = run_assignments(&plan.topology, &plan.workload, list, &cfg, &tick);
            let base = &out[i];
            debug_assert_eq!(base.policy, LINUX_DEFAULT);
            let best = found
                .best_against(base, finite)
                .unwrap_or(&found.runs[0])
                .clone();
            out.push(best);
        }
    }
    bar.finish_and_clear();
    out
}

/// A progress bar on stderr for `n` runs.
pub fn progress_bar(n: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(n as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// A finished `simulate`: its document, and what the human outputs need besides.
pub struct Simulated {
    /// The `simulate --json` document.
    pub doc: SimulateJson,
    /// The machine it ran on.
    pub topology: Topology,
    /// Whether the workload ends by itself (how speedups are computed: [`speedup`]).
    pub finite: bool,
}

/// Check the arguments, run every policy on every seed, and build the document; notices and
/// warnings go to stderr.
pub fn simulate(args: &SimulateArgs) -> anyhow::Result<Simulated> {
    let plan = plan(args)?;
    if let Some(dir) = &args.out {
        report::check_out(dir)?;
    }
    let runs = run_all(&plan);
    let k = plan.seeds.len();
    if runs.len() != plan.policies.len() * k {
        anyhow::bail!("a simulation run failed to produce a result");
    }
    let mut told = std::collections::BTreeSet::new();
    for n in runs.iter().flat_map(|r| &r.notices) {
        if told.insert(n.clone()) && !args.quiet {
            eprintln!("{n}");
        }
    }
    let finite = plan.workload.is_finite();
    let bases: Vec<&RunResult> = runs[..k].iter().collect();
    let mut results = Vec::new();
    for (pi, p) in plan.policies.iter().enumerate() {
        let rs: Vec<&RunResult> = runs[pi * k..(pi + 1) * k].iter().collect();
        results.push(summarize(p, &rs, &bases, finite));
    }
    if results.iter().any(|r| !r.finished) && finite && args.duration.is_none() && !args.quiet {
        tracing::warn!(
            "some runs did not finish within {} simulated seconds; their makespan is the limit",
            plan.cfg.duration_ns as f64 / NS_PER_S as f64
        );
    }
    let mut engine = EngineTotals {
        runs: runs.len(),
        ..Default::default()
    };
    for r in &runs {
        engine.events += r.engine.events;
        engine.wall_s += r.engine.wall_s;
    }
    engine.events_per_s = if engine.wall_s > 0.0 {
        engine.events as f64 / engine.wall_s
    } else {
        0.0
    };
    let doc = SimulateJson {
        provenance: Provenance::new([
            args.machine.as_deref().unwrap_or(DEFAULT_MACHINE),
            args.workload.as_deref().unwrap_or(DEFAULT_WORKLOAD),
        ]),
        machine: plan.topology.name().to_string(),
        workload: plan.workload.name.clone(),
        seed: plan.seeds[0],
        seeds: k,
        speedup_basis: hetsched_sim::metrics::speedup_basis(
            finite,
            plan.workload.apps.iter().any(|a| a.restart),
        ),
        kernel_baseline: plan.cfg.baseline.name,
        quantum_ms: plan.cfg.quantum_ns as f64 / 1e6,
        baseline: results[0].clone(),
        results,
        engine,
        runs,
    };
    Ok(Simulated {
        doc,
        finite,
        topology: plan.topology,
    })
}

pub fn run_simulate(args: &SimulateArgs) -> anyhow::Result<()> {
    let Simulated {
        doc,
        topology,
        finite,
    } = simulate(args)?;
    if let Some(dir) = &args.out {
        report::write_out(dir, &doc, &report::simulate_report(&doc, &topology))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else if args.csv {
        write_csv(&doc, finite, std::io::stdout().lock())?;
    } else {
        print!("{}", table(&doc));
        println!("where each policy wins or loses here, and why:");
        for line in crate::explain::explain(&doc, &topology) {
            println!("  {line}");
        }
    }
    Ok(())
}

/// One row of `simulate --csv` and of a sweep's table: a policy's run on one seed, for one app.
/// Every field is a simulated figure (no wall time), so a run gives the same row wherever it runs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RunRow {
    pub machine: String,
    pub workload: String,
    pub kernel_baseline: String,
    pub policy: String,
    pub seed: u64,
    pub finished: bool,
    pub makespan_s: f64,
    /// This run's speedup over the baseline policy's run on the same seed (NaN, written `null`
    /// in JSON, when no app gives a ratio).
    #[serde(deserialize_with = "null_as_nan")]
    pub speedup_vs_baseline: f64,
    pub app: String,
    pub completion_s: Option<f64>,
    pub completions: u64,
    pub cpu_s: f64,
    pub instructions: f64,
    pub llc_misses: f64,
    pub migrations: u64,
}

/// JSON has no NaN: serde_json writes it as `null`; read `null` back as NaN.
fn null_as_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Every run of the document as rows (policy-major, seed, then app). `finite`: whether the
/// workload ends by itself ([`speedup`]).
pub fn run_rows(doc: &SimulateJson, finite: bool) -> Vec<RunRow> {
    let k = doc.seeds;
    let mut rows = Vec::new();
    for (i, r) in doc.runs.iter().enumerate() {
        // Runs are policy-major and the baseline policy comes first: run i's baseline is run i % k.
        let base = &doc.runs[i % k];
        let speedup_vs_baseline = speedup(base, r, finite);
        for a in &r.apps {
            rows.push(RunRow {
                machine: doc.machine.clone(),
                workload: doc.workload.clone(),
                kernel_baseline: doc.kernel_baseline.to_string(),
                policy: r.policy.clone(),
                seed: r.seed,
                finished: r.finished,
                makespan_s: r.makespan_s,
                speedup_vs_baseline,
                app: a.name.clone(),
                completion_s: a.completion_s,
                completions: a.completions,
                cpu_s: a.cpu_s(),
                instructions: a.instructions,
                llc_misses: a.llc_misses,
                migrations: r.migrations,
            });
        }
    }
    rows
}

/// Every run of the document as CSV.
fn write_csv(doc: &SimulateJson, finite: bool, out: impl std::io::Write) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    for row in run_rows(doc, finite) {
        w.serialize(row)?;
    }
    w.flush()?;
    Ok(())
}

/// The human table: policy, makespan, speedup vs baseline, fairness, migrations.
pub fn table(doc: &SimulateJson) -> String {
    let mut out = format!(
        "machine {} · workload {} · kernel {} · {} seed(s) from {} · speedup = {}\n",
        doc.machine, doc.workload, doc.kernel_baseline, doc.seeds, doc.seed, doc.speedup_basis
    );
    out.push_str(&format!(
        "{:<16} {:>12} {:>16} {:>13} {:>11} {:>10}\n",
        "policy", "makespan_s", "speedup", "fairness_cv", "migrations", "policy_ms"
    ));
    for r in &doc.results {
        let spread = if doc.seeds > 1 {
            format!(
                "{:.3} [{:.2}-{:.2}]",
                r.speedup_vs_baseline, r.speedup_min, r.speedup_max
            )
        } else {
            format!("{:.3}", r.speedup_vs_baseline)
        };
        out.push_str(&format!(
            "{:<16} {:>12.3} {:>16} {:>13.3} {:>11.0} {:>10.2}{}\n",
            r.policy,
            r.makespan_s,
            spread,
            r.fairness,
            r.migrations,
            r.policy_cpu_s * 1e3,
            if r.finished { "" } else { "  (unfinished)" }
        ));
    }
    out.push_str(&format!(
        "engine: {} runs, {} events in {:.3} s ({:.2} M events/s)\n",
        doc.engine.runs,
        doc.engine.events,
        doc.engine.wall_s,
        doc.engine.events_per_s / 1e6
    ));
    out
}

#[derive(Args, Debug)]
pub struct WorkloadsArgs {
    /// Print one JSON document on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run_workloads(args: &WorkloadsArgs) -> anyhow::Result<()> {
    print_named(&workload_list()?, args.json)
}

/// Every workload preset, named and described (resolved against the default machine).
pub fn workload_list() -> anyhow::Result<Vec<NamedJson>> {
    let topo = resolve_machine(DEFAULT_MACHINE)?;
    let mut list = Vec::new();
    for (name, _) in WORKLOAD_PRESETS {
        let w = resolve_workload(name, &topo)?;
        list.push(NamedJson {
            name: name.to_string(),
            description: w.description,
        });
    }
    Ok(list)
}
