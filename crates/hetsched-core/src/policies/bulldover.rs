//! `bulldover`: FPU-aware placement on modules whose cores share an FPU, after BulldOver
//! (Peternier et al., ICPADS 2012).
//!
//! Every period (1 s by default, section 4: "polling these values regularly (every second in our
//! experiments)"):
//!
//! 1. Each managed thread's **FPU usage** over the last period is `1 − EmptyFpuCycles /
//!    TotCpuCycles` (equation 1), from the observed counters: busy FPU cycles over CPU cycles. A
//!    thread that did not run keeps its previous value.
//! 2. Threads at or above [`FP_INTENSIVE_THRESHOLD`] are sorted by usage (the highest first; ties by
//!    thread id). With `N` modules and `k` cores per module, the first `N` are bound one per module
//!    to the first core of each module, the next `N` to the second cores, and so on up to `k × N`
//!    (section 5.C: "the first 4 FPU-intensive threads is restricted to the first core of each
//!    module. The following 4 threads are scheduled on the second core"); the rest, and every thread
//!    below the threshold, are left unrestricted.
//! 3. **Migration-avoiding cache** (section 5.C): a thread that stays in the same group keeps the
//!    core it had; only threads entering a group take a free core of it, in module order.
//!
//! Generalisations (the paper had 2 cores a module and threads of stable behaviour):
//! - modules of any size `k` give `k` groups;
//! - usage is measured per period, so a thread FP-busy only in some phases ranks by what it did
//!   last period, and moves between groups (or out of them) as its phases change;
//! - the threshold: the paper ranks every thread, so integer threads fill the second group; ours
//!   leaves threads under 20% FPU usage unbound (Table I: every integer benchmark is at most 0.15,
//!   every floating-point one at least 0.72), where the backend's balancer puts them on the
//!   cores the bound threads leave free — the same outcome with fewer pins;
//! - machines without FPU-sharing modules: nothing to do; the policy places nothing and says so
//!   once ([`Policy::take_notice`]).

use crate::cpuset::CpuSet;
use crate::ids::{CoreId, ThreadId};
use crate::observe::{Counters, View};
use crate::policies::partitions::is_runnable;
use crate::policy::{Placement, Policy};
use crate::topology::Topology;

/// The policy's name, as users pass it and as the registry lists it.
pub const NAME: &str = "bulldover";

/// Sampling period, ns (BulldOver section 4: every second).
pub const BULLDOVER_PERIOD_NS: u64 = 1_000_000_000;

/// FPU usage below which a thread is not FP-intensive and stays unbound (ours; see the module doc).
pub const FP_INTENSIVE_THRESHOLD: f64 = 0.2;

/// Settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BulldoverConfig {
    pub period_ns: u64,
    pub threshold: f64,
}

impl Default for BulldoverConfig {
    fn default() -> Self {
        Self {
            period_ns: BULLDOVER_PERIOD_NS,
            threshold: FP_INTENSIVE_THRESHOLD,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Tracked {
    last: Counters,
    usage: f64,
    /// The core it is bound to, if any.
    core: Option<CoreId>,
}

/// The BulldOver policy.
pub struct Bulldover {
    cfg: BulldoverConfig,
    /// `groups[g][m]`: the g-th core of module m (modules that share an FPU, topology order).
    groups: Vec<Vec<CoreId>>,
    known_machine: bool,
    threads: Vec<Option<Tracked>>,
    notice: Option<String>,
}

impl Bulldover {
    pub fn new(cfg: BulldoverConfig) -> Self {
        Bulldover {
            cfg,
            groups: Vec::new(),
            known_machine: false,
            threads: Vec::new(),
            notice: None,
        }
    }

    fn know_machine(&mut self, topo: &Topology) {
        if self.known_machine {
            return;
        }
        self.known_machine = true;
        let modules: Vec<&Vec<CoreId>> = topo
            .modules()
            .iter()
            .filter(|m| m.shares_fpu && m.cores.len() > 1)
            .map(|m| &m.cores)
            .collect();
        let k = modules.iter().map(|m| m.len()).max().unwrap_or(0);
        self.groups = (0..k)
            .map(|g| modules.iter().filter_map(|m| m.get(g).copied()).collect())
            .collect();
        if self.groups.is_empty() {
            self.notice = Some(format!(
                "bulldover: machine {:?} has no cores that share an FPU; placing nothing",
                topo.name()
            ));
        }
    }

    /// The FPU usage measured for a thread over its last period.
    pub fn usage(&self, t: ThreadId) -> Option<f64> {
        self.threads
            .get(t.index())
            .and_then(|x| x.as_ref())
            .map(|x| x.usage)
    }

    /// The core a thread is bound to.
    pub fn bound_core(&self, t: ThreadId) -> Option<CoreId> {
        self.threads
            .get(t.index())
            .and_then(|x| x.as_ref())
            .and_then(|x| x.core)
    }
}

/// FPU usage from two counter snapshots (equation 1): `1 − empty / total = busy / total`; `None`
/// when the thread did not run.
pub fn fpu_usage(now: &Counters, before: &Counters) -> Option<f64> {
    let d = now.since(before);
    (d.cycles > 0.0).then(|| (d.fp_busy_cycles / d.cycles).clamp(0.0, 1.0))
}

impl Policy for Bulldover {
    fn needs(&self) -> &'static [crate::policy::Signal] {
        use crate::policy::Signal;
        &[Signal::FpBusy]
    }

    fn name(&self) -> &str {
        NAME
    }

    fn rebalance_period_ns(&self) -> u64 {
        self.cfg.period_ns
    }

    fn on_thread_start(&mut self, view: &View<'_>, thread: ThreadId) -> Option<CpuSet> {
        self.know_machine(view.topology);
        if self.threads.len() <= thread.index() {
            self.threads.resize(thread.index() + 1, None);
        }
        self.threads[thread.index()] = Some(Tracked {
            last: view.thread(thread).counters,
            ..Default::default()
        });
        None
    }

    fn on_thread_exit(&mut self, _view: &View<'_>, thread: ThreadId) {
        if let Some(slot) = self.threads.get_mut(thread.index()) {
            *slot = None;
        }
    }

    fn rebalance(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        self.know_machine(view.topology);
        if self.groups.is_empty() {
            return;
        }
        // 1. Usage over the last period.
        let mut ranked: Vec<(f64, ThreadId)> = Vec::new();
        for (i, slot) in self.threads.iter_mut().enumerate() {
            let Some(x) = slot else {
                continue;
            };
            let obs = &view.threads[i];
            if let Some(u) = fpu_usage(&obs.counters, &x.last) {
                x.usage = u;
            }
            x.last = obs.counters;
            if is_runnable(obs.state) && x.usage >= self.cfg.threshold {
                ranked.push((x.usage, obs.id));
            }
        }
        // 2. Groups of N, highest usage first.
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let n = self.groups[0].len().max(1);
        let mut want: Vec<Option<usize>> = vec![None; self.threads.len()];
        for (rank, &(_, t)) in ranked.iter().enumerate() {
            let g = rank / n;
            if g < self.groups.len() && rank % n < self.groups[g].len() {
                want[t.index()] = Some(g);
            }
        }
        // 3. Keep cores within a group; fill the group's free cores in module order.
        let group_of_core =
            |c: CoreId, groups: &[Vec<CoreId>]| groups.iter().position(|g| g.contains(&c));
        let mut taken: Vec<CoreId> = Vec::new();
        for (i, slot) in self.threads.iter().enumerate() {
            if let (Some(x), Some(g)) = (slot, want[i]) {
                if let Some(c) = x
                    .core
                    .filter(|&c| group_of_core(c, &self.groups) == Some(g))
                {
                    taken.push(c);
                }
            }
        }
        for &(_, t) in &ranked {
            let i = t.index();
            let Some(x) = self.threads[i].as_mut() else {
                continue;
            };
            let Some(g) = want[i] else {
                continue;
            };
            let keeps = x
                .core
                .is_some_and(|c| group_of_core(c, &self.groups) == Some(g));
            if keeps {
                continue;
            }
            let Some(&c) = self.groups[g].iter().find(|c| !taken.contains(c)) else {
                continue;
            };
            taken.push(c);
            x.core = Some(c);
            out.push(Placement::pin(t, c));
        }
        // Threads no longer in a group lose their binding.
        for (i, slot) in self.threads.iter_mut().enumerate() {
            let Some(x) = slot else {
                continue;
            };
            if want[i].is_none() && x.core.take().is_some() {
                out.push(Placement::new(
                    ThreadId(i as u32),
                    view.topology.all_cores(),
                ));
            }
        }
    }

    fn take_notice(&mut self) -> Option<String> {
        self.notice.take()
    }
}

#[cfg(test)]
mod tests;
