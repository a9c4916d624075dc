//! The signature store end to end: two real programs of different memory behaviour (a CPU-bound
//! integer loop and a stream over 24 MiB) are recorded under valgrind into a store, and their
//! signatures drive `hass`: in the simulator on HASS's AMD-2,2 machine, through a workload naming
//! the store's files, and live under duty-cycle emulation, through `run --store`.
//!
//! The two programs are copies of `hetsched-work` at two paths: the store keys an executable by
//! its path and content, so each copy has an entry of its own.

mod live_common;

use live_common::{is_root, mask_of, wait_until};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const HETSCHED: &str = env!("CARGO_BIN_EXE_hetsched");
const WORK: &str = env!("CARGO_BIN_EXE_hetsched-work");

/// The tests one at a time: the live one measures where threads run.
static SERIAL: Mutex<()> = Mutex::new(());

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The recorded programs: their executables and store entries.
struct Recorded {
    dir: PathBuf,
    store: PathBuf,
    int_exe: PathBuf,
    stream_exe: PathBuf,
    int_entry: PathBuf,
    stream_entry: PathBuf,
}

/// Record both programs once (in parallel: each is mostly valgrind), or `None` with a note where
/// valgrind is missing (CI installs it: .ci/run).
fn recorded() -> Option<&'static Recorded> {
    static R: OnceLock<Option<Recorded>> = OnceLock::new();
    R.get_or_init(|| {
        if !have("valgrind") {
            eprintln!("skipped: valgrind is not installed (it records the signatures)");
            return None;
        }
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        // The directories of earlier runs (copies of the binary each), once their run is over:
        // each name ends in its run's pid (`scratch` adds a test's name before it, and this run's
        // tests are using theirs now).
        for e in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(rest) = name.strip_prefix("signature-store-") else {
                continue;
            };
            let pid = rest.rsplit('-').next().unwrap_or(rest);
            if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let dir = tmp.join(format!("signature-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = dir.join("store");
        let int_exe = dir.join("int-prog");
        let stream_exe = dir.join("stream-prog");
        std::fs::copy(WORK, &int_exe).unwrap();
        std::fs::copy(WORK, &stream_exe).unwrap();
        let record = |exe: &Path, args: &[&str]| {
            let store = store.clone();
            let exe = exe.to_path_buf();
            let args: Vec<String> = args.iter().map(ToString::to_string).collect();
            std::thread::spawn(move || {
                let t = Instant::now();
                let out = Command::new(HETSCHED)
                    .args(["signature", "--record", "--save", "--json", "--store"])
                    .arg(&store)
                    .arg("--")
                    .arg(&exe)
                    .args(&args)
                    .output()
                    .unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr).to_string();
                assert!(out.status.success(), "{stderr}");
                let saved = stderr
                    .lines()
                    .find_map(|l| {
                        l.split_once(" to ")
                            .filter(|_| l.contains("saved the signature"))
                    })
                    .map(|(_, p)| PathBuf::from(p.trim()))
                    .unwrap_or_else(|| panic!("no saved entry named: {stderr}"));
                eprintln!(
                    "recorded {} in {:.1} s",
                    exe.display(),
                    t.elapsed().as_secs_f64()
                );
                (saved, serde_json::from_slice::<Value>(&out.stdout).unwrap())
            })
        };
        // Small work sizes: under valgrind each takes seconds, not minutes. 24 MiB streams past
        // the largest cache of the signature grid (16 MiB).
        let a = record(&int_exe, &["int", "--work", "1"]);
        let b = record(&stream_exe, &["stream", "--mib", "24", "--passes", "1"]);
        let (int_entry, int_doc) = a.join().unwrap();
        let (stream_entry, stream_doc) = b.join().unwrap();
        // The two behaviours, as recorded: at a 2 MiB LLC (the AMD-2,2's) the integer loop misses
        // almost never, the stream on nearly every line it touches.
        let at_2mib = |d: &Value| d["misses_per_4096"][3][7].as_f64().unwrap();
        assert!(at_2mib(&int_doc) < 10.0, "{int_doc}");
        assert!(at_2mib(&stream_doc) > 100.0, "{stream_doc}");
        Some(Recorded {
            dir,
            store,
            int_exe,
            stream_exe,
            int_entry,
            stream_entry,
        })
    })
    .as_ref()
}

#[test]
fn recorded_entries_are_keyed_by_the_executables_path_and_content() {
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(r) = recorded() else { return };
    for (exe, entry) in [(&r.int_exe, &r.int_entry), (&r.stream_exe, &r.stream_entry)] {
        assert!(entry.starts_with(&r.store), "{}", entry.display());
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(entry).unwrap()).unwrap();
        let canonical = std::fs::canonicalize(exe).unwrap();
        assert_eq!(doc["executable"]["path"], canonical.to_str().unwrap());
        assert_eq!(
            doc["executable"]["bytes"],
            std::fs::metadata(exe).unwrap().len()
        );
        assert_eq!(doc["executable"]["sha256"].as_str().unwrap().len(), 64);
        assert!(doc.get("windows").is_none());
        // The file name is the key: the path's hash, then the content's.
        let name = entry.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            name.ends_with(&format!(
                "-{}.json",
                doc["executable"]["sha256"].as_str().unwrap()
            )),
            "{name}"
        );
    }
    // `run --signature` reads an entry as a signature file; `--save` needs `--record`.
    let out = Command::new(HETSCHED)
        .args(["signature", "--save", "x.lackey"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `hass` on the simulated AMD-2,2 (2 cores at 2.3 GHz, 2 at 1.15 GHz): two apps of two threads,
/// with the same phases, told apart only by the recorded signatures the workload names. The
/// threads carrying the integer program's signature get the fast cores, those carrying the
/// stream's the slow ones; with the files swapped between the apps, the placement swaps too.
#[test]
fn recorded_signatures_drive_hass_in_the_simulator() {
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(r) = recorded() else { return };
    let run = |first: &Path, second: &Path| -> Value {
        let app = |name: &str, sig: &Path| {
            format!(
                "[[apps]]\nname = \"{name}\"\n[[apps.threads]]\ncount = 2\nsignature = \"{}\"\n\
                 [[apps.threads.phases]]\ninstructions = 4e9\ncpi = 1.0\nmpki = {{ max = 5, min = 1, ws = \"4 MiB\" }}\n",
                // Relative to the workload file's directory.
                sig.strip_prefix(&r.dir).unwrap().display()
            )
        };
        let text = format!(
            "name = \"recorded\"\n{}{}",
            app("first", first),
            app("second", second)
        );
        let wl = r.dir.join("recorded.toml");
        std::fs::write(&wl, text).unwrap();
        let out = Command::new(HETSCHED)
            .args([
                "simulate",
                "--machine",
                "hass-amd-2-2",
                "--policy",
                "hass",
                "--json",
                "--workload",
            ])
            .arg(&wl)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|run| run["policy"] == "hass")
            .expect("a hass run")
            .clone()
    };
    // The share of an app's CPU time on the fast class.
    let fast_share = |run: &Value, app: usize| {
        let c = &run["apps"][app]["cpu_s_per_class"];
        let fast = c["fast"].as_f64().unwrap();
        let slow = c["slow"].as_f64().unwrap();
        assert!(fast + slow > 1.0, "{run}");
        fast / (fast + slow)
    };
    let straight = run(&r.int_entry, &r.stream_entry);
    let (int_fast, stream_fast) = (fast_share(&straight, 0), fast_share(&straight, 1));
    eprintln!("int signature first: fast shares {int_fast:.3} (int), {stream_fast:.3} (stream)");
    // Each app's two threads hold one class's two cores until the first app finishes (it runs
    // faster there): the integer program's threads never leave the fast cores, the stream's run
    // on the slow ones until the fast cores free up.
    assert!(int_fast > 0.99, "{straight}");
    assert!(stream_fast < 0.5, "{straight}");
    let swapped = run(&r.stream_entry, &r.int_entry);
    let (stream_fast, int_fast) = (fast_share(&swapped, 0), fast_share(&swapped, 1));
    eprintln!("stream signature first: fast shares {stream_fast:.3} (stream), {int_fast:.3} (int)");
    assert!(int_fast > 0.9, "{swapped}");
    assert!(stream_fast < 0.5, "{swapped}");
}

fn first_tid(file: &Path) -> u32 {
    let mut tid = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            tid = std::fs::read_to_string(file)
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.trim().parse().ok());
            tid.is_some()
        }),
        "{} never listed a thread",
        file.display()
    );
    tid.unwrap()
}

/// What a live store test needs, or `None` (with the reason on stderr) where it cannot run: root,
/// the recordings, this 2-CPU machine; the tests' lock held, and an empty state directory `name`
/// beside the recordings.
fn live_setup(
    name: &str,
) -> Option<(
    std::sync::MutexGuard<'static, ()>,
    &'static Recorded,
    PathBuf,
)> {
    if !is_root() {
        eprintln!("skipped: the live test needs root");
        return None;
    }
    let guard = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let r = recorded()?;
    let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    if cpus.trim() != "0-1" {
        eprintln!("skipped: the live store test is written for a 2-CPU machine (this has {cpus})");
        return None;
    }
    let state = r.dir.join(name);
    let _ = std::fs::remove_dir_all(&state);
    std::fs::create_dir_all(&state).unwrap();
    Some((guard, r, state))
}

/// Processes killed when the test ends, however it ends (workers outlive hetsched on purpose).
struct Doomed(Vec<u32>, Option<Child>);

impl Drop for Doomed {
    fn drop(&mut self) {
        for &p in &self.0 {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
        if let Some(c) = self.1.as_mut() {
            // SAFETY: as above; SIGTERM makes `emulate` stop its threads and remove its file.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

/// Live, on this 2-CPU machine made asymmetric by `emulate --slow 1 --duty 0.5`: under `run
/// --policy hass --store`, the recorded integer program's worker is placed on the fast CPU 0 and
/// the stream's on the slow CPU 1, from their store entries alone (neither sends a hint); once
/// hetsched exits, both have their original masks again.
#[test]
fn recorded_signatures_drive_hass_live_under_emulation() {
    let Some((_g, r, state)) = live_setup("state") else {
        return;
    };
    let emulate = Command::new(HETSCHED)
        .env("HETSCHED_STATE_DIR", &state)
        .args(["emulate", "--slow", "1", "--duty", "0.5"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut doomed = Doomed(Vec::new(), Some(emulate));
    assert!(
        wait_until(Duration::from_secs(5), || state
            .join("emulated.toml")
            .exists()),
        "emulate wrote no machine file"
    );
    let (int_tids, stream_tids) = (r.dir.join("int.tids"), r.dir.join("stream.tids"));
    let _ = std::fs::remove_file(&int_tids);
    let _ = std::fs::remove_file(&stream_tids);
    // The workers run far longer than the shell, which ends the run after 6 s.
    let script = format!(
        "{} --tid-file {} int --work 100000 & {} --tid-file {} stream --mib 24 --passes 100000 & sleep 6",
        r.int_exe.display(),
        int_tids.display(),
        r.stream_exe.display(),
        stream_tids.display()
    );
    let out_path = r.dir.join("run.json");
    let err_path = r.dir.join("run.err");
    let mut run = Command::new(HETSCHED)
        .env("HETSCHED_STATE_DIR", &state)
        .args([
            "run",
            "--policy",
            "hass",
            "--interval",
            "20",
            "--json",
            "--strict-placement",
            "--store",
        ])
        .arg(&r.store)
        .args(["--", "sh", "-c", &script])
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let int_worker = first_tid(&int_tids);
    let stream_worker = first_tid(&stream_tids);
    doomed.0.extend([int_worker, stream_worker]);
    // Their masks before hetsched placed them: the machine's (sh's, inherited).
    let original = (Some("0-1".to_string()), Some("0-1".to_string()));
    let placed = wait_until(Duration::from_secs(5), || {
        mask_of(int_worker).as_deref() == Some("0")
            && mask_of(stream_worker).as_deref() == Some("1")
    });
    let seen = (mask_of(int_worker), mask_of(stream_worker));
    let status = run.wait().unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(status.success(), "{stderr}");
    assert!(
        placed,
        "masks (int, stream) {seen:?}, expected 0 and 1\n{stderr}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    assert!(report["policy_disabled"].is_null(), "{report}");
    // Both programs found in the store (sh and sleep are not in it).
    let stored = &report["stored_signatures"];
    assert!(stored["found"].as_u64().unwrap() >= 2, "{report}");
    assert_eq!(stored["rejected"], 0, "{report}");
    assert_eq!(report["hints"]["accepted"], 0, "no hint was sent: {report}");
    // Where their CPU time went, per process name: the integer program mostly on the fast class,
    // the stream mostly on the slow one.
    let class_s = |name: &str, class: &str| {
        report["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not in {report}"))["class_s"][class]
            .as_f64()
            .unwrap_or(0.0)
    };
    let int_fast = class_s("int-prog", "fast");
    let int_slow = class_s("int-prog", "slow");
    let stream_fast = class_s("stream-prog", "fast");
    let stream_slow = class_s("stream-prog", "slow");
    eprintln!("int-prog fast {int_fast:.2} s slow {int_slow:.2} s; stream-prog fast {stream_fast:.2} s slow {stream_slow:.2} s");
    assert!(int_fast > 2.0 * int_slow, "{report}");
    assert!(stream_slow > stream_fast, "{report}");
    // hetsched is gone, the workers still run: their masks are their own again.
    assert_eq!(
        (mask_of(int_worker), mask_of(stream_worker)),
        original,
        "{stderr}"
    );
    drop(doomed);
    assert!(
        wait_until(Duration::from_secs(5), || !state
            .join("emulated.toml")
            .exists()),
        "emulate left its machine file"
    );
}

/// The daemon reads the store too: a rule running `hass` over the recorded integer program (matched
/// by its executable) places the program's worker, started outside the daemon and sending no
/// hint, on the fast CPU 0 of a fast/slow machine file, says so in its statistics, and restores
/// the worker's mask at SIGTERM. Without a stored signature `hass` would place nothing.
#[test]
fn the_daemon_gives_managed_programs_their_stored_signatures() {
    let Some((_g, r, state)) = live_setup("daemon-state") else {
        return;
    };
    let machine = r.dir.join("machine.toml");
    std::fs::write(
        &machine,
        "name = \"test-fast-slow\"\nmemory_latency_ns = 90.0\n\
         [[classes]]\nname = \"fast\"\ncapacity = 1.0\n[[classes]]\nname = \"slow\"\ncapacity = 0.5\n\
         [[cores]]\ncpus = \"0\"\nclass = \"fast\"\n[[cores]]\ncpus = \"1\"\nclass = \"slow\"\n",
    )
    .unwrap();
    let stats = state.join("stats.sock");
    let config = r.dir.join("daemon.toml");
    std::fs::write(
        &config,
        format!(
            "interval_ms = 20\nstrict_placement = true\nhint_socket = \"{}\"\nstats_socket = \"{}\"\n\
             [[rule]]\npolicy = \"hass\"\nmatch = {{ exe = \"{}\" }}\n",
            state.join("hint.sock").display(),
            stats.display(),
            std::fs::canonicalize(&r.int_exe).unwrap().display()
        ),
    )
    .unwrap();
    let daemon_log = r.dir.join("daemon.err");
    let daemon = Command::new(HETSCHED)
        .env("HETSCHED_STATE_DIR", &state)
        .env("HETSCHED_LOG", "info")
        .args(["daemon", "--config"])
        .arg(&config)
        .arg("--machine")
        .arg(&machine)
        .arg("--store")
        .arg(&r.store)
        .stderr(std::fs::File::create(&daemon_log).unwrap())
        .spawn()
        .unwrap();
    let daemon_pid = daemon.id();
    let mut doomed = Doomed(Vec::new(), Some(daemon));
    assert!(wait_until(Duration::from_secs(5), || stats.exists()));
    let tid_file = r.dir.join("daemon.tids");
    let _ = std::fs::remove_file(&tid_file);
    let mut worker = Command::new(&r.int_exe)
        .arg("--tid-file")
        .arg(&tid_file)
        .args(["int", "--work", "100000"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    doomed.0.push(worker.id());
    let tid = first_tid(&tid_file);
    // The main thread is admitted first and takes the fast CPU, so the worker may start on the
    // slow one; once the main thread waits, hass's next refresh moves the worker to the fast CPU.
    let placed = wait_until(Duration::from_secs(10), || {
        mask_of(tid).as_deref() == Some("0")
    });
    let out = Command::new(HETSCHED)
        .args(["stats", "--json", "--socket"])
        .arg(&stats)
        .output()
        .unwrap();
    assert!(
        placed,
        "mask {:?}; stats {}\n{}",
        mask_of(tid),
        String::from_utf8_lossy(&out.stdout),
        std::fs::read_to_string(&daemon_log).unwrap_or_default()
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rule = &st["rules"][0];
    assert_eq!(rule["policy"], "hass", "{st}");
    assert!(
        rule["stored_signatures"]["found"].as_u64().unwrap() >= 1,
        "{st}"
    );
    assert_eq!(rule["stored_signatures"]["rejected"], 0, "{st}");
    assert_eq!(st["hints"]["accepted"], 0, "{st}");
    // SIGTERM: the daemon restores the worker's mask and exits 0.
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(daemon_pid as i32, libc::SIGTERM) };
    let status = doomed.1.take().unwrap().wait().unwrap();
    assert!(status.success());
    assert_eq!(mask_of(tid).as_deref(), Some("0-1"));
    let _ = worker.kill();
    let _ = worker.wait();
}

/// A scratch directory under the test target's temporary directory.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("signature-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `--save` of a `#!` script is refused before anything runs: `run` finds an entry by the
/// executable the kernel runs, for a script its interpreter, so the script's entry would never be
/// found.
#[test]
fn a_script_is_not_saved_and_not_run() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("script");
    let marker = dir.join("ran");
    let script = dir.join("prog.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch {}\nsleep 1\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = dir.join("store");
    let out = Command::new(HETSCHED)
        .args(["signature", "--record", "--save", "--store"])
        .arg(&store)
        .arg("--")
        .arg(&script)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "--save: {} is a script (it starts with #!)",
            script.display()
        )),
        "{err}"
    );
    assert!(err.contains("its interpreter"), "{err}");
    assert!(err.contains("`run --signature FILE`"), "{err}");
    assert!(!marker.exists(), "the script ran");
    assert!(!store.exists(), "the store was made");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A store that cannot be written is found before the program runs (exit 2, nothing run); one
/// that stops being writable while the program runs still gets the signature printed, the failure
/// said, and a status other than 0.
#[test]
fn a_store_that_cannot_be_written_loses_no_recording() {
    let dir = scratch("unwritable");
    let marker = dir.join("ran");
    // Nothing can be made under /proc, by root either.
    let out = Command::new(HETSCHED)
        .args([
            "signature",
            "--record",
            "--save",
            "--store",
            "/proc/hetsched-no-store",
            "--",
            "touch",
        ])
        .arg(&marker)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--save: cannot write into the signature store /proc/hetsched-no-store"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    assert!(!marker.exists(), "the program ran");
    if !have("valgrind") {
        eprintln!("skipped: valgrind is not installed (it records the signature)");
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    }
    // The program puts a file where the store was.
    let store = dir.join("store");
    let out = Command::new(HETSCHED)
        .args(["signature", "--record", "--save", "--json", "--store"])
        .arg(&store)
        .arg("--")
        .arg("sh")
        .arg("-c")
        .arg(format!("rm -r {0} && touch {0}", store.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["engine"]["program_exit"], 0, "{err}");
    assert!(
        err.contains(&format!(
            "cannot save into the signature store {}",
            store.display()
        )),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
