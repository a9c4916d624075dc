//! Throughput of the readers and the stack-distance engines, each profile through to the whole
//! signature (44 caches): exact or SHARDS at R = 0.01, set-indexed (the default) or with the
//! binomial approximation (the fully associative engine alone); the lackey reader; from memory.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hetsched_signature::hsb::HsbWriter;
use hetsched_signature::readers::{read_trace, read_trace_into, RefSink};
use hetsched_signature::synthetic::{trace, Mix};
use hetsched_signature::{Format, Kind, ProfileConfig, Profiler, Ref, Sampling, SetModel};
use std::hint::black_box;

const REFS: u64 = 2_000_000;

/// The synthetic trace in hsb; with `x86_sizes`, instruction fetches of 1 to 15 bytes as on x86
/// (sizes 3, 5, 6, 7, 9.. go in the payload, and the reader checks them for 0), not 4.
fn hsb_bytes(x86_sizes: bool) -> Vec<u8> {
    let mut w = HsbWriter::new(Vec::new()).unwrap();
    for (i, mut r) in trace(REFS, Mix::default(), 1).enumerate() {
        if x86_sizes && r.kind == Kind::Instr {
            r.size = 1 + (i as u32 * 7 / 3) % 15;
        }
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

/// The whole signature of an hsb trace.
fn profile(bytes: &[u8], sampling: Sampling, set_model: SetModel) -> u64 {
    let mut p = Profiler::new(ProfileConfig {
        sampling,
        set_model,
        ..Default::default()
    });
    let stats = read_trace_into(bytes, Format::Hsb, &mut p).unwrap();
    let w = p.finish();
    black_box(w[0].signature("bench", 64));
    stats.refs
}

/// A consumer that does next to nothing, so the reader's own cost shows.
struct Checksum(u64);

impl RefSink for Checksum {
    #[inline(never)]
    fn refs(&mut self, refs: impl ExactSizeIterator<Item = Ref>) {
        self.0 = refs.fold(self.0, |n, r| n ^ r.addr);
    }
}

fn benches(c: &mut Criterion) {
    let hsb = hsb_bytes(false);
    let hsb_x86 = hsb_bytes(true);
    let lackey = lackey_bytes();
    let mut g = c.benchmark_group("signature");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(lackey.len() as u64));
    g.bench_function("lackey reader", |b| {
        b.iter(|| {
            let mut n = 0u64;
            read_trace(&lackey[..], Format::Lackey, &mut |r| n += r.addr & 1).unwrap();
            black_box(n)
        });
    });
    g.throughput(Throughput::Elements(REFS));
    g.bench_function("hsb reader", |b| {
        b.iter(|| {
            let mut sum = Checksum(0);
            read_trace_into(&hsb[..], Format::Hsb, &mut sum).unwrap();
            black_box(sum.0)
        });
    });
    for (name, model) in [("", SetModel::Indexed), (" binomial", SetModel::Binomial)] {
        g.bench_function(format!("hsb exact{name}"), |b| {
            b.iter(|| profile(&hsb, Sampling::Exact, model));
        });
        g.bench_function(format!("hsb shards 0.01{name}"), |b| {
            b.iter(|| profile(&hsb, Sampling::Rate(0.01), model));
        });
    }
    g.bench_function("hsb shards 0.01 binomial x86 instruction sizes", |b| {
        b.iter(|| profile(&hsb_x86, Sampling::Rate(0.01), SetModel::Binomial));
    });
    g.finish();
}

criterion_group!(signature, benches);
criterion_main!(signature);
