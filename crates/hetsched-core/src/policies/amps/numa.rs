//! AMPS NUMA-aware migration of running threads (AMPS section 2.4).
//!
//! When faster-core-first picks a *running* thread to migrate, one of three policies decides
//! (section 2.4.3):
//!
//! | policy      | allows a running thread to move from core A to core B when                  |
//! |-------------|------------------------------------------------------------------------------|
//! | `always`    | always (the default on SMP machines, where all three behave alike)            |
//! | `same-node` | A and B are in the same node                                                  |
//! | `rss`       | the overhead is not predicted high, and the thread is not allocating memory   |
//!
//! The prediction (section 2.4.2, "Prediction algorithm") says *high* when all three hold:
//! 1. A and B are in different nodes;
//! 2. A's node holds the thread's largest per-node resident set;
//! 3. that resident set is larger than B's last-level cache.
//!
//! The allocation phase (section 2.4.3, last paragraph): at each timer interrupt the thread's total
//! resident set is compared with the previous one; if it grew, the thread is allocating.

use crate::ids::CoreId;
use crate::topology::Topology;
use std::fmt;
use std::str::FromStr;

/// Which running threads may migrate (AMPS section 2.4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NumaMode {
    Always,
    SameNode,
    Rss,
}

impl NumaMode {
    pub const ALL: [NumaMode; 3] = [NumaMode::Always, NumaMode::SameNode, NumaMode::Rss];

    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            NumaMode::Always => "always",
            NumaMode::SameNode => "same-node",
            NumaMode::Rss => "rss",
        }
    }

    /// The paper's defaults: `always` on SMP ("the default policy in AMPS for SMP systems"), and on
    /// NUMA the policy its evaluation found best, `rss` (section 4.3).
    pub fn default_for(topology: &Topology) -> NumaMode {
        if topology.nodes().len() > 1 {
            NumaMode::Rss
        } else {
            NumaMode::Always
        }
    }
}

impl fmt::Display for NumaMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NumaMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        NumaMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("{s:?}: not a NUMA policy (always, same-node, rss)"))
    }
}

/// The three-condition prediction of section 2.4.2: is moving a thread with these per-node resident
/// bytes from core `from` to core `to` likely to cost many remote misses?
pub fn high_overhead(
    topology: &Topology,
    resident_bytes: &[u64],
    from: CoreId,
    to: CoreId,
) -> bool {
    let (a, b) = (topology.node_of(from), topology.node_of(to));
    // (1) different nodes.
    if a == b {
        return false;
    }
    let on_a = resident_bytes.get(a.index()).copied().unwrap_or(0);
    // (2) A's node has the maximum resident set of the thread's nodes.
    let max = resident_bytes.iter().copied().max().unwrap_or(0);
    if on_a < max {
        return false;
    }
    // (3) that resident set exceeds B's last-level cache.
    let llc_b = topology.llc_of(to).map_or(0, |c| c.size_bytes);
    on_a > llc_b
}

/// Whether a move from core `from` to core `to` takes a thread away from the node that holds the
/// largest of its resident sets: conditions (1) and (2) of [`high_overhead`], whatever the size.
/// The kernel's balancer treats such a move as cache-hot and makes it only once balancing has
/// failed repeatedly (`migrate_degrades_locality`, called from `can_migrate_task` in
/// kernel/sched/fair.c).
pub fn leaves_home(topology: &Topology, resident_bytes: &[u64], from: CoreId, to: CoreId) -> bool {
    let (a, b) = (topology.node_of(from), topology.node_of(to));
    let on_a = resident_bytes.get(a.index()).copied().unwrap_or(0);
    a != b && on_a > 0 && resident_bytes.iter().all(|&r| r <= on_a)
}

/// Whether `mode` lets a running thread move from `from` to `to`. `allocating` is the thread's
/// allocation-phase flag (only the `rss` policy reads it, and only for a move across nodes).
///
/// Section 2.4.3 has `rss` keep a thread in its allocation phase where it is, so that it does not
/// "migrate to other nodes where it continues to allocate memory, causing its resident set to
/// spread across nodes". A move within the node cannot spread it (first touch places the pages
/// on the same node either way), and the overhead prediction of section 2.4.2 is never high
/// within a node; so we apply the condition to moves across nodes only. Applied to every move, it
/// kept a thread that allocates throughout its run (a growing heap, a streaming program) on a
/// slow core for good while a fast core of its own node idled.
pub fn running_move_allowed(
    mode: NumaMode,
    topology: &Topology,
    resident_bytes: &[u64],
    allocating: bool,
    from: CoreId,
    to: CoreId,
) -> bool {
    match mode {
        NumaMode::Always => true,
        NumaMode::SameNode => topology.node_of(from) == topology.node_of(to),
        NumaMode::Rss => {
            topology.node_of(from) == topology.node_of(to)
                || (!allocating && !high_overhead(topology, resident_bytes, from, to))
        }
    }
}

/// The allocation-phase heuristic's memory: the total resident bytes a thread had at the last timer
/// interrupt that found it running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocationPhase {
    previous_rss: u64,
    allocating: bool,
}

impl AllocationPhase {
    /// A timer interrupt found the thread running with this total resident set: it is allocating
    /// if the set grew since the last such interrupt.
    pub fn observe(&mut self, total_rss: u64) {
        self.allocating = total_rss > self.previous_rss;
        self.previous_rss = total_rss;
    }

    pub fn allocating(&self) -> bool {
        self.allocating
    }
}

/// Total resident bytes over every node.
pub fn total_rss(resident_bytes: &[u64]) -> u64 {
    resident_bytes.iter().sum()
}
