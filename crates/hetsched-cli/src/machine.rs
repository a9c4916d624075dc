//! Resolving `--machine`: a preset name, a machine file, or (no flag) this machine from sysfs.

use crate::bad_input;
use hetsched_core::machine_file::load_machine_file;
use hetsched_core::presets::{machine_names, machine_preset};
use hetsched_core::Topology;
use std::path::Path;

/// A preset by name, or a `.toml` machine file. Bad names and bad files are exit-2 errors.
pub fn resolve_machine(spec: &str) -> anyhow::Result<Topology> {
    if let Some(preset) = machine_preset(spec) {
        return preset.map_err(|e| anyhow::anyhow!("{e}"));
    }
    let path = Path::new(spec);
    if spec.ends_with(".toml") || path.exists() {
        return load_machine_file(path).map_err(|e| bad_input(e.to_string()));
    }
    Err(bad_input(format!(
        "--machine {spec:?}: no such preset or file (presets: {})",
        machine_names().collect::<Vec<_>>().join(", ")
    )))
}

/// This machine, from sysfs below `root`, warnings printed once on stderr.
pub fn this_machine(root: &Path) -> Topology {
    let d = hetsched_live::discover(root);
    for w in &d.warnings {
        tracing::warn!("{w}");
    }
    d.topology
}
