//! One line per policy under `simulate`'s table saying where it won or lost on this scenario and
//! why, read from the run's own figures: which app gained or lost most against the baseline, and
//! how much of that app's CPU time the policy gave the fastest cores compared with the baseline.

use crate::simulate::SimulateJson;
use hetsched_core::Topology;
use hetsched_experiments::reproduce::experiments;
use hetsched_sim::RunResult;

/// Per app, the mean over seeds of its completion time, s (`None` when it never completed).
fn completions(runs: &[RunResult], app: usize) -> Option<f64> {
    let v: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.apps.get(app)?.completion_s)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Per app, its share of CPU time on the fastest class over every seed, percent.
fn fast_share(runs: &[RunResult], app: usize, fastest: usize) -> f64 {
    let (fast, all) = runs
        .iter()
        .filter_map(|r| r.apps.get(app))
        .fold((0.0, 0.0), |(f, a), x| {
            (
                f + x.cpu_s_by_class.get(fastest).copied().unwrap_or(0.0),
                a + x.cpu_s(),
            )
        });
    if all > 0.0 {
        100.0 * fast / all
    } else {
        0.0
    }
}

/// Whether a policy's run did exactly what the baseline's run of the same seed did: the same
/// makespan and migrations, and the same work done (a run cut off by the duration has the
/// duration as its makespan whatever it did, so the work is compared too).
fn same_run(a: &RunResult, b: &RunResult) -> bool {
    a.makespan_s == b.makespan_s
        && a.migrations == b.migrations
        && a.instructions == b.instructions
        && a.finished == b.finished
        && a.apps.len() == b.apps.len()
        && a.apps
            .iter()
            .zip(&b.apps)
            .all(|(x, y)| x.completion_s == y.completion_s && x.cpu_s_by_class == y.cpu_s_by_class)
}

/// A completion-time ratio (the baseline's time over the policy's: above 1, the app finished
/// sooner) as a change of the app's time: "59% less time" for 2.46, "30% more time" for 0.77.
fn time_change(g: f64) -> String {
    let change = 1.0 / g - 1.0;
    let word = if change <= 0.0 { "less" } else { "more" };
    format!("{:.0}% {word} time", change.abs() * 100.0)
}

/// The experiment that shows a policy on the ground it was built for.
fn home_experiment(policy: &str) -> &'static str {
    experiments()
        .map(|(name, _)| *name)
        .find(|name| {
            *name == policy
                || name
                    .strip_prefix(policy)
                    .is_some_and(|r| r.starts_with('-'))
        })
        .unwrap_or("matrix")
}

/// The explanation lines for a simulation document (empty for a machine with one core class,
/// where there is no fast core to speak of, except for the pointer to the matrix).
pub fn explain(doc: &SimulateJson, topo: &Topology) -> Vec<String> {
    let seeds = doc.seeds.max(1);
    let fastest = topo.classes_by_speed().first().map_or(0, |c| c.index());
    let fast_name = &topo.classes()[fastest].name;
    let asymmetric = topo.is_asymmetric();
    let base_runs = &doc.runs[..seeds.min(doc.runs.len())];
    let mut lines = Vec::new();
    for (pi, r) in doc.results.iter().enumerate().skip(1) {
        let Some(runs) = doc.runs.get(pi * seeds..(pi + 1) * seeds) else {
            continue;
        };
        let placed_nothing = runs.iter().zip(base_runs).all(|(a, b)| same_run(a, b));
        let mut line = format!("{}: {:.3}x", r.policy, r.speedup_vs_baseline);
        if placed_nothing {
            let why = runs
                .iter()
                .flat_map(|x| &x.notices)
                .next()
                .map(|n| n.trim_start_matches(&format!("{}: ", r.policy)).to_string())
                .unwrap_or_else(|| {
                    let signals =
                        hetsched_core::policies::entry(&r.policy).map_or("", |e| e.signals);
                    format!("nothing in this workload for it to act on (it acts on {signals})")
                });
            line.push_str(&format!(", identical to the baseline: {why}"));
        } else {
            // App by app: completion time against the baseline's (above 1: the app finished sooner).
            let gains: Vec<(usize, f64)> = doc
                .baseline
                .apps
                .iter()
                .enumerate()
                .filter_map(|(ai, _)| {
                    Some((ai, completions(base_runs, ai)? / completions(runs, ai)?))
                })
                .collect();
            let describe = |ai: usize, g: f64| {
                let name = &doc.baseline.apps[ai].name;
                let mut s = format!("{name}, {}", time_change(g));
                if asymmetric {
                    let (ours, base) = (
                        fast_share(runs, ai, fastest),
                        fast_share(base_runs, ai, fastest),
                    );
                    // Shares that round alike explain nothing: the time went elsewhere (waiting,
                    // sharing a cache or a core's turns).
                    if format!("{ours:.0}") == format!("{base:.0}") {
                        s.push_str(&format!(
                            " ({ours:.0}% of its CPU time on {fast_name} cores, as under the baseline: not where it ran)"
                        ));
                    } else {
                        s.push_str(&format!(
                            " ({ours:.0}% of its CPU time on {fast_name} cores vs {base:.0}% under the baseline)"
                        ));
                    }
                }
                s
            };
            if runs.iter().chain(base_runs).any(|x| !x.finished) {
                line.push_str("; cut off by the duration (the speedup compares the work done)");
            }
            let best = gains.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1));
            let worst = gains.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((ai, g)) = best.filter(|b| b.1 > 1.005) {
                line.push_str(&format!("; gains most on {}", describe(ai, g)));
            }
            if let Some((ai, g)) = worst.filter(|w| w.1 < 0.995) {
                line.push_str(&format!("; loses most on {}", describe(ai, g)));
            }
            let base_migrations = doc.baseline.migrations;
            if r.migrations > 2.0 * base_migrations.max(1.0) {
                line.push_str(&format!(
                    "; {:.0} migrations against the baseline's {:.0}",
                    r.migrations, base_migrations
                ));
            }
        }
        let home = home_experiment(&r.policy);
        line.push_str(&format!("; its own ground: `hetsched reproduce {home}`"));
        lines.push(line);
    }
    lines.push(
        "every policy on every paper's scenario, with spreads over seeds: `hetsched reproduce matrix`"
            .to_string(),
    );
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_changes_are_shares_of_the_baselines_time() {
        assert_eq!(time_change(2.46), "59% less time");
        assert_eq!(time_change(1.25), "20% less time");
        assert_eq!(time_change(0.8), "25% more time");
        assert_eq!(time_change(0.25), "300% more time");
    }

    #[test]
    fn each_policy_points_to_the_experiment_of_its_paper() {
        assert_eq!(home_experiment("amps"), "amps-smp");
        assert_eq!(home_experiment("hass"), "hass");
        assert_eq!(home_experiment("numa-amp"), "numa-amp");
        assert_eq!(home_experiment("hetsched"), "matrix");
    }
}
