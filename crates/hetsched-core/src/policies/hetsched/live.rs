//! The threads a pass over the view reads: those not yet known to be done with, in id order. An
//! exited thread stays in the view for good (its id is its index), so with threads coming and
//! going (a service's requests) a pass over every thread ever started made each pass's cost grow
//! with the run.

use crate::ids::ThreadId;

/// Thread ids, ascending, and how many of the view's threads have been listed.
#[derive(Clone, Debug, Default)]
pub(super) struct LiveThreads {
    ids: Vec<u32>,
    listed: usize,
}

impl LiveThreads {
    /// The list for a pass over a view of `n` threads, those not listed before added; give it
    /// back with [`LiveThreads::put_back`], without the threads the pass is done with.
    pub(super) fn take(&mut self, n: usize) -> Vec<u32> {
        self.ids.extend((self.listed..n).map(|i| i as u32));
        self.listed = self.listed.max(n);
        std::mem::take(&mut self.ids)
    }

    /// The list after a pass (still ascending).
    pub(super) fn put_back(&mut self, ids: Vec<u32>) {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        self.ids = ids;
    }

    /// Thread `t` starts again: listed again if a pass dropped it.
    pub(super) fn restart(&mut self, t: ThreadId) {
        if t.index() < self.listed {
            if let Err(at) = self.ids.binary_search(&t.0) {
                self.ids.insert(at, t.0);
            }
        }
    }

    #[cfg(test)]
    pub(super) fn ids(&self) -> &[u32] {
        &self.ids
    }
}
