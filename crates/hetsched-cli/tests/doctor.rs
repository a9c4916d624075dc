//! `hetsched doctor` on this machine: every check present, each missing one saying what it
//! disables, and the machine's facts that other commands also read agreeing with them.

use serde_json::Value;
use std::process::Command;

const HETSCHED: &str = env!("CARGO_BIN_EXE_hetsched");

#[test]
fn doctor_names_every_check_and_what_each_missing_one_disables() {
    let out = Command::new(HETSCHED)
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let checks: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    for name in [
        "CAP_SYS_NICE",
        "process events connector",
        "software counters",
        "hardware counters",
        "SCHED_FIFO threads",
        "move_pages",
        "open files",
        "asymmetric machine",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    for c in &checks {
        let ok = c["ok"].as_bool().unwrap();
        let without = c["without"].as_str().unwrap();
        assert_eq!(ok, without.is_empty(), "{c}");
        assert!(!c["detail"].as_str().unwrap().is_empty(), "{c}");
    }
    // The machine check agrees with `topo`, which reads the same sysfs.
    let topo = Command::new(HETSCHED)
        .args(["topo", "--json"])
        .output()
        .unwrap();
    let topo: Value = serde_json::from_slice(&topo.stdout).unwrap();
    let classes = topo["classes"].as_array().map_or(0, Vec::len);
    let machine = checks
        .iter()
        .find(|c| c["name"] == "asymmetric machine")
        .unwrap();
    assert!(
        machine["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("in {classes} class(es)")),
        "{machine} vs {classes} classes"
    );
    // The human form says the same.
    let text = Command::new(HETSCHED).arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert_eq!(
        text.lines()
            .filter(|l| l.trim_start().starts_with("missing"))
            .count(),
        checks.iter().filter(|c| c["ok"] == false).count(),
        "{text}"
    );
}
