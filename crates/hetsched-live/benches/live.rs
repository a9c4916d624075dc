//! The live backend's per-interval work that does not depend on the kernel: parsing a thread's stat
//! line (every busy thread, every interval), a numa_maps file (every process, once a second on
//! NUMA machines), and a datagram of process events. `cargo bench -p hetsched-live`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use hetsched_live::connector::parse_events;
use hetsched_live::procfs::{parse_numa_maps, parse_stat};

const STAT: &str = "4242 (hetsched-work) S 4240 4242 4240 0 -1 4194560 1204 0 0 0 734 12 0 0 20 0 \
    3 0 2909541 3133440 383 18446744073709551615 94110341816320 94110341836201 140723380601856 0 0 \
    0 0 0 0 0 0 0 17 1 0 0 0 0 0 94110341852208 94110341853824 94110479130624 140723380607507 \
    140723380607527 140723380607527 140723380609003 0\n";

fn numa_maps(lines: usize) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "7f{i:010x} default anon={} dirty={} N0={} N1={} kernelpagesize_kB=4\n",
                i % 97 + 1,
                i % 97 + 1,
                i % 61,
                i % 37
            )
        })
        .collect()
}

fn events(n: usize) -> Vec<u8> {
    // Fork events: nlmsghdr (16) + cn_msg (20) + proc_event header (16) + fork data (16).
    let len = 16 + 20 + 16 + 16;
    let mut buf = Vec::with_capacity(n * len);
    for i in 0..n as u32 {
        let mut m = vec![0u8; len];
        m[..4].copy_from_slice(&(len as u32).to_ne_bytes());
        m[36..40].copy_from_slice(&1u32.to_ne_bytes());
        for (k, v) in [100 + i, 100, 200 + i, 200].iter().enumerate() {
            let o = 52 + 4 * k;
            m[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        }
        buf.extend(m);
    }
    buf
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("live");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse_stat", |b| b.iter(|| parse_stat(black_box(STAT))));
    let maps = numa_maps(2000);
    g.throughput(Throughput::Bytes(maps.len() as u64));
    g.bench_function("parse_numa_maps_2000_mappings", |b| {
        b.iter(|| parse_numa_maps(black_box(&maps), 2));
    });
    let ev = events(56);
    g.throughput(Throughput::Elements(56));
    let mut out = Vec::with_capacity(64);
    g.bench_function("parse_events_56", |b| {
        b.iter(|| {
            out.clear();
            parse_events(black_box(&ev), &mut out);
            out.len()
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
