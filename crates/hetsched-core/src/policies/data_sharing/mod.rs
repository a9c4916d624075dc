//! `data-sharing`: data-sharing-conscious scheduling after Pinter & Zalmanovici
//! (Euro-Par 2006, section 4.1).
//!
//! Applications say which data fragment (DF) each thread works on (a hint at every change; the
//! simulator sends it when a phase of another DF starts). Per application, each DF maps to a CPU
//! and a *priority group*: the threads of the group run on that CPU, in succession (the policy asks
//! the backend for batching, [`Policy::batches_by_data_fragment`]).
//!
//! - A thread arriving with a **new DF** goes to the least-loaded CPU (fewest runnable threads;
//!   "since the tasks' time-slices are similar in length, this constitutes a good measure"), the
//!   lowest id on ties, and founds the DF's group there.
//! - A thread arriving with a **known DF** joins its group on the group's CPU.
//! - A thread **changing DF** leaves its group (the backend preempts it if it must move) and
//!   arrives again with its new DF; with no DF it becomes unmanaged.
//! - **Wake-up**: a thread stays pinned to its group's CPU, so it returns there.
//! - A thread that **dies** or leaves decrements its group's counter; a group whose counter reaches
//!   0 is removed (the paper flags it "may be removed"; we remove it at once, so the DF's next
//!   thread is placed afresh by load).
//! - **Load balancing** ([`DS_BALANCE_PERIOD_NS`]): when the busiest CPU holds 25% more runnable
//!   threads than the least loaded (Linux 2.6's imbalance threshold) and at least two more, a
//!   whole group moves from the busiest to the least loaded, the largest whose move does not
//!   overshoot; unmanaged threads are left to the backend's balancer; when the imbalance persists
//!   [`SPLIT_AFTER`] periods with no group able to move, the largest group on the busiest CPU is
//!   split and half its runnable threads form a second group of the DF on the least-loaded CPU.
//! - Threads without a DF are unmanaged: no placement; the backend balances them as it would.

use crate::cpuset::CpuSet;
use crate::ids::{AppId, CoreId, ThreadId};
use crate::observe::View;
use crate::policies::partitions::is_runnable;
use crate::policy::{Hint, Placement, Policy};
use std::collections::BTreeMap;

/// The policy's name, as users pass it and as the registry lists it.
pub const NAME: &str = "data-sharing";

/// Load-balancing period, ns: Linux 2.6's rebalance tick on an idle-free SMP is in the tens of
/// milliseconds; 20 ms (ours) reacts within a few time slices.
pub const DS_BALANCE_PERIOD_NS: u64 = 20_000_000;

/// A run queue is imbalanced when it holds this factor more tasks than the least loaded (Pinter
/// section 4: "An imbalanced run-queue contains 25% more tasks"; Linux 2.6 `imbalance_pct`).
pub const IMBALANCE: f64 = 1.25;

/// Balancing periods an imbalance must persist, no whole group being movable, before a group is
/// split ("in rare cases, when the problem is sustained"; the number is ours).
pub const SPLIT_AFTER: u32 = 5;

/// A DF of one application.
type DfKey = (AppId, u64);

/// One priority group: the CPU its threads run on and how many threads it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Group {
    cpu: CoreId,
    members: u32,
}

/// Counts of the policy's decisions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataSharingStats {
    pub groups_created: u64,
    pub groups_removed: u64,
    pub group_moves: u64,
    pub group_splits: u64,
}

/// The data-sharing policy.
#[derive(Default)]
pub struct DataSharing {
    /// Split at arrival (ours; the paper splits a group only when an imbalance persists): a
    /// thread whose DF's groups each hold a fair share of the runnable threads per CPU already
    /// founds another group of the DF on the least-loaded CPU rather than joining one. Without it,
    /// a barrier-synchronised job whose threads all name one DF runs one thread at a time on one
    /// CPU until the splits, [`SPLIT_AFTER`] periods apart, spread it (a thread a core on 16 equal
    /// cores: 0.53x the kernel's balance; 0.73x with it). `hetsched` turns it on.
    split_at_arrival: bool,
    /// The groups of each DF (one, or more after a split).
    groups: BTreeMap<DfKey, Vec<Group>>,
    /// Each managed thread's DF and group index.
    member_of: Vec<Option<(DfKey, usize)>>,
    sustained: u32,
    pub stats: DataSharingStats,
}

impl DataSharing {
    pub fn new() -> Self {
        Self::default()
    }

    /// The policy with groups split at arrival (see the field).
    pub fn splitting_at_arrival() -> Self {
        DataSharing {
            split_at_arrival: true,
            ..Self::default()
        }
    }

    /// The CPU of a thread's group, if managed.
    pub fn cpu_of(&self, t: ThreadId) -> Option<CoreId> {
        let (key, g) = self.member_of.get(t.index())?.as_ref()?;
        Some(self.groups.get(key)?[*g].cpu)
    }

    /// Threads in the groups of one DF, per group.
    pub fn group_sizes(&self, app: AppId, df: u64) -> Vec<(CoreId, u32)> {
        self.groups
            .get(&(app, df))
            .map(|gs| gs.iter().map(|g| (g.cpu, g.members)).collect())
            .unwrap_or_default()
    }

    /// Runnable threads per CPU as the backend counts them (a backend applies a placement before
    /// the next callback, so the view is current).
    fn loads(&self, view: &View<'_>) -> Vec<u32> {
        view.cores.iter().map(|c| c.runnable).collect()
    }

    /// Put thread `t` of `app` working on `df` into a group; its CPU.
    fn arrive(&mut self, view: &View<'_>, t: ThreadId, key: DfKey) -> Option<CoreId> {
        let allowed = &view.thread(t).user_allowed;
        let mut loads = self.loads(view);
        // Split at arrival: a group holds at most the runnable threads' fair share of a CPU, and
        // a new group goes where the load is least, a CPU's load the larger of the view's and its
        // groups' members (the threads of one batch of arrivals are not on their CPUs yet).
        let cap = self.split_at_arrival.then(|| {
            let runnable: u32 = loads.iter().sum();
            (runnable + 1).div_ceil(loads.len().max(1) as u32).max(1)
        });
        if cap.is_some() {
            let mut members = vec![0u32; loads.len()];
            for x in self.groups.values().flatten() {
                if let Some(m) = members.get_mut(x.cpu.index()) {
                    *m += x.members;
                }
            }
            for (l, m) in loads.iter_mut().zip(members) {
                *l = (*l).max(m);
            }
        }
        let groups = self.groups.entry(key).or_default();
        // A known DF: its group (the least populated one the thread may use, after a split), one
        // below the cap when groups are split at arrival.
        let known = (0..groups.len())
            .filter(|&g| allowed.contains(groups[g].cpu))
            .filter(|&g| cap.is_none_or(|cap| groups[g].members < cap))
            .min_by_key(|&g| (groups[g].members, g));
        let g = match known {
            Some(g) => g,
            None => {
                let cpu = allowed.iter().min_by_key(|c| (loads[c.index()], c.0))?;
                groups.push(Group { cpu, members: 0 });
                self.stats.groups_created += 1;
                groups.len() - 1
            }
        };
        groups[g].members += 1;
        let cpu = groups[g].cpu;
        if self.member_of.len() <= t.index() {
            self.member_of.resize(t.index() + 1, None);
        }
        self.member_of[t.index()] = Some((key, g));
        Some(cpu)
    }

    /// Thread `t` leaves its group (death or a DF change).
    fn leave(&mut self, t: ThreadId) {
        let Some(Some((key, g))) = self.member_of.get_mut(t.index()).map(Option::take) else {
            return;
        };
        let Some(groups) = self.groups.get_mut(&key) else {
            return;
        };
        groups[g].members = groups[g].members.saturating_sub(1);
        if groups.iter().all(|x| x.members == 0) {
            self.groups.remove(&key);
            self.stats.groups_removed += 1;
        }
    }

    /// Runnable members of each group, with the group's CPU.
    fn runnable_groups(&self, view: &View<'_>) -> BTreeMap<(DfKey, usize), (CoreId, u32)> {
        let mut out: BTreeMap<(DfKey, usize), (CoreId, u32)> = BTreeMap::new();
        for (i, m) in self.member_of.iter().enumerate() {
            let Some((key, g)) = m else { continue };
            if !is_runnable(view.threads[i].state) {
                continue;
            }
            let cpu = self.groups[key][*g].cpu;
            out.entry((*key, *g)).or_insert((cpu, 0)).1 += 1;
        }
        out
    }

    /// Move every member of group `(key, g)` to `cpu`.
    fn move_group(&mut self, key: DfKey, g: usize, cpu: CoreId, out: &mut Vec<Placement>) {
        if let Some(groups) = self.groups.get_mut(&key) {
            groups[g].cpu = cpu;
        }
        for (i, m) in self.member_of.iter().enumerate() {
            if *m == Some((key, g)) {
                out.push(Placement::pin(ThreadId(i as u32), cpu));
            }
        }
    }
}

impl Policy for DataSharing {
    fn needs(&self) -> &'static [crate::policy::Signal] {
        use crate::policy::Signal;
        &[Signal::DataFragments]
    }

    fn name(&self) -> &str {
        NAME
    }

    fn rebalance_period_ns(&self) -> u64 {
        DS_BALANCE_PERIOD_NS
    }

    fn batches_by_data_fragment(&self) -> bool {
        true
    }

    fn on_thread_start(&mut self, view: &View<'_>, thread: ThreadId) -> Option<CpuSet> {
        let obs = view.thread(thread);
        let df = obs.data_fragment?;
        self.arrive(view, thread, (obs.app, df)).map(CpuSet::single)
    }

    fn on_thread_exit(&mut self, _view: &View<'_>, thread: ThreadId) {
        self.leave(thread);
    }

    fn on_hint(
        &mut self,
        view: &View<'_>,
        thread: ThreadId,
        hint: &Hint,
        out: &mut Vec<Placement>,
    ) {
        let Hint::DataFragment { next, .. } = hint else {
            return;
        };
        let was = self.cpu_of(thread);
        self.leave(thread);
        match next {
            Some(df) => {
                let app = view.thread(thread).app;
                if let Some(cpu) = self.arrive(view, thread, (app, *df)) {
                    if was != Some(cpu) {
                        out.push(Placement::pin(thread, cpu));
                    }
                }
            }
            None => {
                if was.is_some() {
                    out.push(Placement::new(thread, view.topology.all_cores()));
                }
            }
        }
    }

    fn rebalance(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        let loads = self.loads(view);
        let Some((busiest, &hi)) = loads
            .iter()
            .enumerate()
            .max_by_key(|(c, &l)| (l, usize::MAX - c))
        else {
            return;
        };
        let Some((idlest, &lo)) = loads.iter().enumerate().min_by_key(|(c, &l)| (l, *c)) else {
            return;
        };
        let imbalanced = hi >= lo + 2 && hi as f64 > lo as f64 * IMBALANCE;
        if !imbalanced {
            self.sustained = 0;
            return;
        }
        let (src, dst) = (CoreId(busiest as u32), CoreId(idlest as u32));
        let diff = hi - lo;
        let movable = |key: &DfKey, g: usize, this: &Self| {
            this.member_of
                .iter()
                .enumerate()
                .all(|(i, m)| *m != Some((*key, g)) || view.threads[i].user_allowed.contains(dst))
        };
        let on_src: Vec<((DfKey, usize), u32)> = self
            .runnable_groups(view)
            .into_iter()
            .filter(|(_, (cpu, _))| *cpu == src)
            .map(|(k, (_, n))| (k, n))
            .collect();
        // The largest group whose move does not overshoot the balance.
        let pick = on_src
            .iter()
            .filter(|((key, g), n)| *n >= 1 && 2 * n <= diff && movable(key, *g, self))
            .max_by_key(|(k, n)| (*n, std::cmp::Reverse(*k)));
        if let Some(&((key, g), _)) = pick {
            self.stats.group_moves += 1;
            self.sustained = 0;
            self.move_group(key, g, dst, out);
            return;
        }
        self.sustained += 1;
        if self.sustained < SPLIT_AFTER {
            return;
        }
        // Sustained: split the largest group on the busiest CPU.
        let Some(&((key, g), n)) = on_src
            .iter()
            .max_by_key(|(k, n)| (*n, std::cmp::Reverse(*k)))
        else {
            return;
        };
        if n < 2 {
            return;
        }
        self.sustained = 0;
        self.stats.group_splits += 1;
        let groups = self.groups.entry(key).or_default();
        groups.push(Group {
            cpu: dst,
            members: 0,
        });
        let ng = groups.len() - 1;
        let mut moved = 0;
        for i in 0..self.member_of.len() {
            if moved >= n / 2 {
                break;
            }
            if self.member_of[i] == Some((key, g))
                && is_runnable(view.threads[i].state)
                && view.threads[i].user_allowed.contains(dst)
            {
                self.member_of[i] = Some((key, ng));
                if let Some(groups) = self.groups.get_mut(&key) {
                    groups[g].members -= 1;
                    groups[ng].members += 1;
                }
                out.push(Placement::pin(ThreadId(i as u32), dst));
                moved += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests;
