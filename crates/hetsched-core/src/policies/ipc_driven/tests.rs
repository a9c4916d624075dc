use super::*;
use crate::ids::AppId;
use crate::observe::{CoreObs, ThreadState};
use crate::presets::machine_preset;

const FAST: usize = 0;
const SLOW: usize = 1;

/// A system whose threads run with an IPC we set, on the first core of their allowed set.
struct State {
    topo: Topology,
    threads: Vec<ThreadObs>,
    /// IPC of each thread on (fast, slow) cores.
    ipc: Vec<(f64, f64)>,
    now: u64,
}

impl State {
    fn new() -> Self {
        State {
            topo: machine_preset("hass-amd-2-2").unwrap().unwrap(),
            threads: Vec::new(),
            ipc: Vec::new(),
            now: 0,
        }
    }
    fn view<'a>(&'a self, cores: &'a [CoreObs]) -> View<'a> {
        crate::policies::fixture::view(&self.topo, &self.threads, cores, self.now)
    }
    fn start(&mut self, p: &mut IpcDriven, ipc: (f64, f64)) -> ThreadId {
        let id = ThreadId(self.threads.len() as u32);
        self.threads
            .push(ThreadObs::new(id, AppId(id.0), self.topo.all_cores(), 4));
        self.ipc.push(ipc);
        let cores = vec![CoreObs::default(); 4];
        let set = p.on_thread_start(&self.view(&cores), id).unwrap();
        let t = &mut self.threads[id.index()];
        t.allowed = set;
        t.state = ThreadState::Running;
        t.cpu = t.allowed.first();
        id
    }
    /// Run one sample period (every thread runs the whole of it where it is placed), then let the
    /// policy decide and apply its placements.
    fn step(&mut self, p: &mut IpcDriven) -> Vec<Placement> {
        self.now += IPC_SAMPLE_PERIOD_NS;
        for (t, &(fast, slow)) in self.threads.iter_mut().zip(&self.ipc) {
            let core = t.cpu.unwrap();
            let ghz = self.topo.class_of(core).effective_ghz().unwrap();
            let cycles = IPC_SAMPLE_PERIOD_NS as f64 * ghz;
            let ipc = if ghz > 2.0 { fast } else { slow };
            t.counters.cycles += cycles;
            t.counters.instructions += cycles * ipc;
            t.counters.cpu_time_ns += IPC_SAMPLE_PERIOD_NS as f64;
        }
        let cores = vec![CoreObs::default(); 4];
        let mut out = Vec::new();
        p.rebalance(&self.view(&cores), &mut out);
        for pl in &out {
            let t = &mut self.threads[pl.thread.index()];
            t.allowed = pl.cpus.clone();
            t.cpu = t.allowed.first();
        }
        out
    }
    fn run_for(&mut self, p: &mut IpcDriven, ns: u64) {
        for _ in 0..ns / IPC_SAMPLE_PERIOD_NS {
            self.step(p);
        }
    }
}

#[test]
fn a_new_thread_is_measured_by_a_forced_migration_and_comes_home() {
    let mut s = State::new();
    let mut p = IpcDriven::new();
    let t = s.start(&mut p, (1.0, 1.6));
    assert_eq!(p.home_of(t), Some(FAST), "fast partition first on ties");
    // Samples at home until the moving average is full, then off to the slow partition.
    for _ in 0..IPC_AVERAGE_SAMPLES - 1 {
        assert!(s.step(&mut p).is_empty());
    }
    let out = s.step(&mut p);
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].cpus.to_list(),
        "0-1",
        "forced migration to the slow partition"
    );
    assert!(p.is_refreshing(t));
    assert_eq!(p.stats.forced_migrations, 1);
    // refresh_period (30 ms) later it returns home.
    s.run_for(&mut p, REFRESH_PERIOD_NS - IPC_SAMPLE_PERIOD_NS);
    assert!(p.is_refreshing(t));
    let out = s.step(&mut p);
    assert_eq!(out[0].cpus.to_list(), "2-3");
    assert!(!p.is_refreshing(t));
    // Ratio of performance (IPC x clock): 1.0 x 2.3 over 1.6 x 1.15.
    let r = p.ratio(t, FAST, SLOW).unwrap();
    assert!((r - 2.3 / (1.6 * 1.15)).abs() < 1e-9, "{r}");
}

#[test]
fn the_swap_rule_puts_the_higher_ratio_on_the_fast_partition() {
    let mut s = State::new();
    let mut p = IpcDriven::new();
    // Two memory-bound threads arrive first and take the fast partition; two CPU-bound ones
    // (same IPC everywhere: ratio 2) go to the slow one.
    let mem: Vec<ThreadId> = (0..2).map(|_| s.start(&mut p, (0.4, 0.7))).collect();
    let cpu: Vec<ThreadId> = (0..2).map(|_| s.start(&mut p, (1.2, 1.2))).collect();
    assert_eq!(p.home_of(mem[0]), Some(FAST));
    assert_eq!(p.home_of(cpu[0]), Some(SLOW));
    // Everyone is measured, waits out swap_inactivity, and then the swaps happen.
    s.run_for(&mut p, SWAP_INACTIVITY_NS + 200_000_000);
    for t in &cpu {
        assert_eq!(p.home_of(*t), Some(FAST));
    }
    for t in &mem {
        assert_eq!(p.home_of(*t), Some(SLOW));
    }
    assert_eq!(p.stats.swaps, 2);
    // Settled: more time brings no further swap (the ratios no longer cross).
    s.run_for(&mut p, 3 * SWAP_INACTIVITY_NS);
    assert_eq!(p.stats.swaps, 2);
}

#[test]
fn no_swap_before_swap_inactivity() {
    let mut s = State::new();
    let mut p = IpcDriven::new();
    for _ in 0..2 {
        s.start(&mut p, (0.4, 0.7));
    }
    for _ in 0..2 {
        s.start(&mut p, (1.2, 1.2));
    }
    s.run_for(&mut p, SWAP_INACTIVITY_NS - 100_000_000);
    assert_eq!(p.stats.swaps, 0, "measured, but still inactive");
}

#[test]
fn a_phase_change_over_the_threshold_triggers_a_refresh() {
    let mut s = State::new();
    let mut p = IpcDriven::new();
    let t = s.start(&mut p, (1.0, 1.0));
    s.run_for(&mut p, SWAP_INACTIVITY_NS + 100_000_000);
    let forced = p.stats.forced_migrations;
    assert_eq!(forced, 1, "only the first measurement so far");
    // A 5% change is not a phase.
    s.ipc[0] = (1.05, 1.05);
    s.run_for(&mut p, 200_000_000);
    assert_eq!(p.stats.forced_migrations, forced);
    assert_eq!(p.stats.phase_changes, 0);
    // A 30% change is.
    s.ipc[0] = (1.3, 1.3);
    s.run_for(&mut p, 100_000_000);
    assert_eq!(p.stats.phase_changes, 1);
    assert_eq!(p.stats.forced_migrations, forced + 1);
    assert_eq!(p.home_of(t), Some(FAST));
}

#[test]
fn a_slow_thread_moves_up_to_a_free_fast_core() {
    let mut s = State::new();
    let mut p = IpcDriven::new();
    let a = s.start(&mut p, (1.0, 1.0));
    let b = s.start(&mut p, (1.0, 1.0));
    let c = s.start(&mut p, (1.0, 1.0));
    assert_eq!(p.home_of(c), Some(SLOW), "fast partition full at c's start");
    // a exits: a fast core is free, and the slow thread takes it once measured and inactive.
    s.threads[a.index()].state = ThreadState::Exited;
    let cores = vec![CoreObs::default(); 4];
    p.on_thread_exit(&s.view(&cores), a);
    s.run_for(&mut p, 200_000_000);
    assert_eq!(
        p.home_of(c),
        Some(SLOW),
        "within swap_inactivity of its measurement"
    );
    s.run_for(&mut p, SWAP_INACTIVITY_NS);
    assert_eq!(p.home_of(c), Some(FAST));
    assert_eq!(p.home_of(b), Some(FAST));
    assert_eq!(p.stats.promotions, 1);
}
