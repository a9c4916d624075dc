//! Workload presets: workload files compiled into the binary (`presets/*.toml`). Each behaves like a
//! paper's benchmark and says so in its name (`-like`); none claims to be the benchmark.

use crate::workload::Workload;
use hetsched_core::{InputError, Topology};

/// (name, workload file text), in the order `hetsched workloads` lists them.
pub const WORKLOAD_PRESETS: &[(&str, &str)] = &[
    (
        "mixed-default",
        include_str!("../presets/mixed-default.toml"),
    ),
    (
        "omp-ammp-like",
        include_str!("../presets/omp-ammp-like.toml"),
    ),
    (
        "omp-swim-like",
        include_str!("../presets/omp-swim-like.toml"),
    ),
    (
        "omp-equake-like",
        include_str!("../presets/omp-equake-like.toml"),
    ),
    (
        "omp-mgrid-like",
        include_str!("../presets/omp-mgrid-like.toml"),
    ),
    ("make-like", include_str!("../presets/make-like.toml")),
    ("jbb-like", include_str!("../presets/jbb-like.toml")),
    ("ogg-like", include_str!("../presets/ogg-like.toml")),
    ("hass-hh-like", include_str!("../presets/hass-hh-like.toml")),
    (
        "hass-hh-memory-first-like",
        include_str!("../presets/hass-hh-memory-first-like.toml"),
    ),
    ("hass-mh-like", include_str!("../presets/hass-mh-like.toml")),
    ("hass-lh-like", include_str!("../presets/hass-lh-like.toml")),
    ("art-like", include_str!("../presets/art-like.toml")),
    ("crafty-like", include_str!("../presets/crafty-like.toml")),
    ("equake-like", include_str!("../presets/equake-like.toml")),
    ("fma3d-like", include_str!("../presets/fma3d-like.toml")),
    ("mcf-like", include_str!("../presets/mcf-like.toml")),
    (
        "sixtrack-like",
        include_str!("../presets/sixtrack-like.toml"),
    ),
    ("twolf-like", include_str!("../presets/twolf-like.toml")),
    ("vortex-like", include_str!("../presets/vortex-like.toml")),
    ("wupwise-like", include_str!("../presets/wupwise-like.toml")),
    ("hmmer-like", include_str!("../presets/hmmer-like.toml")),
    ("povray-like", include_str!("../presets/povray-like.toml")),
    ("sphinx3-like", include_str!("../presets/sphinx3-like.toml")),
    (
        "bulldover-hmmer-povray-like",
        include_str!("../presets/bulldover-hmmer-povray-like.toml"),
    ),
    (
        "bulldover-mcf-sphinx3-like",
        include_str!("../presets/bulldover-mcf-sphinx3-like.toml"),
    ),
    ("scimark-like", include_str!("../presets/scimark-like.toml")),
    (
        "scimark-fft-mm-like",
        include_str!("../presets/scimark-fft-mm-like.toml"),
    ),
    ("chat-like", include_str!("../presets/chat-like.toml")),
    (
        "pinter-custom-like",
        include_str!("../presets/pinter-custom-like.toml"),
    ),
    ("parsec-like", include_str!("../presets/parsec-like.toml")),
    ("scale-8k", include_str!("../presets/scale-8k.toml")),
    ("scale-16k", include_str!("../presets/scale-16k.toml")),
];

/// The workload `hetsched simulate` runs with no arguments.
pub const DEFAULT_WORKLOAD: &str = "mixed-default";

/// Names of every workload preset.
pub fn workload_names() -> impl Iterator<Item = &'static str> {
    WORKLOAD_PRESETS.iter().map(|(n, _)| *n)
}

/// A workload preset resolved against a machine; `None` when no preset has that name.
pub fn workload_preset(name: &str, topology: &Topology) -> Option<Result<Workload, InputError>> {
    WORKLOAD_PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, text)| Workload::parse(text, &format!("preset {n}"), topology))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::presets::machine_preset;

    #[test]
    fn every_preset_resolves_on_every_paper_machine() {
        for m in [
            "amps-smp",
            "amps-numa-1",
            "hass-amd-12-4",
            "bulldover",
            "pinter-smp",
            "ding-4f12s",
        ] {
            let topo = machine_preset(m).unwrap().unwrap();
            for (name, _) in WORKLOAD_PRESETS {
                let w = workload_preset(name, &topo)
                    .unwrap()
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(w.name, *name);
                assert!(
                    name.ends_with("-like")
                        || *name == "mixed-default"
                        || name.starts_with("scale-"),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn scale_16k_has_16384_threads() {
        let topo = machine_preset("scale-1024").unwrap().unwrap();
        let w = workload_preset("scale-16k", &topo).unwrap().unwrap();
        assert_eq!(w.peak_threads(), 16_384);
        let half = machine_preset("scale-512").unwrap().unwrap();
        assert_eq!(
            workload_preset("scale-8k", &half)
                .unwrap()
                .unwrap()
                .peak_threads(),
            8_192
        );
    }

    /// The HASS and BulldOver mixes repeat the single-benchmark presets app for app; an edit to
    /// one must reach the other. (The BulldOver pairs run each instance once; the singles loop.)
    #[test]
    fn mixes_match_the_single_benchmark_presets() {
        let topo = machine_preset("hass-amd-2-2").unwrap().unwrap();
        for mix in [
            "hass-hh-like",
            "hass-hh-memory-first-like",
            "hass-mh-like",
            "hass-lh-like",
            "bulldover-hmmer-povray-like",
            "bulldover-mcf-sphinx3-like",
        ] {
            let w = workload_preset(mix, &topo).unwrap().unwrap();
            for app in &w.apps {
                let single = workload_preset(&app.name, &topo).unwrap().unwrap();
                let want = &single.apps[0];
                assert_eq!(app.threads, want.threads, "{mix}: {}", app.name);
                if mix.starts_with("hass") {
                    assert_eq!(app.restart, want.restart, "{mix}: {}", app.name);
                }
            }
        }
    }
}
