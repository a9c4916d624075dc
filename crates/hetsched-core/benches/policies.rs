//! Policy decision cost: one AMPS rebalance of 16,384 threads on 1,024 cores (scale-1024), from a
//! state balanced by run-queue length (16 per core) that AMPS must rebalance by power: the fast
//! cores take more threads, so the balance makes thousands of moves. Target (issue 4): < 5 ms.

use criterion::{criterion_group, criterion_main, Criterion};
use hetsched_core::policies::amps::{Amps, AmpsConfig};
use hetsched_core::presets::machine_preset;
use hetsched_core::{
    AppId, CoreId, CoreObs, CpuSet, Policy, ThreadId, ThreadObs, ThreadState, View,
};

fn bench(c: &mut Criterion) {
    let topo = machine_preset("scale-1024").unwrap().unwrap();
    let n = topo.num_cores();
    let all = topo.all_cores();
    let mut threads = Vec::new();
    let mut cores = vec![CoreObs::default(); n];
    for i in 0..16 * n {
        let core = CoreId((i % n) as u32);
        let running = cores[core.index()].current.is_none();
        let id = ThreadId(i as u32);
        threads.push(ThreadObs {
            state: if running {
                ThreadState::Running
            } else {
                ThreadState::Runnable
            },
            cpu: Some(core),
            allowed: CpuSet::single(core),
            ..ThreadObs::new(id, AppId((i / 4) as u32), all.clone(), topo.nodes().len())
        });
        cores[core.index()].runnable += 1;
        if running {
            cores[core.index()].current = Some(id);
        }
    }
    let view = View {
        now_ns: 0,
        topology: &topo,
        threads: &threads,
        cores: &cores,
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
        })
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
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
