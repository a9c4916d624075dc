//! Application lifecycle: instances arrive and start their threads, threads walk their phases,
//! meet at barriers, sleep, exit, and instances complete (and restart when the workload says so).

use super::state::{AppInstance, DfState, SimThread};
use super::{Event, Simulation, NS_PER_S};
use crate::workload::PhaseEnd;
use hetsched_core::{AppId, CoreId, ThreadId, ThreadObs, ThreadState};
use std::collections::VecDeque;

impl<'a> Simulation<'a> {
    /// Copy `copy` of workload application `spec_idx` starts (its `run`-th run): an instance and
    /// its threads, each offered to the policy and then queued by the baseline.
    pub(super) fn start_instance(&mut self, spec_idx: usize, copy: u32, run: u32) {
        let spec = &self.workload.apps[spec_idx];
        let app_idx = self.apps.push(AppInstance {
            spec: spec_idx,
            copy,
            run,
            start_ns: self.now,
            live: 0,
            arrived: 0,
            waiting: Vec::new(),
            dfs: spec
                .data_fragments
                .iter()
                .map(|&b| DfState {
                    bytes: b as f64,
                    copies: Vec::new(),
                })
                .collect(),
            bytes_per_node: vec![0.0; self.topo.nodes().len()],
            total_bytes: 0.0,
            pages: VecDeque::new(),
            done: false,
        });
        // A thread's observation counts resident bytes per node only where the engine keeps them.
        let nodes = self.node_bytes.nodes();
        for heat in &mut self.app_heat {
            heat.push(0.0);
        }
        for (g, group) in spec.threads.iter().enumerate() {
            for _ in 0..group.count {
                let id = self.threads.push(SimThread {
                    cur: self.phase_base[spec_idx][g],
                    app: app_idx,
                    group: g as u32,
                    spec: spec_idx as u32,
                    phase: 0,
                    iter: 0,
                    remaining: group.phases[0].instructions,
                    penalty_ns: 0.0,
                    vruntime: 0,
                    lag: 0,
                    last_core: None,
                    warm_llc: None,
                    warm_fill: 0.0,
                    total_bytes: 0.0,
                    start_ns: self.now,
                    end_ns: None,
                    ideal_ns: 0.0,
                    exit_after_barrier: false,
                });
                self.node_bytes.push_thread();
                let mut obs = ThreadObs::new(
                    id,
                    app_idx,
                    spec.cpus.clone().unwrap_or_else(|| self.topo.all_cores()),
                    nodes,
                );
                obs.data_fragment = group.phases[0].data_fragment.map(|d| d as u64);
                obs.signature = Some(group.signature.clone());
                let (may_move, summary, reach) = self.allowed_facts(&obs.allowed);
                self.may_move.push(may_move);
                self.allowed_summary.push(summary);
                self.allowed_reach.push(reach);
                self.obs.push(obs);
                self.changes.add_thread(id);
                self.apps[app_idx].live += 1;
                // The policy may restrict the thread before it first runs.
                let placed = self.call_policy(|p, view| p.on_thread_start(view, id));
                if let Some(set) = placed {
                    let allowed = set.intersection(&self.obs[id].user_allowed);
                    if allowed.is_empty() {
                        self.rejected_placements += 1;
                    } else {
                        self.set_allowed(id, allowed);
                    }
                }
                let core = self.place_new(id);
                self.enqueue(id, core);
            }
        }
    }

    pub(super) fn finish_phase(&mut self, t: ThreadId, c: CoreId) {
        let phase = self.phase_of(t);
        if phase.free_bytes > 0 {
            self.free_memory(self.threads[t].app, phase.free_bytes as f64);
        }
        let spec_idx = self.threads[t].spec as usize;
        let group_idx = self.threads[t].group as usize;
        let group = &self.workload.apps[spec_idx].threads[group_idx];
        let base = self.phase_base[spec_idx][group_idx];
        // Advance the phase pointer.
        let th = &mut self.threads[t];
        let mut last = false;
        loop {
            th.phase += 1;
            if th.phase as usize == group.phases.len() {
                th.phase = 0;
                th.iter += 1;
                if th.iter >= group.repeat {
                    last = true;
                    break;
                }
            }
            // `once` phases run only in the first pass.
            if th.iter == 0 || !group.phases[th.phase as usize].once {
                break;
            }
        }
        th.cur = base + th.phase;
        match (&phase.end, last) {
            (PhaseEnd::Barrier, _) => {
                self.threads[t].exit_after_barrier = last;
                if !last {
                    self.load_phase(t, c);
                }
                self.arrive_barrier(t, c);
            }
            (_, true) => self.exit_thread(t, c),
            (PhaseEnd::Next, false) => {
                let before = self.obs[t].data_fragment;
                self.load_phase(t, c);
                self.hint_fragment_change(t, before);
                if self.cores[c].current == Some(t) {
                    self.set_rate(c);
                }
            }
            (PhaseEnd::Sleep { ns }, false) => {
                let ns = *ns;
                // The next phase starts off-core: dispatch prices it (cache, footprint).
                self.block(c);
                let next = self.phase_of(t);
                self.threads[t].remaining = next.instructions;
                let before = self.obs[t].data_fragment;
                self.obs[t].data_fragment = next.data_fragment.map(|d| d as u64);
                if self.obs[t].data_fragment != before {
                    self.changes.note_lifecycle(t);
                }
                self.hint_fragment_change(t, before);
                let late = self.jitter.wake_delay_ns(ns);
                self.push(self.now + ns + late, Event::Wake { thread: t });
            }
        }
    }

    /// Load the thread's new current phase while it runs on `c`.
    pub(super) fn load_phase(&mut self, t: ThreadId, c: CoreId) {
        let phase = self.phase_of(t);
        self.threads[t].remaining = phase.instructions;
        let fragment = phase.data_fragment.map(|d| d as u64);
        if self.obs[t].data_fragment != fragment {
            self.changes.note_lifecycle(t);
        }
        self.obs[t].data_fragment = fragment;
        self.refresh_phase_cache(t, c);
        // Footprint change on the LLC.
        if let Some(l) = self.cores[c].llc {
            let ws = self.phase_info(t).ws_bytes.min(self.llcs[l].capacity);
            self.llcs[l].sum_ws += ws - self.cores[c].cur_ws;
            self.cores[c].cur_ws = ws;
        }
        // A new data fragment may be cold.
        if phase.data_fragment.is_some() {
            let pen = self.df_refill(t, c);
            self.threads[t].penalty_ns += pen;
        }
    }

    pub(super) fn arrive_barrier(&mut self, t: ThreadId, c: CoreId) {
        let a = self.threads[t].app;
        self.apps[a].arrived += 1;
        if self.apps[a].arrived >= self.apps[a].live {
            self.release_barrier(a);
            if self.threads[t].exit_after_barrier {
                self.exit_thread(t, c);
            } else {
                self.set_rate(c);
            }
        } else {
            self.apps[a].waiting.push(t);
            self.block(c);
        }
    }

    pub(super) fn release_barrier(&mut self, a: AppId) {
        self.apps[a].arrived = 0;
        let waiting = std::mem::take(&mut self.apps[a].waiting);
        for w in waiting {
            if self.threads[w].exit_after_barrier {
                self.finish_exit(w);
            } else {
                self.wake(w);
            }
        }
    }

    /// The running thread on `c` blocks (sleep or barrier).
    pub(super) fn block(&mut self, c: CoreId) {
        let t = self.undispatch(c);
        self.obs[t].state = ThreadState::Blocked;
        self.changes.note_lifecycle(t);
        self.threads[t].lag = self.threads[t].vruntime - self.cores[c].min_vruntime;
        self.need_pick.push(c);
    }

    pub(super) fn wake(&mut self, t: ThreadId) {
        self.changes.note_lifecycle(t);
        let core = self.place_wake(t);
        self.enqueue(t, core);
    }

    pub(super) fn exit_thread(&mut self, t: ThreadId, c: CoreId) {
        self.undispatch(c);
        self.need_pick.push(c);
        self.finish_exit(t);
    }

    /// Bookkeeping of a thread that is off every core and queue.
    pub(super) fn finish_exit(&mut self, t: ThreadId) {
        self.obs[t].state = ThreadState::Exited;
        self.changes.note_lifecycle(t);
        self.threads[t].end_ns = Some(self.now);
        self.call_policy(|p, view| p.on_thread_exit(view, t));
        let a = self.threads[t].app;
        self.apps[a].live -= 1;
        if self.apps[a].live > 0
            && self.apps[a].arrived > 0
            && self.apps[a].arrived >= self.apps[a].live
        {
            // Everyone left is waiting: the exit completes the barrier.
            self.release_barrier(a);
        }
        if self.apps[a].live == 0 && !self.apps[a].done {
            self.complete_instance(a);
        }
    }

    pub(super) fn complete_instance(&mut self, a: AppId) {
        self.apps[a].done = true;
        let inst = &self.apps[a];
        let spec = &self.workload.apps[inst.spec];
        let (spec_idx, copy, run) = (inst.spec, inst.copy, inst.run);
        self.completions[spec_idx].push((self.now - inst.start_ns) as f64 / NS_PER_S as f64);
        self.last_completion_ns = self.now;
        let again = spec.restart && spec.runs.is_none_or(|r| run + 1 < r);
        if again {
            self.start_instance(spec_idx, copy, run + 1);
        } else {
            self.copies_done[spec_idx] += 1;
        }
    }
}
