//! Policy decision cost on 16,384 threads and 1,024 cores (scale-1024):
//! - one AMPS rebalance from a state balanced by run-queue length (16 per core) that AMPS must
//!   rebalance by power: the fast cores take more threads, so the balance makes thousands of
//!   moves. Target: < 1 ms, small next to the 4 ms balance interval;
//! - one HASS rebalance in which every thread is due a refresh (the worst case: regular and, where
//!   it keeps the thread, optimistic assignment for all 16,384).

use criterion::BatchSize;
use criterion::{criterion_group, criterion_main, Criterion};
use hetsched_core::observe::RunQueues;
use hetsched_core::policies::amps::{Amps, AmpsConfig};
use hetsched_core::policies::hass::{Hass, REFRESH_CPU_NS};
use hetsched_core::presets::machine_preset;
use hetsched_core::Signature;
use hetsched_core::{
    AppId, CoreId, CoreObs, CpuSet, Policy, ThreadId, ThreadObs, ThreadState, View,
};
use std::sync::Arc;

/// 16 threads a core on scale-1024, each pinned to its core (the first of each running), thread
/// `i` in process `app(i)`.
fn sixteen_a_core(
    topo: &hetsched_core::Topology,
    app: impl Fn(usize) -> usize,
) -> (Vec<ThreadObs>, Vec<CoreObs>) {
    let n = topo.num_cores();
    let all = topo.all_cores();
    let mut threads = Vec::new();
    let mut cores = vec![CoreObs::default(); n];
    for i in 0..16 * n {
        let core = CoreId((i % n) as u32);
        let running = cores[core.index()].current.is_none();
        let id = ThreadId(i as u32);
        let mut t = ThreadObs::new(id, AppId(app(i) as u32), all.clone(), topo.nodes().len());
        t.state = if running {
            ThreadState::Running
        } else {
            ThreadState::Runnable
        };
        t.cpu = Some(core);
        t.allowed = CpuSet::single(core);
        threads.push(t);
        cores[core.index()].runnable += 1;
        if running {
            cores[core.index()].current = Some(id);
        }
    }
    (threads, cores)
}

/// Run queues as a backend keeps them.
struct Queues(Vec<Vec<ThreadId>>);

impl RunQueues for Queues {
    fn for_each_waiting(&self, core: CoreId, f: &mut dyn FnMut(ThreadId)) {
        self.0[core.index()].iter().copied().for_each(f);
    }
}

fn bench(c: &mut Criterion) {
    let topo = machine_preset("scale-1024").unwrap().unwrap();
    let n = topo.num_cores();
    let (threads, cores) = sixteen_a_core(&topo, |i| i / 4);
    let view = View {
        now_ns: 0,
        topology: &topo,
        threads: &threads,
        cores: &cores,
        run_queues: None,
        resident_changed: None,
        lifecycle_changed: None,
    };
    let mut amps = Amps::new(AmpsConfig::default());
    let mut out = Vec::new();
    amps.rebalance(&view, &mut out);
    eprintln!("one rebalance moves {} threads", out.len());
    c.bench_function("amps/rebalance/16k-threads/1024-cores", |b| {
        b.iter(|| {
            out.clear();
            amps.rebalance(&view, &mut out);
            out.len()
        });
    });
    // The same with the run queues a simulator hands over (a source's waiting threads are read
    // from its queue, not found in a pass over every thread).
    let mut queues = vec![Vec::new(); n];
    for t in threads.iter().filter(|t| t.state == ThreadState::Runnable) {
        queues[t.cpu.unwrap().index()].push(t.id);
    }
    let queues = Queues(queues);
    let queued_view = View {
        run_queues: Some(&queues),
        resident_changed: None,
        lifecycle_changed: None,
        ..view
    };
    c.bench_function("amps/rebalance/16k-threads/1024-cores/run-queues", |b| {
        b.iter(|| {
            out.clear();
            amps.rebalance(&queued_view, &mut out);
            out.len()
        });
    });
    // The steady state: nothing to move.
    let mut balanced = Amps::new(AmpsConfig::default());
    let idle_view = View {
        threads: &threads[..n],
        ..view
    };
    let mut c1 = vec![CoreObs::default(); n];
    for t in &threads[..n] {
        c1[t.cpu.unwrap().index()] = CoreObs {
            runnable: 1,
            current: Some(t.id),
        };
    }
    let idle_view = View {
        cores: &c1,
        ..idle_view
    };
    c.bench_function("amps/rebalance/1024-threads/1024-cores/balanced", |b| {
        b.iter(|| {
            out.clear();
            balanced.rebalance(&idle_view, &mut out);
            out.len()
        });
    });
}

/// One `hetsched` rebalance on 16,384 threads and 1,024 cores, half of them single-threaded
/// programs and half in 4-thread processes, all in the `amps` part: its balance, the counts of
/// competing threads per process and the benefit bookkeeping.
fn bench_hetsched(c: &mut Criterion) {
    use hetsched_core::policies::hetsched::{Hetsched, HetschedConfig};
    let topo = machine_preset("scale-1024").unwrap().unwrap();
    let n = topo.num_cores();
    // Threads 0..8n: one a process; 8n..16n: four a process.
    let (threads, cores) = sixteen_a_core(&topo, |i| {
        if i < 8 * n {
            i
        } else {
            8 * n + (i - 8 * n) / 4
        }
    });
    let mut p = Hetsched::new(HetschedConfig::default());
    let mut out = Vec::new();
    let mut now = 0;
    // One AMPS period later, a rebalance.
    let mut step = |p: &mut Hetsched, out: &mut Vec<_>| {
        now += 4_000_000;
        let view = View {
            now_ns: now,
            topology: &topo,
            threads: &threads,
            cores: &cores,
            run_queues: None,
            resident_changed: None,
            lifecycle_changed: None,
        };
        out.clear();
        p.rebalance(&view, out);
        out.len()
    };
    // Warm: parts assigned, every part's first decision made.
    for _ in 0..3 {
        step(&mut p, &mut out);
    }
    c.bench_function("hetsched/rebalance/16k-threads-two-parts/1024-cores", |b| {
        b.iter(|| step(&mut p, &mut out));
    });
}

fn bench_hass(c: &mut Criterion) {
    let topo = machine_preset("scale-1024").unwrap().unwrap();
    let n = topo.num_cores();
    let nodes = topo.nodes().len();
    // Four kinds of thread, CPU-bound to memory-bound.
    let sigs: Vec<Arc<Signature>> = [0.0, 20.0, 100.0, 400.0]
        .iter()
        .map(|&m| Arc::new(Signature::from_row("b", &[m * 4.0, m])))
        .collect();
    let mut threads: Vec<ThreadObs> = Vec::new();
    let cores = vec![CoreObs::default(); n];
    let mut hass = Hass::new(1);
    for i in 0..16 * n {
        let id = ThreadId(i as u32);
        let mut t = ThreadObs::new(id, AppId(i as u32), topo.all_cores(), nodes);
        t.signature = Some(sigs[i % 4].clone());
        threads.push(t);
        let view = View {
            now_ns: 0,
            topology: &topo,
            threads: &threads,
            cores: &cores,
            run_queues: None,
            resident_changed: None,
            lifecycle_changed: None,
        };
        let set = hass.on_thread_start(&view, id).unwrap();
        threads[i].cpu = set.first();
        threads[i].state = ThreadState::Runnable;
    }
    let mut now = 0u64;
    let mut out = Vec::new();
    c.bench_function("hass/rebalance/16k-threads-all-due/1024-cores", |b| {
        b.iter_batched(
            || {
                now += 10_000_000;
                for t in &mut threads {
                    t.counters.cpu_time_ns += REFRESH_CPU_NS;
                }
                (threads.clone(), now)
            },
            |(ts, now)| {
                out.clear();
                let view = View {
                    now_ns: now,
                    topology: &topo,
                    threads: &ts,
                    cores: &cores,
                    run_queues: None,
                    resident_changed: None,
                    lifecycle_changed: None,
                };
                hass.rebalance(&view, &mut out);
                out.len()
            },
            BatchSize::LargeInput,
        );
    });
}

criterion_group!(benches, bench, bench_hass, bench_hetsched);
criterion_main!(benches);
