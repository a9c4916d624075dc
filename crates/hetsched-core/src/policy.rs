//! The policy interface: a policy sees a [`View`] and answers with placements. It needs
//! `rebalance` and little else to exist; the other callbacks default to doing nothing, so a
//! simple policy stays short. Policies make no OS calls, read no clock and draw no unseeded random number:
//! time comes in as `View::now_ns`.

use crate::cpuset::CpuSet;
use crate::ids::{AppId, CoreId, NodeId, ThreadId};
use crate::observe::View;
use crate::signature::Signature;
use std::sync::Arc;

/// Where a thread may run from now on. The backend intersects it with the user's mask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub thread: ThreadId,
    pub cpus: CpuSet,
}

impl Placement {
    pub fn new(thread: ThreadId, cpus: CpuSet) -> Self {
        Self { thread, cpus }
    }
    /// Pin to one core.
    pub fn pin(thread: ThreadId, core: CoreId) -> Self {
        Self {
            thread,
            cpus: CpuSet::single(core),
        }
    }
}

/// Move an application's most accessed pages ("sticky pages", Ding et al. section 3.3.2) that are
/// not on node `to` there, at most `max_bytes` of them. The backend chooses the pages by their
/// access heat and charges the copy to the application's threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageMove {
    pub app: AppId,
    pub to: NodeId,
    pub max_bytes: u64,
}

/// A hint from an application about one of its threads.
#[derive(Clone, Debug, PartialEq)]
pub enum Hint {
    /// The data fragment a thread works on now and next (Pinter section 4).
    DataFragment {
        current: Option<u64>,
        next: Option<u64>,
    },
    /// The thread's architectural signature, for the task it starts now (HASS section 5,
    /// "Extension to multithreaded applications": a signature per thread or per task).
    Signature(Arc<Signature>),
}

/// An observation a policy decides on that not every backend can supply. A live machine without
/// hardware counters has none of the counter signals; hints exist only when applications send
/// them. A policy declares what it uses ([`Policy::needs`]) so the backend can say, once, what the
/// policy will miss on this machine; the policy itself must still act sensibly on zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// Instructions and cycles (IPC).
    Ipc,
    /// LLC misses and references per instruction.
    LlcMisses,
    /// FPU busy cycles (BulldOver's CYCLES_FPU_EMPTY, or FP instructions).
    FpBusy,
    /// LLC eviction and fill counts (Ding et al. equation 5).
    LlcTraffic,
    /// Per-node access heat of a process's pages, which the backend's page mover uses to move the
    /// hottest node's pages first (a [`PageMove`] names only the process and the destination).
    NodeAccesses,
    /// Per-node resident memory.
    NodeResidency,
    /// Architectural signatures (from a signature file or a hint).
    Signatures,
    /// Data-fragment hints.
    DataFragments,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Ipc => "instructions and cycles",
            Signal::LlcMisses => "LLC misses and references",
            Signal::FpBusy => "FPU busy cycles",
            Signal::LlcTraffic => "LLC evictions and fills",
            Signal::NodeAccesses => "per-node access heat",
            Signal::NodeResidency => "per-node resident memory",
            Signal::Signatures => "architectural signatures",
            Signal::DataFragments => "data-fragment hints",
        }
    }
}

/// A placement policy. The same object runs in the simulator and live.
pub trait Policy: Send {
    /// The CLI name (`amps`, `hass`, ...).
    fn name(&self) -> &str;

    /// How often `rebalance` is called, ns.
    fn rebalance_period_ns(&self) -> u64 {
        100_000_000
    }

    /// Periodic decision over the whole system.
    fn rebalance(&mut self, view: &View<'_>, out: &mut Vec<Placement>);

    /// A thread appeared. Return a placement to apply before it first runs.
    ///
    /// `thread` may be the id of a thread that exited earlier (the live backend reuses ids to keep
    /// its memory bounded under thread churn): it is a new thread, and nothing the policy kept
    /// about the old one may carry over to it.
    fn on_thread_start(&mut self, _view: &View<'_>, _thread: ThreadId) -> Option<CpuSet> {
        None
    }

    /// A thread is gone; its id may be given to a new thread later.
    fn on_thread_exit(&mut self, _view: &View<'_>, _thread: ThreadId) {}

    /// A core has nothing to run (faster-core-first policies pull here).
    fn on_core_idle(&mut self, _view: &View<'_>, _core: CoreId, _out: &mut Vec<Placement>) {}

    /// An application sent a hint about one of its threads.
    fn on_hint(
        &mut self,
        _view: &View<'_>,
        _thread: ThreadId,
        _hint: &Hint,
        _out: &mut Vec<Placement>,
    ) {
    }

    /// A message for the user, given once (for example: this machine has nothing the policy acts
    /// on). Policies print nothing themselves; the backend shows it on stderr.
    fn take_notice(&mut self) -> Option<String> {
        None
    }

    /// Whether the policy asks the backend to run the threads of one application and data fragment
    /// in succession on a core (Pinter section 4.1's priority groups), an order within a core that
    /// placements cannot express. The simulator honours it; stock Linux cannot.
    fn batches_by_data_fragment(&self) -> bool {
        false
    }

    /// Page moves the policy asks for since the last call; the backend collects them after every
    /// callback that may place threads. Default: none.
    fn take_page_moves(&mut self, _out: &mut Vec<PageMove>) {}

    /// The observations the policy decides on beyond state, CPU and CPU time. Default: none.
    fn needs(&self) -> &'static [Signal] {
        &[]
    }

    /// Whether the policy keeps work conserving for `thread` and `core`: after its periodic
    /// balance, and for the core of an idle call after that call, `core` does not idle while the
    /// thread waits behind another on a core of its own although its user mask allows `core`
    /// ([`crate::observe::idle_beside_waiting`]). Between two balances a thread that wakes on its
    /// pinned, busy core may wait at most one rebalance period. The simulator asserts it in debug
    /// builds. Default: no promise (a policy that restricts threads to a class or groups them on a
    /// CPU by design says why in its module doc).
    fn conserves_work_for(&self, _view: &View<'_>, _thread: ThreadId, _core: CoreId) -> bool {
        false
    }

    /// True for the baseline: the backend's own balancer does everything.
    fn is_baseline(&self) -> bool {
        false
    }
}
