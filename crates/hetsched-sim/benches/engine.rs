//! Engine throughput: the default scenario, and one simulated second of the scale run (1,024
//! cores, 16,384 threads, 4 ms quantum) beside the yardstick's second of the same scenario (the
//! least an event simulation of it must do, `support/yardstick.rs`). The 60 s figures, their
//! ratio and the policies' are the `scale` benchmark's.

#[path = "support/yardstick.rs"]
mod yardstick;

use criterion::{criterion_group, criterion_main, Criterion};
use hetsched_core::policies::linux_default::NAME as LINUX_DEFAULT;
use hetsched_core::policies::policy_by_name;
use hetsched_core::presets::machine_preset;
use hetsched_sim::presets::workload_preset;
use hetsched_sim::{simulate, SimConfig};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    let smp = machine_preset("amps-smp").unwrap().unwrap();
    let mixed = workload_preset("mixed-default", &smp).unwrap().unwrap();
    g.bench_function("amps-smp/mixed-default", |b| {
        b.iter(|| {
            simulate(
                &smp,
                &mixed,
                policy_by_name(LINUX_DEFAULT).unwrap(),
                SimConfig::default(),
            )
        });
    });
    let big = machine_preset("scale-1024").unwrap().unwrap();
    let scale = workload_preset("scale-16k", &big).unwrap().unwrap();
    g.bench_function("scale-1024/scale-16k/1s", |b| {
        b.iter(|| {
            let cfg = SimConfig {
                duration_ns: 1_000_000_000,
                ..Default::default()
            };
            simulate(&big, &scale, policy_by_name(LINUX_DEFAULT).unwrap(), cfg)
        });
    });
    let y = yardstick::run(&big, &scale, 4_000_000, 1_000_000_000);
    eprintln!(
        "yardstick: {} quantum ends, {:.3e} instructions in one simulated second",
        y.events, y.instructions
    );
    g.bench_function("yardstick/scale-1024/scale-16k/1s", |b| {
        b.iter(|| yardstick::run(&big, &scale, 4_000_000, 1_000_000_000));
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
