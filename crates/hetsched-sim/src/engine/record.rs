//! What a run leaves: Gantt segments, CPU time per core class, the invariant checks, and the
//! result.

use super::{Simulation, GANTT_MAX_SEGMENTS, NS_PER_S};
use crate::metrics::{coefficient_of_variation, AppResult, EngineStats, GanttSegment, RunResult};
use hetsched_core::{CoreId, ThreadState};

impl<'a> Simulation<'a> {
    /// End the running thread's stretch on `c`: its CPU time goes to its spec's class account,
    /// and to the Gantt chart when one is recorded.
    pub(super) fn close_segment(&mut self, c: CoreId) {
        let Some(t) = self.cores[c].current else {
            return;
        };
        let start = self.cores[c].dispatched_at;
        let phase = self.threads[t].cur as usize;
        let classes = self.topo.classes().len();
        self.class_ns[phase * classes + self.cores[c].class as usize] +=
            self.now.saturating_sub(start) as f64;
        if !self.cfg.record_gantt {
            return;
        }
        if self.now <= start {
            return;
        }
        if let Some(last) = self.gantt.last_mut() {
            if last.core == c.0 && last.thread == t.0 && last.end_ns == start {
                last.end_ns = self.now;
                return;
            }
        }
        if self.gantt.len() >= GANTT_MAX_SEGMENTS {
            self.gantt_dropped += 1;
            return;
        }
        let app = self.threads[t].app;
        self.gantt.push(GanttSegment {
            core: c.0,
            thread: t.0,
            app: self.workload.apps[self.apps[app].spec].name.clone(),
            start_ns: start,
            end_ns: self.now,
        });
    }

    /// Panics when an invariant is broken: a thread on two cores, a runnable count that disagrees
    /// with the queues, or an idle core while a thread waits that may run on it.
    pub(super) fn check_invariants(&self) {
        let mut seen = vec![0u32; self.threads.len()];
        let may_move: u32 = self
            .queues
            .iter()
            .flat_map(crate::runqueue::RunQueue::threads)
            .map(|t| (self.obs[t].allowed.len() >= 2) as u32)
            .sum();
        assert_eq!(
            may_move, self.waiting_may_move,
            "waiting threads that may move"
        );
        for t in self.obs.ids() {
            assert_eq!(
                self.may_move[t],
                self.obs[t].allowed.len() >= 2,
                "thread {t} may move"
            );
        }
        for (c, core) in self.cores.iter_enumerated() {
            let queue = &self.queues[c];
            let n = queue.len() as u32 + core.current.is_some() as u32;
            assert_eq!(n, self.core_obs[c].runnable, "core {c} runnable count");
            assert_eq!(
                self.queued.contains(c),
                !queue.is_empty(),
                "core {c} in the set of cores with waiting threads"
            );
            if let Some(t) = core.current {
                seen[t.index()] += 1;
                assert_eq!(self.obs[t].state, ThreadState::Running);
                assert_eq!(self.obs[t].cpu, Some(c));
            }
            for t in queue.threads() {
                seen[t.index()] += 1;
                assert_eq!(
                    self.obs[t].state,
                    ThreadState::Runnable,
                    "thread {t} queued on {c}"
                );
            }
        }
        for (t, &s) in self.obs.ids().zip(&seen) {
            assert!(s <= 1, "thread {t} is on {s} cores/queues");
            let st = self.obs[t].state;
            if matches!(st, ThreadState::Running | ThreadState::Runnable) {
                assert_eq!(s, 1, "thread {t} is {st:?} but on no core");
            }
        }
        for c in self.idle.iter() {
            for queue in &self.queues {
                for t in queue.threads() {
                    assert!(
                        !self.obs[t].allowed.contains(c),
                        "core {c} idle while thread {t} waits and may run there (t={}; idle core runnable {}, queue {:?}; waiting thread's core {:?})",
                        self.now,
                        self.core_obs[c].runnable,
                        self.queues[c],
                        self.obs[t].cpu
                    );
                }
            }
        }
    }

    pub(super) fn result(&self, finished: bool, wall_s: f64) -> RunResult {
        let classes = self.topo.classes().len();
        // The phases of spec `si` are `phase_base[si][0]..` up to the next spec's first phase.
        let spec_phases = |si: usize| {
            let start = self.phase_base[si].first().copied().unwrap_or(0) as usize;
            let end = self
                .phase_base
                .get(si + 1)
                .and_then(|b| b.first().copied())
                .map_or(self.phases.len(), |e| e as usize);
            start..end
        };
        // FPU busy and total cycles per spec, from the threads' counters (BulldOver equation 1).
        let mut fp_cycles = vec![(0.0, 0.0); self.workload.apps.len()];
        // (instructions, LLC misses, evictions, fills) per spec.
        let mut llc = vec![[0.0; 4]; self.workload.apps.len()];
        for (th, obs) in self.threads.iter().zip(&self.obs) {
            let spec = self.apps[th.app].spec;
            let (busy, all) = (obs.counters.fp_busy_cycles, obs.counters.cycles);
            fp_cycles[spec].0 += busy;
            fp_cycles[spec].1 += all;
            let c = obs.counters;
            let sums = &mut llc[spec];
            sums[0] += c.instructions;
            sums[1] += c.llc_misses;
            sums[2] += obs.llc_traffic.evictions;
            sums[3] += obs.llc_traffic.fills;
        }
        let apps = self
            .workload
            .apps
            .iter()
            .zip(&self.completions)
            .enumerate()
            .map(|(si, (spec, times))| AppResult {
                closed_loop: spec.restart,
                fpu_usage: (fp_cycles[si].1 > 0.0).then(|| fp_cycles[si].0 / fp_cycles[si].1),
                l2_misses: spec_phases(si).map(|p| self.l2_misses[p]).sum(),
                cpu_s_by_class: (0..classes)
                    .map(|k| {
                        spec_phases(si)
                            .map(|p| self.class_ns[p * classes + k])
                            .sum::<f64>()
                            / NS_PER_S as f64
                    })
                    .collect(),
                cpu_s_per_class: self
                    .topo
                    .classes()
                    .iter()
                    .enumerate()
                    .map(|(k, class)| {
                        let ns: f64 = spec_phases(si)
                            .map(|p| self.class_ns[p * classes + k])
                            .sum();
                        (class.name.clone(), ns / NS_PER_S as f64)
                    })
                    .collect(),
                class_migrations: spec_phases(si).map(|p| self.class_moves[p]).sum(),
                instructions: llc[si][0],
                llc_misses: llc[si][1],
                llc_evictions: llc[si][2],
                llc_fills: llc[si][3],
                name: spec.name.clone(),
                service: spec.service.clone(),
                completion_s: if times.is_empty() {
                    None
                } else {
                    Some(times.iter().sum::<f64>() / times.len() as f64)
                },
                completions: times.len() as u64,
                completion_times_s: times.clone(),
            })
            .collect();
        // Fairness: coefficient of variation of per-thread normalised progress (work done, in time
        // it would take alone on the fastest core, over time alive).
        let rates: Vec<f64> = self
            .threads
            .iter()
            .filter_map(|t| {
                let end = t.end_ns.unwrap_or(self.now);
                let alive = end.saturating_sub(t.start_ns) as f64;
                (alive > 0.0).then(|| t.ideal_ns / alive)
            })
            .collect();
        let fairness = coefficient_of_variation(&rates);
        let makespan_ns = if finished {
            self.last_completion_ns
        } else {
            self.now
        };
        RunResult {
            policy: self.policy.name().to_string(),
            seed: self.cfg.seed,
            finished,
            makespan_s: makespan_ns as f64 / NS_PER_S as f64,
            apps,
            migrations: self.migrations,
            fairness,
            llc_misses: self.llc_misses,
            instructions: self.obs.iter().map(|o| o.counters.instructions).sum(),
            policy_cpu_s: self.policy_time.as_secs_f64(),
            rejected_placements: self.rejected_placements,
            threads: self.threads.len() as u64,
            gantt: if self.cfg.record_gantt {
                Some(self.gantt.clone())
            } else {
                None
            },
            gantt_dropped: self.gantt_dropped,
            engine: EngineStats {
                events: self.events,
                wall_s,
                events_per_s: if wall_s > 0.0 {
                    self.events as f64 / wall_s
                } else {
                    0.0
                },
                simulated_s: self.now as f64 / NS_PER_S as f64,
            },
            balance_moves: self.balance_moves,
            pages_moved_bytes: self.pages_moved_bytes,
            notices: Vec::new(),
        }
    }
}
