//! What a session leaves: per-thread and per-class summaries, and the decision counters.

use super::*;

impl Engine {
    /// Stop: restore every affinity and report.
    pub fn finish(&mut self) -> EngineSummary {
        self.restore_all();
        let class_names: Vec<String> = self
            .topology
            .classes()
            .iter()
            .map(|c| c.name.clone())
            .collect();
        let threads = self
            .slots
            .iter()
            .map(|s| ThreadSummary {
                tid: s.tid,
                pid: s.pid,
                comm: s.comm.clone(),
                cpu_s: s.last_cpu_ns * 1e-9,
                class_s: class_names
                    .iter()
                    .cloned()
                    .zip(s.class_ns.iter().map(|ns| ns * 1e-9))
                    .collect(),
                placements_applied: s.placements_applied,
            })
            .collect();
        let missing = self
            .policy
            .as_ref()
            .map(|p| missing_signals(p.needs(), &self.plan, self.topology.nodes().len()))
            .unwrap_or_default();
        EngineSummary {
            policy: self.policy_name.clone(),
            dry_run: self.config.dry_run,
            counters: self.plan.roles().iter().map(|r| r.name()).collect(),
            hardware_counters: self.plan.has_hardware(),
            policy_missing: missing.iter().map(|s| s.name()).collect(),
            policy_disabled: self.disabled.clone(),
            decisions: self.decisions,
            pages_moved_bytes: self.pages.moved_bytes,
            threads_seen: self.slots.len(),
            threads,
            restore: self.restored,
        }
    }

    /// CPU seconds of live threads per core class, and their count per class of the CPU they
    /// were last seen on (for the daemon's metrics: per class, never per thread).
    pub fn class_totals(&self) -> Vec<(String, f64, u32)> {
        let mut v: Vec<(String, f64, u32)> = self
            .topology
            .classes()
            .iter()
            .map(|c| (c.name.clone(), 0.0, 0))
            .collect();
        for (s, o) in self.slots.iter().zip(&self.obs) {
            for (k, ns) in s.class_ns.iter().enumerate() {
                v[k].1 += ns * 1e-9;
            }
            if let (true, Some(cpu)) = (s.alive, o.cpu) {
                v[self.topology.core(cpu).class.index()].2 += 1;
            }
        }
        v
    }

    pub fn decisions(&self) -> Decisions {
        self.decisions
    }
}
