//! What a session leaves: the totals folded as threads leave (CPU time per core class and per
//! process name, fragments), the decision counters, and the report built from them at the end.

use super::*;

/// What threads did, folded per core class and per process name: the threads that left, and at
/// the end those still here.
#[derive(Clone, Debug, Default)]
pub(super) struct Totals {
    /// CPU ns per core class.
    class_ns: Vec<f64>,
    by_name: BTreeMap<String, NameTotals>,
    /// Per process name and data fragment: the hints entering it and the CPUs its threads were
    /// placed on (at most [`MAX_PROCESS_NAMES`] rows; further fragments are not kept).
    fragments: BTreeMap<(String, u64), (u64, CpuSet)>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct NameTotals {
    pub(super) processes: u64,
    threads: u64,
    cpu_ns: f64,
    class_ns: Vec<f64>,
    placements_applied: u64,
}

impl Totals {
    pub(super) fn row(&mut self, name: &str) -> &mut NameTotals {
        let key = if self.by_name.contains_key(name) || self.by_name.len() < MAX_PROCESS_NAMES {
            name
        } else {
            OTHER_PROCESSES
        };
        if !self.by_name.contains_key(key) {
            self.by_name.insert(key.to_string(), NameTotals::default());
        }
        self.by_name.get_mut(key).expect("inserted above")
    }

    /// A thread of a process named `name` entered fragment `df` (`cpus`: where it was placed, if
    /// it was).
    pub(super) fn fragment(&mut self, name: &str, df: u64, entered: bool, cpus: Option<&CpuSet>) {
        let key = (name.to_string(), df);
        if !self.fragments.contains_key(&key) && self.fragments.len() >= MAX_PROCESS_NAMES {
            return;
        }
        let row = self.fragments.entry(key).or_default();
        row.0 += u64::from(entered);
        if let Some(c) = cpus {
            row.1.union_with(c);
        }
    }

    /// Fold in one thread of a process named `name`.
    pub(super) fn thread(&mut self, name: &str, s: &Slot) {
        add_into(&mut self.class_ns, &s.class_ns);
        let row = self.row(name);
        row.threads += 1;
        row.cpu_ns += s.last_cpu_ns;
        add_into(&mut row.class_ns, &s.class_ns);
        row.placements_applied += u64::from(s.placements_applied);
    }
}

fn add_into(sum: &mut Vec<f64>, v: &[f64]) {
    if sum.len() < v.len() {
        sum.resize(v.len(), 0.0);
    }
    for (a, b) in sum.iter_mut().zip(v) {
        *a += b;
    }
}

/// Counts of the engine's decisions.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Decisions {
    /// Placements the policy asked for.
    pub placements: u64,
    /// Applied (or, in a dry run, that would have been).
    pub applied: u64,
    /// The thread already had that mask.
    pub unchanged: u64,
    pub held_by_dwell: u64,
    pub held_by_cap: u64,
    /// Nothing left after intersecting with the user's mask.
    pub outside_user_mask: u64,
    /// The thread was gone when acted on.
    pub vanished: u64,
    /// The program had changed the thread's mask itself; the engine adopted it.
    pub adopted_user_changes: u64,
    pub page_moves_requested: u64,
}

/// The processes of one command name in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessSummary {
    /// The command name (`comm`), or [`OTHER_PROCESSES`].
    pub name: String,
    pub processes: u64,
    pub threads: u64,
    pub cpu_s: f64,
    /// CPU seconds on each core class.
    pub class_s: BTreeMap<String, f64>,
    pub placements_applied: u64,
}

/// One data fragment of one process name in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct FragmentSummary {
    pub process: String,
    pub fragment: u64,
    /// Hints of a thread entering it.
    pub entries: u64,
    /// The CPUs its threads were placed on (kernel cpulist).
    pub cpus: String,
}

/// What the engine reports at the end.
#[derive(Clone, Debug, Serialize)]
pub struct EngineSummary {
    pub policy: String,
    pub dry_run: bool,
    pub counters: Vec<&'static str>,
    pub hardware_counters: bool,
    /// Signals the policy uses that this machine cannot give.
    pub policy_missing: Vec<&'static str>,
    pub policy_disabled: Option<String>,
    pub decisions: Decisions,
    pub pages_moved_bytes: u64,
    /// Threads managed over the session, and the most at once.
    pub threads_seen: u64,
    pub threads_peak: usize,
    /// CPU seconds of every managed thread on each core class.
    pub class_s: BTreeMap<String, f64>,
    /// Per command name, most CPU first.
    pub processes: Vec<ProcessSummary>,
    /// Per process name and data fragment (threads that hinted theirs): where they ran.
    pub fragments: Vec<FragmentSummary>,
    /// Signature store lookups, when the policy places by signatures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_signatures: Option<StoreCounts>,
    pub restore: Restored,
}

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
