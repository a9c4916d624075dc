//! `hetsched simulate` and `hetsched workloads` as a user runs them.

use serde_json::Value;
mod common;

use common::hetsched;

#[test]
fn no_arguments_runs_the_default_scenario_and_prints_a_table() {
    let (code, out, err) = hetsched(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("machine amps-smp · workload mixed-default"),
        "{out}"
    );
    assert!(
        out.contains("linux-default") && out.contains("makespan_s") && out.contains("migrations"),
        "{out}"
    );
}

#[test]
fn json_has_the_contract_fields() {
    let (code, out, err) = hetsched(&["simulate", "--json", "--seeds", "2"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("stdout is one JSON document");
    for k in [
        "machine",
        "workload",
        "seed",
        "baseline",
        "results",
        "engine",
        "schema_version",
        "hetsched_version",
        "command",
        "inputs",
        "kernel_baseline",
        "quantum_ms",
    ] {
        assert!(!v[k].is_null(), "missing {k}");
    }
    // The default scenario's inputs are presets: named, not hashed.
    assert_eq!(v["inputs"][0]["name"], "amps-smp");
    assert!(v["inputs"][0]["sha256"].is_null());
    let r = &v["results"][0];
    for k in [
        "policy",
        "makespan_s",
        "speedup_vs_baseline",
        "apps",
        "migrations",
        "fairness",
        "llc_misses",
        "policy_cpu_s",
    ] {
        assert!(!r[k].is_null(), "missing results[0].{k}");
    }
    assert_eq!(r["speedup_vs_baseline"], 1.0, "the baseline against itself");
    for k in ["name", "completion_s", "completions"] {
        assert!(!r["apps"][0][k].is_null(), "missing apps[0].{k}");
    }
    for k in ["events", "wall_s", "events_per_s"] {
        assert!(v["engine"][k].as_f64().unwrap() > 0.0, "engine.{k}");
    }
    let policies = v["results"].as_array().unwrap().len();
    assert!(policies >= 2, "every implemented policy runs by default");
    assert_eq!(v["runs"].as_array().unwrap().len(), 2 * policies);
}

#[test]
fn every_preset_pair_simulates() {
    let (_, machines, _) = hetsched(&["machines", "--json"]);
    let (_, workloads, _) = hetsched(&["workloads", "--json"]);
    let names = |s: &str| -> Vec<String> {
        serde_json::from_str::<Value>(s)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap().to_string())
            .collect()
    };
    let (machines, workloads) = (names(&machines), names(&workloads));
    assert!(workloads.len() >= 20);
    for m in &machines {
        // On the scale presets (512 and 1,024 cores) every workload runs under the kernel alone:
        // the placement policies' cost there is the benchmarks' business (an idle core's pull
        // scans the waiting threads, which a debug-profile test run pays for minutes per pair).
        let policy = if m.starts_with("scale-") {
            "linux-default"
        } else {
            "all"
        };
        for w in &workloads {
            let mut args = vec![
                "simulate",
                "--machine",
                m,
                "--workload",
                w,
                "--duration",
                "0.05",
                "--json",
            ];
            if policy != "all" {
                args.extend(["--policy", policy]);
            }
            let (code, out, err) = hetsched(&args);
            assert_eq!(code, 0, "{m} {w}: {err}");
            let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{m} {w}: {e}"));
            assert_eq!(v["machine"], m.as_str());
        }
    }
}

#[test]
fn out_writes_a_report_with_charts() {
    let dir = std::env::temp_dir().join(format!("hetsched-report-{}", std::process::id()));
    let (code, _, err) = hetsched(&["simulate", "--out", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("<svg") && html.contains("core 7") && html.contains("mcf-like"),
        "Gantt and bars"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["machine"], "amps-smp");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_input_exits_2_naming_it() {
    for (args, needle) in [
        (
            vec!["simulate", "--policy", "nope"],
            "--policy \"nope\": unknown policy",
        ),
        (vec!["simulate", "--machine", "nope"], "--machine \"nope\""),
        (
            vec!["simulate", "--workload", "nope"],
            "--workload \"nope\"",
        ),
        (vec!["simulate", "--seeds", "0"], "--seeds 0"),
        (vec!["simulate", "--duration", "-1"], "--duration -1"),
        (vec!["simulate", "--quantum-ms", "0"], "--quantum-ms 0"),
        (
            vec!["simulate", "--policy", "static-best"],
            "--policy static-best: static-best binds single-threaded applications to partitions; \"omp-like\" has 8 threads",
        ),
    ] {
        let (code, out, err) = hetsched(&args);
        assert_eq!(code, 2, "{args:?}");
        assert!(out.is_empty());
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let dir = std::env::temp_dir().join(format!("hetsched-w-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("w.toml");
    std::fs::write(&f, "name = \"w\"\n[[apps]]\nname = \"a\"\n[[apps.threads]]\n[[apps.threads.phases]]\ninstructions = -5\ncpi = 1.0\n").unwrap();
    let (code, _, err) = hetsched(&["simulate", "--workload", f.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("w.toml: apps[0].threads[0].phases[0].instructions: must be positive and at most 1e15, got -5"),
        "{err}"
    );
    // Eight different single-threaded apps on four partitions: 8!/(2!)^4 = 2520 assignments.
    let mut eight = String::from("name = \"eight\"\n");
    for i in 0..8 {
        eight += &format!("[[apps]]\nname = \"a{i}\"\n[[apps.threads]]\n[[apps.threads.phases]]\ninstructions = 1e9\ncpi = 1.0\n");
    }
    let f = dir.join("eight.toml");
    std::fs::write(&f, eight).unwrap();
    let (code, _, err) = hetsched(&[
        "simulate",
        "--policy",
        "static-best",
        "--machine",
        "hass-amd-4-4-2-2",
        "--workload",
        f.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("2520 static assignments of this workload to the 4 partitions of this machine exceed the limit of 256"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn static_best_is_the_best_static_assignment_and_hass_finds_it_on_hh() {
    let (code, out, err) = hetsched(&[
        "simulate",
        "--machine",
        "hass-amd-2-2",
        "--workload",
        "hass-hh-like",
        "--policy",
        "hass,static-best",
        "--duration",
        "200",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let results = v["results"].as_array().unwrap();
    let speedup = |name: &str| {
        results
            .iter()
            .find(|r| r["policy"] == name)
            .unwrap_or_else(|| panic!("no {name}"))["speedup_vs_baseline"]
            .as_f64()
            .unwrap()
    };
    // The oracle never loses to the baseline's (random, static) placement; HASS matches it on HH
    // (HASS section 5: within 0.5%).
    assert!(speedup("static-best") >= 1.0);
    assert!((speedup("hass") - speedup("static-best")).abs() < 0.005);
}

#[test]
fn the_kernel_baseline_is_named_chosen_by_flag_and_checked() {
    let (code, out, err) = hetsched(&["simulate", "--json", "--policy", "amps"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kernel_baseline"], "linux-6");
    let (code, out, err) = hetsched(&["simulate", "--baseline", "linux-cfs", "--policy", "amps"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("kernel linux-cfs"), "{out}");
    let (code, _, err) = hetsched(&["simulate", "--baseline", "nope"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("linux-6") && err.contains("linux-cfs"),
        "{err}"
    );
}

/// Inputs that would hang a run, or are typos, are refused before anything runs, naming the
/// field; an empty `--policy` is an error, not "every policy".
#[test]
fn unbounded_or_absurd_workloads_and_an_empty_policy_are_refused() {
    let dir = std::env::temp_dir().join(format!("hs-sim-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = "name = \"w\"\n[[apps]]\nname = \"a\"\n[[apps.threads]]\ncount = COUNT\nrepeat = REPEAT\nphases = [ { instructions = INSTR, cpi = 1.0 } ]\n";
    let cases = [
        (
            "1",
            "4000000000",
            "1e6",
            "apps[0].threads: its threads would run 4.000e9 phases",
        ),
        (
            "1",
            "1",
            "1e300",
            "apps[0].threads[0].phases[0].instructions",
        ),
        ("1.5", "1", "1e6", "line 5: count: a count"),
        ("1", "4e9", "1e6", "line 6: repeat:"),
    ];
    for (i, (count, repeat, instr, want)) in cases.iter().enumerate() {
        let path = dir.join(format!("w{i}.toml"));
        let text = base
            .replace("COUNT", count)
            .replace("REPEAT", repeat)
            .replace("INSTR", instr);
        std::fs::write(&path, text).unwrap();
        let (code, _, err) = hetsched(&["simulate", "--workload", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(want) && err.lines().count() == 1, "{err}");
    }
    let (code, _, err) = hetsched(&["simulate", "--policy", ""]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("names no policy"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--csv`: a header, then one row per policy, app and seed, each with the run's speedup.
#[test]
fn csv_has_a_row_per_policy_app_and_seed() {
    let (code, out, err) = hetsched(&["simulate", "--csv", "--seeds", "2", "--policy", "amps"]);
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for k in [
        "policy",
        "seed",
        "app",
        "speedup_vs_baseline",
        "completion_s",
        "kernel_baseline",
    ] {
        assert!(header.contains(&k), "{header:?}");
    }
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // linux-default and amps, 2 seeds, the default scenario's 3 apps.
    assert_eq!(rows.len(), 2 * 2 * 3, "{out}");
    let col = |k: &str| header.iter().position(|h| *h == k).unwrap();
    for r in &rows {
        assert_eq!(r.len(), header.len());
        if r[col("policy")] == "linux-default" {
            assert_eq!(r[col("speedup_vs_baseline")], "1.0");
        }
    }
}

/// A machine of one fast and seven slow cores, and six batch programs on it, that run past a
/// 2-second duration.
const ONE_FAST_SEVEN_SLOW: &str = "name = \"m01\"\nmemory_latency_ns = 85.0\n[[classes]]\nname = \"fast\"\nfreq_ghz = 3.5\n[[classes]]\nname = \"slow\"\nfreq_ghz = 1.0\n[[cores]]\ncpus = \"0\"\nclass = \"fast\"\n[[cores]]\ncpus = \"1-7\"\nclass = \"slow\"\n[[caches]]\nlevel = 2\nsize = \"1 MiB\"\nassoc = 8\ncpus = \"0-7\"\nshared_by = 1\n[[caches]]\nlevel = 3\nsize = \"8 MiB\"\nassoc = 16\ncpus = \"0-7\"\n";
const BATCH_MIX: &str = "name = \"w01\"\n[[apps]]\nname = \"cpu-long\"\n[[apps.threads]]\n[[apps.threads.phases]]\ninstructions = 8e9\ncpi = 0.7\nmpki = { max = 1.0, min = 0.05, ws = \"512 KiB\" }\n[[apps]]\nname = \"cpu-mid\"\ncopies = 2\n[[apps.threads]]\n[[apps.threads.phases]]\ninstructions = 4e9\ncpi = 0.8\nmpki = { max = 2.0, min = 0.1, ws = \"1 MiB\" }\nfp = 0.3\n[[apps]]\nname = \"mem-long\"\n[[apps.threads]]\n[[apps.threads.phases]]\ninstructions = 3e9\ncpi = 1.0\nmpki = { max = 40, min = 8, ws = \"512 MiB\" }\nalloc = \"256 MiB\"\n[[apps]]\nname = \"mem-mid\"\ncopies = 2\n[[apps.threads]]\n[[apps.threads.phases]]\ninstructions = 1.5e9\ncpi = 1.0\nmpki = { max = 25, min = 2, ws = \"64 MiB\" }\nalloc = \"64 MiB\"\n";

#[test]
fn a_run_cut_off_by_the_duration_is_identical_only_when_its_speedup_is_one() {
    let dir = std::env::temp_dir().join(format!("hetsched-cut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (m, w) = (dir.join("m.toml"), dir.join("w.toml"));
    std::fs::write(&m, ONE_FAST_SEVEN_SLOW).unwrap();
    std::fs::write(&w, BATCH_MIX).unwrap();
    let (code, out, err) = hetsched(&[
        "simulate",
        "--machine",
        m.to_str().unwrap(),
        "--workload",
        w.to_str().unwrap(),
        "--duration",
        "2",
        "--seeds",
        "2",
        "--policy",
        "amps,hetsched",
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("identical")).collect();
    for l in &lines {
        assert!(l.trim_start().contains(": 1.000x, identical"), "{out}");
    }
    assert!(!out.contains("sooner") && !out.contains("later"), "{out}");
    assert!(
        out.contains("amps: 0.994x; cut off by the duration (the speedup compares the work done)"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn counts_past_their_limit_exit_2_before_anything_runs() {
    for (args, want) in [
        (
            vec!["simulate", "--seeds", "100000000", "--policy", "linux-default"],
            "hetsched: --seeds 100000000: at most 10000",
        ),
        (
            vec![
                "simulate",
                "--seed",
                "18446744073709551615",
                "--seeds",
                "2",
                "--policy",
                "linux-default",
            ],
            "hetsched: --seed 18446744073709551615 --seeds 2: the last seed would be past 18446744073709551615",
        ),
        (
            vec!["validate", "--seeds", "100000000"],
            "hetsched: --seeds 100000000: at most 10000",
        ),
        (
            vec!["validate", "--runs", "100000000"],
            "hetsched: --runs 100000000: at most 1000",
        ),
    ] {
        let (code, out, err) = hetsched(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty());
        assert_eq!(err.trim(), want, "{args:?}");
    }
}

#[test]
fn an_unwritable_out_directory_is_found_before_the_runs() {
    let start = std::time::Instant::now();
    let (code, out, err) = hetsched(&["simulate", "--out", "/proc/nope", "--seeds", "50"]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty());
    assert!(err.contains("--out /proc/nope:"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // Every policy on fifty seeds of the default scenario takes minutes; the refusal comes first.
    assert!(start.elapsed().as_secs_f64() < 5.0);
}

/// `--out` naming a file that exists is bad input (exit 2, one line), found before the runs, and
/// the file is left as it was.
#[test]
fn an_out_path_that_is_a_file_is_bad_input_and_left_alone() {
    let file = std::env::temp_dir().join(format!("hs-out-file-{}", std::process::id()));
    std::fs::write(&file, "mine").unwrap();
    let path = file.to_str().unwrap();
    let (code, out, err) = hetsched(&["simulate", "--out", path, "--seeds", "50"]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty());
    assert_eq!(
        err.trim(),
        format!("hetsched: --out {path}: exists and is not a directory")
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    let _ = std::fs::remove_file(&file);
}

/// A reader that goes away early (`hetsched simulate --json | head -1`) ends the command quietly,
/// by SIGPIPE as `cat` ends, in JSON and CSV (forms long enough to outlast the pipe's buffer): no
/// panic, no backtrace, no error line (before, JSON's print panicked with "failed printing to
/// stdout: Broken pipe" and CSV ended with that error).
#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    for form in ["--json", "--csv"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hetsched"))
            .args(["simulate", "--seeds", "40", form])
            .env("RUST_BACKTRACE", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read one byte, then close the pipe while the command still has much to print.
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 1];
        out.read_exact(&mut first).unwrap();
        drop(out);
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(libc::SIGPIPE),
            "{form:?}: {status:?}\n{err}"
        );
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{form:?}: {err}"
        );
    }
}
