//! Resolving `--machine`: a preset name, a machine file, TOML text (from the Python package or a
//! sweep), or (no flag) this machine from sysfs.

use crate::bad_input;
use hetsched_core::machine_file::{load_machine_file, parse_machine};
use hetsched_core::presets::{machine_names, machine_preset};
use hetsched_core::Topology;
use std::path::Path;

/// What errors call a machine or workload given as TOML text rather than named.
pub const INLINE_MACHINE: &str = "machine text";
/// See [`INLINE_MACHINE`].
pub const INLINE_WORKLOAD: &str = "workload text";

/// True when a `--machine` or `--workload` value is the TOML text itself: it spans lines, which
/// no preset name and no sensible path does.
pub fn is_inline(spec: &str) -> bool {
    spec.contains('\n')
}

/// A preset by name, a `.toml` machine file, or machine-file text ([`is_inline`]). Bad names and
/// bad files are exit-2 errors.
pub fn resolve_machine(spec: &str) -> anyhow::Result<Topology> {
    if is_inline(spec) {
        return parse_machine(spec, INLINE_MACHINE).map_err(|e| bad_input(e.to_string()));
    }
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
