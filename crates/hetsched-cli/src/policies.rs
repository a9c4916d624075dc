//! `hetsched policies`: the policy registry, for people and for scripts.

use crate::topo::ListArgs;
use hetsched_core::policies::{PolicyEntry, REGISTRY};
use serde::Serialize;
use std::io::Write;

/// One registry entry as `policies --json` prints it.
#[derive(Serialize)]
pub struct PolicyJson {
    name: &'static str,
    description: &'static str,
    citation: &'static str,
    oracle: bool,
    signals: &'static str,
    live: bool,
}

impl From<&PolicyEntry> for PolicyJson {
    fn from(e: &PolicyEntry) -> Self {
        Self {
            name: e.name,
            description: e.description,
            citation: e.citation,
            oracle: e.oracle,
            signals: e.signals,
            live: e.live,
        }
    }
}

/// Every policy of the registry, as `policies --json` lists them.
pub fn policy_list() -> Vec<PolicyJson> {
    REGISTRY.iter().map(PolicyJson::from).collect()
}

/// Print every policy: a table (name, where it runs, what it observes, description and paper), or
/// with `--json` one array.
pub fn run_policies(args: &ListArgs) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &policy_list())?;
        writeln!(out)?;
        return Ok(());
    }
    let width = REGISTRY.iter().map(|e| e.name.len()).max().unwrap_or(0);
    for e in REGISTRY {
        let runs = match (e.oracle, e.live) {
            (true, _) => "simulator only, oracle",
            (false, true) => "simulator and live",
            (false, false) => "simulator only",
        };
        writeln!(out, "{:width$}  {}", e.name, e.description)?;
        writeln!(out, "{:width$}  runs: {runs}; observes: {}", "", e.signals)?;
        if !e.citation.is_empty() {
            writeln!(out, "{:width$}  paper: {}", "", e.citation)?;
        }
    }
    Ok(())
}
