//! The engine's invariants (property tests) and the performance model's effects seen end to end.

use hetsched_core::policies::policy_by_name;
use hetsched_core::presets::machine_preset;
use hetsched_core::rng::SeededRng;
use hetsched_core::{CoreId, CpuSet, Placement, Policy, ThreadId, Topology, View};
use hetsched_sim::workload::{AppSpec, MissCurve, Phase, PhaseEnd, ThreadSpec, Workload};
use hetsched_sim::{simulate, SimConfig};
use proptest::prelude::*;

mod common;
use common::phase;

fn machine(name: &str) -> Topology {
    machine_preset(name).unwrap().unwrap()
}

fn single(name: &str, phases: Vec<Phase>) -> Workload {
    common::app(name, 1, phases, 1)
}

/// A test policy: pins every thread to `first` until `switch_ns`, then to `then`.
struct Pin {
    first: CoreId,
    then: CoreId,
    switch_ns: u64,
}

impl Policy for Pin {
    fn name(&self) -> &str {
        "pin"
    }
    fn rebalance_period_ns(&self) -> u64 {
        1_000_000
    }
    fn on_thread_start(&mut self, _v: &View<'_>, _t: ThreadId) -> Option<CpuSet> {
        Some(CpuSet::single(self.first))
    }
    fn rebalance(&mut self, v: &View<'_>, out: &mut Vec<Placement>) {
        if v.now_ns >= self.switch_ns {
            for t in v.live_threads() {
                out.push(Placement::pin(t.id, self.then));
            }
        }
    }
}

fn pinned_time(topo: &Topology, w: &Workload, core: u32) -> f64 {
    let p = Box::new(Pin {
        first: CoreId(core),
        then: CoreId(core),
        switch_ns: u64::MAX,
    });
    let r = simulate(topo, w, p, SimConfig::default());
    assert!(r.finished);
    r.makespan_s
}

/// A CPU-bound thread runs twice as fast on a core twice as fast; a memory-bound one gains much
/// less (HASS section 3).
#[test]
fn fast_core_doubles_cpu_bound_but_not_memory_bound() {
    let smp = machine("amps-smp"); // cores 0-1 at 2.66 GHz, 2-7 at 50% duty
    let cpu = single("cpu", vec![phase(2e9, 1.0, 0.0, PhaseEnd::Next)]);
    let mem = single("mem", vec![phase(2e8, 1.0, 40.0, PhaseEnd::Next)]);
    let cpu_ratio = pinned_time(&smp, &cpu, 3) / pinned_time(&smp, &cpu, 0);
    let mem_ratio = pinned_time(&smp, &mem, 3) / pinned_time(&smp, &mem, 0);
    assert!((cpu_ratio - 2.0).abs() < 0.01, "cpu-bound: {cpu_ratio}");
    assert!(mem_ratio < 1.15, "memory-bound: {mem_ratio}");
}

/// Pages on a remote node cost the paper's latency ratio (AMPS Table 1: 176 / 68 for 2 hops).
#[test]
fn remote_pages_cost_the_papers_latency_ratio() {
    let numa = machine("amps-numa-1");
    // Node 0 holds cores 0-3; node 2 (cores 8-11) is two hops from node 0.
    assert_eq!(numa.latency_ns(CoreId(8), hetsched_core::NodeId(0)), 176.0);
    let mut alloc = phase(1e6, 0.01, 0.0, PhaseEnd::Sleep { ns: 10_000_000 });
    alloc.alloc_bytes = 1 << 30;
    // Pure memory stall: tiny CPI, fixed miss rate.
    let work = phase(1e8, 1e-6, 50.0, PhaseEnd::Next);
    let w = single("numa", vec![alloc, work]);
    let stay = Box::new(Pin {
        first: CoreId(0),
        then: CoreId(1),
        switch_ns: 5_000_000,
    });
    let away = Box::new(Pin {
        first: CoreId(0),
        then: CoreId(8),
        switch_ns: 5_000_000,
    });
    let local = simulate(&numa, &w, stay, SimConfig::default());
    let remote = simulate(&numa, &w, away, SimConfig::default());
    let work_time = |r: &hetsched_sim::RunResult| r.makespan_s - 0.010 - 1e6 * 0.01 / 3.3e9;
    let ratio = work_time(&remote) / work_time(&local);
    assert!(
        (ratio - 176.0 / 68.0).abs() < 0.03,
        "remote/local = {ratio}"
    );
}

#[test]
fn same_seed_same_result_and_baseline_varies_across_seeds() {
    let smp = machine("amps-smp");
    // Three single-threaded programs on 2 fast + 6 slow cores: where they land is chance.
    let mut w = single("three", vec![phase(1e9, 1.0, 0.5, PhaseEnd::Next)]);
    w.apps[0].copies = 3;
    let run = |seed| {
        simulate(
            &smp,
            &w,
            policy_by_name("linux-default").unwrap(),
            SimConfig {
                seed,
                // A balancer blind to core speed: which thread lands on a fast core is luck.
                baseline: hetsched_sim::baseline::baseline_by_name("linux-cfs").unwrap(),
                ..Default::default()
            },
        )
    };
    let (a, b) = (run(3), run(3));
    assert_eq!(a.apps[0].completion_times_s, b.apps[0].completion_times_s);
    assert_eq!(a.migrations, b.migrations);
    let spans: Vec<f64> = (1..=8)
        .map(|s| run(s).apps[0].completion_s.unwrap())
        .collect();
    let min = spans.iter().cloned().fold(f64::MAX, f64::min);
    let max = spans.iter().cloned().fold(f64::MIN, f64::max);
    assert!(
        max > min * 1.01,
        "the baseline should vary with the seed on an asymmetric machine: {spans:?}"
    );
}

/// A policy that pins threads to random cores (seeded), to drive every placement path.
struct RandomPins {
    rng: SeededRng,
    cores: usize,
}

impl Policy for RandomPins {
    fn name(&self) -> &str {
        "random-pins"
    }
    fn rebalance_period_ns(&self) -> u64 {
        3_000_000
    }
    fn rebalance(&mut self, v: &View<'_>, out: &mut Vec<Placement>) {
        for t in v.live_threads() {
            if self.rng.below(3) == 0 {
                let a = self.rng.below(self.cores) as u32;
                let b = self.rng.below(self.cores) as u32;
                let set: CpuSet = [CoreId(a), CoreId(b)].into_iter().collect();
                out.push(Placement::new(t.id, set));
            }
        }
    }
    fn on_core_idle(&mut self, v: &View<'_>, core: CoreId, out: &mut Vec<Placement>) {
        if let Some(t) = v
            .live_threads()
            .find(|t| t.state == hetsched_core::ThreadState::Runnable)
        {
            out.push(Placement::pin(t.id, core));
        }
    }
}

fn arb_phase() -> impl Strategy<Value = Phase> {
    (1e5f64..2e7, 0.5f64..2.0, 0.0f64..30.0, 0u8..4, 0u32..3).prop_map(
        |(instr, cpi, mpki, end, sleep)| Phase {
            instructions: instr,
            cpi,
            miss: MissCurve::Knee {
                mpki_max: mpki * 2.0,
                mpki_min: mpki,
                ws_bytes: 4 << 20,
            },
            fp_fraction: if end == 1 { 0.8 } else { 0.0 },
            mlp: 1.0,
            data_fragment: if end == 2 { Some(0) } else { None },
            df_writes: end == 2,
            alloc_bytes: if end == 3 { 1 << 20 } else { 0 },
            free_bytes: 0,
            once: false,
            end: match end {
                0 => PhaseEnd::Barrier,
                1 => PhaseEnd::Sleep {
                    ns: 100_000 + sleep as u64 * 1_000_000,
                },
                _ => PhaseEnd::Next,
            },
        },
    )
}

fn arb_workload() -> impl Strategy<Value = Workload> {
    let app = (
        proptest::collection::vec(
            (
                1u32..5,
                proptest::collection::vec(arb_phase(), 1..4),
                1u32..3,
            ),
            1..3,
        ),
        0u64..20_000_000,
        any::<bool>(),
    )
        .prop_map(|(groups, arrival, restart)| AppSpec {
            service: None,
            name: "app".into(),
            copies: 1,
            arrival_ns: arrival,
            restart,
            runs: if restart { Some(2) } else { None },
            threads: groups
                .into_iter()
                .map(|(count, phases, repeat)| ThreadSpec::new("t", count, phases, repeat))
                .collect(),
            data_fragments: vec![256 << 10],
            cpus: None,
        });
    proptest::collection::vec(app, 1..4).prop_map(|apps| Workload {
        name: "random".into(),
        description: String::new(),
        apps,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, .. ProptestConfig::default() })]

    /// DESIGN.md invariants, checked after every event and tick: a thread is on at most one core;
    /// the baseline never leaves a core idle while a thread waits in its allowed set. And no work
    /// is lost: a finished run retired exactly the workload's instructions.
    #[test]
    fn invariants_hold_and_no_work_is_lost(
        w in arb_workload(),
        m in prop::sample::select(vec!["amps-smp", "bulldover", "pinter-smp", "hass-amd-2-2", "arm-3cluster-phone", "amps-numa-2"]),
        seed in 0u64..1000,
        random_policy in any::<bool>(),
    ) {
        let topo = machine(m);
        let policy: Box<dyn Policy> = if random_policy {
            Box::new(RandomPins { rng: SeededRng::new(seed), cores: topo.num_cores() })
        } else {
            policy_by_name("linux-default").unwrap()
        };
        let cfg = SimConfig { seed, check_invariants: true, duration_ns: 30_000_000_000, ..Default::default() };
        let r = simulate(&topo, &w, policy, cfg);
        prop_assert!(r.finished, "did not finish in 30 s");
        let expected: f64 = w.apps.iter().zip(&r.apps).map(|(a, res)| a.instructions() * res.completions as f64).sum();
        prop_assert!((r.instructions - expected).abs() <= 1e-6 * expected.max(1.0), "retired {} of {}", r.instructions, expected);
        for (a, res) in w.apps.iter().zip(&r.apps) {
            let runs = if a.restart { a.runs.unwrap_or(1) } else { 1 } as u64;
            prop_assert_eq!(res.completions, runs * a.copies as u64);
        }
    }
}

#[test]
fn regression_idle_core_with_waiting_thread() {
    let w = Workload {
        name: "random".into(),
        description: "".into(),
        apps: vec![
            AppSpec {
                service: None,
                name: "app".into(),
                copies: 1,
                arrival_ns: 13251137,
                restart: true,
                runs: Some(2),
                threads: vec![
                    ThreadSpec::new(
                        "t",
                        4,
                        vec![Phase {
                            instructions: 4645434.509151489,
                            cpi: 1.9997614777236081,
                            miss: MissCurve::Knee {
                                mpki_max: 40.70556265181933,
                                mpki_min: 20.352781325909664,
                                ws_bytes: 4194304,
                            },
                            fp_fraction: 0.0,
                            mlp: 1.0,
                            data_fragment: None,
                            df_writes: false,
                            alloc_bytes: 0,
                            free_bytes: 0,
                            once: false,
                            end: PhaseEnd::Barrier,
                        }],
                        2,
                    ),
                    ThreadSpec::new(
                        "t",
                        1,
                        vec![Phase {
                            instructions: 11253163.425995914,
                            cpi: 0.5,
                            miss: MissCurve::Knee {
                                mpki_max: 15.757123355380914,
                                mpki_min: 7.878561677690457,
                                ws_bytes: 4194304,
                            },
                            fp_fraction: 0.0,
                            mlp: 1.0,
                            data_fragment: None,
                            df_writes: false,
                            alloc_bytes: 0,
                            free_bytes: 0,
                            once: false,
                            end: PhaseEnd::Barrier,
                        }],
                        1,
                    ),
                ],
                data_fragments: vec![262144],
                cpus: None,
            },
            AppSpec {
                service: None,
                name: "app".into(),
                copies: 1,
                arrival_ns: 9684258,
                restart: true,
                runs: Some(2),
                threads: vec![ThreadSpec::new(
                    "t",
                    4,
                    vec![
                        Phase {
                            instructions: 3993828.767483713,
                            cpi: 1.0989392982211932,
                            miss: MissCurve::Knee {
                                mpki_max: 16.567895041837588,
                                mpki_min: 8.283947520918794,
                                ws_bytes: 4194304,
                            },
                            fp_fraction: 0.0,
                            mlp: 1.0,
                            data_fragment: Some(0),
                            df_writes: true,
                            alloc_bytes: 0,
                            free_bytes: 0,
                            once: false,
                            end: PhaseEnd::Next,
                        },
                        Phase {
                            instructions: 12742525.278449375,
                            cpi: 1.2275788142528232,
                            miss: MissCurve::Knee {
                                mpki_max: 3.044425422070486,
                                mpki_min: 1.522212711035243,
                                ws_bytes: 4194304,
                            },
                            fp_fraction: 0.8,
                            mlp: 1.0,
                            data_fragment: None,
                            df_writes: false,
                            alloc_bytes: 0,
                            free_bytes: 0,
                            once: false,
                            end: PhaseEnd::Sleep { ns: 100000 },
                        },
                        Phase {
                            instructions: 3476296.5989463683,
                            cpi: 1.17397374290606,
                            miss: MissCurve::Knee {
                                mpki_max: 38.86857393355279,
                                mpki_min: 19.434286966776394,
                                ws_bytes: 4194304,
                            },
                            fp_fraction: 0.0,
                            mlp: 1.0,
                            data_fragment: Some(0),
                            df_writes: true,
                            alloc_bytes: 0,
                            free_bytes: 0,
                            once: false,
                            end: PhaseEnd::Next,
                        },
                    ],
                    1,
                )],
                data_fragments: vec![262144],
                cpus: None,
            },
        ],
    };
    let topo = machine("bulldover");
    let policy = Box::new(RandomPins {
        rng: SeededRng::new(394),
        cores: topo.num_cores(),
    });
    let cfg = SimConfig {
        seed: 394,
        check_invariants: true,
        duration_ns: 30_000_000_000,
        ..Default::default()
    };
    let r = simulate(&topo, &w, policy, cfg);
    assert!(r.finished);
}

/// A test policy that records every thread's resident bytes at each rebalance (what a policy sees).
struct RecordResident {
    seen: std::sync::Arc<std::sync::Mutex<Vec<u64>>>,
}

impl Policy for RecordResident {
    fn name(&self) -> &str {
        "record-resident"
    }
    fn rebalance_period_ns(&self) -> u64 {
        4_000_000
    }
    fn rebalance(&mut self, view: &View<'_>, _out: &mut Vec<Placement>) {
        let total: Vec<u64> = view
            .threads
            .iter()
            .map(|t| t.resident_bytes.iter().sum())
            .collect();
        *self.seen.lock().unwrap() = total;
    }
}

/// Resident bytes per thread at the end of a run of this workload on amps-numa-1.
fn resident_after(text: &str) -> Vec<u64> {
    let topo = machine("amps-numa-1");
    let w = Workload::parse(text, "owner.toml", &topo).unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let policy = RecordResident { seen: seen.clone() };
    let cfg = SimConfig {
        duration_ns: 2_000_000_000,
        ..Default::default()
    };
    simulate(&topo, &w, Box::new(policy), cfg);
    let v = seen.lock().unwrap().clone();
    v
}

#[test]
fn freed_pages_leave_their_owners_resident_sets() {
    // AMPS section 2.4.2, Figure 4: four children first-touch 16 MiB each; the main thread then
    // frees 32 MiB of the process's memory. With owner lists the children's counters fall by 32 MiB
    // in all, and the main thread's (which allocated nothing) stays at zero.
    let text = |child_tail: &str| {
        format!(
            r#"
name = "owner"
[[apps]]
name = "p"
[[apps.threads]]
[[apps.threads.phases]]
instructions = 1e6
cpi = 1.0
barrier = true
[[apps.threads.phases]]
instructions = 1e6
cpi = 1.0
free = "32 MiB"
[[apps.threads.phases]]
instructions = 1e9
cpi = 1.0
[[apps.threads]]
count = 4
[[apps.threads.phases]]
instructions = 4e7
cpi = 1.0
alloc = "16 MiB"
barrier = true
{child_tail}
"#
        )
    };
    let mib = 1u64 << 20;
    // Children still alive (a long phase after the barrier).
    let alive = resident_after(&text(
        "[[apps.threads.phases]]\ninstructions = 1e9\ncpi = 1.0\n",
    ));
    assert_eq!(alive.len(), 5);
    assert_eq!(alive[0], 0, "the freeing thread owns none of the pages");
    let children: u64 = alive[1..].iter().sum();
    assert!(
        children.abs_diff(32 * mib) < 1024,
        "children keep 64 - 32 MiB, got {children}"
    );
    // Children exited before the free: their entries are dropped, nobody is charged.
    let exited = resident_after(&text(""));
    assert_eq!(exited[0], 0);
    let children: u64 = exited[1..].iter().sum();
    assert!(
        children.abs_diff(64 * mib) < 1024,
        "exited owners keep their last counters, got {children}"
    );
}

/// Two copies of one benchmark preset pinned to `cores` on the BulldOver machine: (completion
/// time of the slower, module-L2 misses).
fn pair_on(bench: &str, cores: [u32; 2]) -> (f64, f64) {
    let topo = machine("bulldover");
    let single = hetsched_sim::presets::workload_preset(bench, &topo)
        .unwrap()
        .unwrap();
    let mut apps = Vec::new();
    for c in cores {
        let mut a = single.apps[0].clone();
        a.restart = false;
        a.cpus = Some(CpuSet::single(CoreId(c)));
        apps.push(a);
    }
    let w = Workload {
        name: "pair".into(),
        description: String::new(),
        apps,
    };
    let r = simulate(
        &topo,
        &w,
        policy_by_name("linux-default").unwrap(),
        SimConfig::default(),
    );
    assert!(r.finished);
    let worst = r
        .apps
        .iter()
        .filter_map(|a| a.completion_s)
        .fold(0.0, f64::max);
    (worst, r.apps.iter().map(|a| a.l2_misses).sum())
}

/// BulldOver section 3.A: two FP-busy threads on one module slow each other (shared FPU); two
/// integer threads whose hot sets fill the module's L2 slow each other through L2 misses; an
/// integer thread with a small footprint pays for neither.
#[test]
fn a_module_shares_its_fpu_and_its_l2() {
    // Cores 0 and 1 form module 0; cores 0 and 2 are on different modules.
    let (povray_same, _) = pair_on("povray-like", [0, 1]);
    let (povray_apart, _) = pair_on("povray-like", [0, 2]);
    assert!(
        povray_same > 1.3 * povray_apart,
        "FPU: {povray_same} vs {povray_apart}"
    );
    let (hmmer_same, l2_same) = pair_on("hmmer-like", [0, 1]);
    let (hmmer_apart, l2_apart) = pair_on("hmmer-like", [0, 2]);
    assert!(
        l2_same > 1.2 * l2_apart,
        "L2 misses: {l2_same} vs {l2_apart}"
    );
    assert!(
        hmmer_same > 1.02 * hmmer_apart,
        "L2: {hmmer_same} vs {hmmer_apart}"
    );
    // hmmer's 3% FP share barely meets the FPU: its slowdown is the L2's, far below povray's.
    assert!(hmmer_same / hmmer_apart < povray_same / povray_apart);
}

/// A baseline that queues every thread on the first core it may use and never balances: with it,
/// nothing spreads threads but the engine's own idle sweep asking the baseline (which declines).
struct FirstCore;

impl hetsched_sim::baseline::Baseline for FirstCore {
    fn name(&self) -> &'static str {
        "first-core"
    }
    fn place_new(&mut self, rq: &hetsched_sim::baseline::RunQueueView<'_>, t: ThreadId) -> CoreId {
        rq.allowed(t).iter().next().unwrap()
    }
    fn place_wake(&mut self, rq: &hetsched_sim::baseline::RunQueueView<'_>, t: ThreadId) -> CoreId {
        self.place_new(rq, t)
    }
    fn newidle_pull(
        &mut self,
        _: &hetsched_sim::baseline::RunQueueView<'_>,
        _: CoreId,
    ) -> Option<ThreadId> {
        None
    }
    fn on_tick(&mut self, _: u64, _: &mut dyn hetsched_sim::baseline::BalancePort) {}
}

static FIRST_CORE: hetsched_sim::baseline::BaselineEntry = hetsched_sim::baseline::BaselineEntry {
    name: "first-core",
    description: "every thread on its first allowed core, no balancing",
    make: |_| Box::new(FirstCore),
};

/// The baseline is whatever `SimConfig::baseline` names: two CPU-bound threads on a symmetric
/// machine take twice as long when the baseline stacks them on one core as when the default one
/// spreads them, and the default is found by its name in the table.
#[test]
fn the_baseline_is_chosen_through_the_config() {
    let topo = machine("pinter-smp");
    let mut w = single("two", vec![phase(2e9, 1.0, 0.0, PhaseEnd::Next)]);
    w.apps[0].threads[0].count = 2;
    let run = |baseline| {
        let cfg = SimConfig {
            baseline,
            ..SimConfig::default()
        };
        let r = simulate(&topo, &w, policy_by_name("linux-default").unwrap(), cfg);
        assert!(r.finished);
        r.makespan_s
    };
    let default = hetsched_sim::baseline::default_baseline();
    assert_eq!(
        hetsched_sim::baseline::baseline_by_name(default.name).map(|b| b.name),
        Some(default.name)
    );
    let spread = run(default);
    let stacked = run(&FIRST_CORE);
    let ratio = stacked / spread;
    assert!(
        (1.9..2.1).contains(&ratio),
        "stacked {stacked} s vs spread {spread} s"
    );
}

/// A run that finishes nothing gets a speedup from the work it did over the same window, not a
/// silent 1; per-class CPU time is keyed by the class's name.
#[test]
fn an_unfinished_run_is_compared_by_progress_and_classes_are_named() {
    let smp = machine("amps-smp"); // cores 0-1 fast, 2-7 at 50% duty
    let w = single("long", vec![phase(1e13, 1.0, 0.0, PhaseEnd::Next)]);
    let cfg = SimConfig {
        duration_ns: 2_000_000_000,
        ..SimConfig::default()
    };
    let on = |core: u32| {
        let p = Box::new(Pin {
            first: CoreId(core),
            then: CoreId(core),
            switch_ns: u64::MAX,
        });
        simulate(&smp, &w, p, cfg.clone())
    };
    let (slow, fast) = (on(3), on(0));
    assert!(!slow.finished && !fast.finished);
    let s = hetsched_sim::metrics::speedup(&slow, &fast, true);
    assert!((s - 2.0).abs() < 0.02, "progress speedup {s}");
    let classes = &fast.apps[0].cpu_s_per_class;
    assert_eq!(classes.keys().collect::<Vec<_>>(), ["fast", "slow"]);
    assert!(
        classes["fast"] > 1.9 && classes["slow"] == 0.0,
        "{classes:?}"
    );
}

/// The apps of one service count once in the speedup: two request kinds of a service whose
/// throughput quadruples and stays put, beside a batch-like closed loop that stays put, give the
/// geometric mean of sqrt(4 x 1) and 1, not of 4, 1 and 1.
#[test]
fn a_services_apps_count_once_in_the_speedup() {
    let smp = machine("amps-smp");
    // Three closed loops of one thread; the first two are request kinds of one service.
    let app = |name: &str, service: &str| {
        format!(
            "[[apps]]\nname = \"{name}\"\n{service}restart = true\n[[apps.threads]]\ncount = 1\n\
             [[apps.threads.phases]]\ninstructions = 1e6\ncpi = 1.0\n"
        )
    };
    let text = format!(
        "name = \"svc\"\n{}{}{}",
        app("login", "service = \"web\"\n"),
        app("search", "service = \"web\"\n"),
        app("batch", "")
    );
    let text = text.as_str();
    let w = Workload::parse(text, "svc.toml", &smp).unwrap();
    assert_eq!(w.apps[0].service.as_deref(), Some("web"));
    assert_eq!(w.apps[2].service, None);
    let cfg = SimConfig {
        duration_ns: 50_000_000,
        ..SimConfig::default()
    };
    let base = simulate(&smp, &w, policy_by_name("linux-default").unwrap(), cfg);
    assert_eq!(base.apps[1].service.as_deref(), Some("web"));
    let mut faster = base.clone();
    faster.apps[0].instructions *= 4.0;
    let s = hetsched_sim::metrics::speedup(&base, &faster, false);
    assert!((s - 2f64.sqrt()).abs() < 1e-9, "grouped speedup {s}");
    let mut ungrouped = base.clone();
    for a in &mut ungrouped.apps {
        a.service = None;
    }
    let s = hetsched_sim::metrics::speedup(&ungrouped, &faster, false);
    assert!((s - 4f64.cbrt()).abs() < 1e-9, "ungrouped speedup {s}");
    let err = Workload::parse(&text.replacen("\"web\"", "\" \"", 1), "svc.toml", &smp).unwrap_err();
    assert!(err.to_string().contains("service"), "{err}");
}
