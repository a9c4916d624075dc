//! report.html: the simulation summary as a page with inline SVG charts (no scripts, no external
//! files): speedups, per-app completion times, and a core-by-time Gantt chart per policy in the
//! style of Pinter's Figures 2-3.

use crate::simulate::SimulateJson;
use hetsched_core::policies::STATIC_BEST;
use hetsched_core::Topology;
use std::fmt::Write;

/// Gantt charts are drawn for machines up to this many cores.
pub const GANTT_MAX_CORES: usize = 64;

/// Write `results.json` and `report.html` into `--out DIR` (created if missing), and say where.
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

/// A stable colour per name.
fn color(name: &str) -> String {
    let h = name
        .bytes()
        .fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
    format!("hsl({}, 60%, 55%)", h % 360)
}

fn bar_chart(title: &str, rows: &[(String, f64)], unit: &str, reference: Option<f64>) -> String {
    let w = 640.0;
    let label_w = 150.0;
    let row_h = 22.0;
    let h = rows.len() as f64 * row_h + 40.0;
    let max = rows
        .iter()
        .map(|r| r.1)
        .fold(reference.unwrap_or(0.0), f64::max)
        .max(1e-12);
    let scale = (w - label_w - 80.0) / max;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        svg,
        r#"<text x="0" y="14" font-weight="bold">{}</text>"#,
        esc(title)
    );
    for (i, (name, v)) in rows.iter().enumerate() {
        let y = 24.0 + i as f64 * row_h;
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text><rect x="{label_w}" y="{y}" width="{:.1}" height="{}" fill="{}"/><text x="{:.1}" y="{}">{v:.3} {unit}</text>"#,
            label_w - 6.0,
            y + 14.0,
            esc(name),
            v * scale,
            row_h - 6.0,
            color(name),
            label_w + v * scale + 4.0,
            y + 14.0
        );
    }
    if let Some(r) = reference {
        let x = label_w + r * scale;
        let _ = write!(
            svg,
            r#"<line x1="{x:.1}" y1="20" x2="{x:.1}" y2="{}" stroke="black" stroke-dasharray="4 3"/>"#,
            h - 10.0
        );
    }
    svg.push_str("</svg>");
    svg
}

fn gantt(doc: &SimulateJson, run_index: usize, cores: usize) -> String {
    let run = &doc.runs[run_index];
    let Some(segments) = &run.gantt else {
        return String::new();
    };
    let end_ns = segments.iter().map(|s| s.end_ns).max().unwrap_or(1).max(1) as f64;
    let w = 900.0;
    let left = 60.0;
    let row_h = 14.0;
    let h = cores as f64 * row_h + 50.0;
    let scale = (w - left - 10.0) / end_ns;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        svg,
        r#"<text x="0" y="12" font-weight="bold">{} (seed {}): which thread ran where</text>"#,
        esc(&run.policy),
        run.seed
    );
    for c in 0..cores {
        let y = 20.0 + c as f64 * row_h;
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="end">core {c}</text>"#,
            left - 4.0,
            y + 10.0
        );
    }
    for s in segments {
        let x = left + s.start_ns as f64 * scale;
        let width = ((s.end_ns - s.start_ns) as f64 * scale).max(0.3);
        let y = 20.0 + s.core as f64 * row_h;
        let _ = write!(
            svg,
            r#"<rect x="{x:.2}" y="{y}" width="{width:.2}" height="{}" fill="{}"><title>{} thread {} {:.3}-{:.3} s</title></rect>"#,
            row_h - 2.0,
            color(&s.app),
            esc(&s.app),
            s.thread,
            s.start_ns as f64 / 1e9,
            s.end_ns as f64 / 1e9
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{left}" y="{}">0 s</text><text x="{}" y="{}" text-anchor="end">{:.3} s</text>"#,
        h - 8.0,
        w - 10.0,
        h - 8.0,
        end_ns / 1e9
    );
    svg.push_str("</svg>");
    if run.gantt_dropped > 0 {
        let _ = write!(
            svg,
            "<p>{} later segments not drawn.</p>",
            run.gantt_dropped
        );
    }
    svg
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
    let speedups: Vec<(String, f64)> = doc
        .results
        .iter()
        .map(|r| (r.policy.clone(), r.speedup_vs_baseline))
        .collect();
    html.push_str(&bar_chart(
        "Speedup over linux-default (dashed: 1.0)",
        &speedups,
        "x",
        Some(1.0),
    ));
    for (i, app) in doc.baseline.apps.iter().enumerate() {
        let rows: Vec<(String, f64)> = doc
            .results
            .iter()
            .filter_map(|r| {
                r.apps
                    .get(i)
                    .and_then(|a| a.completion_s)
                    .map(|c| (r.policy.clone(), c))
            })
            .collect();
        if !rows.is_empty() {
            html.push_str(&bar_chart(
                &format!("{}: mean completion time", app.name),
                &rows,
                "s",
                None,
            ));
        }
    }
    if topo.num_cores() <= GANTT_MAX_CORES {
        html.push_str("<h2>Gantt charts (first seed)</h2><p>");
        for app in &doc.baseline.apps {
            let _ = write!(
                html,
                r#"<span style="display:inline-block;width:12px;height:12px;background:{};margin:0 4px 0 12px"></span>{}"#,
                color(&app.name),
                esc(&app.name)
            );
        }
        html.push_str("</p>");
        for (pi, _) in doc.results.iter().enumerate() {
            html.push_str(&gantt(doc, pi * doc.seeds, topo.num_cores()));
        }
    } else {
        let _ = write!(
            html,
            "<p>Gantt charts are drawn for machines of at most {GANTT_MAX_CORES} cores.</p>"
        );
    }
    html.push_str("</body></html>\n");
    html
}

/// Grouped bars of fractions per bin, one colour per series (the style of AMPS Figure 6).
pub fn histogram_svg(h: &hetsched_experiments::reproduce::Histogram) -> String {
    let (w, plot_h, left, top) = (720.0, 220.0, 50.0, 30.0);
    let bins = h.edges.len().saturating_sub(1).max(1);
    let max = h
        .series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let bin_w = (w - left - 10.0) / bins as f64;
    let bar_w = bin_w / (h.series.len().max(1) as f64 + 0.5);
    let height = top + plot_h + 60.0 + 18.0 * h.series.len() as f64;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="11"><text x="0" y="14" font-weight="bold">{}</text>"#,
        esc(&h.title)
    );
    let base = top + plot_h;
    let _ = write!(
        svg,
        r#"<line x1="{left}" y1="{base}" x2="{}" y2="{base}" stroke="black"/><text x="4" y="{}">{:.0}%</text><text x="4" y="{base}">0</text>"#,
        w - 10.0,
        top + 10.0,
        max * 100.0
    );
    for (si, (name, v)) in h.series.iter().enumerate() {
        for (b, &f) in v.iter().enumerate() {
            let bh = f / max * plot_h;
            let x = left + b as f64 * bin_w + si as f64 * bar_w;
            let _ = write!(
                svg,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{}"><title>{}: {:.0}%</title></rect>"#,
                base - bh,
                bar_w - 1.0,
                color(name),
                esc(name),
                f * 100.0
            );
        }
        let ly = base + 44.0 + 18.0 * si as f64;
        let _ = write!(
            svg,
            r#"<rect x="{left}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{}" y="{ly:.1}">{}</text>"#,
            ly - 10.0,
            color(name),
            left + 18.0,
            esc(name)
        );
    }
    for (b, e) in h.edges.iter().enumerate() {
        if b % 2 == 0 {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{e:.1}</text>"#,
                left + b as f64 * bin_w,
                base + 14.0
            );
        }
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text></svg>"#,
        left + (w - left) / 2.0,
        base + 28.0,
        esc(&h.x_label)
    );
    svg
}

/// The policy matrix as a heat map: scenarios down, policies across; each cell coloured by the
/// mean speedup over linux-default (red below 1, white at 1, green above, saturating at ±30%) and
/// labelled with it; the spread over seeds in the cell's tooltip.
pub fn heat_map_svg(m: &hetsched_experiments::reproduce::matrix::Matrix) -> String {
    let (left, top, cw, ch) = (230.0, 90.0, 86.0, 26.0);
    // The policies, then static-best (grey where it is not computable).
    let columns: Vec<&str> = m
        .policies
        .iter()
        .map(String::as_str)
        .chain([STATIC_BEST])
        .collect();
    let w = left + cw * columns.len() as f64 + 10.0;
    let h = top + ch * m.scenarios.len() as f64 + 30.0;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11"><text x="0" y="14" font-weight="bold">Mean speedup over linux-default (red: slower, green: faster)</text>"#
    );
    for (j, p) in columns.iter().enumerate() {
        let x = left + cw * (j as f64 + 0.5);
        let _ = write!(
            svg,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="start" transform="rotate(-35 {x:.1} {:.1})">{}</text>"#,
            top - 8.0,
            top - 8.0,
            esc(p)
        );
    }
    for (i, sc) in m.scenarios.iter().enumerate() {
        let y = top + ch * i as f64;
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + ch * 0.65,
            esc(sc)
        );
        let cells = m.cells[i]
            .iter()
            .map(Some)
            .chain([m.static_best[i].as_ref()]);
        for (j, c) in cells.enumerate() {
            let x = left + cw * j as f64;
            let Some(c) = c else {
                let _ = write!(
                    svg,
                    r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="rgb(225,225,225)" stroke="white"><title>static-best on {}: {}</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="gray">n/a</text>"#,
                    cw - 1.0,
                    ch - 1.0,
                    esc(sc),
                    esc(&m.static_best_note[i]),
                    x + cw / 2.0,
                    y + ch * 0.65,
                );
                continue;
            };
            let t = ((c.mean - 1.0) / 0.3).clamp(-1.0, 1.0);
            let (r, g, b) = if t < 0.0 {
                (255.0, 255.0 * (1.0 + t), 255.0 * (1.0 + t))
            } else {
                (255.0 * (1.0 - t), 255.0, 255.0 * (1.0 - t))
            };
            let _ = write!(
                svg,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="rgb({r:.0},{g:.0},{b:.0})" stroke="white"><title>{} on {}: {:.3} ({:.3}-{:.3})</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle">{:.3}</text>"#,
                cw - 1.0,
                ch - 1.0,
                esc(columns[j]),
                esc(sc),
                c.mean,
                c.min,
                c.max,
                x + cw / 2.0,
                y + ch * 0.65,
                c.mean
            );
        }
    }
    svg.push_str("</svg>");
    svg
}
