//! The state of one balance: each core's run-queue length, running and waiting threads, and
//! the cores left to a combined policy's own threads; the moves a balance makes are recorded here.

use super::numa::{self, AllocationPhase, NumaMode};
use super::order::CoreKey;
use super::{
    improves, initial_core, scaled_load, Machine, Members, Orders, ACROSS_NODES, LOAD_EPS,
};
use crate::cpuset::CpuSet;
use crate::ids::{CoreId, ThreadId};
use crate::observe::{ThreadState, View};
use crate::policy::Placement;
use std::cell::RefCell;

/// Cores a combined policy gives to threads of its own ([`super::Amps::close`]), and those
/// threads.
#[derive(Clone, Debug, Default)]
pub(super) struct Closed {
    pub(super) cores: CpuSet,
    /// Sorted.
    pub(super) holders: Vec<ThreadId>,
}

impl Closed {
    pub(super) fn core(&self, c: usize) -> bool {
        self.cores.contains(CoreId(c as u32))
    }

    pub(super) fn holds(&self, t: ThreadId) -> bool {
        !self.holders.is_empty() && self.holders.binary_search(&t).is_ok()
    }

    /// Some closed core runs or queues a thread that is not a holder.
    pub(super) fn strays(&self, view: &View<'_>) -> bool {
        self.cores.iter().any(|c| {
            let core = view.core(c);
            core.runnable > 1 || core.current.is_some_and(|t| !self.holds(t))
        })
    }
}

/// Per-core state of one balance, reused across calls (no allocation per balance once warm).
#[derive(Clone, Debug, Default)]
pub(super) struct Scratch {
    pub(super) runnable: Vec<u32>,
    /// Per core: the threads waiting there, by id, then those this balance moved there in the
    /// order they came. Listed when first asked for ([`Scratch::waiting`]) when the view has run
    /// queues: a balance looks at few sources, and a list per core of every waiting thread cost
    /// more than the rest of the balance; from a pass over the threads otherwise.
    pub(super) queued: RefCell<Vec<Vec<ThreadId>>>,
    /// Per core: `queued` holds its threads.
    listed: RefCell<Vec<bool>>,
    pub(super) running: Vec<Option<ThreadId>>,
}

impl Scratch {
    /// Fill from the view: run-queue lengths and running threads per core, and the waiting ones
    /// per core when the view has no run queues.
    pub(super) fn fill(&mut self, view: &View<'_>) {
        let n = view.cores.len();
        self.runnable.clear();
        self.runnable.extend(view.cores.iter().map(|c| c.runnable));
        self.running.clear();
        let queued = self.queued.get_mut();
        queued.resize_with(n, Vec::new);
        let listed = self.listed.get_mut();
        listed.clear();
        if view.run_queues.is_some() {
            // The backend's own view: each core's current thread is a thread of the view.
            self.running.extend(view.cores.iter().map(|c| c.current));
            listed.resize(n, false);
            return;
        }
        // A view of some threads only (a part of a combined policy) shows the others as exited,
        // while the cores still show what runs on them.
        self.running.resize(n, None);
        listed.resize(n, true);
        queued.iter_mut().for_each(Vec::clear);
        for t in view.threads {
            let Some(c) = t.cpu else { continue };
            match t.state {
                ThreadState::Runnable => queued[c.index()].push(t.id),
                ThreadState::Running => self.running[c.index()] = Some(t.id),
                _ => {}
            }
        }
    }

    /// The waiting threads of core `c` ([`Scratch::queued`]), listed from its run queue on first
    /// use.
    pub(super) fn waiting(
        &self,
        view: &View<'_>,
        c: usize,
    ) -> std::cell::RefMut<'_, Vec<ThreadId>> {
        let mut queued = self.queued.borrow_mut();
        let mut listed = self.listed.borrow_mut();
        if !listed[c] {
            listed[c] = true;
            let list = &mut queued[c];
            list.clear();
            if let Some(q) = view.run_queues {
                q.for_each_waiting(CoreId(c as u32), &mut |t| list.push(t));
            }
            list.sort_unstable();
        }
        std::cell::RefMut::map(queued, |q| &mut q[c])
    }

    pub(super) fn load(&self, power: &[f64], c: usize) -> f64 {
        scaled_load(self.runnable[c], power[c])
    }

    pub(super) fn key(&self, power: &[f64], c: usize) -> CoreKey {
        super::core_key(&self.runnable, power, c)
    }

    /// A thread on `src` that may move to `dst`: a waiting one first (the last this balance moved
    /// there, else the one of highest id that waited there before), else the running one if the
    /// NUMA policy allows. Returns it and whether it was running.
    pub(super) fn movable(
        &self,
        view: &View<'_>,
        numa: NumaMode,
        alloc: &[AllocationPhase],
        closed: &Closed,
        src: usize,
        dst: CoreId,
    ) -> Option<(ThreadId, bool)> {
        let may = |t: ThreadId| view.thread(t).user_allowed.contains(dst) && !closed.holds(t);
        if let Some(&t) = self.waiting(view, src).iter().rev().find(|&&t| may(t)) {
            return Some((t, false));
        }
        let t = self.running[src].filter(|&t| !closed.holds(t))?;
        let obs = view.thread(t);
        let allocating = alloc
            .get(t.index())
            .is_some_and(AllocationPhase::allocating);
        let ok = obs.user_allowed.contains(dst)
            && numa::running_move_allowed(
                numa,
                view.topology,
                &obs.resident_bytes,
                allocating,
                CoreId(src as u32),
                dst,
            );
        ok.then_some((t, true))
    }

    /// The thread idle core `d` pulls (rule 6): from the nearest core with a thread waiting that
    /// may run on `d` (any node: an idle core beside a waiting thread is lost throughput), the
    /// busiest (then slower) first among equally near ones; failing that, a thread running alone
    /// on a slower core that AMPS's scaled load would move (faster-core-first), the nearest
    /// first: in another node only a process's only thread (`members`) whose move the overhead
    /// prediction allows. Returns the source, the thread and whether it was running.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pull_into_idle(
        &self,
        machine: &Machine,
        view: &View<'_>,
        alloc: &[AllocationPhase],
        closed: &Closed,
        members: &Members,
        candidates: &mut Vec<(u8, CoreKey)>,
        crowded: &[u32],
        busy: &[u32],
        d: usize,
    ) -> Option<(usize, ThreadId, bool)> {
        let power = &machine.power[..];
        let dst = CoreId(d as u32);
        candidates.clear();
        candidates.extend(
            crowded
                .iter()
                .map(|&s| s as usize)
                .filter(|&s| s != d && self.runnable[s] >= 2)
                .map(|s| (machine.distance(s, d), self.key(power, s))),
        );
        candidates.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        if let Some(found) = candidates.iter().find_map(|&(_, k)| {
            let s = k.2 as usize;
            self.movable(view, machine.numa, alloc, closed, s, dst)
                .filter(|&(t, _)| {
                    machine.pull_waiting_allowed(view, closed, t, s, d, |c| self.runnable[c])
                })
                .map(|(t, r)| (s, t, r))
        }) {
            return Some(found);
        }
        // A lone thread on a slower core: nearest first (its LLC, its node, then across nodes),
        // the greatest key first within each, as a sort of them all by (distance, key) would
        // take them. `busy` lists every core with a thread (the only ones it can come from) by
        // their key with one thread, the key of every core taken here; that key's load only
        // falls along it, so once it no longer improves on `d`'s, no core further on can.
        let after = scaled_load(1, power[d]);
        let takes = |s: usize| {
            s != d
                && self.runnable[s] == 1
                && !closed.core(s)
                && machine.speed[d] > machine.speed[s] + LOAD_EPS
        };
        let pull = |s: usize, near: u8| {
            self.movable(view, machine.numa, alloc, closed, s, dst)
                .filter(|&(t, _)| {
                    machine.pull_allowed(view, t, s, d) && (near < ACROSS_NODES || members.alone(t))
                })
                .map(|(t, r)| (s, t, r))
        };
        let found = (0..=ACROSS_NODES).find_map(|near| {
            busy.iter()
                .map(|&s| s as usize)
                .take_while(|&s| improves(after, scaled_load(1, power[s])))
                .filter(|&s| machine.distance(s, d) == near && takes(s))
                .find_map(|s| pull(s, near))
        });
        // The same as every core that takes, sorted by (distance, key), would give.
        if cfg!(debug_assertions) {
            let mut all: Vec<(u8, CoreKey)> = (0..power.len())
                .filter(|&s| takes(s) && improves(after, self.load(power, s)))
                .map(|s| (machine.distance(s, d), self.key(power, s)))
                .collect();
            all.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            let sorted = all.iter().find_map(|&(near, k)| pull(k.2 as usize, near));
            debug_assert_eq!(found, sorted, "idle core {d}");
        }
        found
    }

    /// Move every thread but the holders off the closed cores, each to the open core it would
    /// start on ([`initial_core`]) given the moves before it, within the closed core's node where
    /// its mask allows.
    pub(super) fn vacate(
        &mut self,
        view: &View<'_>,
        machine: &Machine,
        closed: &Closed,
        out: &mut Vec<Placement>,
    ) {
        for c in closed.cores.iter().map(CoreId::index) {
            let mut leaving: Vec<(ThreadId, bool)> = self
                .waiting(view, c)
                .iter()
                .filter(|&&t| !closed.holds(t))
                .map(|&t| (t, false))
                .collect();
            leaving.extend(
                self.running[c]
                    .filter(|&t| !closed.holds(t))
                    .map(|t| (t, true)),
            );
            // Within the core's node where its mask allows, as the rest of the balance prefers.
            let node: CpuSet = machine.node_cores[machine.node[c].index()]
                .iter()
                .map(|&x| CoreId(x))
                .collect();
            // What stays on `c` once the leaving threads are gone: its neighbours' crowd counts
            // that, not the threads on their way out.
            let stays = self.runnable[c].saturating_sub(leaving.len() as u32);
            for (t, was_running) in leaving {
                let open = view.thread(t).user_allowed.difference(&closed.cores);
                let near = open.intersection(&node);
                let open = if near.is_empty() { open } else { near };
                let runnable = &self.runnable;
                let after = |m: CoreId| {
                    if m.index() == c {
                        stays
                    } else {
                        runnable[m.index()]
                    }
                };
                let mut llc_sums = Vec::new();
                let Some(d) = initial_core(
                    &open,
                    |x| runnable[x.index()],
                    |x| machine.power[x.index()],
                    |x| machine.crowd(after, &mut llc_sums, x),
                ) else {
                    continue;
                };
                self.apply(view, t, was_running, c, d.index());
                out.push(Placement::pin(t, d));
            }
        }
    }

    /// Record the move of `t` from `s` to `d` and re-key both cores in `order`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply_keyed(
        &mut self,
        view: &View<'_>,
        order: &mut Orders,
        machine: &Machine,
        t: ThreadId,
        was_running: bool,
        s: usize,
        d: usize,
    ) {
        for c in [s, d] {
            order.take(machine, c);
        }
        self.apply(view, t, was_running, s, d);
        for c in [s, d] {
            order.put(machine, self, c);
        }
    }

    /// Record the move of `t` from `s` to `d`.
    pub(super) fn apply(
        &mut self,
        view: &View<'_>,
        t: ThreadId,
        was_running: bool,
        s: usize,
        d: usize,
    ) {
        if was_running {
            self.running[s] = None;
        } else {
            // Listed: it was found there.
            self.queued.get_mut()[s].retain(|&x| x != t);
        }
        if self.runnable[d] == 0 {
            self.running[d] = Some(t);
        } else {
            // Listed first, so the list is the queue's threads and then the arrivals.
            self.waiting(view, d).push(t);
        }
        self.runnable[s] -= 1;
        self.runnable[d] += 1;
    }
}
