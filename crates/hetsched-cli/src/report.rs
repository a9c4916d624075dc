//! report.html: the simulation summary as a page with inline SVG charts (no scripts, no external
//! files): speedups, per-app completion times, and a core-by-time Gantt chart per policy in the
//! style of Pinter's Figures 2-3.

use crate::figures::{bar_figure_svg, css, gantt_svg, series_colors, GanttRun};
use crate::simulate::SimulateJson;
use hetsched_core::ids::Id;
use hetsched_core::{CoreId, Topology};
use hetsched_experiments::reproduce::{Bar, BarGroup, Figure};
use std::fmt::Write;

/// Gantt charts are drawn for machines up to this many cores.
pub const GANTT_MAX_CORES: usize = 64;

/// Write `results.json` and `report.html` into `--out DIR` (created if missing), and say where.
/// Make the `--out` directory and check that a file can be written there (a probe file, removed
/// again), so that a long run is not lost to a directory found unwritable at its end.
pub fn check_out(dir: &std::path::Path) -> anyhow::Result<()> {
    let fail = |e: &dyn std::fmt::Display| anyhow::anyhow!("--out {}: {e}", dir.display());
    if dir.exists() && !dir.is_dir() {
        return Err(crate::bad_input(format!(
            "--out {}: exists and is not a directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| fail(&e))?;
    let probe = dir.join(".hetsched-write-check");
    std::fs::write(&probe, b"").map_err(|e| fail(&e))?;
    std::fs::remove_file(&probe).map_err(|e| fail(&e))?;
    Ok(())
}

pub fn write_out(
    dir: &std::path::Path,
    results: &impl serde::Serialize,
    html: &str,
) -> anyhow::Result<()> {
    let fail = |e: &dyn std::fmt::Display| anyhow::anyhow!("--out {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(|e| fail(&e))?;
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(results)?,
    )
    .map_err(|e| fail(&e))?;
    std::fs::write(dir.join("report.html"), html).map_err(|e| fail(&e))?;
    eprintln!("wrote {}", dir.join("report.html").display());
    Ok(())
}

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The whole page.
pub fn simulate_report(doc: &SimulateJson, topo: &Topology) -> String {
    let mut html = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>hetsched simulate</title>",
    );
    html.push_str("<style>body{font-family:sans-serif;margin:2em;max-width:1000px}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th:first-child,td:first-child{text-align:left}</style></head><body>");
    let _ = write!(
        html,
        "<h1>hetsched simulate</h1><p>machine <b>{}</b> ({}), workload <b>{}</b>, {} seed(s) from {}; speedup = {}.</p>",
        esc(&doc.machine),
        esc(topo.description()),
        esc(&doc.workload),
        doc.seeds,
        doc.seed,
        esc(doc.speedup_basis)
    );
    html.push_str("<table><tr><th>policy</th><th>makespan s</th><th>speedup</th><th>min</th><th>max</th><th>fairness CV</th><th>migrations</th><th>policy ms</th></tr>");
    for r in &doc.results {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.0}</td><td>{:.2}</td></tr>",
            esc(&r.policy),
            r.makespan_s,
            r.speedup_vs_baseline,
            r.speedup_min,
            r.speedup_max,
            r.fairness,
            r.migrations,
            r.policy_cpu_s * 1e3
        );
    }
    html.push_str("</table>");
    for f in simulate_figures(doc) {
        html.push_str(&bar_figure_svg(&f));
    }
    if topo.num_cores() <= GANTT_MAX_CORES {
        html.push_str(&gantt_section(doc, topo));
    } else {
        let _ = write!(
            html,
            "<p>Gantt charts are drawn for machines of at most {GANTT_MAX_CORES} cores.</p>"
        );
    }
    html.push_str("</body></html>\n");
    html
}

/// The figures of a simulation: each policy's speedup over the baseline with its range over seeds,
/// and each app's mean completion time under every policy.
fn simulate_figures(doc: &SimulateJson) -> Vec<Figure> {
    let seeds = doc.seeds.max(1);
    let speedups = doc
        .results
        .iter()
        .map(|r| {
            BarGroup::new(
                &r.policy,
                vec![Bar {
                    series: r.policy.clone(),
                    mean: r.speedup_vs_baseline,
                    min: r.speedup_min,
                    max: r.speedup_max,
                    runs: seeds,
                    paper: None,
                }],
            )
        })
        .collect();
    let mut figures = vec![Figure::new(
        "Speedup",
        &format!(
            "speedup over {} ({})",
            doc.kernel_baseline, doc.speedup_basis
        ),
        "speedup over the baseline, x",
        speedups,
    )
    .with_reference(1.0)];
    // Completion times: one group per app, one bar per policy, whiskers over seeds.
    let apps: Vec<BarGroup> = doc
        .baseline
        .apps
        .iter()
        .enumerate()
        .map(|(ai, app)| {
            let bars = doc
                .results
                .iter()
                .enumerate()
                .map(|(pi, r)| {
                    let per_seed: Vec<f64> = doc.runs[pi * seeds..(pi + 1) * seeds]
                        .iter()
                        .map(|run| {
                            run.apps
                                .get(ai)
                                .and_then(|a| a.completion_s)
                                .unwrap_or(f64::NAN)
                        })
                        .collect();
                    Bar::of(&r.policy, &per_seed, None)
                })
                .collect();
            BarGroup::new(&app.name, bars)
        })
        .collect();
    if apps
        .iter()
        .flat_map(|g| &g.bars)
        .any(|b| b.mean.is_finite())
    {
        figures.push(Figure::new(
            "Completion times",
            "mean completion time of each app (whiskers: range over seeds)",
            "completion time, s",
            apps,
        ));
    }
    figures
}

/// Gantt charts of the first seed of every policy, on one time axis, rows labelled by core and
/// class, one colour per app with the legend above.
fn gantt_section(doc: &SimulateJson, topo: &Topology) -> String {
    let seeds = doc.seeds.max(1);
    let app_names: Vec<String> = doc.baseline.apps.iter().map(|a| a.name.clone()).collect();
    let colors = series_colors(&app_names);
    let core_labels: Vec<String> = (0..topo.num_cores())
        .map(|c| {
            let id = CoreId::from_index(c);
            format!("core {c} ({})", topo.class_of(id).name)
        })
        .collect();
    let runs: Vec<_> = (0..doc.results.len())
        .filter_map(|pi| doc.runs.get(pi * seeds))
        .filter(|r| r.gantt.is_some())
        .collect();
    let end_s = runs
        .iter()
        .flat_map(|r| r.gantt.iter().flatten())
        .map(|s| s.end_ns)
        .max()
        .unwrap_or(1) as f64
        / 1e9;
    let mut html = String::from("<h2>Gantt charts (first seed, one time axis)</h2><p>");
    for (name, c) in app_names.iter().zip(&colors) {
        let _ = write!(
            html,
            r#"<span style="display:inline-block;width:12px;height:12px;background:{};margin:0 4px 0 12px"></span>{}"#,
            css(*c),
            esc(name)
        );
    }
    html.push_str("</p>");
    for run in runs {
        let segments = run
            .gantt
            .iter()
            .flatten()
            .map(|s| {
                let app = app_names
                    .iter()
                    .position(|a| *a == s.app)
                    .unwrap_or(usize::MAX);
                (
                    s.core as usize,
                    app,
                    s.start_ns as f64 / 1e9,
                    s.end_ns as f64 / 1e9,
                )
            })
            .collect();
        html.push_str(&gantt_svg(
            &GanttRun {
                title: format!(
                    "{} (seed {}): which app ran on which core",
                    run.policy, run.seed
                ),
                segments,
                dropped: run.gantt_dropped,
                core_labels: &core_labels,
            },
            &colors,
            end_s,
        ));
    }
    html
}
