//! Helpers the policies' unit tests share: a view over hand-built threads.

use crate::observe::{CoreObs, ThreadObs, View};
use crate::topology::Topology;

/// A view of `threads` on `topo` at `now_ns`.
pub(crate) fn view<'a>(
    topo: &'a Topology,
    threads: &'a [ThreadObs],
    cores: &'a [CoreObs],
    now_ns: u64,
) -> View<'a> {
    View {
        now_ns,
        topology: topo,
        threads,
        cores,
        run_queues: None,
        resident_changed: None,
        lifecycle_changed: None,
    }
}
