//! Results of a run, as typed structs with a description on every field, so a JSON reader knows what each number is.

use serde::Serialize;
use std::collections::BTreeMap;

/// One app (workload entry) in one run.
#[derive(Clone, Debug, Serialize)]
pub struct AppResult {
    /// The app's name in the workload.
    pub name: String,
    /// The service it serves requests of, if the workload says so: apps of one service count
    /// once in the speedup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Mean wall time from start to exit of a completed instance, s (None: none completed).
    pub completion_s: Option<f64>,
    /// Instances that completed.
    pub completions: u64,
    /// The app restarts when an instance exits (a closed loop, or a service's requests): its
    /// figure is throughput, not completion time.
    pub closed_loop: bool,
    /// Every completion time, in completion order, s.
    #[serde(skip_serializing)]
    pub completion_times_s: Vec<f64>,
    /// CPU time of all its instances per core class (topology order), s (HASS Table 2).
    #[serde(skip_serializing)]
    pub cpu_s_by_class: Vec<f64>,
    /// The same, keyed by the class's name (the JSON's form).
    pub cpu_s_per_class: BTreeMap<String, f64>,
    /// Times one of its threads moved to a core of another class (HASS Table 3).
    pub class_migrations: u64,
    /// FPU usage, 1 - empty FPU cycles / CPU cycles over all its threads (BulldOver equation 1).
    pub fpu_usage: Option<f64>,
    /// Misses in shared caches below the LLC (module L2s), all its threads (BulldOver Figure 7).
    pub l2_misses: f64,
    /// Instructions its threads retired (the denominator of Ding et al. equations 5-6).
    pub instructions: f64,
    /// LLC misses of its threads (demand misses and refills).
    pub llc_misses: f64,
    /// Lines its threads' demand misses evicted from the LLC (Ding et al. equation 5).
    pub llc_evictions: f64,
    /// Lines its threads' L2 evictions wrote into the LLC (Ding et al. equation 6).
    pub llc_fills: f64,
}

impl AppResult {
    /// LLC misses per kilo-instruction over the run.
    pub fn mpki(&self) -> f64 {
        if self.instructions > 0.0 {
            self.llc_misses / self.instructions * 1000.0
        } else {
            0.0
        }
    }

    /// CPU time on every class, s.
    pub fn cpu_s(&self) -> f64 {
        self.cpu_s_by_class.iter().sum()
    }
}

/// How fast the engine ran.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct EngineStats {
    /// Events processed: phase ends, wake-ups, arrivals, and one quantum expiry per busy core per tick.
    pub events: u64,
    /// Wall-clock time of the run, s.
    pub wall_s: f64,
    /// events / wall_s.
    pub events_per_s: f64,
    /// Simulated time reached, s.
    pub simulated_s: f64,
}

/// One thread's stretch on one core.
#[derive(Clone, Debug, Serialize)]
pub struct GanttSegment {
    /// The core (dense id).
    pub core: u32,
    /// The thread (id within the run).
    pub thread: u32,
    /// Its app's name.
    pub app: String,
    /// Start of the stretch, simulated ns.
    pub start_ns: u64,
    /// End of the stretch, simulated ns.
    pub end_ns: u64,
}

/// One policy on one machine, workload and seed.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// Policy name.
    pub policy: String,
    /// The run's seed.
    pub seed: u64,
    /// True when all work finished before the duration limit.
    pub finished: bool,
    /// Time at which the last finite app completed (or the duration, if unfinished), s.
    pub makespan_s: f64,
    /// Per workload app.
    pub apps: Vec<AppResult>,
    /// Times a thread changed core.
    pub migrations: u64,
    /// Coefficient of variation of per-thread progress rate (work done, measured as time alone on
    /// the fastest core, over time alive); lower is fairer.
    pub fairness: f64,
    /// LLC misses, all threads (demand misses plus refills).
    pub llc_misses: f64,
    /// Instructions retired, all threads.
    pub instructions: f64,
    /// Wall time spent inside the policy's callbacks, s.
    pub policy_cpu_s: f64,
    /// Placements ignored because they left a thread no core of its user mask.
    pub rejected_placements: u64,
    /// Threads created.
    pub threads: u64,
    /// Threads moved by the baseline balancer.
    pub balance_moves: u64,
    /// Bytes of memory the policy's page moves migrated between nodes.
    pub pages_moved_bytes: f64,
    /// What the policy asked to tell the user (once each).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
    /// Which thread ran where, when recorded (`SimConfig::record_gantt`).
    #[serde(skip_serializing)]
    pub gantt: Option<Vec<GanttSegment>>,
    /// Segments not recorded past [`crate::engine::GANTT_MAX_SEGMENTS`].
    #[serde(skip_serializing)]
    pub gantt_dropped: u64,
    /// How fast the engine ran.
    pub engine: EngineStats,
}

/// Speedup of `r` over `base`: the makespan ratio when the workload ends by itself (`finite`) and
/// both runs finished. Otherwise the geometric mean over applications, each counted once, of its
/// own figure: a closed-loop app's throughput ratio (instructions retired per simulated second over
/// the window), a batch app's completion-time ratio when it completed in both runs, else its
/// progress ratio (instructions per simulated second): progress, never a silent 1. An app counts
/// once however many copies it runs, and the apps of one service (`AppResult::service`) count once
/// together, with the geometric mean of their figures. [`speedup_basis`] names the figure.
pub fn speedup(base: &RunResult, r: &RunResult, finite: bool) -> f64 {
    if finite && base.finished && r.finished && r.makespan_s > 0.0 {
        return base.makespan_s / r.makespan_s;
    }
    let rate = |run: &RunResult, a: &AppResult| a.instructions / run.engine.simulated_s.max(1e-12);
    // Log-ratio sums and counts per application: a service's apps share one entry.
    let mut groups: Vec<(Option<&str>, f64, u32)> = Vec::new();
    for (b, x) in base.apps.iter().zip(&r.apps) {
        let ratio = match (b.closed_loop, b.completion_s, x.completion_s) {
            (false, Some(bt), Some(xt)) if xt > 0.0 => bt / xt,
            _ if b.instructions > 0.0 => rate(r, x) / rate(base, b),
            _ => continue,
        };
        if !(ratio.is_finite() && ratio > 0.0) {
            continue;
        }
        let service = b.service.as_deref();
        match groups
            .iter_mut()
            .find(|(s, _, _)| service.is_some() && *s == service)
        {
            Some((_, sum, n)) => {
                *sum += ratio.ln();
                *n += 1;
            }
            None => groups.push((service, ratio.ln(), 1)),
        }
    }
    if groups.is_empty() {
        return f64::NAN;
    }
    (groups
        .iter()
        .map(|(_, sum, n)| sum / *n as f64)
        .sum::<f64>()
        / groups.len() as f64)
        .exp()
}

/// What [`speedup`] measures for a workload: its name in every table and document.
pub fn speedup_basis(workload_finite: bool, any_closed_loop: bool) -> &'static str {
    match (workload_finite, any_closed_loop) {
        (true, _) => "makespan ratio (each app's completion ratio, or its progress, when a run is unfinished)",
        (false, true) => "geometric mean over apps of throughput ratios (closed-loop apps) and completion-time ratios (batch apps)",
        (false, false) => "geometric mean over apps of completion-time ratios",
    }
}

/// Standard deviation over mean, or 0 for fewer than two values.
pub fn coefficient_of_variation(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    if mean == 0.0 {
        return 0.0;
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
    var.sqrt() / mean
}
