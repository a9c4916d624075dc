//! What a session leaves: CPU time per core class and per process name, and the decision
//! counters.

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
        let by_class = |ns: &[f64]| -> BTreeMap<String, f64> {
            class_names
                .iter()
                .cloned()
                .zip(ns.iter().map(|ns| ns * 1e-9))
                .collect()
        };
        // The threads still here count as if they left now.
        let mut totals = self.totals.clone();
        totals.class_ns.resize(class_names.len(), 0.0);
        for s in self.slots.iter().filter(|s| s.alive) {
            let name = self.procs.get(&s.pid).map_or("", |p| p.name.as_str());
            totals.thread(name, s);
        }
        for p in self.procs.values() {
            totals.row(&p.name).processes += 1;
        }
        let mut processes: Vec<ProcessSummary> = totals
            .by_name
            .into_iter()
            .map(|(name, t)| ProcessSummary {
                name,
                processes: t.processes,
                threads: t.threads,
                cpu_s: t.cpu_ns * 1e-9,
                class_s: by_class(&t.class_ns),
                placements_applied: t.placements_applied,
            })
            .collect();
        processes.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s).then(a.name.cmp(&b.name)));
        let fragments = totals
            .fragments
            .iter()
            .map(|((process, fragment), (entries, cpus))| FragmentSummary {
                process: process.clone(),
                fragment: *fragment,
                entries: *entries,
                cpus: self.cpus.to_os(cpus).to_list(),
            })
            .collect();
        let missing = self
            .policy
            .as_ref()
            .map(|p| missing_signals(p.needs(), &self.plan, self.topology.nodes().len()))
            .unwrap_or_default()
            .into_iter()
            .chain(self.hint_signals_missing())
            .collect::<Vec<_>>();
        EngineSummary {
            policy: self.policy_name.clone(),
            dry_run: self.config.dry_run,
            counters: self.plan.roles().iter().map(|r| r.name()).collect(),
            hardware_counters: self.plan.has_hardware(),
            policy_missing: missing.iter().map(|s| s.name()).collect(),
            policy_disabled: self.disabled.clone(),
            decisions: self.decisions,
            pages_moved_bytes: self.pages.moved_bytes,
            threads_seen: self.threads_seen,
            threads_peak: self.threads_peak,
            class_s: by_class(&totals.class_ns),
            processes,
            fragments,
            stored_signatures: self.stored_counts(),
            restore: self.restored,
        }
    }

    /// CPU seconds per core class of every thread managed so far, and the count of live threads
    /// per class of the CPU they were last seen on (for the daemon's metrics: per class, never
    /// per thread).
    pub fn class_totals(&self) -> Vec<(String, f64, u32)> {
        let mut v: Vec<(String, f64, u32)> = self
            .topology
            .classes()
            .iter()
            .map(|c| (c.name.clone(), 0.0, 0))
            .collect();
        for (k, ns) in self.totals.class_ns.iter().enumerate() {
            v[k].1 += ns * 1e-9;
        }
        for (s, o) in self.slots.iter().zip(&self.obs).filter(|(s, _)| s.alive) {
            for (k, ns) in s.class_ns.iter().enumerate() {
                v[k].1 += ns * 1e-9;
            }
            if let Some(cpu) = o.cpu {
                v[self.topology.core(cpu).class.index()].2 += 1;
            }
        }
        v
    }

    pub fn decisions(&self) -> Decisions {
        self.decisions
    }
}
