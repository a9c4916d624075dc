//! The library behind the `hetsched` command: each command's pipeline (resolving machines and
//! workloads, running simulations, building the JSON documents with their provenance, CSV rows),
//! and parameter sweeps. The `hetsched` binary parses arguments and calls into it; the Python
//! package (`crates/hetsched-py`) calls the same functions, so each pipeline exists once.

pub mod explain;
pub mod figures;
pub mod live;
pub mod machine;
pub mod policies;
pub mod provenance;
pub mod report;
pub mod reproduce;
pub mod signature;
pub mod simulate;
pub mod sweep;
pub mod topo;
pub mod validate;

/// Bad input: a flag, a file or a value that cannot be used. Exit code 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Shorthand for an exit-2 error.
pub fn bad_input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(msg.into()))
}
