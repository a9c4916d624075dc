//! Helpers shared by the reproduction tests.

use hetsched_experiments::reproduce::{run_experiment, Experiment, Row};

/// Run an experiment by name, quietly.
pub fn run(name: &str) -> Experiment {
    run_experiment(name, &|_, _, _| {}).expect("a registered experiment")
}

/// The row of an experiment with this label.
pub fn row<'a>(e: &'a Experiment, label: &str) -> &'a Row {
    e.rows
        .iter()
        .find(|r| r.label == label)
        .unwrap_or_else(|| panic!("no row {label:?} in {}", e.experiment))
}
