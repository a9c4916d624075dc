//! The policy port: the policy's view of the machine, its hints, and how its placements and page
//! moves are applied.

use super::Simulation;
use crate::runqueue::RunQueue;
use hetsched_core::observe::RunQueues;
use hetsched_core::{CoreId, IdVec, ThreadId};
use hetsched_core::{Hint, Placement, Policy, ThreadState, View};
use std::time::Instant;

/// Machines larger than this skip the debug-build work-conservation check (its cost grows with
/// waiting threads times idle cores at every decision).
const CONSERVATION_CHECK_MAX_CORES: usize = 64;
/// The engine's run queues as a policy reads them.
struct Queues<'q>(&'q IdVec<CoreId, RunQueue>);

impl RunQueues for Queues<'_> {
    fn for_each_waiting(&self, core: CoreId, f: &mut dyn FnMut(ThreadId)) {
        self.0[core].threads().for_each(f);
    }
}

impl<'a> Simulation<'a> {
    /// Call the policy with a view of now, adding the time it takes to the policy's CPU time.
    pub(super) fn call_policy<R>(
        &mut self,
        call: impl FnOnce(&mut dyn Policy, &View<'_>) -> R,
    ) -> R {
        let t0 = Instant::now();
        let queues = Queues(&self.queues);
        let view = View {
            now_ns: self.now,
            topology: self.topo,
            threads: self.obs.as_slice(),
            cores: self.core_obs.as_slice(),
            run_queues: Some(&queues),
            resident_changed: Some(self.changes.resident()),
            lifecycle_changed: Some(self.changes.lifecycle()),
        };
        let r = call(self.policy.as_mut(), &view);
        self.policy_time += t0.elapsed();
        r
    }

    /// Call the policy, then apply the placements it answers.
    pub(super) fn with_policy(
        &mut self,
        call: impl FnOnce(&mut dyn Policy, &View<'_>, &mut Vec<Placement>),
    ) {
        self.call_and_apply(call, false);
    }

    /// The policy's periodic balance; the log of changed threads starts again after it (before its
    /// placements apply, so that the next balance sees what they change).
    pub(super) fn rebalance_policy(&mut self) {
        self.call_and_apply(|p, view, out| p.rebalance(view, out), true);
    }

    fn call_and_apply(
        &mut self,
        call: impl FnOnce(&mut dyn Policy, &View<'_>, &mut Vec<Placement>),
        clear_changes: bool,
    ) {
        let mut out = std::mem::take(&mut self.placements);
        out.clear();
        self.call_policy(|p, view| call(p, view, &mut out));
        if clear_changes {
            self.changes.clear();
        }
        for p in out.drain(..) {
            self.apply_placement(p);
        }
        self.placements = out;
        let mut moves = std::mem::take(&mut self.page_moves);
        self.policy.take_page_moves(&mut moves);
        for m in moves.drain(..) {
            self.move_pages(&m);
        }
        self.page_moves = moves;
    }

    /// Debug builds, machines of at most [`CONSERVATION_CHECK_MAX_CORES`] cores: the policy's
    /// work-conservation promise holds ([`Policy::conserves_work_for`]):
    /// on core `only` after an idle call, on every core after a periodic balance. One decision may
    /// leave a breach (a part of a combined policy placed threads the others did not see yet); the
    /// next periodic balance must mend it, so a breach that outlives one balance period panics.
    pub(super) fn check_conserving(&mut self, only: Option<CoreId>) {
        // The check scans waiting threads against idle cores at every decision: on the scale
        // presets (1,024 cores, 16k threads) a debug run would take minutes. The property tests'
        // machines have at most 64 cores.
        if !cfg!(debug_assertions) || self.topo.num_cores() > CONSERVATION_CHECK_MAX_CORES {
            return;
        }
        let view = View {
            now_ns: self.now,
            topology: self.topo,
            threads: self.obs.as_slice(),
            cores: self.core_obs.as_slice(),
            run_queues: None,
            resident_changed: None,
            lifecycle_changed: None,
        };
        // A core a placement of this decision emptied gets its own idle call next.
        let pending: hetsched_core::CpuSet = self.need_pick.iter().copied().collect();
        let policy = &self.policy;
        let breach = hetsched_core::observe::idle_beside_waiting(&view, only, |t, c| {
            policy.conserves_work_for(&view, t, c)
        })
        .filter(|(c, _)| !pending.contains(*c));
        match (breach, self.conservation_breach) {
            (Some((core, t)), Some(_)) if only.is_none() => panic!(
                "{}: core {} idles at {} ns while thread {} waits on core {:?}, one balance \
                 period after an earlier breach",
                self.policy.name(),
                core.0,
                self.now,
                t.0,
                self.obs[t].cpu.map(|c| c.0)
            ),
            (Some(b), _) => self.conservation_breach = Some(b),
            (None, _) if only.is_none() => self.conservation_breach = None,
            (None, _) => {}
        }
    }

    /// Whether idle core `c` is kept from a thread waiting behind another that the policy promised
    /// not to keep waiting ([`Policy::conserves_work_for`]). Only queued threads wait, so only
    /// they are looked at (the idle sweep asks this for every idle core).
    pub(super) fn breach_at(&self, c: CoreId) -> bool {
        let view = View {
            now_ns: self.now,
            topology: self.topo,
            threads: self.obs.as_slice(),
            cores: self.core_obs.as_slice(),
            run_queues: None,
            resident_changed: None,
            lifecycle_changed: None,
        };
        let policy = &self.policy;
        let queued = self.queued.iter().flat_map(|b| self.queues[b].threads());
        hetsched_core::observe::idle_beside_waiting_among(&view, Some(c), queued, |t, c| {
            policy.conserves_work_for(&view, t, c)
        })
        .is_some()
    }

    /// A thread moved to another data fragment: the application's hint (Pinter section 4.1: the
    /// current and next DF, "whenever it changes DFs"), answered by the policy at once.
    pub(super) fn hint_fragment_change(&mut self, t: ThreadId, before: Option<u64>) {
        let now = self.obs[t].data_fragment;
        if now == before {
            return;
        }
        let hint = Hint::DataFragment {
            current: before,
            next: now,
        };
        self.with_policy(|p, view, out| p.on_hint(view, t, &hint, out));
    }

    /// Apply a policy placement: restrict the thread, moving it if it is outside its new set.
    pub(super) fn apply_placement(&mut self, p: Placement) {
        let t = p.thread;
        if self
            .obs
            .get(t)
            .is_none_or(|o| o.state == ThreadState::Exited)
        {
            return;
        }
        let allowed = p.cpus.intersection(&self.obs[t].user_allowed);
        if allowed.is_empty() {
            self.rejected_placements += 1;
            return;
        }
        if allowed == self.obs[t].allowed {
            return;
        }
        self.set_allowed(t, allowed);
        let Some(cpu) = self.obs[t].cpu else { return };
        let c = cpu;
        if self.obs[t].allowed.contains(cpu) {
            // A waiting thread whose new set offers an idle core goes there now, as the kernel's
            // idle balance would: no core idles while a thread waits that may run on it.
            if self.obs[t].state == ThreadState::Runnable {
                let dest = self.place_wake(t);
                if dest != c {
                    self.dequeue_waiting(t, c);
                    self.enqueue(t, dest);
                }
            }
            return;
        }
        match self.obs[t].state {
            ThreadState::Running => {
                self.undispatch(c);
                self.threads[t].lag = self.threads[t].vruntime - self.cores[c].min_vruntime;
                self.need_pick.push(c);
                let dest = self.place_wake(t);
                self.enqueue(t, dest);
            }
            ThreadState::Runnable => {
                self.dequeue_waiting(t, c);
                let dest = self.place_wake(t);
                self.enqueue(t, dest);
            }
            _ => {}
        }
    }
}
