//! `hetsched policies` as a user runs it.

use hetsched_core::policies::{policy_names, REGISTRY};
use serde_json::Value;
mod common;

use common::hetsched;

#[test]
fn the_table_lists_every_policy_with_what_it_observes() {
    let (code, out, err) = hetsched(&["policies"]);
    assert_eq!(code, 0, "{err}");
    for e in REGISTRY {
        assert!(
            out.lines().any(|l| l.starts_with(e.name)),
            "{} missing:\n{out}",
            e.name
        );
    }
    assert_eq!(out.matches("observes:").count(), REGISTRY.len(), "{out}");
    assert!(out.contains("simulator only, oracle"), "{out}");
}

#[test]
fn json_is_the_registry() {
    let (code, out, err) = hetsched(&["policies", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("stdout is one JSON document");
    let list = v.as_array().expect("an array");
    assert_eq!(list.len(), REGISTRY.len());
    for (item, e) in list.iter().zip(REGISTRY) {
        assert_eq!(item["name"], e.name);
        assert_eq!(item["oracle"], e.oracle);
        assert_eq!(item["live"], e.live);
        for k in ["description", "citation", "signals"] {
            assert!(item[k].is_string(), "{k} of {}", e.name);
        }
    }
    // Exactly the oracles are not constructible as policies; each constructible one builds and
    // names itself as the registry does.
    let oracles: Vec<&str> = REGISTRY
        .iter()
        .filter(|e| e.oracle)
        .map(|e| e.name)
        .collect();
    assert_eq!(oracles, ["static-best"]);
    for name in policy_names() {
        let p = hetsched_core::policies::policy_by_name(name).expect("constructible");
        assert_eq!(p.name(), name);
    }
}

#[test]
fn completions_and_the_man_page_are_generated_from_the_commands() {
    let (code, out, err) = hetsched(&["completions", "bash"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("simulate") && out.contains("--baseline"),
        "{out}"
    );
    let (code, out, err) = hetsched(&["man"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(".ie") && out.contains(".TH hetsched 1"),
        "{out}"
    );
    let (code, _, _) = hetsched(&["completions", "tcsh"]);
    assert_eq!(code, 2);
}
