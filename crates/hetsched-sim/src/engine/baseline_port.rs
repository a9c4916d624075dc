//! The baseline port: the kernel balancer sees the run queues read-only and moves threads through
//! [`BalancePort`], never the engine's own state.

use super::Simulation;
use crate::baseline::{BalancePort, Baseline, RunQueueView};
use hetsched_core::{CoreId, ThreadId, ThreadState};

impl<'a> Simulation<'a> {
    /// The run queues as the baseline sees them.
    fn rq_view(&self) -> RunQueueView<'_> {
        RunQueueView {
            now_ns: self.now,
            topology: self.topo,
            threads: &self.obs,
            cores: &self.core_obs,
            queues: &self.queues,
            idle: &self.idle,
            queued: &self.queued,
            waiting_may_move: self.waiting_may_move,
            allowed_summary: &self.allowed_summary,
            summary_span: self.summary_span,
            allowed_reach: &self.allowed_reach,
        }
    }

    /// Run the baseline with the engine as its port. `None` only if the baseline is already
    /// running (it never calls back into itself).
    pub(super) fn with_baseline<R>(
        &mut self,
        call: impl FnOnce(&mut dyn Baseline, &mut Self) -> R,
    ) -> Option<R> {
        let mut b = self.baseline.take()?;
        let r = call(b.as_mut(), self);
        self.baseline = Some(b);
        Some(r)
    }

    /// The core a new thread is queued on.
    pub(super) fn place_new(&mut self, t: ThreadId) -> CoreId {
        self.with_baseline(|b, sim| b.place_new(&sim.rq_view(), t))
            .unwrap_or_else(|| self.fallback_core(t))
    }

    /// The core a waking (or re-placed) thread is queued on.
    pub(super) fn place_wake(&mut self, t: ThreadId) -> CoreId {
        self.with_baseline(|b, sim| b.place_wake(&sim.rq_view(), t))
            .unwrap_or_else(|| self.fallback_core(t))
    }

    /// Where a thread goes if the baseline cannot be asked: its previous core if it may run there,
    /// else the first it may.
    fn fallback_core(&self, t: ThreadId) -> CoreId {
        let obs = &self.obs[t];
        obs.cpu
            .filter(|&c| obs.allowed.contains(c))
            .or_else(|| obs.allowed.iter().next())
            .unwrap_or(CoreId(0))
    }

    /// Idle core `c` asks the baseline for a waiting thread to pull.
    pub(super) fn newidle_pull(&mut self, c: CoreId) {
        if let Some(Some(t)) = self.with_baseline(|b, sim| b.newidle_pull(&sim.rq_view(), c)) {
            self.move_thread(t, c);
        }
    }
}

impl BalancePort for Simulation<'_> {
    fn view(&self) -> RunQueueView<'_> {
        self.rq_view()
    }

    fn move_thread(&mut self, t: ThreadId, to: CoreId) {
        let Some(from) = self.obs[t].cpu else {
            return;
        };
        match self.obs[t].state {
            ThreadState::Runnable => self.dequeue_waiting(t, from),
            ThreadState::Running => {
                self.undispatch(from);
                self.threads[t].lag = self.threads[t].vruntime - self.cores[from].min_vruntime;
                self.need_pick.push(from);
            }
            ThreadState::Blocked | ThreadState::Exited => return,
        }
        self.enqueue(t, to);
        self.balance_moves += 1;
    }
}
