//! `hetsched reproduce`: the papers' experiments on the simulator, the paper's figure beside ours.

use crate::bad_input;
use crate::figures::{bar_figure_svg, heat_map_svg, histogram_svg};
use crate::provenance::Provenance;
use crate::report::{esc, write_out};
use crate::simulate::progress_bar;
use clap::Args;
use hetsched_core::policies::STATIC_BEST;
use hetsched_experiments::reproduce::{experiments, run_experiment, Experiment, Row};
use serde::Serialize;
use std::fmt::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// An experiment name, or `all` (the default). `hetsched reproduce --list` names them.
    pub experiment: Option<String>,
    /// List the experiments and exit.
    #[arg(long)]
    pub list: bool,
    /// Print one JSON document on stdout: the experiments and what produced them (with `--list`,
    /// the experiments' names).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV on stdout: a header, then one row per experiment row (docs/json.md).
    #[arg(long)]
    pub csv: bool,
    /// Write report.html (tables and the paper-style figures) and results.json here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `reproduce --json`: the experiments, with what produced them.
#[derive(Serialize)]
struct ReproduceJson<'a> {
    #[serde(flatten)]
    provenance: Provenance,
    experiments: &'a [Experiment],
}

/// One row of `reproduce --csv`.
#[derive(Serialize)]
struct CsvRow<'a> {
    experiment: &'a str,
    paper: &'a str,
    kernel_baseline: &'a str,
    label: &'a str,
    paper_value: Option<f64>,
    our_value: f64,
    unit: &'a str,
    /// Empty for an informational row.
    holds: Option<bool>,
    note: &'a str,
}

/// Every row of every experiment as CSV.
fn write_csv(done: &[Experiment], out: impl std::io::Write) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    for e in done {
        for r in &e.rows {
            w.serialize(CsvRow {
                experiment: &e.experiment,
                paper: &e.paper,
                kernel_baseline: &e.baseline,
                label: &r.label,
                paper_value: r.paper_value,
                our_value: r.our_value,
                unit: &r.unit,
                holds: r.holds,
                note: &r.note,
            })?;
        }
    }
    w.flush()?;
    Ok(())
}

/// Run one experiment by name, or `all`, each with a progress bar on stderr unless `quiet`.
pub fn run_experiments(which: &str, quiet: bool) -> anyhow::Result<Vec<Experiment>> {
    let names: Vec<&str> = if which == "all" {
        experiments().map(|(n, _)| *n).collect()
    } else if experiments().any(|(n, _)| *n == which) {
        vec![which]
    } else {
        return Err(bad_input(format!(
            "reproduce {which:?}: no such experiment (experiments: all, {})",
            experiments()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let mut done = Vec::new();
    for name in names {
        let bar = if quiet {
            indicatif::ProgressBar::hidden()
        } else {
            eprintln!("reproducing {name} ...");
            progress_bar(0)
        };
        let e = run_experiment(name, &|_, total, label| {
            bar.set_length(total as u64);
            bar.set_message(label.to_string());
            bar.inc(1);
        })
        .ok_or_else(|| anyhow::anyhow!("experiment {name} is registered but does not run"))?;
        bar.finish_and_clear();
        done.push(e);
    }
    Ok(done)
}

/// The `reproduce --json` document of finished experiments.
pub fn reproduce_json(done: &[Experiment]) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(&ReproduceJson {
        provenance: Provenance::new([]),
        experiments: done,
    })?)
}

/// One line of `reproduce --list --json`.
#[derive(Serialize)]
struct ExperimentName {
    name: &'static str,
    reproduces: &'static str,
}

pub fn run_reproduce(args: &ReproduceArgs) -> anyhow::Result<()> {
    if args.list {
        if args.json {
            let list: Vec<ExperimentName> = experiments()
                .map(|&(name, reproduces)| ExperimentName { name, reproduces })
                .collect();
            println!("{}", serde_json::to_string_pretty(&list)?);
            return Ok(());
        }
        for (name, what) in experiments() {
            println!("{name:<20} {what}");
        }
        return Ok(());
    }
    let which = args.experiment.as_deref().unwrap_or("all");
    // A directory that cannot be written is found before the experiments run (a name that is
    // no experiment is reported first, with the directory left as it is).
    if let (Some(dir), true) = (
        &args.out,
        which == "all" || experiments().any(|(n, _)| *n == which),
    ) {
        crate::report::check_out(dir)?;
    }
    let done = run_experiments(args.experiment.as_deref().unwrap_or("all"), false)?;
    let doc = ReproduceJson {
        provenance: Provenance::new([]),
        experiments: &done,
    };
    if let Some(dir) = &args.out {
        write_out(dir, &doc, &report(&done))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else if args.csv {
        write_csv(&done, std::io::stdout().lock())?;
    } else {
        for e in &done {
            print!("{}", table(e));
        }
    }
    Ok(())
}

fn fmt_value(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.abs() >= 1000.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.3}"),
    }
}

/// A matrix as a grid: scenarios down, policies across, mean speedup in each cell.
fn matrix_grid(m: &hetsched_experiments::reproduce::matrix::Matrix) -> String {
    let w = m.scenarios.iter().map(String::len).max().unwrap_or(10);
    let cw = m.policies.iter().map(String::len).max().unwrap_or(6).max(6);
    let mut out = format!("  {:<w$}", "scenario \\ policy");
    for p in &m.policies {
        let _ = write!(out, " {p:>cw$}");
    }
    let _ = write!(out, " {STATIC_BEST:>cw$}");
    out.push('\n');
    for ((sc, row), best) in m.scenarios.iter().zip(&m.cells).zip(&m.static_best) {
        let _ = write!(out, "  {sc:<w$}");
        for c in row {
            let _ = write!(out, " {:>cw$.3}", c.mean);
        }
        match best {
            Some(b) => {
                let _ = write!(out, " {:>cw$.3}", b.mean);
            }
            None => {
                let _ = write!(out, " {:>cw$}", "-");
            }
        }
        out.push('\n');
    }
    out
}

/// The human table of one experiment.
pub fn table(e: &Experiment) -> String {
    let mut out = format!(
        "{} · {} · kernel {} · {}\n  {}\n",
        e.experiment,
        e.paper,
        e.baseline,
        if e.holds { "holds" } else { "DOES NOT HOLD" },
        e.title
    );
    // A matrix shows its grid; below it only the rows that check something (every cell is in the
    // grid, and in the JSON).
    let rows: Vec<&Row> = match &e.matrix {
        Some(m) => {
            out.push_str(&matrix_grid(m));
            out.push('\n');
            e.rows.iter().filter(|r| r.holds.is_some()).collect()
        }
        None => e.rows.iter().collect(),
    };
    if rows.is_empty() {
        return out;
    }
    let w = rows
        .iter()
        .map(|r| r.label.len())
        .max()
        .unwrap_or(10)
        .max(10);
    let _ = writeln!(
        out,
        "  {:<w$} {:>10} {:>10} {:<10} {:<6} note",
        "row", "paper", "ours", "unit", "holds"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<w$} {:>10} {:>10} {:<10} {:<6} {}",
            r.label,
            fmt_value(r.paper_value),
            fmt_value(Some(r.our_value)),
            r.unit,
            match r.holds {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "-",
            },
            r.note
        );
    }
    out.push('\n');
    out
}

fn report(experiments: &[Experiment]) -> String {
    let mut html = String::from(
        "<!doctype html><meta charset=\"utf-8\"><title>hetsched reproduce</title>\
         <style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}\
         td,th{padding:2px 8px;text-align:left}.no{color:#b00;font-weight:bold}</style>\
         <h1>Reproduced experiments</h1>",
    );
    for e in experiments {
        let _ = write!(
            html,
            "<h2>{} <small>({}; kernel {})</small></h2><p>{} — <b class=\"{}\">{}</b></p><table><tr><th>row</th><th>paper</th><th>ours</th><th>unit</th><th>holds</th><th>note</th></tr>",
            esc(&e.experiment),
            esc(&e.paper),
            esc(&e.baseline),
            esc(&e.title),
            if e.holds { "" } else { "no" },
            if e.holds { "holds" } else { "does not hold" }
        );
        if let Some(m) = &e.matrix {
            // The heat map first, then the table of every cell.
            if let Some(at) = html.rfind("<table>") {
                html.truncate(at);
            }
            html.push_str(&heat_map_svg(m));
            html.push_str("<table><tr><th>row</th><th>paper</th><th>ours</th><th>unit</th><th>holds</th><th>note</th></tr>");
        }
        for r in &e.rows {
            let _ = write!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
                esc(&r.label),
                fmt_value(r.paper_value),
                fmt_value(Some(r.our_value)),
                esc(&r.unit),
                if r.holds == Some(false) { "no" } else { "" },
                match r.holds {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                },
                esc(&r.note)
            );
        }
        html.push_str("</table>");
        for f in &e.figures {
            html.push_str(&bar_figure_svg(f));
        }
        for h in &e.histograms {
            html.push_str(&histogram_svg(h));
        }
    }
    html
}
