//! `hetsched sweep` as a user runs it: a table with provenance per row, an interrupted sweep that
//! resumes to the same table, refusals that leave the directory as it was.

mod common;

use common::hetsched;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// 12 cells: a preset and 2 generated shapes, 2 workloads, 2 seeds.
const SWEEP: &str = r#"
machines = ["amps-smp", { generate = "two-class", fast = 2, slow = [2, 4], speed_ratio = 2.0 }]
workloads = ["mixed-default", "omp-equake-like"]
policies = ["amps", "hass"]
seeds = [3, 4]
"#;
const CELLS: usize = 12;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hs-sweep-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn sweep_file(dir: &Path, text: &str) -> String {
    let path = dir.join("sweep.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// Run the sweep into `out`; its table.
fn run(file: &str, out: &Path, extra: &[&str]) -> String {
    let mut args = vec!["sweep", file, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = hetsched(&args);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), out.join("results.csv").to_str().unwrap());
    std::fs::read_to_string(out.join("results.csv")).unwrap()
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).unwrap().lines().count()
}

#[test]
fn a_sweep_gives_one_row_per_cell_policy_and_app_with_provenance() {
    let dir = scratch("table");
    let file = sweep_file(&dir, SWEEP);
    let table = run(&file, &dir.join("out"), &[]);
    let mut rows = csv::Reader::from_reader(table.as_bytes());
    let header: Vec<String> = rows.headers().unwrap().iter().map(String::from).collect();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let records: Vec<csv::StringRecord> = rows.records().map(Result::unwrap).collect();
    let cells: std::collections::BTreeSet<&str> = records
        .iter()
        .map(|r| r.get(col("cell_id")).unwrap())
        .collect();
    assert_eq!(cells.len(), CELLS);
    // mixed-default has 3 apps, omp-equake-like 1: (3 + 1) apps x 3 policies x 2 seeds x 3 machines.
    assert_eq!(records.len(), (3 + 1) * 3 * 2 * 3);
    let sweep_sha = records[0].get(col("sweep_sha256")).unwrap();
    assert_eq!(sweep_sha.len(), 64);
    for r in &records {
        assert_eq!(r.get(col("sweep_sha256")).unwrap(), sweep_sha);
        assert_eq!(
            r.get(col("hetsched_version")).unwrap(),
            env!("CARGO_PKG_VERSION")
        );
        assert!(["3", "4"].contains(&r.get(col("seed")).unwrap()));
    }
    let machines: std::collections::BTreeSet<&str> = records
        .iter()
        .map(|r| r.get(col("machine")).unwrap())
        .collect();
    assert_eq!(
        machines.into_iter().collect::<Vec<_>>(),
        [
            "amps-smp",
            "two-class-2f2s-x2-2ghz-1n",
            "two-class-2f4s-x2-2ghz-1n"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stopped_sweep_resumes_to_the_same_table() {
    let dir = scratch("resume");
    let file = sweep_file(&dir, SWEEP);
    let whole = run(&file, &dir.join("whole"), &["--threads", "1"]);
    let out = dir.join("stopped");
    run(&file, &out, &["--stop-after", "5"]);
    assert_eq!(lines(&out.join("cells.jsonl")), 5);
    let resumed = run(&file, &out, &[]);
    assert_eq!(resumed, whole);
    // The 5 finished cells were not run again.
    assert_eq!(lines(&out.join("cells.jsonl")), CELLS);
    // Run again with nothing to do: the same table.
    assert_eq!(run(&file, &out, &[]), whole);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--json` says what a run did: cells run now and before, finished or not, where the table is;
/// stdout is the document alone.
#[test]
fn json_says_what_a_run_of_the_sweep_did() {
    let dir = scratch("json");
    let file = sweep_file(&dir, SWEEP);
    let out = dir.join("out");
    let doc = |extra: &[&str]| {
        let mut args = vec![
            "sweep",
            file.as_str(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = hetsched(&args);
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str::<serde_json::Value>(&stdout).expect("stdout is one JSON document")
    };
    let first = doc(&["--stop-after", "5"]);
    assert_eq!(first["cells"], CELLS);
    assert_eq!(
        (first["run_now"].as_u64(), first["done_before"].as_u64()),
        (Some(5), Some(0))
    );
    assert_eq!(first["complete"], false);
    let second = doc(&[]);
    assert_eq!(second["run_now"].as_u64(), Some(CELLS as u64 - 5));
    assert_eq!(second["done_before"].as_u64(), Some(5));
    assert_eq!(
        (second["finished"].as_u64(), second["complete"].as_bool()),
        (Some(CELLS as u64), Some(true))
    );
    assert_eq!(second["table"].as_str(), out.join("results.csv").to_str());
    assert!(second["schema_version"].is_u64() && second["command"].is_array());
    assert!(lines(&out.join("results.csv")) > CELLS);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_killed_sweep_resumes_to_the_same_table() {
    let dir = scratch("kill");
    let file = sweep_file(&dir, SWEEP);
    let whole = run(&file, &dir.join("whole"), &[]);
    let out = dir.join("killed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hetsched"))
        .args([
            "sweep",
            &file,
            "--out",
            out.to_str().unwrap(),
            "--threads",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once a cell has finished (or, on a fast machine, whenever it is).
    let cells = out.join("cells.jsonl");
    for _ in 0..2000 {
        if std::fs::metadata(&cells).is_ok_and(|m| m.len() > 0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(lines(&cells) <= CELLS);
    assert_eq!(run(&file, &out, &[]), whole);
    assert_eq!(lines(&cells), CELLS);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn another_sweeps_directory_is_refused_and_left_alone() {
    let dir = scratch("other");
    let file = sweep_file(&dir, SWEEP);
    let out = dir.join("out");
    let table = run(&file, &out, &["--stop-after", "1"]);
    let other = dir.join("other.toml");
    std::fs::write(&other, SWEEP.replace("seeds = [3, 4]", "seeds = 1")).unwrap();
    let (code, stdout, stderr) = hetsched(&[
        "sweep",
        other.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("holds the results of another sweep file"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("results.csv")).unwrap(),
        table
    );
    assert_eq!(
        std::fs::read_to_string(out.join("sweep.toml")).unwrap(),
        SWEEP
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sweep_file_errors_name_the_key_and_write_nothing() {
    let dir = scratch("errors");
    let cases = [
        (
            SWEEP.replace("fast = 2", "fats = 2"),
            "machines[1]: unknown field `fats`",
        ),
        (
            SWEEP.replace("\"hass\"", "\"has\""),
            "policies[1]: \"has\": unknown policy",
        ),
        (
            SWEEP.replace("speed_ratio = 2.0", "speed_ratio = [2.0, \"x\"]"),
            "machines[1].speed_ratio: \"x\" is not a number",
        ),
        (
            SWEEP.replace("\"omp-equake-like\"", "\"nope.toml\""),
            "workloads[1]: ",
        ),
        (
            SWEEP.replace("seeds = [3, 4]", "seeds = 0"),
            "seeds: 0: need at least one seed",
        ),
        (
            format!("{SWEEP}\n[params]\nnuma = \"sometimes\"\n"),
            "params.numa: ",
        ),
        (
            format!("{SWEEP}\n[params]\ninterval_ms = 0.5\n"),
            "params: --interval 0.5: must be between 1 and 3600000 ms",
        ),
        (format!("{SWEEP}\ncolour = 1\n"), "unknown field `colour`"),
    ];
    for (text, expected) in cases {
        let file = sweep_file(&dir, &text);
        let out = dir.join("out");
        let (code, stdout, stderr) = hetsched(&["sweep", &file, "--out", out.to_str().unwrap()]);
        assert_eq!(code, 2, "{text}\n{stderr}");
        assert!(stdout.is_empty());
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("hetsched: {file}: ")),
            "{stderr}"
        );
        assert!(stderr.contains(expected), "{expected:?} not in {stderr}");
        assert!(!out.exists(), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
