//! `hetsched signature` end to end: real programs traced by valgrind lackey, compressed and
//! converted traces, and the refusals.

mod common;

use common::hetsched;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A C program that walks an array of `argv[1]` bytes `argv[2]` times, one access a cache line.
const WALK_C: &str = r#"
#include <stdlib.h>
int main(int argc, char **argv) {
    size_t n = (size_t)atol(argv[1]);
    int passes = atoi(argv[2]);
    volatile char *a = malloc(n);
    long s = 0;
    for (int p = 0; p < passes; p++)
        for (size_t i = 0; i < n; i += 64) s += a[i];
    return (int)(s & 1);
}
"#;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hetsched-sig-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compile the walker, or `None` (with a note) where there is no C compiler or valgrind. CI
/// installs both (`.ci/run`), and there their absence fails the test.
fn walker(dir: &Path) -> Option<PathBuf> {
    let have = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !have("cc") || !have("valgrind") {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have cc and valgrind (.ci/run installs them)"
        );
        eprintln!("skipped: no cc or valgrind here");
        return None;
    }
    let src = dir.join("walk.c");
    std::fs::write(&src, WALK_C).unwrap();
    let bin = dir.join("walk");
    let ok = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap()
        .success();
    assert!(ok, "cc failed");
    Some(bin)
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Misses per 4096 instructions of the 16-way row at each size.
fn row16(v: &serde_json::Value) -> Vec<f64> {
    v["misses_per_4096"][2]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// The knee of a loop over 1 MiB is at 1 MiB: every line misses in caches of 512 KiB, almost
/// none in caches of 2 MiB. A stream over 24 MiB misses at every size up to 16 MiB.
#[test]
fn recorded_programs_have_their_knee_at_the_working_set() {
    let dir = scratch("knee");
    let Some(bin) = walker(&dir) else { return };
    let bin = bin.to_str().unwrap();
    let (code, out, err) = hetsched(&[
        "signature",
        "--json",
        "--record",
        "--",
        bin,
        "1048576",
        "12",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["sizes_bytes"][6], 1 << 20);
    let r = row16(&v);
    // 16384 lines a pass, 12 passes: at 512 KiB each access misses (about 1 per 7 instructions).
    assert!(r[5] > 5.0 * r[7].max(0.5), "512K {} vs 2M {}", r[5], r[7]);
    assert!(r[5] > 100.0, "{r:?}");
    // Past the knee only the cold misses (the program's first pass, the loader) are left.
    assert!(r[7] < 0.15 * r[5], "{r:?}");
    assert!(v["engine"]["refs_per_s"].as_f64().unwrap() > 0.0);

    let (code, out, err) = hetsched(&[
        "signature",
        "--json",
        "--record",
        "--",
        bin,
        "25165824",
        "2",
    ]);
    assert_eq!(code, 0, "{err}");
    let s = row16(&json(&out));
    // A stream larger than the largest cache: as many misses at 16 MiB as at 1 MiB.
    assert!(s[10] > 0.9 * s[6] && s[10] > 100.0, "{s:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A lackey trace file of a real program, plain, gzip and zstd; converted to hsb; profiled exactly
/// and sampled: the same signature from every form, the table printed, a signature file written.
#[test]
fn a_lackey_trace_file_in_every_form() {
    let dir = scratch("forms");
    let Some(bin) = walker(&dir) else { return };
    let trace = dir.join("walk.lackey");
    let ok = Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes"])
        .arg(format!("--log-file={}", trace.display()))
        .arg(&bin)
        .args(["262144", "8"])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let t = trace.to_str().unwrap();
    let (code, plain, err) = hetsched(&["signature", t, "--json"]);
    assert_eq!(code, 0, "{err}");
    let plain = json(&plain);
    assert_eq!(plain["engine"]["format"], "lackey");
    // gzip and zstd, recognised by content.
    let gz = dir.join("walk.gz");
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("gzip -c {t} > {}", gz.display()))
        .status()
        .unwrap();
    assert!(status.success());
    let (code, out, err) = hetsched(&["signature", gz.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["engine"]["compression"], "gzip");
    assert_eq!(v["misses_per_4096"], plain["misses_per_4096"]);
    if Command::new("zstd").arg("--version").output().is_ok() {
        let zst = dir.join("walk.zst");
        let status = Command::new("zstd")
            .args(["-q", "-f", t, "-o"])
            .arg(&zst)
            .status()
            .unwrap();
        assert!(status.success());
        let (code, out, err) = hetsched(&["signature", zst.to_str().unwrap(), "--json"]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        assert_eq!(v["engine"]["compression"], "zstd");
        assert_eq!(v["misses_per_4096"], plain["misses_per_4096"]);
    }
    // hsb: converted, then read back to the same signature, and smaller.
    let hsb = dir.join("walk.hsb");
    let (code, _, err) = hetsched(&["signature", t, "--convert", hsb.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = hetsched(&["signature", hsb.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["engine"]["format"], "hsb");
    assert_eq!(v["misses_per_4096"], plain["misses_per_4096"]);
    assert!(std::fs::metadata(&hsb).unwrap().len() * 4 < std::fs::metadata(&trace).unwrap().len());
    // The human table and a signature file the simulator reads.
    let sig = dir.join("walk.toml");
    let (code, table, err) = hetsched(&["signature", t, "--out", sig.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains("ways")
            && table.contains("16MiB")
            && table.contains("16KiB")
            && table.contains("misses per 4,096 instructions"),
        "{table}"
    );
    let parsed = hetsched_core::Signature::load(&sig).unwrap();
    assert_eq!(parsed.misses.len(), 4);
    // Phase windows.
    let (code, out, err) = hetsched(&["signature", t, "--json", "--window", "200000"]);
    assert_eq!(code, 0, "{err}");
    assert!(json(&out)["windows"].as_array().unwrap().len() >= 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_traces_exit_2_naming_the_line_and_change_nothing() {
    let dir = scratch("bad");
    let cases: [(&str, &[u8], &str); 4] = [
        (
            "truncated.lackey",
            b"I  0400,3\n L 1000,8\n L 2000",
            "line 3: expected `,size`",
        ),
        (
            "nonhex.lackey",
            b"I  0400,3\n L 10q0,8\n",
            "line 2: expected `,size`",
        ),
        (
            "garbage.bin",
            b"\x00\x01\x02\x03\xfe\xff",
            "not a trace hetsched knows",
        ),
        ("empty.lackey", b"", "the trace is empty"),
    ];
    for (name, bytes, want) in cases {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        let out = dir.join(format!("{name}.toml"));
        let (code, stdout, err) = hetsched(&[
            "signature",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
        assert!(stdout.is_empty());
        assert!(!out.exists(), "{name}: wrote a signature");
    }
    let (code, _, err) = hetsched(&["signature", "/no/such/trace"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = hetsched(&["signature", "-", "--sample-rate", "2"]);
    assert_eq!(code, 2);
    assert!(err.contains("--sample-rate"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A lackey trace of `instructions` instructions, each with a load from one of 4096 cache lines
/// (256 KiB), in an order a fixed LCG gives.
fn synthetic_trace(path: &Path, instructions: usize) {
    let mut text = String::new();
    let mut x: u64 = 1;
    for _ in 0..instructions {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let line = (x >> 33) % 4096;
        text.push_str(&format!("I  0400,3\n L {:x},8\n", 0x10_0000 + 64 * line));
    }
    std::fs::write(path, text).unwrap();
}

/// `signature --json` carries the provenance block with the trace's SHA-256, and the sampling and
/// cache grid it was made with; `--csv` gives one row per associativity and size (and window),
/// the same numbers as the JSON.
#[test]
fn signature_json_has_provenance_and_csv_has_the_same_cells() {
    use sha2::{Digest, Sha256};
    let dir = scratch("prov");
    let trace = dir.join("synthetic.lackey");
    synthetic_trace(&trace, 20_000);
    let t = trace.to_str().unwrap();
    let (code, out, err) = hetsched(&["signature", t, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["hetsched_version"], env!("CARGO_PKG_VERSION"));
    let want: String = Sha256::digest(std::fs::read(&trace).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(v["inputs"].as_array().unwrap().len(), 1, "{}", v["inputs"]);
    assert_eq!(v["inputs"][0]["name"], t);
    assert_eq!(v["inputs"][0]["sha256"], want.as_str());
    assert_eq!(v["engine"]["sample_rate"], 1.0);
    assert_eq!(v["engine"]["sampling"], "exact");
    let sizes = v["sizes_bytes"].as_array().unwrap().len();
    let assoc = v["assoc"].as_array().unwrap().len();
    assert_eq!((sizes, assoc), (11, 4));

    // The same trace from stdin, gzip-compressed: hashed as the bytes read.
    let gz = dir.join("synthetic.lackey.gz");
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("gzip -c {t} > {}", gz.display()))
        .status()
        .unwrap();
    assert!(status.success());
    let out = Command::new(env!("CARGO_BIN_EXE_hetsched"))
        .args(["signature", "-", "--json"])
        .stdin(std::fs::File::open(&gz).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = json(&String::from_utf8_lossy(&out.stdout));
    let want_gz: String = Sha256::digest(std::fs::read(&gz).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(s["inputs"][0]["name"], "-");
    assert_eq!(s["inputs"][0]["sha256"], want_gz.as_str());
    assert_eq!(s["misses_per_4096"], v["misses_per_4096"]);

    let (code, out, err) = hetsched(&["signature", t, "--csv"]);
    assert_eq!(code, 0, "{err}");
    let mut r = csv::Reader::from_reader(out.as_bytes());
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        header,
        [
            "name",
            "window",
            "first_instruction",
            "instructions",
            "line_bytes",
            "cache_bytes",
            "assoc",
            "misses_per_4096_instr"
        ]
    );
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), sizes * assoc);
    // The 16-way, 64 KiB cell: the working set (256 KiB) does not fit, so misses are many.
    let cell = rows
        .iter()
        .find(|row| &row[5] == "65536" && &row[6] == "16")
        .expect("a 16-way 64 KiB row");
    let csv_value: f64 = cell[7].parse().unwrap();
    let json_value = v["misses_per_4096"][2][2].as_f64().unwrap();
    assert_eq!(v["assoc"][2], 16);
    assert_eq!(v["sizes_bytes"][2], 65536);
    assert_eq!(csv_value, json_value);
    assert!(csv_value > 1000.0, "{csv_value}");
    assert_eq!(&cell[0], "synthetic");
    assert_eq!(&cell[1], "");
    assert_eq!(&cell[3], "20000");

    // With windows: the whole trace's rows, then each window's.
    let (code, out, err) = hetsched(&["signature", t, "--csv", "--window", "8000"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<csv::StringRecord> = csv::Reader::from_reader(out.as_bytes())
        .records()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 4 * sizes * assoc);
    let windows: Vec<&str> = rows.iter().map(|row| &row[1]).collect();
    assert_eq!(windows[sizes * assoc - 1], "");
    assert_eq!(windows[sizes * assoc], "0");
    assert_eq!(windows[rows.len() - 1], "2");
    assert_eq!(&rows[rows.len() - 1][2], "16000");

    let (code, _, err) = hetsched(&["signature", t, "--csv", "--json"]);
    assert_eq!(code, 2, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Run `hetsched ARGS`: (exit code, stderr, wall seconds, peak resident memory in bytes, from the
/// child's own rusage).
fn hetsched_measured(args: &[&str]) -> (i32, String, f64, u64) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let err_path =
        std::env::temp_dir().join(format!("hetsched-sig-{}-{run}.err", std::process::id()));
    let t0 = std::time::Instant::now();
    // Reaped by wait4 below, which gives its rusage as well (std's wait would not).
    #[allow(clippy::zombie_processes)]
    let child = Command::new(env!("CARGO_BIN_EXE_hetsched"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value, and wait4 writes the child's into it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our child's, not yet waited for (std waits only when asked).
    let pid = unsafe { libc::wait4(child.id() as i32, &raw mut status, 0, &raw mut usage) };
    assert_eq!(pid, child.id() as i32);
    let wall = t0.elapsed().as_secs_f64();
    let err = std::fs::read_to_string(&err_path).unwrap();
    std::fs::remove_file(&err_path).unwrap();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    // ru_maxrss is in KiB on Linux (getrusage(2)).
    (code, err, wall, usage.ru_maxrss as u64 * 1024)
}

/// Traces that claim enormous accesses fail at once with one line naming the record, in well
/// under 2 s and 256 MiB: a 22-byte hsb whose one load claims 0xFFFFFFFF bytes (67 M lines), and a
/// lackey trace of 20 loads of 999,999,999 bytes.
#[test]
fn traces_claiming_huge_accesses_fail_fast_in_little_memory() {
    let dir = scratch("hostile");
    let hsb = dir.join("huge.hsb");
    // Header; a block of 1 record with 5 payload bytes; a load (kind 1) with a 1-byte delta
    // (bits 2-4 = 0) and a u32 size (bits 5-7 = 7); the size; the delta.
    let mut bytes = b"HSB\x01\0\0\0\0".to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&5u32.to_le_bytes());
    bytes.push(1 | 7 << 5);
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    bytes.push(0x80);
    assert_eq!(bytes.len(), 22);
    std::fs::write(&hsb, &bytes).unwrap();
    let lackey = dir.join("huge.lackey");
    let mut text = String::from("I  04000000,3\n");
    for i in 0..20 {
        text += &format!(" L {:08x},999999999\n", 0x1000_0000u64 + i * 0x4000_0000);
    }
    std::fs::write(&lackey, &text).unwrap();
    for (path, want) in [
        (&hsb, "byte 17: a record of size 4294967295 (1..=65536)"),
        (
            &lackey,
            "line 2: an access of 999999999 bytes (at most 65536)",
        ),
    ] {
        for extra in [&[][..], &["--json"], &["--sample-rate", "0.01"]] {
            let mut args = vec!["signature", path.to_str().unwrap()];
            args.extend_from_slice(extra);
            let (code, err, wall, peak) = hetsched_measured(&args);
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(err.contains(want), "{args:?}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
            assert!(wall < 2.0, "{args:?}: {wall:.2} s");
            assert!(peak < 256 << 20, "{args:?}: peak {} MiB", peak >> 20);
            eprintln!("{args:?}: {wall:.3} s, peak {} MiB", peak >> 20);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--record` is a launcher: the program's exit status is ours, and with --json the program's
/// standard output goes to our standard error, so standard output parses as JSON.
#[test]
fn record_passes_the_exit_status_through_and_keeps_json_apart() {
    assert!(
        Command::new("valgrind")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "valgrind is needed to test --record (.ci/run installs it)"
    );
    let (code, out, err) = hetsched(&[
        "signature",
        "--record",
        "--json",
        "--",
        "sh",
        "-c",
        "echo hello from the program; exit 7",
    ]);
    assert_eq!(code, 7, "{err}");
    let v = json(&out);
    assert_eq!(v["engine"]["program_exit"], 7);
    assert!(err.contains("hello from the program"), "{err}");
    // The whole of stdout is the document (the command line in it names the program's words).
    assert!(
        out.starts_with('{') && out.trim_end().ends_with('}'),
        "{out}"
    );
    // Our engine's speed, valgrind's time apart.
    let cpu = v["engine"]["cpu_s"].as_f64().unwrap();
    let refs = v["refs"].as_f64().unwrap();
    let rate = v["engine"]["refs_per_s"].as_f64().unwrap();
    assert!(
        (rate * cpu / refs - 1.0).abs() < 1e-9,
        "{rate} {cpu} {refs}"
    );
    assert!(v["engine"]["valgrind_cpu_s"].as_f64().unwrap() > 0.0);
    // Without --json the program's output stays on stdout; a status of 0 is 0.
    let (code, out, err) = hetsched(&["signature", "--record", "--", "echo", "hello"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("hello\n"), "{out}");
}

/// A rate below 2^-24 is refused; a rate whose sample holds too few lines is flagged on stderr
/// and in the JSON; the rate reported is the rate used.
#[test]
fn sample_rates_that_cannot_work_are_refused_or_flagged() {
    let dir = scratch("rates");
    let trace = dir.join("small.lackey");
    synthetic_trace(&trace, 20_000);
    let t = trace.to_str().unwrap();
    let (code, _, err) = hetsched(&["signature", t, "--sample-rate", "1e-9"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--sample-rate: 0.000000001 is below 2^-24"),
        "{err}"
    );
    let (code, out, err) = hetsched(&["signature", t, "--json", "--sample-rate", "1e-6"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: the sample held"), "{err}");
    let v = json(&out);
    assert!(v["engine"]["sample_warning"].is_string(), "{out}");
    // 1e-6 of 2^24 rounds to 17 hash values: the rate used.
    assert_eq!(v["engine"]["sample_rate"], 17.0 / 16_777_216.0);
    let (code, out, err) = hetsched(&["signature", t, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(json(&out)["engine"].get("sample_warning").is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Whether valgrind runs here (CI installs it: .ci/run).
fn have_valgrind() -> bool {
    let ok = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok || std::env::var_os("CI").is_none(),
        "CI must have valgrind (.ci/run installs it)"
    );
    if !ok {
        eprintln!("skipped: no valgrind here");
    }
    ok
}

/// A process the program leaves running in the background inherits valgrind's log descriptor and
/// holds the trace's FIFO open; the recording still ends when the program (valgrind) exits.
#[test]
fn record_ends_when_the_program_exits_though_its_background_child_runs_on() {
    if !have_valgrind() {
        return;
    }
    // Our standard output and error go to files: the background sleep inherits them too, and a
    // pipe would stay open until it exits, whenever hetsched does.
    let dir = scratch("background");
    let (out_path, err_path) = (dir.join("out"), dir.join("err"));
    let t0 = std::time::Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_hetsched"))
        .args(["signature", "--record", "--json", "--"])
        .args(["sh", "-c", "sleep 8 & exit 0"])
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .status()
        .unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let out = std::fs::read_to_string(&out_path).unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    let v = json(&out);
    assert_eq!(v["engine"]["program_exit"], 0);
    assert!(v["refs"].as_u64().unwrap() > 1000, "{out}");
    assert!(
        wall < 6.0,
        "{wall:.1} s: the recording waited for the background sleep"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The entries of `dir` whose names start with `hetsched-record-`.
fn record_dirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("hetsched-record-"))
        })
        .collect()
}

/// The FIFO lives in a directory of its own, with a name that is not the pid's and mode 0700; a
/// SIGTERM to hetsched stops valgrind (and the program in it) and removes the directory.
#[test]
fn record_keeps_its_fifo_private_and_cleans_up_when_stopped() {
    use std::os::unix::fs::PermissionsExt;
    if !have_valgrind() {
        return;
    }
    /// Stops the recording if the test fails before it does.
    struct Running(Option<std::process::Child>);
    impl Drop for Running {
        fn drop(&mut self) {
            if let Some(mut c) = self.0.take() {
                // SAFETY: kill has no memory preconditions; the pid is our child's.
                unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
                let _ = c.wait();
            }
        }
    }
    let tmp = scratch("private");
    let mut running = Running(Some(
        Command::new(env!("CARGO_BIN_EXE_hetsched"))
            .args(["signature", "--record", "--", "sleep", "60"])
            .env("TMPDIR", &tmp)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let pid = running.0.as_ref().unwrap().id();
    let t0 = std::time::Instant::now();
    let dir = loop {
        if let [d] = &record_dirs(&tmp)[..] {
            if d.join("trace.fifo").exists() {
                break d.clone();
            }
        }
        assert!(t0.elapsed().as_secs() < 30, "no recording directory");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    assert_ne!(name, format!("hetsched-record-{pid}"), "a predictable name");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{name}: mode {mode:o}");
    // Valgrind, our child, running the program: the FIFO is made before valgrind is started, so
    // on a busy machine the child may appear a moment after it.
    let valgrind: Vec<u32> = loop {
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
        let found: Vec<u32> = children
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        if !found.is_empty() || t0.elapsed().as_secs() >= 30 {
            assert_eq!(found.len(), 1, "{children:?}");
            break found;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // SAFETY: kill has no memory preconditions; the pid is our child's, not yet waited for.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let t1 = std::time::Instant::now();
    let out = running.0.take().unwrap().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(t1.elapsed().as_secs() < 10, "{err}");
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{err}");
    assert!(err.contains("the recording stopped"), "{err}");
    assert!(record_dirs(&tmp).is_empty(), "{:?}", record_dirs(&tmp));
    assert!(
        !Path::new(&format!("/proc/{}", valgrind[0])).exists(),
        "valgrind still runs"
    );
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// A program that cannot be started is one line naming it, with a shell's status: 127 when it is
/// not found, 126 when it cannot be run; no command at all is a usage error.
#[test]
fn record_of_a_program_that_cannot_start_exits_as_a_shell_does() {
    let dir = scratch("nostart");
    let plain = dir.join("plain.txt");
    std::fs::write(&plain, "not a program\n").unwrap();
    let missing = dir.join("no-such-program");
    for (program, status, want) in [
        (missing.to_str().unwrap(), 127, "no such file"),
        ("hetsched-no-such-program", 127, "not found on PATH"),
        (
            plain.to_str().unwrap(),
            126,
            "not executable (permission denied)",
        ),
        (dir.to_str().unwrap(), 126, "a directory"),
    ] {
        let (code, out, err) = hetsched(&["signature", "--record", "--", program]);
        assert_eq!(code, status, "{program}: {err}");
        assert_eq!(
            err.trim_end(),
            format!("hetsched: cannot start {program:?}: {want}"),
            "{program}"
        );
        assert!(out.is_empty(), "{out}");
    }
    let (code, _, err) = hetsched(&["signature", "--record", "--"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err.trim_end(),
        "hetsched: --record needs a command after `--`"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The table's cells stay apart however large: 30 loads of 64 KiB each for one instruction make
/// 125,829,120 misses per 4,096 instructions.
#[test]
fn the_table_keeps_its_columns_for_large_values() {
    let dir = scratch("wide");
    let trace = dir.join("wide.lackey");
    let mut text = String::from("I  04000000,3\n");
    for i in 0..30u64 {
        text += &format!(" L {:08x},65536\n", 0x1000_0000 + i * 0x1_0000);
    }
    std::fs::write(&trace, text).unwrap();
    let (code, out, err) = hetsched(&["signature", trace.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("ways"))
        .skip(1)
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    for row in rows {
        let cells: Vec<f64> = row
            .split_whitespace()
            .map(|c| {
                c.parse()
                    .unwrap_or_else(|e| panic!("{c:?} in {row:?}: {e}"))
            })
            .collect();
        // The ways, then one cell per size.
        assert_eq!(cells.len(), 12, "{row:?}");
        assert_eq!(cells[1], 1.3e8, "{row:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The sampling named in the header and the JSON is the rate used, with the one asked for beside
/// it when they differ (also said on stderr); the warning about a small sample names the cells it
/// spoils: none with the set-indexed model, all with the binomial one.
#[test]
fn the_rate_used_is_the_rate_shown_and_the_warning_fits_the_set_model() {
    let dir = scratch("rate-shown");
    let trace = dir.join("small.lackey");
    synthetic_trace(&trace, 20_000);
    let t = trace.to_str().unwrap();
    // 1e-6 of 2^24 rounds to 17 hash values.
    let used = "1.013279e-6 = 17/2^24";
    let (code, out, err) = hetsched(&["signature", t, "--sample-rate", "1e-6"]);
    assert_eq!(code, 0, "{err}");
    let header = out.lines().next().unwrap();
    assert!(
        header.contains(&format!("shards fixed rate {used} (requested 0.000001)")),
        "{header}"
    );
    assert!(
        err.contains(&format!("--sample-rate 0.000001: sampling at {used}")),
        "{err}"
    );
    assert!(
        err.contains("the set-associative cells (set-indexed model) are exact regardless"),
        "{err}"
    );
    let (code, out, err) = hetsched(&[
        "signature",
        t,
        "--json",
        "--sample-rate",
        "1e-6",
        "--set-model",
        "binomial",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(
        v["engine"]["sampling"],
        format!("shards fixed rate {used} (requested 0.000001)")
    );
    assert_eq!(v["engine"]["sample_rate_requested"], 1e-6);
    let warning = v["engine"]["sample_warning"].as_str().unwrap();
    assert!(!warning.contains("exact"), "{warning}");
    assert!(
        warning.contains("so are the set-associative cells, which the binomial model computes from the sampled distances"),
        "{warning}"
    );
    assert!(err.contains(warning), "{err}");
    // A rate that is a multiple of 2^-24 is used as asked.
    let (code, out, err) = hetsched(&["signature", t, "--json", "--sample-rate", "0.5"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["engine"]["sampling"], "shards fixed rate 0.5");
    assert!(v["engine"].get("sample_rate_requested").is_none(), "{out}");
    assert!(!err.contains("sampling at"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
