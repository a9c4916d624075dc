//! `hetsched topo` and `hetsched machines` as a user runs them: exit codes, stdout purity, and the
//! papers' numbers in the JSON.

use serde_json::Value;
mod common;

use common::hetsched;

fn topo_json(machine: &str) -> Value {
    let (code, out, err) = hetsched(&["topo", "--machine", machine, "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("stdout is one JSON document")
}

fn class_freqs(v: &Value) -> Vec<(String, f64, u64)> {
    let mut out: Vec<(String, f64, u64)> = v["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["effective_ghz"].as_f64().unwrap(),
                c["cores"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.1.total_cmp(&b.1));
    out
}

#[test]
fn every_preset_prints_json_with_the_papers_numbers() {
    let (code, out, _) = hetsched(&["machines", "--json"]);
    assert_eq!(code, 0);
    let list: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.len() >= 14);
    for name in &names {
        let v = topo_json(name);
        assert_eq!(v["name"], *name);
        for key in ["cores", "classes", "modules", "caches", "nodes"] {
            assert!(v[key].is_array(), "{name}: {key}");
        }
    }
    // AMPS Table 1 / section 4.1: 8 cores, 2 at 2.66 GHz and 6 at half that; 79 ns.
    let smp = topo_json("amps-smp");
    assert_eq!(smp["cores"].as_array().unwrap().len(), 8);
    assert_eq!(
        class_freqs(&smp),
        vec![("slow".into(), 1.33, 6), ("fast".into(), 2.66, 2)]
    );
    assert_eq!(smp["nodes"][0]["latency_ns"][0], 79.0);
    // AMPS NUMA: 32 cores, 8 nodes, 68/146/176 ns.
    let numa = topo_json("amps-numa-1");
    assert_eq!(numa["cores"].as_array().unwrap().len(), 32);
    assert_eq!(numa["nodes"].as_array().unwrap().len(), 8);
    let row: Vec<f64> = numa["nodes"][0]["latency_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(
        row,
        vec![68.0, 146.0, 176.0, 176.0, 146.0, 176.0, 176.0, 146.0]
    );
    assert_eq!(numa["nodes"][0]["distance"][4], 21);
    // HASS Table 1: AMD-4,4,2,2.
    let amd = topo_json("hass-amd-4-4-2-2");
    let f: Vec<(f64, u64)> = class_freqs(&amd)
        .into_iter()
        .map(|(_, f, n)| (f, n))
        .collect();
    assert_eq!(f, vec![(1.15, 4), (1.4, 4), (2.0, 2), (2.3, 2)]);
    // BulldOver: 4 modules of 2 sharing the FPU.
    let b = topo_json("bulldover");
    assert_eq!(b["modules"].as_array().unwrap().len(), 4);
    assert!(b["modules"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["shares_fpu"] == true && m["cores"].as_array().unwrap().len() == 2));
    // Ding: 4 fast + 12 slow.
    let d = topo_json("ding-4f12s");
    assert_eq!(
        class_freqs(&d),
        vec![("slow".into(), 1.0, 12), ("fast".into(), 2.0, 4)]
    );
}

#[test]
fn this_machine_from_sysfs_and_from_a_fixture_root() {
    let (code, out, _) = hetsched(&["topo", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(!v["cores"].as_array().unwrap().is_empty());
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../hetsched-live/tests/fixtures/sysfs/big-little-phone"
    );
    let (code, out, err) = hetsched(&["topo", "--json", "--sysfs-root", root]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["classes"].as_array().unwrap().len(), 3);
    let (code, out, _) = hetsched(&["topo", "--sysfs-root", root]);
    assert_eq!(code, 0);
    assert!(out.contains("prime") && out.contains("node 0"), "{out}");
}

#[test]
fn bad_input_exits_2_with_one_line_naming_it() {
    let (code, out, err) = hetsched(&["topo", "--machine", "no-such-preset"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no-such-preset"));

    let dir = std::env::temp_dir().join(format!("hetsched-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, "name = \"x\"\n[[classes]]\nname = \"a\"\nfreq_ghz = 2.0\n[[cores]]\ncpus = \"0-1\"\nclass = \"a\"\n[[nodes]]\ncpus = \"0-1\"\ndistance = [10, 20]\n").unwrap();
    let (code, _, err) = hetsched(&["topo", "--machine", file.to_str().unwrap(), "--json"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.toml: nodes[0].distance: distance matrix is not square"),
        "{err}"
    );
    let (code, _, err) = hetsched(&[
        "topo",
        "--machine",
        dir.join("missing.toml").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.toml: cannot read"), "{err}");
    let (code, _, _) = hetsched(&["topo", "--bogus-flag"]);
    assert_eq!(code, 2);
    std::fs::remove_dir_all(&dir).ok();
}

/// `topo --json` starts with the provenance block: a preset is named, a machine file hashed, and
/// this machine (read from sysfs, no file named) has no inputs.
#[test]
fn topo_json_says_what_produced_it() {
    use sha2::{Digest, Sha256};
    let v = topo_json("amps-smp");
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["hetsched_version"], env!("CARGO_PKG_VERSION"));
    assert!(v["command"].as_array().unwrap().iter().any(|a| a == "topo"));
    assert_eq!(v["inputs"][0]["name"], "amps-smp");
    assert!(v["inputs"][0]["sha256"].is_null());
    // The machine's own fields are all still there.
    assert_eq!(v["name"], "amps-smp");
    assert_eq!(v["cores"].as_array().unwrap().len(), 8);

    let dir = std::env::temp_dir().join(format!("hetsched-topo-prov-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("two.toml");
    let text = "name = \"two\"\nmemory_latency_ns = 90.0\n[[classes]]\nname = \"fast\"\ncapacity = 1.0\n[[classes]]\nname = \"slow\"\ncapacity = 0.5\n[[cores]]\ncpus = \"0\"\nclass = \"fast\"\n[[cores]]\ncpus = \"1\"\nclass = \"slow\"\n";
    std::fs::write(&file, text).unwrap();
    let v = topo_json(file.to_str().unwrap());
    let want: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(v["inputs"][0]["name"], file.to_str().unwrap());
    assert_eq!(v["inputs"][0]["sha256"], want.as_str());
    assert_eq!(v["name"], "two");
    std::fs::remove_dir_all(&dir).ok();

    let (code, out, err) = hetsched(&["topo", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["inputs"], serde_json::json!([]));
}
