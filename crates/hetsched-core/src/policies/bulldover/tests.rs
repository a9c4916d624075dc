use super::*;
use crate::ids::AppId;
use crate::machine_file::parse_machine;
use crate::observe::{CoreObs, ThreadObs, ThreadState};
use crate::presets::machine_preset;

/// Threads whose FPU usage we set; every period each runs 1e9 cycles.
struct State {
    topo: Topology,
    threads: Vec<ThreadObs>,
    usage: Vec<f64>,
    now: u64,
}

impl State {
    fn new(topo: Topology) -> Self {
        State {
            topo,
            threads: Vec::new(),
            usage: Vec::new(),
            now: 0,
        }
    }
    fn view<'a>(&'a self, cores: &'a [CoreObs]) -> View<'a> {
        crate::policies::fixture::view(&self.topo, &self.threads, cores, self.now)
    }
    fn start(&mut self, p: &mut Bulldover, usage: f64) -> ThreadId {
        let id = ThreadId(self.threads.len() as u32);
        let mut t = ThreadObs::new(id, AppId(0), self.topo.all_cores(), 1);
        t.state = ThreadState::Running;
        self.threads.push(t);
        self.usage.push(usage);
        let cores = vec![CoreObs::default(); self.topo.num_cores()];
        assert!(p.on_thread_start(&self.view(&cores), id).is_none());
        id
    }
    fn period(&mut self, p: &mut Bulldover) -> Vec<Placement> {
        self.now += BULLDOVER_PERIOD_NS;
        for (t, &u) in self.threads.iter_mut().zip(&self.usage) {
            t.counters.cycles += 1e9;
            t.counters.fp_busy_cycles += u * 1e9;
        }
        let cores = vec![CoreObs::default(); self.topo.num_cores()];
        let mut out = Vec::new();
        p.rebalance(&self.view(&cores), &mut out);
        for pl in &out {
            self.threads[pl.thread.index()].allowed = pl.cpus.clone();
        }
        out
    }
    fn allowed(&self, t: ThreadId) -> String {
        self.threads[t.index()].allowed.to_list()
    }
}

fn bulldover_machine() -> Topology {
    machine_preset("bulldover").unwrap().unwrap()
}

#[test]
fn fpu_usage_is_equation_1() {
    let before = Counters::default();
    let now = Counters {
        cycles: 1000.0,
        fp_busy_cycles: 750.0,
        ..Default::default()
    };
    // 1 - empty / total = 1 - 250 / 1000.
    assert_eq!(fpu_usage(&now, &before), Some(0.75));
    assert_eq!(fpu_usage(&before, &before), None, "did not run");
}

#[test]
fn fp_threads_go_one_per_module_on_the_first_cores() {
    let mut s = State::new(bulldover_machine());
    let mut p = Bulldover::new(BulldoverConfig::default());
    let fp: Vec<ThreadId> = [0.9, 0.8, 0.7, 0.75]
        .iter()
        .map(|&u| s.start(&mut p, u))
        .collect();
    let int: Vec<ThreadId> = (0..4).map(|_| s.start(&mut p, 0.03)).collect();
    let out = s.period(&mut p);
    assert_eq!(out.len(), 4, "only the FP threads are bound");
    let mut cores: Vec<String> = fp.iter().map(|&t| s.allowed(t)).collect();
    cores.sort();
    // The first core of each of the four modules (0-1, 2-3, 4-5, 6-7).
    assert_eq!(cores, vec!["0", "2", "4", "6"]);
    // Highest usage takes the first module.
    assert_eq!(s.allowed(fp[0]), "0");
    for t in int {
        assert_eq!(s.allowed(t), "0-7", "integer threads stay unrestricted");
        assert_eq!(p.bound_core(t), None);
    }
}

#[test]
fn eight_fp_threads_fill_first_then_second_cores() {
    let mut s = State::new(bulldover_machine());
    let mut p = Bulldover::new(BulldoverConfig::default());
    let ids: Vec<ThreadId> = (0..9)
        .map(|i| s.start(&mut p, 0.9 - i as f64 * 0.05))
        .collect();
    s.period(&mut p);
    let core = |t: ThreadId| p.bound_core(t).map(|c| c.0);
    assert_eq!(
        ids[..4].iter().map(|&t| core(t)).collect::<Vec<_>>(),
        vec![Some(0), Some(2), Some(4), Some(6)]
    );
    assert_eq!(
        ids[4..8].iter().map(|&t| core(t)).collect::<Vec<_>>(),
        vec![Some(1), Some(3), Some(5), Some(7)]
    );
    assert_eq!(core(ids[8]), None, "beyond k x N: unrestricted");
}

#[test]
fn eight_modules_of_three_cores() {
    let text = r#"
name = "m8x3"
memory_latency_ns = 80
[[classes]]
name = "c"
freq_ghz = 2.0
[[cores]]
cpus = "0-23"
class = "c"
[[modules]]
cpus = "0-23"
shared_by = 3
shares_fpu = true
"#;
    let mut s = State::new(parse_machine(text, "m8x3.toml").unwrap());
    let mut p = Bulldover::new(BulldoverConfig::default());
    let ids: Vec<ThreadId> = (0..17)
        .map(|i| s.start(&mut p, 0.99 - i as f64 * 0.01))
        .collect();
    s.period(&mut p);
    let cores: Vec<Option<u32>> = ids.iter().map(|&t| p.bound_core(t).map(|c| c.0)).collect();
    // Group 0: the first core of each of the 8 modules (0, 3, 6, ... 21); group 1: the second.
    assert_eq!(&cores[..8], &[0, 3, 6, 9, 12, 15, 18, 21].map(Some));
    assert_eq!(&cores[8..16], &[1, 4, 7, 10, 13, 16, 19, 22].map(Some));
    assert_eq!(cores[16], Some(2), "group 2, module 0");
}

#[test]
fn the_cache_keeps_a_thread_on_its_core_while_it_stays_in_its_group() {
    let mut s = State::new(bulldover_machine());
    let mut p = Bulldover::new(BulldoverConfig::default());
    let ids: Vec<ThreadId> = [0.9, 0.8, 0.7, 0.6, 0.5]
        .iter()
        .map(|&u| s.start(&mut p, u))
        .collect();
    s.period(&mut p);
    let before: Vec<Option<CoreId>> = ids.iter().map(|&t| p.bound_core(t)).collect();
    // The order inside the top group flips: nobody moves.
    s.usage[0] = 0.65;
    s.usage[3] = 0.95;
    assert!(s.period(&mut p).is_empty());
    assert_eq!(
        ids.iter().map(|&t| p.bound_core(t)).collect::<Vec<_>>(),
        before
    );
    // Thread 4 (second group) overtakes thread 2: they swap groups, and only they move; thread 4
    // takes the core thread 2 left.
    s.usage[4] = 0.85;
    s.usage[2] = 0.4;
    let out = s.period(&mut p);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(p.bound_core(ids[4]), before[2]);
    assert_eq!(
        p.bound_core(ids[2]).map(|c| c.0),
        Some(1),
        "second group, first module"
    );
}

#[test]
fn the_threshold_and_phases_bind_and_unbind() {
    let mut s = State::new(bulldover_machine());
    let mut p = Bulldover::new(BulldoverConfig::default());
    let low = s.start(&mut p, FP_INTENSIVE_THRESHOLD - 0.05);
    let high = s.start(&mut p, FP_INTENSIVE_THRESHOLD + 0.05);
    s.period(&mut p);
    assert_eq!(p.bound_core(low), None);
    assert!(p.bound_core(high).is_some());
    // `high` enters an integer phase: unbound at the next period.
    s.usage[1] = 0.0;
    let out = s.period(&mut p);
    assert_eq!(out, vec![Placement::new(high, s.topo.all_cores())]);
    assert_eq!(p.bound_core(high), None);
    assert!((p.usage(high).unwrap() - 0.0).abs() < 1e-12);
}

#[test]
fn a_machine_without_modules_gets_nothing_and_one_notice() {
    let mut s = State::new(machine_preset("amps-smp").unwrap().unwrap());
    let mut p = Bulldover::new(BulldoverConfig::default());
    for _ in 0..4 {
        s.start(&mut p, 0.9);
    }
    assert!(s.period(&mut p).is_empty());
    let n = p.take_notice().expect("says so");
    assert!(n.contains("no cores that share an FPU"), "{n}");
    assert!(p.take_notice().is_none(), "once");
}
