//! `linux-2.6`: the O(1) scheduler with scheduling domains of Linux 2.6.16, the kernel of the
//! AMPS and Pinter papers' experiments, on a machine it believes symmetric (each rule named by the
//! 2.6.16 kernel/sched.c function it models; docs/baselines.md lists what is left out):
//!
//! 1. **Fork and exec balancing** (`sched_fork` with `SD_BALANCE_FORK`, `sched_exec`): a new
//!    thread goes to the idlest core of its allowed set by run-queue length; ties are broken by
//!    the seeded generator.
//! 2. **Wake-ups stay put** (`try_to_wake_up`): a waking thread is queued on the core it last ran
//!    on, busy or not, as long as it may run there. (2.6.16 could also pull it to the waker's core
//!    under `SD_WAKE_AFFINE`; the simulator has no waker, so that case is left out. There is no
//!    search for an idle core: `select_idle_sibling` came with 2.6.28.)
//! 3. **Idle balancing** (`idle_balance`, and `rebalance_tick` on an idle core every 1-4 ms): a
//!    core going idle, and every idle core at each tick, pulls a waiting thread from the busiest
//!    core that has one it may run.
//! 4. **Busy balancing** (`rebalance_tick` on a busy core): every `balance_interval x
//!    busy_factor` (1 ms x 64, [`BUSY_BALANCE_TICKS`] ticks) the least loaded cores pull waiting
//!    threads from the busiest while the run-queue lengths differ by two or more (with integer
//!    lengths this is `imbalance_pct` 125's test, `find_busiest_group`).
//! 5. Only waiting threads move; a running thread is never pushed off its core (2.6.16's active
//!    balance only moved a running thread after repeated failures, which the simulator's balance,
//!    finding a waiting thread whenever one may move, never reaches).
//!
//! Load is the run-queue length (`nr_running`, the `SCHED_LOAD_SCALE` per task of 2.6); core
//! speed plays no part.

use super::linux_cfs::LinuxCfs;
use super::{BalancePort, Baseline, RunQueueView};
use hetsched_core::{CoreId, ThreadId};

/// The baseline's name.
pub const NAME: &str = "linux-2.6";

/// Ticks between busy-core balances: `SD_CPU_INIT`'s `min_interval` (1 ms) times `busy_factor`
/// (64), include/linux/topology.h of 2.6.16, is 64 ms: 16 ticks of 4 ms (HZ 250).
pub const BUSY_BALANCE_TICKS: u64 = 16;

/// The balancer: the seeded tie-breaks and queue scans of `linux-cfs`, with 2.6's rules.
#[derive(Clone, Debug)]
pub struct Linux26 {
    cfs: LinuxCfs,
    /// One per core: the balance weighs every core alike.
    equal_capacity: Vec<f64>,
}

impl Linux26 {
    /// A balancer whose random tie-breaks follow `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            cfs: LinuxCfs::new(seed),
            equal_capacity: Vec::new(),
        }
    }
}

impl Baseline for Linux26 {
    fn name(&self) -> &'static str {
        NAME
    }

    /// The idlest allowed core (an idle one when there is one); seeded tie-break.
    fn place_new(&mut self, rq: &RunQueueView<'_>, t: ThreadId) -> CoreId {
        self.cfs.random_least_loaded(rq, t)
    }

    /// The previous core when allowed, else the idlest allowed core.
    fn place_wake(&mut self, rq: &RunQueueView<'_>, t: ThreadId) -> CoreId {
        match rq.cpu(t) {
            Some(p) if rq.may_run(t, p) => p,
            _ => self.cfs.random_least_loaded(rq, t),
        }
    }

    fn newidle_pull(&mut self, rq: &RunQueueView<'_>, idle: CoreId) -> Option<ThreadId> {
        self.cfs.newidle_pull(rq, idle)
    }

    fn on_tick(&mut self, tick: u64, port: &mut dyn BalancePort) {
        // Idle cores balance at every tick: each pulls from the busiest core it can.
        let idle: Vec<CoreId> = {
            let rq = port.view();
            if rq.queued.is_empty() {
                Vec::new()
            } else {
                rq.idle.iter().collect()
            }
        };
        for c in idle {
            let rq = port.view();
            if rq.runnable(c) > 0 || rq.queued.is_empty() {
                continue;
            }
            if let Some(t) = self.cfs.newidle_pull(&rq, c) {
                port.move_thread(t, c);
            }
        }
        if tick.is_multiple_of(BUSY_BALANCE_TICKS) {
            let n = port.view().num_cores();
            self.equal_capacity.resize(n, 1.0);
            self.cfs.periodic_balance(&self.equal_capacity, port);
        }
    }
}
