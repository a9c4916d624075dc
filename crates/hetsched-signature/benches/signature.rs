//! Throughput of the readers and the stack-distance engines (issue: exact ≥ 20 M references/s,
//! SHARDS at R = 0.01 ≥ 150 M references/s, the lackey reader ≥ 200 MB/s, from memory).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hetsched_signature::hsb::HsbWriter;
use hetsched_signature::readers::{read_trace, read_trace_batches};
use hetsched_signature::synthetic::{trace, Mix};
use hetsched_signature::{Format, Kind, ProfileConfig, Profiler, Sampling};
use std::hint::black_box;

const REFS: u64 = 2_000_000;

fn hsb_bytes() -> Vec<u8> {
    let mut w = HsbWriter::new(Vec::new()).unwrap();
    for r in trace(REFS, Mix::default(), 1) {
        w.push(r).unwrap();
    }
    w.finish().unwrap()
}

fn lackey_bytes() -> Vec<u8> {
    let mut s = String::new();
    for r in trace(REFS, Mix::default(), 1) {
        let k = match r.kind {
            Kind::Instr => "I ",
            Kind::Load => " L",
            Kind::Store => " S",
            Kind::Modify => " M",
        };
        s.push_str(&format!("{k} {:08x},{}\n", r.addr, r.size));
    }
    s.into_bytes()
}

fn profile(bytes: &[u8], sampling: Sampling) -> u64 {
    let mut p = Profiler::new(ProfileConfig {
        sampling,
        ..Default::default()
    });
    let stats = read_trace_batches(
        bytes,
        Format::Hsb,
        &mut |b: &[hetsched_signature::Ref]| p.push_all(b),
    )
    .unwrap();
    black_box(p.finish());
    stats.refs
}

fn benches(c: &mut Criterion) {
    let hsb = hsb_bytes();
    let lackey = lackey_bytes();
    let mut g = c.benchmark_group("signature");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(lackey.len() as u64));
    g.bench_function("lackey reader", |b| {
        b.iter(|| {
            let mut n = 0u64;
            read_trace(&lackey[..], Format::Lackey, &mut |r| n += r.addr & 1).unwrap();
            black_box(n)
        })
    });
    g.throughput(Throughput::Elements(REFS));
    g.bench_function("hsb reader", |b| {
        b.iter(|| {
            let mut n = 0u64;
            read_trace(&hsb[..], Format::Hsb, &mut |r| n += r.addr & 1).unwrap();
            black_box(n)
        })
    });
    g.bench_function("hsb exact", |b| b.iter(|| profile(&hsb, Sampling::Exact)));
    g.bench_function("hsb shards 0.01", |b| {
        b.iter(|| profile(&hsb, Sampling::Rate(0.01)))
    });
    g.finish();
}

criterion_group!(signature, benches);
criterion_main!(signature);
