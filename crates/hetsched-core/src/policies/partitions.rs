//! CPU partitions as HASS and the IPC-driven algorithm use them (HASS sections 4 and 6): cores of
//! one class grouped into partitions, a thread assigned to one partition at a time, and a count of
//! the runnable threads each partition holds.

use crate::cpuset::CpuSet;
use crate::ids::{ClassId, CoreId, ThreadId};
use crate::observe::{ThreadState, View};
use crate::topology::{Partition, Topology};

/// Largest partition: a class of more cores is split (HASS section 4: "each class may contain one
/// or more partitions" when classes are large). The paper gives no size (its machines had at most
/// 12 cores a class and it did not implement splitting); 32 keeps regular assignment, linear in the
/// number of partitions, cheap on a 1,024-core machine (32 partitions) while a partition's
/// runnable counter is shared by at most 32 cores.
pub const MAX_PARTITION_CORES: usize = 32;

/// The machine's partitions, fastest class first, and which partition each core is in.
#[derive(Clone, Debug, Default)]
pub struct Partitions {
    parts: Vec<Partition>,
    of_core: Vec<usize>,
    sizes: Vec<u32>,
}

impl Partitions {
    pub fn new(topo: &Topology) -> Self {
        let parts = topo.partitions(MAX_PARTITION_CORES);
        let mut of_core = vec![0; topo.num_cores()];
        for (i, p) in parts.iter().enumerate() {
            for c in p.cores.iter() {
                of_core[c.index()] = i;
            }
        }
        let sizes = parts.iter().map(|p| p.cores.len() as u32).collect();
        Partitions {
            parts,
            of_core,
            sizes,
        }
    }

    pub fn len(&self) -> usize {
        self.parts.len()
    }
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }
    /// The partition a core belongs to.
    pub fn of_core(&self, core: CoreId) -> usize {
        self.of_core[core.index()]
    }
    pub fn class(&self, p: usize) -> ClassId {
        self.parts[p].class
    }
    pub fn cores(&self, p: usize) -> &CpuSet {
        &self.parts[p].cores
    }
    /// Number of cores of partition `p`.
    pub fn size(&self, p: usize) -> u32 {
        self.sizes[p]
    }
    /// Whether a thread allowed on `user_allowed` may run in partition `p`.
    pub fn usable(&self, p: usize, user_allowed: &CpuSet) -> bool {
        self.parts[p].cores.intersects(user_allowed)
    }
}

/// Whether a thread counts as runnable (running, or ready to run): HASS section 4.
pub fn is_runnable(state: ThreadState) -> bool {
    matches!(state, ThreadState::Running | ThreadState::Runnable)
}

/// Runnable threads per partition, counting each runnable thread that `partition_of` assigns.
pub fn runnable_counts(
    view: &View<'_>,
    parts: &Partitions,
    partition_of: impl Fn(ThreadId) -> Option<usize>,
) -> Vec<u32> {
    let mut counts = vec![0; parts.len()];
    for t in view.threads.iter().filter(|t| is_runnable(t.state)) {
        if let Some(p) = partition_of(t.id) {
            counts[p] += 1;
        }
    }
    counts
}
