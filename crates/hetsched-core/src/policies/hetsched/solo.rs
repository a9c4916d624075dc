//! Cores of their own for single-threaded processes while threads outnumber cores.
//!
//! When more threads compete than there are cores, some share a core. AMPS's scaled load decides
//! how many share each core, not who: a single-threaded program may share a fast core with two
//! threads of a barrier job while another of that job's threads runs alone. For the time the
//! workload takes to finish that choice matters. A multi-threaded process can use every core the
//! others leave, and when the single-threaded programs are done it has all of them; a
//! single-threaded program can use one core and nothing else, so whatever it loses to sharing
//! comes straight onto its completion time, and a long one finishes last, alone, with the
//! machine idle around it. (This is the list-scheduling rule of running the work that cannot
//! spread first; Ding et al. reach the same placement by ranking whole processes, section 3.3.1,
//! where a single-threaded process fits the fast cores whole and a wide one does not.)
//!
//! So while the competing threads outnumber the cores and the AMPS part places every thread, each
//! competing single-threaded program holds one of the machine's faster cores alone: those of
//! every class but the slowest, fastest first. The programs that gain most from a fast core (the
//! [`super::benefit`] estimate) get the fastest ones; a holder keeps its core while that core is
//! still among those given. Two conditions keep the rule to where its argument holds:
//! - **all of the programs or none**: when there are more of them than faster cores, the ones
//!   left over would share the slowest cores with everything else and finish last;
//! - **the rest can fill the machine**: the other competing threads must be at least as many as
//!   the cores, so no core idles once the programs are done.
//!
//! The AMPS part balances everything else over the cores no holder runs or waits on
//! ([`crate::policies::amps::Amps::close`]): nothing moves there or starts there, and its periodic
//! balance moves any other thread found there to the open core it would start on. A held core
//! whose holder blocks is open to the AMPS part again (work conservation); a thread pulled there
//! leaves at the next balance once the holder runs again.

use crate::cpuset::CpuSet;
use crate::ids::{CoreId, ThreadId};
use crate::observe::View;
use crate::policies::partitions::is_runnable;
use crate::policy::Placement;
use crate::topology::Topology;

/// Which threads hold which cores.
#[derive(Clone, Debug, Default)]
pub struct Solo {
    /// Per core: the thread holding it.
    holder: Vec<Option<ThreadId>>,
    /// Per thread: the core it holds.
    held: Vec<Option<CoreId>>,
    /// Holders, for a pass over them alone.
    holders: Vec<ThreadId>,
}

/// The cores a single-threaded program may hold: those of every class but the slowest, fastest
/// first, then by id.
pub fn faster_cores(topo: &Topology) -> Vec<CoreId> {
    let speed = |c: CoreId| topo.class_of(c).capacity;
    let slowest = topo
        .cores()
        .iter()
        .map(|c| speed(c.id))
        .fold(f64::MAX, f64::min);
    let mut cores: Vec<CoreId> = topo
        .cores()
        .iter()
        .map(|c| c.id)
        .filter(|&c| speed(c) > slowest + 1e-9)
        .collect();
    cores.sort_by(|&a, &b| speed(b).total_cmp(&speed(a)).then(a.cmp(&b)));
    cores
}

impl Solo {
    /// The core thread `t` holds.
    pub fn core_of(&self, t: ThreadId) -> Option<CoreId> {
        self.held.get(t.index()).copied().flatten()
    }

    /// The thread holding core `c`.
    pub fn holder_of(&self, c: CoreId) -> Option<ThreadId> {
        self.holder.get(c.index()).copied().flatten()
    }

    /// Thread `t` holds no core any more (it exited, or left the AMPS part).
    pub fn release(&mut self, t: ThreadId) {
        if let Some(c) = self.held.get_mut(t.index()).and_then(Option::take) {
            self.holder[c.index()] = None;
            self.holders.retain(|&x| x != t);
        }
    }

    /// No thread holds a core.
    pub fn release_all(&mut self) {
        for t in std::mem::take(&mut self.holders) {
            if let Some(c) = self.held[t.index()].take() {
                self.holder[c.index()] = None;
            }
        }
    }

    /// The threads that hold a core.
    pub fn holders(&self) -> &[ThreadId] {
        &self.holders
    }

    /// Whether core `c` is closed now ([`Solo::closed`]).
    pub fn closes(&self, view: &View<'_>, c: CoreId) -> bool {
        self.holder
            .get(c.index())
            .copied()
            .flatten()
            .and_then(|t| view.threads.get(t.index()))
            .is_some_and(|obs| is_runnable(obs.state))
    }

    /// The cores closed to the AMPS part's other threads: those whose holder runs or waits to.
    pub fn closed(&self, view: &View<'_>) -> CpuSet {
        let mut set = CpuSet::new();
        for &t in &self.holders {
            if let (Some(c), Some(obs)) = (self.core_of(t), view.threads.get(t.index())) {
                if is_runnable(obs.state) {
                    set.insert(c);
                }
            }
        }
        set
    }

    /// Give the cores of `given` (fastest first) to `candidates` (the programs of most gain
    /// first): a candidate that holds one of them keeps it, the others take the free ones in
    /// order where their user masks allow. Holders that are no longer candidates, or whose core is
    /// no longer given or allowed, let go; if a candidate's mask allows none of the cores left,
    /// none holds a core. Pins the threads that move (`out` gains nothing when none holds).
    pub fn assign(
        &mut self,
        view: &View<'_>,
        candidates: &[ThreadId],
        given: &[CoreId],
        out: &mut Vec<Placement>,
    ) {
        let n = view.cores.len();
        if self.holder.len() < n {
            self.holder.resize(n, None);
        }
        if self.held.len() < view.threads.len() {
            self.held.resize(view.threads.len(), None);
        }
        let mut is_given = vec![false; n];
        for c in given {
            is_given[c.index()] = true;
        }
        let mut is_candidate = vec![false; view.threads.len()];
        for t in candidates {
            is_candidate[t.index()] = true;
        }
        for t in self.holders.clone() {
            // A holder whose user mask no longer allows its core lets go too.
            let keep = is_candidate[t.index()]
                && self.core_of(t).is_some_and(|c| {
                    is_given[c.index()] && view.thread(t).user_allowed.contains(c)
                });
            if !keep {
                self.release(t);
            }
        }
        let free_cores: Vec<CoreId> = given
            .iter()
            .copied()
            .filter(|c| self.holder[c.index()].is_none())
            .collect();
        let mut free = free_cores.into_iter();
        let mut pending: Vec<CoreId> = Vec::new();
        for &t in candidates {
            if self.core_of(t).is_some() {
                continue;
            }
            let obs = view.thread(t);
            // The first free core its mask allows; cores passed over stay free for the next.
            let c = match pending.iter().position(|&c| obs.user_allowed.contains(c)) {
                Some(i) => Some(pending.remove(i)),
                None => loop {
                    match free.next() {
                        Some(c) if obs.user_allowed.contains(c) => break Some(c),
                        Some(c) => pending.push(c),
                        None => break None,
                    }
                },
            };
            let Some(c) = c else {
                // Its mask allows none of the cores left: all of the programs or none.
                self.release_all();
                out.retain(|p| !candidates.contains(&p.thread));
                return;
            };
            self.holder[c.index()] = Some(t);
            self.held[t.index()] = Some(c);
            self.holders.push(t);
            if obs.allowed.len() != 1 || !obs.allowed.contains(c) {
                out.push(Placement::pin(t, c));
            }
        }
    }
}
