//! `hetsched signature` against valgrind's cachegrind on the same binaries: sweeping, random,
//! strided, pointer-chasing and phase-changing C programs with working sets of half, once and
//! twice the last-level cache, for two last-level caches (1 MiB 16-way and 256 KiB 8-way, 64-byte
//! lines). Both sides count data references only: cachegrind's LLd misses (DLmr + DLmw) over its
//! D refs, and our signature's misses at that size and associativity (from a lackey trace of the
//! same run) over the trace's data references. Ours must be within 10% of cachegrind's, or within
//! 0.005 when both are tiny.
//!
//! Cachegrind's last level sees only the first level's misses (its D1 and I1 are fixed here at
//! 32 KiB 8-way, its default shape, so the host does not change them), where ours sees every
//! reference. These programs read one byte a line and keep nothing hot in the first level, and for
//! them the misses agree; accesses straddling two lines, or a hot set the first level serves while
//! a colder one fills the last level, part the two counts (docs/signature-format.md).

mod common;

use common::hetsched;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `prog MODE BYTES`: one-byte reads at line granularity over a line-aligned array of BYTES.
/// 0 sweep (3 passes), 1 random lines (3 × lines reads), 2 strided (every fourth line, 6 passes:
/// a quarter of the array in a quarter of the sets, so it fits exactly when the array does, where
/// a model of random sets would have it fit in a cache of a quarter of the array's size), 3 pointer chasing (a random single cycle through 64-byte nodes, built with Sattolo's
/// algorithm, followed 3 times round), 4 phases (3 passes over an eighth of the array, then random
/// reads over all of it).
const PROG_C: &str = r#"
#include <stdint.h>
#include <stdlib.h>
#define NEXT(x) (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
int main(int argc, char **argv) {
    uint64_t x = 88172645463325252ull;
    int mode = atoi(argv[1]);
    size_t n = (size_t)atol(argv[2]), lines = n / 64;
    volatile char *a = aligned_alloc(4096, n);
    long s = 0;
    if (mode == 0) {
        for (int p = 0; p < 3; p++)
            for (size_t i = 0; i < lines; i++) s += a[i * 64];
    } else if (mode == 1) {
        for (size_t k = 0; k < 3 * lines; k++) s += a[(NEXT(x) % lines) * 64];
    } else if (mode == 2) {
        for (int p = 0; p < 6; p++)
            for (size_t i = 0; i < lines; i += 4) s += a[i * 64];
    } else if (mode == 3) {
        volatile uint64_t *node = (volatile uint64_t *)a;
        for (size_t i = 0; i < lines; i++) node[i * 8] = i;
        for (size_t i = lines - 1; i > 0; i--) {
            size_t j = NEXT(x) % i;
            uint64_t t = node[i * 8]; node[i * 8] = node[j * 8]; node[j * 8] = t;
        }
        size_t at = 0;
        for (size_t k = 0; k < 3 * lines; k++) at = node[at * 8];
        s = (long)at;
    } else {
        for (int p = 0; p < 3; p++)
            for (size_t i = 0; i < lines / 8; i++) s += a[i * 64];
        for (size_t k = 0; k < 2 * lines; k++) s += a[(NEXT(x) % lines) * 64];
    }
    return (int)(s & 1);
}
"#;

const PROGRAMS: [&str; 5] = ["sweep", "random", "strided", "pointer chasing", "phases"];

/// The two last-level caches: (bytes, ways), 64-byte lines.
const LL: [(u64, u32); 2] = [(1 << 20, 16), (256 << 10, 8)];

/// Compile the program once per test binary run (tests in parallel each get their own copy).
/// Valgrind and a C compiler are required: without them the test fails (CI installs both).
fn program(dir: &Path) -> PathBuf {
    for tool in ["cc", "valgrind"] {
        let ok = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "{tool} is needed to check signatures against cachegrind (.ci/run installs it)"
        );
    }
    let src = dir.join("prog.c");
    std::fs::write(&src, PROG_C).unwrap();
    let bin = dir.join("prog");
    let ok = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap()
        .success();
    assert!(ok, "cc failed on {}", src.display());
    bin
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hetsched-cg-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A number as cachegrind prints it (`1,234`).
fn number(s: &str) -> u64 {
    s.replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

/// Cachegrind's (D refs, LLd misses) for `prog MODE BYTES` with the last level `ll`.
fn cachegrind(prog: &Path, mode: usize, bytes: u64, (ll, ways): (u64, u32)) -> (u64, u64) {
    let out = Command::new("valgrind")
        .args([
            "--tool=cachegrind",
            "--cache-sim=yes",
            "--I1=32768,8,64",
            "--D1=32768,8,64",
            &format!("--LL={ll},{ways},64"),
            "--cachegrind-out-file=/dev/null",
        ])
        .arg(prog)
        .args([mode.to_string(), bytes.to_string()])
        .output()
        .expect("run valgrind");
    let err = String::from_utf8_lossy(&out.stderr);
    // `==pid== D   refs:   88,487  (78,083 rd + 10,404 wr)`: the total follows the colon.
    let total = |label: &str| {
        let line = err
            .lines()
            .find(|l| l.contains(label))
            .unwrap_or_else(|| panic!("no {label:?} in cachegrind's output:\n{err}"));
        number(
            line.split(':')
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap(),
        )
    };
    (total("D   refs:"), total("LLd misses:"))
}

/// Our (data references, misses) of each cache of `LL`, from a lackey trace of `prog MODE BYTES`.
fn ours(prog: &Path, dir: &Path, mode: usize, bytes: u64) -> (u64, Vec<f64>) {
    let trace = dir.join(format!("{mode}-{bytes}.lackey"));
    let ok = Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes"])
        .arg(format!("--log-file={}", trace.display()))
        .arg(prog)
        .args([mode.to_string(), bytes.to_string()])
        .status()
        .expect("run valgrind")
        .code()
        .is_some();
    assert!(ok, "lackey was killed");
    let (code, out, err) = hetsched(&["signature", trace.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    std::fs::remove_file(&trace).unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let instructions = v["instructions"].as_u64().unwrap();
    let data = v["refs"].as_u64().unwrap() - instructions;
    let at = |key: &str, want: u64| {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .position(|x| x.as_u64() == Some(want))
            .unwrap()
    };
    let misses = LL
        .iter()
        .map(|&(ll, ways)| {
            let per_4096 = v["misses_per_4096"][at("assoc", ways as u64)][at("sizes_bytes", ll)]
                .as_f64()
                .unwrap();
            per_4096 * instructions as f64 / 4096.0
        })
        .collect();
    (data, misses)
}

/// Every working set of `mode` against both last levels; all the runs in parallel, then one
/// report of every comparison, failing if any is out of bounds.
fn compare(mode: usize) {
    let dir = scratch(&mode.to_string());
    let prog = program(&dir);
    // Half, once and twice each last level: 128 KiB .. 2 MiB.
    let sizes: Vec<u64> = (0..5).map(|k| (128u64 << 10) << k).collect();
    let (ours_all, cg_all) = std::thread::scope(|s| {
        let ours: Vec<_> = sizes
            .iter()
            .map(|&b| {
                s.spawn({
                    let (prog, dir) = (&prog, &dir);
                    move || ours(prog, dir, mode, b)
                })
            })
            .collect();
        let cg: Vec<_> = LL
            .iter()
            .flat_map(|&ll| [ll.0 / 2, ll.0, ll.0 * 2].map(|b| (ll, b)))
            .map(|(ll, b)| {
                (
                    ll,
                    b,
                    s.spawn({
                        let prog = &prog;
                        move || cachegrind(prog, mode, b, ll)
                    }),
                )
            })
            .collect();
        (
            ours.into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>(),
            cg.into_iter()
                .map(|(ll, b, h)| (ll, b, h.join().unwrap()))
                .collect::<Vec<_>>(),
        )
    });
    let mut report = String::new();
    let mut bad = 0;
    for ((ll, ways), bytes, (cg_refs, cg_misses)) in cg_all {
        let (our_refs, our_misses) = &ours_all[sizes.iter().position(|&b| b == bytes).unwrap()];
        let our_misses = our_misses[LL.iter().position(|&c| c == (ll, ways)).unwrap()];
        let cg = cg_misses as f64 / cg_refs as f64;
        let us = our_misses / *our_refs as f64;
        let ok = (us - cg).abs() <= 0.10 * cg || (us - cg).abs() <= 0.005;
        bad += !ok as usize;
        report += &format!(
            "{} {:>4} KiB working set, LL {} KiB {ways}-way: cachegrind {cg:.4} ({cg_misses} / {cg_refs}), ours {us:.4} ({our_misses:.0} / {our_refs}){}\n",
            PROGRAMS[mode],
            bytes >> 10,
            ll >> 10,
            if ok { "" } else { "  <- out of bounds" }
        );
    }
    eprint!("{report}");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        bad, 0,
        "miss ratios off cachegrind's by more than 10%:\n{report}"
    );
}

#[test]
fn a_sweep_matches_cachegrind() {
    compare(0);
}

#[test]
fn random_reads_match_cachegrind() {
    compare(1);
}

#[test]
fn a_strided_walk_matches_cachegrind() {
    compare(2);
}

#[test]
fn pointer_chasing_matches_cachegrind() {
    compare(3);
}

#[test]
fn a_phase_change_matches_cachegrind() {
    compare(4);
}
