//! A backend may give an exited thread's id to a new thread (the live engine does, to keep its
//! memory bounded under thread churn). To every policy, `on_thread_start` of a reused id begins a
//! new thread: nothing the policy kept about the id's previous thread may change its decisions.
//!
//! Each policy runs twice on the same machine and the same timeline. Before the threads under test
//! start, an earlier thread lives for a while and exits: in the *recycled* run it has id 0, the
//! id the first new thread then reuses; in the *fresh* run it has an id no one reuses. From then
//! on both runs see the same threads, counters and times, so a policy that forgets properly
//! places them identically; one that carries the old thread's counters, partition or history
//! over to the new one does not.

use super::{policy_with_options, PolicyOptions, REGISTRY};
use crate::ids::{AppId, CoreId, ThreadId};
use crate::observe::{CoreObs, ThreadObs, ThreadState, View};
use crate::policy::{Placement, Policy};
use crate::presets::machine_preset;
use crate::{CpuSet, Topology};

/// A thread's behaviour: instructions per cycle and LLC misses per thousand instructions.
#[derive(Clone, Copy)]
struct Behaviour {
    ipc: f64,
    mpki: f64,
}

/// Hand-driven threads: each round every live thread runs the whole round on its core (a core
/// shared by k threads gives each 1/k), and placements move a thread to the first core of its set.
struct Driver {
    topo: Topology,
    policy: Box<dyn Policy>,
    threads: Vec<ThreadObs>,
    behaviour: Vec<Behaviour>,
    now: u64,
    /// Every placement the policy made, with the time.
    log: Vec<(u64, ThreadId, CpuSet)>,
}

const ROUND_NS: u64 = 50_000_000;

impl Driver {
    fn new(machine: &str, policy: &str) -> Self {
        let topo = machine_preset(machine).unwrap().unwrap();
        let policy = policy_with_options(
            policy,
            &PolicyOptions {
                seed: 7,
                ..PolicyOptions::default()
            },
        )
        .unwrap();
        Driver {
            topo,
            policy,
            threads: Vec::new(),
            behaviour: Vec::new(),
            now: 0,
            log: Vec::new(),
        }
    }

    fn nodes(&self) -> usize {
        self.topo.nodes().len()
    }

    /// Ids below `n` exist (as exited placeholders when never started).
    fn reserve(&mut self, n: usize) {
        while self.threads.len() < n {
            let id = ThreadId(self.threads.len() as u32);
            let mut t = ThreadObs::new(id, AppId(u32::MAX), self.topo.all_cores(), self.nodes());
            t.state = ThreadState::Exited;
            self.threads.push(t);
            self.behaviour.push(Behaviour {
                ipc: 0.0,
                mpki: 0.0,
            });
        }
    }

    fn cores(&self) -> Vec<CoreObs> {
        let mut cores = vec![CoreObs::default(); self.topo.num_cores()];
        for t in &self.threads {
            if let (ThreadState::Running | ThreadState::Runnable, Some(c)) = (t.state, t.cpu) {
                let obs = &mut cores[c.index()];
                obs.runnable += 1;
                if t.state == ThreadState::Running {
                    obs.current = Some(t.id);
                }
            }
        }
        cores
    }

    /// Running on the least loaded allowed core (lowest id first), or queued behind its thread.
    fn settle(&mut self, id: ThreadId, cpus: &CpuSet) {
        let cores = self.cores();
        let t = &self.threads[id.index()];
        let was_on = t.cpu.filter(|c| cpus.contains(*c));
        let core = was_on.unwrap_or_else(|| {
            cpus.iter()
                .min_by_key(|c| (cores[c.index()].runnable, c.0))
                .expect("a placement names a core")
        });
        let busy = cores[core.index()].current.is_some_and(|cur| cur != id);
        let t = &mut self.threads[id.index()];
        t.allowed = cpus.clone();
        t.cpu = Some(core);
        t.state = if busy {
            ThreadState::Runnable
        } else {
            ThreadState::Running
        };
    }

    fn call<R>(
        &mut self,
        f: impl FnOnce(&mut dyn Policy, &View<'_>, &mut Vec<Placement>) -> R,
    ) -> R {
        let cores = self.cores();
        let view = View {
            now_ns: self.now,
            topology: &self.topo,
            threads: &self.threads,
            cores: &cores,
            run_queues: None,
            resident_changed: None,
            lifecycle_changed: None,
        };
        let mut out = Vec::new();
        let r = f(self.policy.as_mut(), &view, &mut out);
        for p in out {
            assert_ne!(
                self.threads[p.thread.index()].state,
                ThreadState::Exited,
                "{} placed an exited thread",
                self.policy.name()
            );
            self.log.push((self.now, p.thread, p.cpus.clone()));
            self.settle(p.thread, &p.cpus);
        }
        r
    }

    fn start(&mut self, id: u32, app: u32, behaviour: Behaviour) {
        let id = ThreadId(id);
        self.reserve(id.index() + 1);
        let all = self.topo.all_cores();
        self.threads[id.index()] = ThreadObs::new(id, AppId(app), all.clone(), self.nodes());
        self.behaviour[id.index()] = behaviour;
        self.settle(id, &all);
        if let Some(cpus) = self.call(|p, v, _| p.on_thread_start(v, id)) {
            self.log.push((self.now, id, cpus.clone()));
            self.settle(id, &cpus);
        }
    }

    fn exit(&mut self, id: u32) {
        let t = &mut self.threads[id as usize];
        t.state = ThreadState::Exited;
        t.cpu = None;
        self.call(|p, v, _| p.on_thread_exit(v, ThreadId(id)));
    }

    /// One round of running, then the policy's idle-core and periodic calls.
    fn round(&mut self) {
        let cores = self.cores();
        self.now += ROUND_NS;
        for (t, b) in self.threads.iter_mut().zip(&self.behaviour) {
            let (ThreadState::Running | ThreadState::Runnable, Some(c)) = (t.state, t.cpu) else {
                continue;
            };
            let share = 1.0 / f64::from(cores[c.index()].runnable.max(1));
            let ghz = self.topo.class_of(c).effective_ghz().unwrap_or(2.0);
            let ns = ROUND_NS as f64 * share;
            let cycles = ns * ghz;
            let instructions = cycles * b.ipc * self.topo.relative_speed(c).clamp(0.5, 1.0);
            t.counters.cpu_time_ns += ns;
            t.counters.cycles += cycles;
            t.counters.instructions += instructions;
            t.counters.llc_refs += instructions * b.mpki * 2e-3;
            t.counters.llc_misses += instructions * b.mpki * 1e-3;
            t.counters.fp_busy_cycles += cycles * 0.1;
        }
        let cores = self.cores();
        for (c, obs) in cores.iter().enumerate() {
            if obs.is_idle() {
                let core = CoreId(c as u32);
                self.call(|p, v, out| p.on_core_idle(v, core, out));
            }
        }
        self.call(|p, v, out| p.rebalance(v, out));
    }
}

/// The recycled run's log and the fresh run's, from the moment the threads under test start.
fn both_runs(
    machine: &str,
    policy: &str,
    new_threads: &[(u32, Behaviour)],
) -> [Vec<(u64, ThreadId, CpuSet)>; 2] {
    let old = Behaviour {
        ipc: 3.0,
        mpki: 40.0,
    };
    let n = new_threads.len() as u32;
    [0, n].map(|old_id| {
        let mut d = Driver::new(machine, policy);
        d.reserve(old_id as usize);
        d.start(old_id, 99, old);
        for _ in 0..40 {
            d.round();
        }
        d.exit(old_id);
        d.round();
        let from = d.log.len();
        for (i, &(app, b)) in new_threads.iter().enumerate() {
            d.start(i as u32, app, b);
        }
        for _ in 0..40 {
            d.round();
        }
        d.log.split_off(from)
    })
}

#[test]
fn a_reused_thread_id_is_a_new_thread_to_every_policy() {
    let b = |ipc, mpki| Behaviour { ipc, mpki };
    let threads = [
        (1, b(0.4, 30.0)),
        (1, b(2.0, 0.5)),
        (2, b(1.2, 5.0)),
        (2, b(0.6, 20.0)),
        (3, b(1.8, 1.0)),
    ];
    for machine in ["hass-intel-2-2", "amps-numa-2", "bulldover", "ding-4f12s"] {
        for e in REGISTRY.iter().filter(|e| e.make.is_some()) {
            let [recycled, fresh] = both_runs(machine, e.name, &threads);
            assert_eq!(
                recycled, fresh,
                "{} on {machine}: a new thread given an exited thread's id was placed differently from one with a new id",
                e.name
            );
        }
    }
}

#[test]
fn the_driver_sees_placements() {
    // The comparison above means something only if the policies decide here at all.
    let b = |ipc, mpki| Behaviour { ipc, mpki };
    let threads = [
        (1, b(0.4, 30.0)),
        (1, b(2.0, 0.5)),
        (2, b(1.2, 5.0)),
        (3, b(0.6, 20.0)),
        (3, b(1.8, 1.0)),
    ];
    let deciding: Vec<&str> = REGISTRY
        .iter()
        .filter(|e| e.make.is_some())
        .filter(|e| !both_runs("hass-intel-2-2", e.name, &threads)[1].is_empty())
        .map(|e| e.name)
        .collect();
    for name in ["amps", "ipc-driven", "hetsched"] {
        assert!(
            deciding.contains(&name),
            "{name} made no placement: {deciding:?}"
        );
    }
}
