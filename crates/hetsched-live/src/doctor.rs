//! `hetsched doctor`: what this machine and these privileges give the live backend, and what each
//! missing piece disables. Every check tries the real thing (subscribing to the connector,
//! opening counters, a SCHED_FIFO thread, a `move_pages` query) rather than guessing from
//! versions.

use crate::counters::{CounterPlan, Role};
use crate::engine::missing_signals;
use crate::{connector::Connector, sys};
use hetsched_core::policies::REGISTRY;
use serde::Serialize;
use std::path::Path;

/// One thing the live backend can use.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// What is checked.
    pub name: &'static str,
    pub ok: bool,
    /// What was found.
    pub detail: String,
    /// What does not work, or works worse, without it (empty when `ok`).
    pub without: String,
}

fn check(name: &'static str, ok: bool, detail: String, without: &str) -> Check {
    Check {
        name,
        ok,
        detail,
        without: if ok {
            String::new()
        } else {
            without.to_string()
        },
    }
}

/// Capabilities (include/uapi/linux/capability.h) the backend uses, and what each allows.
const CAPABILITIES: &[(u32, &str, &str)] = &[
    (
        23,
        "CAP_SYS_NICE",
        "affinity of other users' threads, moving other processes' pages, SCHED_FIFO for `emulate`",
    ),
    (
        12,
        "CAP_NET_ADMIN",
        "the process events connector (new threads are then found by polling /proc)",
    ),
    (
        38,
        "CAP_PERFMON",
        "counters of other users' threads (CAP_SYS_ADMIN also allows it)",
    ),
    (
        19,
        "CAP_SYS_PTRACE",
        "reading other users' numa_maps (NUMA policies see no residency for them)",
    ),
    (
        24,
        "CAP_SYS_RESOURCE",
        "an open-file limit above the hard limit (counters on more threads)",
    ),
];

/// The effective capability set of this process (`CapEff` in /proc/self/status).
fn effective_capabilities() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// Every check, in the order they are shown.
pub fn checks(sys_root: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    let caps = effective_capabilities();
    for &(bit, name, allows) in CAPABILITIES {
        let ok = caps & (1 << bit) != 0;
        out.push(check(
            name,
            ok,
            if ok { "held".into() } else { "not held".into() },
            allows,
        ));
    }

    let connector = Connector::subscribe();
    out.push(check(
        "process events connector",
        connector.is_ok(),
        match &connector {
            Ok(_) => "subscribed".into(),
            Err(e) => e.to_string(),
        },
        "new threads are found by polling /proc, up to an interval late",
    ));

    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let plan = CounterPlan::probe(sys_root, &cpuinfo);
    let roles: Vec<&str> = plan.roles().iter().map(|r| r.name()).collect();
    out.push(check(
        "software counters",
        plan.has(Role::TaskClock),
        if roles.is_empty() {
            "perf_event_open refused".into()
        } else {
            roles.join(", ")
        },
        "CPU time is read from /proc at clock-tick resolution",
    ));
    let discovery = crate::discover(sys_root);
    let nodes = discovery.topology.nodes().len();
    let lacking: Vec<String> = REGISTRY
        .iter()
        .filter_map(|e| Some((e.name, e.make?)))
        .filter_map(|(name, make)| {
            let policy = make(&hetsched_core::policies::PolicyOptions::default());
            let missing = missing_signals(policy.needs(), &plan, nodes);
            (!missing.is_empty()).then(|| {
                format!(
                    "{name} sees zeros for {}",
                    missing
                        .iter()
                        .map(|s| s.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
        })
        .collect();
    out.push(check(
        "hardware counters",
        plan.has_hardware(),
        if plan.has_hardware() {
            roles.join(", ")
        } else {
            "no PMU events (a VM without a virtual PMU?)".into()
        },
        &lacking.join("; "),
    ));

    let fifo = std::thread::spawn(|| sys::set_fifo(1))
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the probe thread panicked")));
    out.push(check(
        "SCHED_FIFO threads",
        fifo.is_ok(),
        match &fifo {
            Ok(()) => "allowed".into(),
            Err(e) => e.to_string(),
        },
        "`emulate` cannot duty-cycle CPUs",
    ));

    if nodes > 1 {
        let page = [0u8; 1];
        let mut status = [0i32; 1];
        let r = sys::move_pages(
            std::process::id(),
            &[std::ptr::from_ref(&page).cast::<u8>() as usize & !4095],
            &[],
            &mut status,
        );
        out.push(check(
            "move_pages",
            r.is_ok(),
            match &r {
                Ok(()) => format!("{nodes} NUMA nodes"),
                Err(e) => e.to_string(),
            },
            "NUMA policies cannot move pages after threads",
        ));
    } else {
        out.push(check(
            "move_pages",
            true,
            "one NUMA node: no pages to move".into(),
            "",
        ));
    }

    let limit = sys::raise_fd_limit();
    let per_thread = 1 + plan.fds_per_thread();
    let threads = limit.saturating_sub(sys::FD_RESERVE) / per_thread;
    out.push(check(
        "open files",
        threads >= 10_000,
        format!("limit {limit}: counters and a stat descriptor on {threads} threads ({per_thread} a thread)"),
        "threads past that are watched through /proc alone (no counters)",
    ));

    let t = &discovery.topology;
    out.push(check(
        "asymmetric machine",
        t.is_asymmetric(),
        format!(
            "{} CPUs in {} class(es){}",
            t.num_cores(),
            t.classes().len(),
            discovery
                .capacity_source
                .as_deref()
                .map(|s| format!(", capacities from {s}"))
                .unwrap_or_default()
        ),
        "the AMP policies have one class to work with: use a machine file, or `hetsched emulate` to make slow CPUs",
    ));
    out
}
