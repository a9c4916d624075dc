//! The live backend on this machine's real threads: tracking, pinning as the policy says, restoring
//! on exit, on SIGTERM and after a crash, threads vanishing mid-decision, the hint socket's checks,
//! duty-cycle emulation, dry runs, the daemon. They need root (CI runs as root); elsewhere each
//! test says so and passes without checking anything. They run one at a time: emulation and
//! pinning change what the others measure.

mod live_common;

use live_common::{is_root, mask_of, wait_until};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

const HETSCHED: &str = env!("CARGO_BIN_EXE_hetsched");
const WORK: &str = env!("CARGO_BIN_EXE_hetsched-work");

/// A scratch directory: the state directory and the test's files; threads to kill when the test
/// ends, however it ends.
struct Scratch {
    dir: PathBuf,
    doomed: Mutex<Vec<u32>>,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("hs-live-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch {
            dir,
            doomed: Mutex::new(Vec::new()),
        }
    }
    /// Kill `tid`'s process when the test ends.
    fn doom(&self, tid: u32) {
        self.doomed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(tid);
    }
    /// Start `cmd` with stdout and stderr in files (a pipe would stay open in the program's
    /// descendants, and reading it to the end would wait for them).
    fn spawn(&self, cmd: &mut Command, name: &str) -> Run {
        let out = self.path(&format!("{name}.out"));
        let err = self.path(&format!("{name}.err"));
        let child = cmd
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        Run { child, out, err }
    }
    fn path(&self, f: &str) -> PathBuf {
        self.dir.join(f)
    }
    fn state(&self) -> PathBuf {
        self.dir.join("state")
    }
    /// A machine file for this machine: the first online CPU fast, the rest at half speed.
    fn machine(&self) -> PathBuf {
        let n = online_cpus().len();
        assert!(n >= 2, "the live tests need at least two CPUs");
        let text = format!(
            "name = \"test-fast-slow\"\nmemory_latency_ns = 90.0\n\
             [[classes]]\nname = \"fast\"\ncapacity = 1.0\n\
             [[classes]]\nname = \"slow\"\ncapacity = 0.5\n\
             [[cores]]\ncpus = \"0\"\nclass = \"fast\"\n\
             [[cores]]\ncpus = \"1-{}\"\nclass = \"slow\"\n",
            n - 1
        );
        let p = self.path("machine.toml");
        std::fs::write(&p, text).unwrap();
        p
    }
    fn hetsched(&self) -> Command {
        let mut c = Command::new(HETSCHED);
        c.env("HETSCHED_STATE_DIR", self.state());
        c
    }
    /// `hetsched run --policy P --interval 20 --json --strict-placement --machine (the test
    /// machine) EXTRA...`; the caller adds `-- CMD`. Strict placement makes the masks exactly the
    /// policy's (widened, a thread the policy puts on the slow CPU may keep running on the fast
    /// one, and which mask it ends with depends on where the kernel happened to run it).
    fn run(&self, policy: &str, extra: &[&str]) -> Command {
        let mut c = self.hetsched();
        c.args([
            "run",
            "--policy",
            policy,
            "--interval",
            "20",
            "--json",
            "--strict-placement",
        ])
        .args(extra)
        .arg("--machine")
        .arg(self.machine());
        c
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for &t in self
            .doomed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            kill(t, libc::SIGKILL);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A started command whose output goes to files.
struct Run {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Run {
    fn id(&self) -> u32 {
        self.child.id()
    }
    /// Wait for it; its exit status, stdout and stderr.
    fn finish(mut self) -> Output {
        let status = self.child.wait().unwrap();
        Output {
            status,
            stdout: std::fs::read(&self.out).unwrap_or_default(),
            stderr: std::fs::read(&self.err).unwrap_or_default(),
        }
    }
}

fn online_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let mut v = Vec::new();
    for part in text.trim().split(',') {
        match part.split_once('-') {
            Some((a, b)) => v.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => v.push(part.parse().unwrap()),
        }
    }
    v
}

fn all_cpus_list() -> String {
    let v = online_cpus();
    format!("{}-{}", v[0], v[v.len() - 1])
}

/// Thread ids written by `hetsched-work --tid-file`, once `n` are there.
fn tids(file: &Path, n: usize) -> Vec<u32> {
    let mut v = Vec::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            v = std::fs::read_to_string(file)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            v.len() >= n
        }),
        "{} never listed {n} threads",
        file.display()
    );
    v
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// SHA-256 (hex) of a file's bytes.
fn sha256_of(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: kill has no memory preconditions.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

macro_rules! root_only {
    () => {
        if !is_root() {
            eprintln!("skipped: the live tests need root");
            return;
        }
    };
}

/// Run `policy` over a shell whose background worker (one busy thread, `work` units) outlives
/// the shell (`sleep` seconds) and hetsched: the worker must be pinned to the fast CPU 0 while
/// hetsched runs, and have its original mask again once hetsched is gone. Returns the worker's
/// tid and the run's JSON report.
fn lone_worker_pinned_to_fast_and_restored(
    s: &Scratch,
    policy: &str,
    work: u32,
    sleep: f64,
) -> (u32, Value) {
    let tid_file = s.path("tids");
    let script = format!(
        "{WORK} --tid-file {} int --threads 1 --work {work} & sleep {sleep}",
        tid_file.display()
    );
    let child = s.spawn(s.run(policy, &[]).args(["--", "sh", "-c", &script]), "run");
    let worker = tids(&tid_file, 1)[0];
    s.doom(worker);
    let original = all_cpus_list();
    assert!(
        wait_until(Duration::from_secs(5), || mask_of(worker).as_deref()
            == Some("0")),
        "{policy}: worker mask {:?}, expected 0",
        mask_of(worker)
    );
    let out = child.finish();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json_of(&out);
    // hetsched is gone, the worker still runs: its mask is the original again.
    assert_eq!(
        mask_of(worker).as_deref(),
        Some(original.as_str()),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        report["restore"]["restored"].as_u64().unwrap() >= 1,
        "{report}"
    );
    assert_eq!(report["policy"], policy);
    // The provenance block: `command` stays the program run, hetsched's own command line is
    // `hetsched_command`, and the machine file is hashed.
    assert_eq!(report["schema_version"], 2, "{report}");
    assert_eq!(report["command"][0], "sh", "{report}");
    assert!(
        report["hetsched_command"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "run"),
        "{report}"
    );
    assert_eq!(
        report["inputs"][0]["sha256"],
        sha256_of(&s.path("machine.toml")).as_str(),
        "{report}"
    );
    (worker, report)
}

#[test]
fn threads_are_pinned_as_the_policy_says_and_restored_when_hetsched_exits() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("pin");
    // AMPS puts the only busy thread on the fast core; the program (sh) exits after 1.5 s.
    let (worker, report) = lone_worker_pinned_to_fast_and_restored(&s, "amps", 1200, 1.5);
    assert!(
        report["decisions"]["applied"].as_u64().unwrap() >= 1,
        "{report}"
    );
    assert_eq!(report["exit_code"], 0);
    // The summary is per process name: the worker's process ran on the fast class.
    let p = report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "hetsched-work")
        .expect("the worker's process is in the summary");
    assert!(p["class_s"]["fast"].as_f64().unwrap() > 0.5, "{p}");
    assert!(
        report["class_s"]["fast"].as_f64().unwrap() > 0.5,
        "{report}"
    );
    // No journal is left behind.
    let left: Vec<_> = std::fs::read_dir(s.state())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("affinity-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    kill(worker, libc::SIGKILL);
}

/// The combined policy on this VM's counters (software events only): a single-threaded
/// computation (its main thread only waits for the worker) gets AMPS's faster-core-first once the
/// idle main thread stops counting (2 s), and its mask comes back when hetsched exits.
#[test]
fn the_hetsched_policy_runs_live_and_pins_a_lone_busy_thread_to_the_fast_cpu() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("combined");
    let (worker, report) = lone_worker_pinned_to_fast_and_restored(&s, "hetsched", 3000, 5.0);
    assert!(report["policy_disabled"].is_null(), "{report}");
    kill(worker, libc::SIGKILL);
}

#[test]
fn sigterm_restores_at_once_and_is_passed_to_the_program() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("term");
    let tid_file = s.path("tids");
    // The program ignores SIGTERM, so hetsched outlives the signal and the test can look.
    let script = format!(
        "trap '' TERM; {WORK} --tid-file {} int --threads 1 --work 5000 & wait",
        tid_file.display()
    );
    let child = s.spawn(s.run("amps", &[]).args(["--", "sh", "-c", &script]), "run");
    let worker = tids(&tid_file, 1)[0];
    s.doom(worker);
    assert!(wait_until(Duration::from_secs(5), || mask_of(worker)
        .as_deref()
        == Some("0")));
    kill(child.id(), libc::SIGTERM);
    let original = all_cpus_list();
    assert!(
        wait_until(Duration::from_secs(3), || mask_of(worker).as_deref()
            == Some(original.as_str())),
        "not restored after SIGTERM: {:?}",
        mask_of(worker)
    );
    // The program is still there (it ignored the signal); end it, and hetsched follows.
    kill(worker, libc::SIGKILL);
    let out = child.finish();
    let report = json_of(&out);
    assert_eq!(report["stopped_by_signal"], libc::SIGTERM);
}

#[test]
fn threads_exiting_mid_decision_cause_no_error() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("churn");
    // With the process events connector, and by polling /proc alone.
    for mode in ["connector", "polling"] {
        let mut cmd = s.hetsched();
        cmd.args([
            "run",
            "--policy",
            "amps",
            "--interval",
            "5",
            "--min-dwell",
            "0",
            "--json",
        ]);
        if mode == "polling" {
            cmd.arg("--no-connector");
        }
        let out = cmd
            .arg("--machine")
            .arg(s.machine())
            .args([
                "--",
                WORK,
                "churn",
                "--seconds",
                "1.5",
                "--lifetime-ms",
                "2",
                "--width",
                "4",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}: {stderr}");
        assert!(
            !stderr.contains("ERROR") && !stderr.contains("WARN hetsched_live::engine"),
            "{mode}: {stderr}"
        );
        let r = json_of(&out);
        assert!(r["policy_disabled"].is_null(), "{r}");
        assert!(
            r["threads_seen"].as_u64().unwrap() > 50,
            "{mode}: {}",
            r["threads_seen"]
        );
        assert!(
            r["decisions"]["placements"].as_u64().unwrap() > 0,
            "{}",
            r["decisions"]
        );
    }
}

/// Thousands of short-lived threads: the summary is per process name, not a row per thread ever
/// seen, and hetsched's own memory stays bounded (before, every exited thread kept its record and
/// its row: 11,544 threads gave 20.9 MB and a 2.4 MB JSON document).
#[test]
fn memory_and_the_summary_stay_bounded_under_thread_churn() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("churn-memory");
    let out = s
        .run("amps", &[])
        .args([
            "--",
            WORK,
            "churn",
            "--seconds",
            "6",
            "--lifetime-ms",
            "1",
            "--width",
            "8",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    let r: Value = serde_json::from_str(&text).unwrap();
    let seen = r["threads_seen"].as_u64().unwrap();
    // On an idle 2-core machine more than 2,000 threads start in the 6 s; on a loaded one fewer
    // (1,764 at worst seen), still thousands of records if exited threads kept theirs.
    assert!(seen > 1500, "only {seen} threads seen");
    assert!(
        r.get("threads").is_none(),
        "no per-thread rows: {text:.300}"
    );
    let processes = r["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 1, "{processes:?}");
    assert_eq!(processes[0]["name"], "hetsched-work");
    assert_eq!(processes[0]["threads"].as_u64().unwrap(), seen);
    assert!(text.len() < 8192, "{} bytes of JSON", text.len());
    let peak = r["overhead"]["peak_rss_kb"].as_u64().unwrap();
    assert!(
        peak > 0 && peak < 20_000,
        "peak RSS {peak} kB for {seen} threads"
    );
}

/// A policy that places by hints alone says so when none come: once on stderr after 2 s, and in
/// `policy_missing` (before, `hass` without signatures placed nothing and said nothing).
#[test]
fn a_policy_without_its_hints_says_so() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("no-hints");
    let out = s
        .run("hass", &[])
        .args(["--", "sleep", "2.5"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr
            .matches("policy hass places threads by architectural signatures alone")
            .count(),
        1,
        "{stderr}"
    );
    let r = json_of(&out);
    assert_eq!(
        r["policy_missing"],
        serde_json::json!(["architectural signatures"]),
        "{r}"
    );
    // AMPS needs no hints: nothing said.
    let out = s
        .run("amps", &[])
        .args(["--", "sleep", "2.5"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("places nothing"));
}

/// Four threads on two data fragments, each thread hinting its fragment as it starts: the two
/// groups are on different CPUs, one fragment each, in every run (before, the loads read at the
/// last interval put both groups on one CPU in most runs, and the correcting move was dropped by
/// the dwell rule while the policy believed it made).
#[test]
fn data_sharing_groups_take_one_cpu_each_in_every_run() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("fragments");
    for round in 0..3 {
        let tid_file = s.path(&format!("tids-{round}"));
        let child = s.spawn(
            s.run("data-sharing", &[])
                .args(["--", WORK, "--tid-file"])
                .arg(&tid_file)
                .args([
                    "share",
                    "--threads",
                    "4",
                    "--buffers",
                    "2",
                    "--passes",
                    "30000",
                    "--hint",
                ]),
            "run",
        );
        let t = tids(&tid_file, 4);
        for &tid in &t {
            s.doom(tid);
        }
        // Thread k works on fragment k % 2.
        let grouped = || {
            let m: Vec<Option<String>> = t.iter().map(|&tid| mask_of(tid)).collect();
            let single = m
                .iter()
                .all(|x| x.as_deref().is_some_and(|l| !l.contains([',', '-'])));
            single && m[0] == m[2] && m[1] == m[3] && m[0] != m[1]
        };
        assert!(
            wait_until(Duration::from_secs(3), grouped),
            "round {round}: masks {:?}",
            t.iter().map(|&tid| mask_of(tid)).collect::<Vec<_>>()
        );
        let out = child.finish();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r = json_of(&out);
        assert_eq!(r["hints"]["accepted"], 4, "{r}");
        // The summary shows the grouping: per fragment, its two threads' entries and CPUs.
        let fragments = r["fragments"].as_array().unwrap();
        assert_eq!(fragments.len(), 2, "{r}");
        for (df, f) in fragments.iter().enumerate() {
            assert_eq!(f["process"], "hetsched-work");
            assert_eq!(f["fragment"], df);
            assert_eq!(f["entries"], 2, "{f}");
            assert!(!f["cpus"].as_str().unwrap().is_empty(), "{f}");
        }
    }
}

#[test]
fn hints_from_foreign_senders_are_rejected_and_malformed_ones_counted() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("hints");
    std::fs::create_dir_all(s.state()).unwrap();
    // The state directory must let an unprivileged sender reach the socket.
    use std::os::unix::fs::PermissionsExt;
    for d in [&s.dir, &s.state()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let tid_file = s.path("tids");
    // First a program that hints its own threads, then one that waits for foreign hints.
    let script = format!(
        "{WORK} share --hint --threads 2 --kib 64 --passes 5000 && \
         {WORK} --tid-file {} sleepers --threads 2 --seconds 3 --wake-ms 100",
        tid_file.display()
    );
    let child = s.spawn(
        s.hetsched()
            .env("HETSCHED_LOG", "hetsched_live=debug")
            .args([
                "run",
                "--policy",
                "data-sharing",
                "--json",
                "--",
                "sh",
                "-c",
                &script,
            ]),
        "run",
    );
    let sleeper = tids(&tid_file, 2)[0];
    let socket = s.state().join(format!("hint-{}.sock", child.id()));
    let send = |extra: &[&str]| {
        let st = Command::new(WORK)
            .args(["send-hint", "--socket"])
            .arg(&socket)
            .args(["--tid", &sleeper.to_string()])
            .args(extra)
            .status()
            .unwrap();
        assert!(st.success(), "send-hint {extra:?}");
    };
    // Let the tracker see the sleepers first.
    std::thread::sleep(Duration::from_millis(300));
    send(&["--uid", "65534"]); // nobody, about a thread not its own: rejected
    send(&[]); // root may hint any managed thread: accepted
    send(&["--garbage", "7"]); // malformed
    send(&["--garbage", "5000"]); // oversized: malformed
    let out = child.finish();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json_of(&out);
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(r["hints"]["rejected"], 1, "{}\n{log}", r["hints"]);
    assert_eq!(r["hints"]["malformed"], 2, "{}\n{log}", r["hints"]);
    // Two from the sharing program about its own threads, one from root about a sleeper. A
    // sharing thread may have ended by the time a busy machine lets hetsched read its hint
    // (counted gone, as the docs say); the sleeper lives on, so root's is accepted.
    let count = |k: &str| r["hints"][k].as_u64().unwrap_or(0);
    assert_eq!(
        count("accepted") + count("gone"),
        3,
        "{}\n{log}",
        r["hints"]
    );
    assert!(count("accepted") >= 1, "{}\n{log}", r["hints"]);
}

#[test]
fn emulation_slows_the_chosen_core_about_twofold_and_cleans_up() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("emulate");
    let cpus = online_cpus();
    let slow = *cpus.last().unwrap();
    let fast = cpus[0];
    // Refuses to make every core slow, and changes nothing then.
    let all = format!("{}-{}", cpus[0], slow);
    let out = s
        .hetsched()
        .args(["emulate", "--slow", &all, "--duty", "0.5", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least one must stay fast"));
    assert!(!s.state().join("emulated.toml").exists());

    // Three runs on each CPU, alternating; the fastest of each is the least disturbed by
    // whatever else the machine does.
    let one = format!("{WORK} --pin {fast} int --work 100; {WORK} --pin {slow} int --work 100; ");
    let script = format!(
        "{one}{one}{one}test -f {}/emulated.toml",
        s.state().display()
    );
    let out = s
        .hetsched()
        .args([
            "emulate",
            "--slow",
            &slow.to_string(),
            "--duty",
            "0.5",
            "--json",
        ])
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The programs' reports went to stderr (stdout carries the JSON).
    let walls: Vec<f64> = stderr
        .lines()
        .filter(|l| l.starts_with("{\"program\""))
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["wall_s"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert_eq!(walls.len(), 6, "{stderr}");
    let best = |parity: usize| {
        walls
            .iter()
            .skip(parity)
            .step_by(2)
            .copied()
            .fold(f64::INFINITY, f64::min)
    };
    let (on_fast, on_slow) = (best(0), best(1));
    let ratio = on_slow / on_fast;
    assert!(
        (1.6..=2.6).contains(&ratio),
        "slow/fast = {ratio:.2} ({walls:?})"
    );
    let r = json_of(&out);
    assert_eq!(r["duty"], 0.5);
    assert_eq!(r["schema_version"], 2, "{r}");
    assert!(
        !s.state().join("emulated.toml").exists(),
        "the machine file is removed"
    );
    // No stealing thread survives: the CPU is as fast as the other again.
    let after = (0..2)
        .map(|_| {
            let t = Instant::now();
            let st = Command::new(WORK)
                .args(["--pin", &slow.to_string(), "int", "--work", "100"])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(st.success());
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    assert!(
        after < on_slow * 0.8,
        "after {after:.3} s vs emulated {on_slow:.3} s"
    );
}

#[test]
fn a_dry_run_changes_nothing() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("dry");
    let tid_file = s.path("tids");
    let child = s.spawn(
        s.run("amps", &["--dry-run"])
            .args(["--", WORK, "--tid-file"])
            .arg(&tid_file)
            .args(["int", "--threads", "2", "--work", "250"]),
        "run",
    );
    let workers = tids(&tid_file, 2);
    let original = all_cpus_list();
    let mut seen = Vec::new();
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(600) {
        for &w in &workers {
            if let Some(m) = mask_of(w) {
                seen.push(m);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.finish();
    assert!(out.status.success());
    assert!(seen.iter().all(|m| *m == original), "masks seen: {seen:?}");
    let r = json_of(&out);
    assert_eq!(r["dry_run"], true);
    assert!(
        r["decisions"]["applied"].as_u64().unwrap() >= 1,
        "the policy did decide: {}",
        r["decisions"]
    );
    assert_eq!(r["restore"]["restored"], 0);
    assert!(
        !s.state().exists()
            || std::fs::read_dir(s.state())
                .unwrap()
                .flatten()
                .all(|e| !e.file_name().to_string_lossy().starts_with("affinity-"))
    );
}

#[test]
fn a_crashed_run_is_restored_at_the_next_start() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("crash");
    let tid_file = s.path("tids");
    let mut child = s
        .hetsched()
        .args([
            "run",
            "--policy",
            "amps",
            "--interval",
            "20",
            "--strict-placement",
            "--machine",
        ])
        .arg(s.machine())
        .args(["--", WORK, "--tid-file"])
        .arg(&tid_file)
        .args(["int", "--threads", "1", "--work", "1500"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let worker = tids(&tid_file, 1)[0];
    s.doom(worker);
    assert!(wait_until(Duration::from_secs(5), || mask_of(worker)
        .as_deref()
        == Some("0")));
    // No chance to clean up.
    child.kill().unwrap();
    child.wait().unwrap();
    let journal: String = std::fs::read_dir(s.state())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("affinity-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    eprintln!("journal after the crash: {journal} (worker {worker})");
    assert_eq!(
        mask_of(worker).as_deref(),
        Some("0"),
        "still pinned after the crash"
    );
    let out = s
        .hetsched()
        .args(["run", "--json", "--policy", "linux-default", "--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let r = json_of(&out);
    // The worker and the program's main thread.
    assert!(
        r["recovered"]["restored"].as_u64().unwrap() >= 1,
        "{}",
        r["recovered"]
    );
    assert_eq!(
        mask_of(worker).as_deref(),
        Some(all_cpus_list().as_str()),
        "recovered {}; {}",
        r["recovered"],
        String::from_utf8_lossy(&out.stderr)
    );
    kill(worker, libc::SIGKILL);
}

#[test]
fn every_policy_runs_live_with_the_counters_this_machine_has() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("policies");
    let list = Command::new(HETSCHED)
        .args(["simulate", "--help"])
        .output()
        .unwrap();
    assert!(list.status.success());
    for policy in [
        "linux-default",
        "amps",
        "hass",
        "ipc-driven",
        "bulldover",
        "data-sharing",
        "numa-amp",
        "hetsched",
    ] {
        let out = s
            .run(policy, &[])
            .args(["--", WORK, "omp", "--threads", "2", "--phases", "4"])
            .args(["--parallel-work", "10", "--serial-work", "10"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{policy}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r = json_of(&out);
        assert!(
            r["policy_disabled"].is_null(),
            "{policy}: {}",
            r["policy_disabled"]
        );
        assert_eq!(r["policy"], policy);
        assert!(
            r["counters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == "task-clock")
                || r["counters"].as_array().unwrap().is_empty()
        );
    }
}

#[test]
fn the_exit_status_passes_through_and_a_bad_command_is_exit_2() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("status");
    let st = s
        .hetsched()
        .args(["run", "--", "sh", "-c", "exit 7"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(7));
    let out = s
        .hetsched()
        .args(["run", "--", "/no/such/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // One line, naming it (before, a warning about counters came first).
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/no/such/program"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let plain = s.path("not-executable");
    std::fs::write(&plain, "true\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    for program in ["no-such-program-anywhere", plain.to_str().unwrap()] {
        let out = s.hetsched().args(["run", "--", program]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{program}: {err}");
        assert!(err.contains(program), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // Nothing is left in the state directory: no journal, no hint socket.
    let left: Vec<_> = std::fs::read_dir(s.state())
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
    let out = s
        .hetsched()
        .args(["run", "--policy", "nope", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"nope\""));
    for (flag, value) in [
        ("--interval", "1e12"),
        ("--interval", "0.1"),
        ("--stop-grace", "-1"),
        // Before, these panicked converting to a duration (exit 101).
        ("--min-dwell", "1e30"),
        ("--min-dwell", "inf"),
        ("--min-dwell", "nan"),
        ("--min-dwell", "-1"),
    ] {
        let out = s
            .hetsched()
            .args(["run", flag, value, "--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag) && err.lines().count() == 1, "{err}");
    }
}

/// Under systemd's `Type=notify` the daemon says READY=1 once its sockets are up and STOPPING=1
/// at SIGTERM; `stats --watch` asks again and again; `daemon --json` ends with its statistics as
/// one JSON document.
#[test]
fn the_daemon_notifies_readiness_watches_and_reports_as_json() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("notify");
    let stats = s.path("stats.sock");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = s.path("daemon.toml");
    std::fs::write(
        &config,
        format!(
            "hint_socket = \"{}\"\nstats_socket = \"{}\"\nmetrics = \"127.0.0.1:{port}\"\n[[rule]]\npolicy = \"amps\"\nmatch = {{ comm = \"no-such-program\" }}\n",
            s.path("hint.sock").display(),
            stats.display()
        ),
    )
    .unwrap();
    let notify = std::os::unix::net::UnixDatagram::bind(s.path("notify.sock")).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let daemon = s
        .hetsched()
        .args(["daemon", "--json", "--config"])
        .arg(&config)
        .arg("--machine")
        .arg(s.machine())
        .env("NOTIFY_SOCKET", s.path("notify.sock"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 512];
    let n = notify.recv(&mut buf).unwrap();
    let ready = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready}");
    assert!(stats.exists(), "ready before the stats socket is up");
    // Three answers a line each, about 0.2 s apart.
    let mut watch = Command::new(HETSCHED)
        .args(["stats", "--json", "--watch", "0.2", "--socket"])
        .arg(&stats)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    kill(watch.id(), libc::SIGTERM);
    let _ = watch.wait();
    let mut lines = String::new();
    Read::read_to_string(&mut watch.stdout.take().unwrap(), &mut lines).unwrap();
    let docs: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(docs.len() >= 3, "{lines}");
    assert!(docs[1]["uptime_s"].as_f64() > docs[0]["uptime_s"].as_f64());
    // Idle metrics clients (connected, never asking) do not hold up the daemon's loop: the
    // metrics are served from a thread of their own (before, each held the loop 200 ms).
    let idle: Vec<std::net::TcpStream> = (0..10)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let t = Instant::now();
    let out = Command::new(HETSCHED)
        .args(["stats", "--json", "--socket"])
        .arg(&stats)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
    drop(idle);
    let body = {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut b = String::new();
        c.read_to_string(&mut b).unwrap();
        b
    };
    assert!(body.contains("hetsched_daemon_cpu_seconds_total"), "{body}");
    kill(daemon.id(), libc::SIGTERM);
    let n = notify.recv(&mut buf).unwrap();
    assert_eq!(String::from_utf8_lossy(&buf[..n]).trim(), "STOPPING=1");
    let out = daemon.wait_with_output().unwrap();
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["rules"][0]["policy"], "amps");
    assert!(report["uptime_s"].as_f64().unwrap() > 0.5, "{report}");
    // The provenance block, the configuration file first among the inputs.
    assert_eq!(report["schema_version"], 2, "{report}");
    assert_eq!(
        report["inputs"][0]["sha256"],
        sha256_of(&config).as_str(),
        "{report}"
    );
}

/// SIGHUP reloads the rules: a removed rule's threads get their masks back, a configuration that
/// does not parse changes nothing, and a rule added back manages its processes again (before,
/// SIGHUP was ignored).
#[test]
fn sighup_reloads_the_rules_and_restores_the_threads_of_removed_ones() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("reload");
    let stats = s.path("stats.sock");
    let config = s.path("daemon.toml");
    let write = |comm: &str| {
        std::fs::write(
            &config,
            format!(
                "interval_ms = 20\nstrict_placement = true\nhint_socket = \"{}\"\nstats_socket = \"{}\"\n[[rule]]\npolicy = \"amps\"\nmatch = {{ comm = \"{comm}\" }}\n",
                s.path("hint.sock").display(),
                stats.display()
            ),
        )
        .unwrap();
    };
    write("hetsched-work");
    let mut daemon = s
        .hetsched()
        .args(["daemon", "--config"])
        .arg(&config)
        .arg("--machine")
        .arg(s.machine())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(5), || stats.exists()));
    let tid_file = s.path("tids");
    let mut worker = Command::new(WORK)
        .arg("--tid-file")
        .arg(&tid_file)
        .args(["int", "--threads", "1", "--work", "3000"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let tid = tids(&tid_file, 1)[0];
    s.doom(tid);
    let pinned = || mask_of(tid).as_deref() == Some("0");
    let free = || mask_of(tid) == Some(all_cpus_list());
    assert!(
        wait_until(Duration::from_secs(5), pinned),
        "{:?}",
        mask_of(tid)
    );
    // The rule is gone: its thread is the kernel's again.
    write("no-such-program");
    kill(daemon.id(), libc::SIGHUP);
    assert!(
        wait_until(Duration::from_secs(5), free),
        "{:?}",
        mask_of(tid)
    );
    // A file that does not parse: nothing changes, the daemon goes on.
    std::fs::write(&config, "interval_ms = \"fast\"\n").unwrap();
    kill(daemon.id(), libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new(HETSCHED)
        .args(["stats", "--json", "--socket"])
        .arg(&stats)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(json_of(&out)["rules"].as_array().unwrap().len(), 1);
    assert!(free());
    // The rule is back: the thread is managed again.
    write("hetsched-work");
    kill(daemon.id(), libc::SIGHUP);
    assert!(
        wait_until(Duration::from_secs(5), pinned),
        "{:?}",
        mask_of(tid)
    );
    kill(daemon.id(), libc::SIGTERM);
    let status = daemon.wait().unwrap();
    let mut err = String::new();
    Read::read_to_string(&mut daemon.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    assert!(err.contains("configuration not reloaded"), "{err}");
    assert!(free(), "restored at the stop");
    let _ = worker.kill();
    let _ = worker.wait();
}

/// The daemon managing 10,000 threads stays under 20 MB, and once they are gone its memory returns
/// near where it started (before, it grew from 5 to 22 MB under churn and stayed there).
#[test]
fn the_daemon_holds_ten_thousand_threads_in_bounded_memory_and_gives_it_back() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("daemon-memory");
    let stats = s.path("stats.sock");
    let config = s.path("daemon.toml");
    std::fs::write(
        &config,
        format!(
            "hint_socket = \"{}\"\nstats_socket = \"{}\"\n[[rule]]\npolicy = \"amps\"\nmatch = {{ comm = \"hetsched-work\" }}\n",
            s.path("hint.sock").display(),
            stats.display()
        ),
    )
    .unwrap();
    let mut daemon = s
        .hetsched()
        .args(["daemon", "--config"])
        .arg(&config)
        .arg("--machine")
        .arg(s.machine())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(5), || stats.exists()));
    let query = || {
        let out = Command::new(HETSCHED)
            .args(["stats", "--json", "--socket"])
            .arg(&stats)
            .output()
            .unwrap();
        json_of(&out)
    };
    let live = |v: &Value| v["rules"][0]["threads_live"].as_u64().unwrap();
    let start = query()["rss_kb"].as_u64().unwrap();
    let mut worker = Command::new(WORK)
        .args([
            "sleepers",
            "--threads",
            "10000",
            "--seconds",
            "8",
            "--wake-ms",
            "1000",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Asked every 300 ms: the daemon is busy taking 10,000 threads in.
    let until = |limit: Duration, f: &dyn Fn(&Value) -> bool| {
        let t = Instant::now();
        while t.elapsed() < limit {
            if f(&query()) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        false
    };
    assert!(
        until(Duration::from_secs(30), &|v| live(v) > 10_000),
        "{}",
        query()
    );
    let during = query();
    assert!(worker.wait().unwrap().success());
    assert!(until(Duration::from_secs(10), &|v| live(v) == 0));
    std::thread::sleep(Duration::from_millis(500));
    let after = query();
    kill(daemon.id(), libc::SIGTERM);
    assert!(daemon.wait().unwrap().success());
    let peak = during["peak_rss_kb"].as_u64().unwrap();
    let end = after["rss_kb"].as_u64().unwrap();
    eprintln!(
        "daemon memory: {start} kB at start, peak {peak} kB with {} threads, {end} kB after",
        live(&during)
    );
    assert!(
        peak < 20_000,
        "peak {peak} kB with {} threads",
        live(&during)
    );
    assert!(
        end < start + 2048,
        "{end} kB after the threads left, {start} kB at the start"
    );
}

#[test]
fn the_daemon_manages_matching_processes_serves_stats_and_metrics_and_restores_on_sigterm() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("daemon");
    let stats = s.path("stats.sock");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = s.path("daemon.toml");
    std::fs::write(
        &config,
        format!(
            "interval_ms = 20\nstrict_placement = true\nhint_socket = \"{}\"\nstats_socket = \"{}\"\nmetrics = \"127.0.0.1:{port}\"\n\
             [[rule]]\npolicy = \"amps\"\nmatch = {{ comm = \"hetsched-work\" }}\n",
            s.path("hint.sock").display(),
            stats.display()
        ),
    )
    .unwrap();
    let mut daemon = s
        .hetsched()
        .args(["daemon", "--config"])
        .arg(&config)
        .arg("--machine")
        .arg(s.machine())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(5), || stats.exists()));
    // A process the daemon did not start, matching the rule.
    let tid_file = s.path("tids");
    let mut worker = Command::new(WORK)
        .arg("--tid-file")
        .arg(&tid_file)
        .args(["int", "--threads", "1", "--work", "1500"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let tid = tids(&tid_file, 1)[0];
    s.doom(tid);
    assert!(
        wait_until(Duration::from_secs(5), || mask_of(tid).as_deref()
            == Some("0")),
        "mask {:?}",
        mask_of(tid)
    );
    let out = Command::new(HETSCHED)
        .args(["stats", "--json", "--socket"])
        .arg(&stats)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st = json_of(&out);
    // A second daemon over the same state directory refuses, naming the first, and changes
    // nothing: the first one still answers on its socket.
    let second = s.path("second.toml");
    std::fs::write(
        &second,
        format!(
            "hint_socket = \"{}\"\nstats_socket = \"{}\"\n[[rule]]\npolicy = \"amps\"\nmatch = {{ comm = \"x\" }}\n",
            s.path("hint2.sock").display(),
            stats.display()
        ),
    )
    .unwrap();
    let refused = s
        .hetsched()
        .args(["daemon", "--config"])
        .arg(&second)
        .arg("--machine")
        .arg(s.machine())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains(&format!("already running (pid {})", daemon.id())),
        "{err}"
    );
    assert!(stats.exists() && !s.path("hint2.sock").exists());
    let again = Command::new(HETSCHED)
        .args(["stats", "--json", "--socket"])
        .arg(&stats)
        .output()
        .unwrap();
    assert!(again.status.success(), "the first daemon stopped answering");
    assert_eq!(st["rules"][0]["policy"], "amps");
    assert!(
        st["rules"][0]["threads_live"].as_u64().unwrap() >= 1,
        "{st}"
    );
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    conn.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.0 200"), "{body}");
    assert!(
        body.contains("hetsched_threads{rule=\"1\",policy=\"amps\",class=\"fast\"}"),
        "{body}"
    );
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
    assert!(!body.contains(&tid.to_string()), "no series per thread");
    kill(daemon.id(), libc::SIGTERM);
    let status = daemon.wait().unwrap();
    assert!(status.success());
    assert_eq!(mask_of(tid).as_deref(), Some(all_cpus_list().as_str()));
    assert!(!stats.exists());
    worker.kill().unwrap();
    worker.wait().unwrap();
    let mut err = String::new();
    daemon
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!err.contains("ERROR"), "{err}");
}

/// CPU seconds (user + system) process `pid` has used, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = text.rsplit_once(')').map_or("", |(_, rest)| rest);
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime) are the 12th and 13th after the command name.
    let ticks: f64 = f.get(11..13).map_or(0.0, |v| {
        v.iter().filter_map(|x| x.parse::<f64>().ok()).sum()
    });
    // SAFETY: sysconf has no memory preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// After SIGTERM, `run` waits for a program that ignores it without spinning: over two seconds it
/// uses almost no CPU (a loop polling undrained descriptors used a whole core), and when the
/// program then exits its status passes through.
#[test]
fn after_a_stop_signal_run_waits_without_spinning() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("nospin");
    let child = s.spawn(
        s.run("amps", &["--stop-grace", "30"])
            // Each short sleep is a process start and exit: events keep arriving after the stop.
            .args([
                "--",
                "sh",
                "-c",
                "trap '' TERM; for i in 1 2 3 4 5 6; do sleep 0.5; done; exit 7",
            ]),
        "run",
    );
    std::thread::sleep(Duration::from_millis(500));
    kill(child.id(), libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(200));
    let before = cpu_seconds(child.id());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_seconds(child.id()) - before;
    assert!(
        used < 0.2,
        "hetsched used {used:.2} CPU s in 2 s after SIGTERM"
    );
    let out = child.finish();
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json_of(&out);
    assert_eq!(report["stopped_by_signal"], libc::SIGTERM);
    assert_eq!(report["detached"], false);
}

/// A program still running a grace period after the stop signal is left running: hetsched exits
/// 128 + the signal and says so, and the program lives on.
#[test]
fn a_program_outliving_the_grace_period_is_left_running() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("detach");
    let pid_file = s.path("pid");
    let script = format!("echo $$ > {}; trap '' TERM; sleep 30", pid_file.display());
    let child = s.spawn(
        s.run("amps", &["--stop-grace", "1"])
            .args(["--", "sh", "-c", &script]),
        "run",
    );
    let program = tids(&pid_file, 1)[0];
    s.doom(program);
    kill(child.id(), libc::SIGTERM);
    let t0 = Instant::now();
    let out = child.finish();
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "hetsched took {took:?} to leave"
    );
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM));
    let report = json_of(&out);
    assert_eq!(report["detached"], true);
    // Still running: no exit status to report (before, `exit_code` said 1).
    assert!(
        report["exit_code"].is_null() && report["exit_signal"].is_null(),
        "{report}"
    );
    assert!(mask_of(program).is_some(), "the program should still run");
}

/// A program started through a wrapper that a policy pinned (a lone shell is a lone thread): its
/// threads inherit that pin, and those the policy does not place get their user's mask back at
/// once; they are never left confined to the wrapper's CPU.
#[test]
fn threads_that_inherit_a_pin_the_policy_did_not_choose_get_their_mask_back() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("inherit");
    let tid_file = s.path("tids");
    let script = format!(
        "sleep 0.3; exec {WORK} --tid-file {} omp --threads 2 --phases 40 --parallel-work 40 --serial-work 5",
        tid_file.display()
    );
    let child = s.spawn(
        s.run("hetsched", &[]).args(["--", "sh", "-c", &script]),
        "run",
    );
    let workers = tids(&tid_file, 2);
    for &w in &workers {
        s.doom(w);
    }
    let all = all_cpus_list();
    // Released to the user's mask, or placed by the policy (its balance gives a lone barrier
    // job's threads a core each); never all left on the one CPU the wrapper was pinned to.
    let freed_or_placed = || {
        let masks: Vec<Option<String>> = workers.iter().map(|&w| mask_of(w)).collect();
        let freed = masks.iter().all(|m| m.as_ref().is_none_or(|m| *m == all));
        let mut pinned: Vec<&String> = masks.iter().flatten().collect();
        pinned.sort();
        pinned.dedup();
        freed || (pinned.len() == workers.len() && masks.iter().all(Option::is_some))
    };
    assert!(
        wait_until(Duration::from_secs(2), freed_or_placed),
        "workers confined: {:?}",
        workers.iter().map(|&w| mask_of(w)).collect::<Vec<_>>()
    );
    let out = child.finish();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A real program nobody here wrote: `make -j2` building a small C project under `run`, every
/// compiler process tracked. It finishes, and its exit status passes through (0, then make's own
/// 2 for a broken source).
#[test]
fn make_builds_a_c_project_under_run_and_its_status_passes_through() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("make");
    let src = s.path("proj");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..6 {
        std::fs::write(
            src.join(format!("f{i}.c")),
            format!("int f{i}(int x) {{ int s = 0; for (int k = 0; k < x; k++) s += k * {i}; return s; }}\n"),
        )
        .unwrap();
    }
    let decls: String = (0..6).map(|i| format!("int f{i}(int);\n")).collect();
    let calls: String = (0..6).map(|i| format!(" + f{i}(argc)")).collect();
    std::fs::write(
        src.join("main.c"),
        format!(
            "{decls}int main(int argc, char **argv) {{ (void)argv; return (0{calls}) & 0; }}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        src.join("Makefile"),
        "OBJS = main.o f0.o f1.o f2.o f3.o f4.o f5.o\nprog: $(OBJS)\n\tcc -o prog $(OBJS)\n%.o: %.c\n\tcc -O2 -c $< -o $@\n",
    )
    .unwrap();
    let make = |policy: &str| {
        s.run(policy, &[])
            .args(["--", "make", "-s", "-j2", "-C"])
            .arg(&src)
            .output()
            .unwrap()
    };
    let out = make("hetsched");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(src.join("prog").exists());
    let report = json_of(&out);
    // make, and a compiler process per object at least, each counted under its name.
    assert!(report["threads_seen"].as_u64().unwrap() >= 7, "{report}");
    let processes = report["processes"].as_array().unwrap();
    assert!(processes.iter().any(|p| p["name"] == "make"), "{report}");
    let total: u64 = processes
        .iter()
        .map(|p| p["processes"].as_u64().unwrap())
        .sum();
    assert!(total >= 7, "{report}");
    // A broken source: make's own status (2) passes through.
    std::fs::write(src.join("f3.c"), "int f3(int x) { return x +; }\n").unwrap();
    let out = make("amps");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The lines of hetsched's own error in `stderr` (log lines, such as the notice of a machine
/// without hardware counters, are not part of it).
fn error_lines(stderr: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.starts_with("hetsched:"))
        .count()
}

/// The grandchild pid a shell's double fork wrote to `file`, once it is there.
fn pid_in(file: &Path) -> u32 {
    tids(file, 1)[0]
}

/// A copy of the shell under a name of its own, for daemon rules that must match nothing else
/// on the machine.
fn own_shell(s: &Scratch, name: &str) -> PathBuf {
    let p = s.path(name);
    std::fs::copy("/bin/sh", &p).unwrap();
    p
}

/// A process whose parent exits right after forking it (a double fork, `( cmd & )`) inherits
/// the pin hetsched gave its grandparent. Once `run` is over it has its original mask again, with
/// the connector and without (before, the pin was taken for its own mask and kept for ever).
#[test]
fn a_double_forked_process_gets_its_original_mask_back_after_run() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("double-fork");
    let all = all_cpus_list();
    for (k, extra) in [&[][..], &["--no-connector"][..]].into_iter().enumerate() {
        let pid_file = s.path(&format!("orphan-{k}"));
        let script = format!(
            "sleep 0.4; (sleep 30 & echo $! > {}); sleep 1",
            pid_file.display()
        );
        let out = s
            .run("amps", extra)
            .args(["--", "sh", "-c", &script])
            .output()
            .unwrap();
        let orphan = pid_in(&pid_file);
        s.doom(orphan);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            mask_of(orphan).as_deref(),
            Some(all.as_str()),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        kill(orphan, libc::SIGKILL);
    }
}

/// A daemon with one rule, `amps` for processes named `comm`, placing strictly every 20 ms on the
/// scratch machine, its sockets numbered `k`; once its stats socket is there, it and that socket.
fn strict_amps_daemon(s: &Scratch, k: usize, comm: &str, extra: &[&str]) -> (Child, PathBuf) {
    let stats = s.path(&format!("stats-{k}.sock"));
    let config = s.path(&format!("daemon-{k}.toml"));
    std::fs::write(
        &config,
        format!(
            "interval_ms = 20\nstrict_placement = true\nhint_socket = \"{}\"\nstats_socket = \"{}\"\n[[rule]]\npolicy = \"amps\"\nmatch = {{ comm = \"{comm}\" }}\n",
            s.path(&format!("hint-{k}.sock")).display(),
            stats.display()
        ),
    )
    .unwrap();
    let daemon = s
        .hetsched()
        .args(["daemon", "--config"])
        .arg(&config)
        .arg("--machine")
        .arg(s.machine())
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(5), || stats.exists()));
    (daemon, stats)
}

/// A shell that forks a child and a double-forked grandchild on cue, for the stop tests: it
/// writes its pid, waits for the file `go`, forks both (each pid written to a file) and sleeps.
struct ForksOnCue {
    shell: PathBuf,
    go: PathBuf,
    child: PathBuf,
    orphan: PathBuf,
}

impl ForksOnCue {
    /// The files of round `k`.
    fn new(s: &Scratch, k: usize) -> Self {
        let [shell, go, child, orphan] =
            ["shell", "go", "child", "orphan"].map(|n| s.path(&format!("{n}-{k}")));
        ForksOnCue {
            shell,
            go,
            child,
            orphan,
        }
    }

    fn script(&self) -> String {
        format!(
            "echo $$ > {}; while [ ! -e {} ]; do sleep 0.02; done; sleep 30 & echo $! > {}; (sleep 30 & echo $! > {}); sleep 30",
            self.shell.display(),
            self.go.display(),
            self.child.display(),
            self.orphan.display()
        )
    }

    /// Once the shell is pinned, hold `backend` stopped while the shell forks (the grandchild
    /// inherits the pin), then send it SIGTERM and let it go on: the shell's, child's and
    /// grandchild's pids.
    fn fork_while_held(&self, s: &Scratch, backend: u32, all: &str, what: &str) -> [u32; 3] {
        let shell = pid_in(&self.shell);
        s.doom(shell);
        assert!(
            wait_until(Duration::from_secs(5), || mask_of(shell)
                .is_some_and(|m| m != all)),
            "{what}: the shell was never pinned"
        );
        kill(backend, libc::SIGSTOP);
        std::fs::write(&self.go, "").unwrap();
        let (child, orphan) = (pid_in(&self.child), pid_in(&self.orphan));
        s.doom(child);
        s.doom(orphan);
        assert_ne!(mask_of(orphan).as_deref(), Some(all), "{what}: not pinned");
        kill(backend, libc::SIGTERM);
        kill(backend, libc::SIGCONT);
        [shell, child, orphan]
    }
}

/// A stop signal to `run` while the program's shell has just forked a child and a
/// double-forked grandchild, before hetsched looked (it is held stopped meanwhile): both are
/// caught up with before the restore and have their original masks once `run` is over, with
/// the connector and without.
#[test]
fn children_made_just_before_a_stop_signal_get_their_masks_back() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("stop-children");
    let all = all_cpus_list();
    for (k, extra) in [&[][..], &["--no-connector"][..]].into_iter().enumerate() {
        let cue = ForksOnCue::new(&s, k);
        let mut run = s
            .run("amps", extra)
            .args(["--", "sh", "-c", &cue.script()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        s.doom(run.id());
        let pids = cue.fork_while_held(&s, run.id(), &all, &format!("{extra:?}"));
        let _ = run.wait().unwrap();
        for p in &pids[1..] {
            assert_eq!(
                mask_of(*p).as_deref(),
                Some(all.as_str()),
                "{extra:?}: pid {p} of {pids:?}"
            );
            kill(*p, libc::SIGKILL);
        }
    }
}

/// A shell that forks as fast as it can, each round a child and a double-forked grandchild
/// (`( sleep 30 & )`), every pid written to `pids` (its own first).
fn fork_storm_script(pids: &Path) -> String {
    let f = pids.display();
    format!(
        "echo $$ >> {f}; while :; do sleep 30 & echo $! >> {f}; ( sleep 30 & echo $! >> {f} ); done"
    )
}

/// After a fork storm: the shell is killed, and the pids in `pids` (the shell's descendants)
/// whose mask is not `all` are returned, each with its mask; every one is killed.
fn storm_left_pinned(s: &Scratch, pids: &Path, all: &str) -> Vec<(u32, String)> {
    let listed = tids(pids, 1);
    kill(listed[0], libc::SIGKILL);
    std::thread::sleep(Duration::from_millis(50));
    let pinned = listed[1..]
        .iter()
        .filter_map(|&p| mask_of(p).filter(|m| m != all).map(|m| (p, m)))
        .collect();
    for &p in &listed {
        s.doom(p);
        kill(p, libc::SIGKILL);
    }
    pinned
}

/// A stop signal in the middle of a fork storm (a child and a double-forked grandchild every
/// few milliseconds, hundreds while hetsched runs) leaves no process with a pin, under `run` and
/// under the daemon, with the connector and without. Before, 19 of 20 such stops of `run` left
/// some grandchildren pinned: those forked during the restore, those whose parent was placed
/// again before they were seen, and those a scan that ran ahead of their fork event took for
/// orphans outside the scope.
#[test]
fn a_stop_in_a_fork_storm_leaves_no_pin_behind() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("fork-storm");
    let shell = own_shell(&s, "hsstorm");
    let all = all_cpus_list();
    for (k, extra) in [&[][..], &["--no-connector"][..]].into_iter().enumerate() {
        for round in 0..2 {
            let pids = s.path(&format!("run-{k}-{round}"));
            let mut run = s
                .run("amps", extra)
                .args([
                    "--stop-grace",
                    "1",
                    "--",
                    "sh",
                    "-c",
                    &fork_storm_script(&pids),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            s.doom(run.id());
            std::thread::sleep(Duration::from_millis(600));
            kill(run.id(), libc::SIGTERM);
            let _ = run.wait().unwrap();
            let left = storm_left_pinned(&s, &pids, &all);
            assert!(left.is_empty(), "run {extra:?}: left pinned {left:?}");
        }
        let (mut daemon, _stats) = strict_amps_daemon(&s, k, "hsstorm", extra);
        s.doom(daemon.id());
        let pids = s.path(&format!("daemon-{k}"));
        let mut sh = Command::new(&shell)
            .args(["-c", &fork_storm_script(&pids)])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(600));
        kill(daemon.id(), libc::SIGTERM);
        assert!(daemon.wait().unwrap().success());
        let left = storm_left_pinned(&s, &pids, &all);
        let _ = sh.wait();
        assert!(left.is_empty(), "daemon {extra:?}: left pinned {left:?}");
    }
}

/// Under the daemon, with the connector and without, a managed shell's child (which matches no
/// rule) and its double-forked grandchild belong to the shell's rule, and both have their
/// original masks once the daemon stops, even when both were made just before the stop and the
/// daemon had not looked yet (it is held stopped while the shell forks them: what is pending
/// when the stop signal comes is caught up with before the restore).
#[test]
fn the_daemon_restores_the_children_of_managed_processes_in_both_tracking_modes() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("daemon-children");
    let shell = own_shell(&s, "hsdfsh");
    let all = all_cpus_list();
    for (k, extra) in [&[][..], &["--no-connector"][..]].into_iter().enumerate() {
        let (mut daemon, _stats) = strict_amps_daemon(&s, k, "hsdfsh", extra);
        s.doom(daemon.id());
        let cue = ForksOnCue::new(&s, k);
        let mut sh = Command::new(&shell)
            .args(["-c", &cue.script()])
            .spawn()
            .unwrap();
        let pids = cue.fork_while_held(&s, daemon.id(), &all, &format!("{extra:?}"));
        let status = daemon.wait().unwrap();
        let mut err = String::new();
        Read::read_to_string(&mut daemon.stderr.take().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{err}");
        for p in pids {
            assert_eq!(
                mask_of(p).as_deref(),
                Some(all.as_str()),
                "{extra:?}: pid {p} of {pids:?}\n{err}"
            );
        }
        for p in &pids[1..] {
            kill(*p, libc::SIGKILL);
        }
        let _ = sh.kill();
        let _ = sh.wait();
    }
}

/// A process that matches no rule and that no managed process made is never taken, even with a
/// mask a managed thread holds: a user's `taskset -c N job &`, double-forked in a process group
/// of its own while the daemon has a managed shell pinned to CPU N, keeps its mask while the
/// daemon runs and after it stops, with the connector and without (before, both modes took it
/// for the shell's orphaned grandchild, moved it and gave it every CPU at the end).
#[test]
fn the_daemon_never_takes_an_unrelated_process_with_a_managed_pin() {
    use std::os::unix::process::CommandExt;
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("daemon-stranger");
    let shell = own_shell(&s, "hsstsh");
    let all = all_cpus_list();
    for (k, extra) in [&[][..], &["--no-connector"][..]].into_iter().enumerate() {
        let (mut daemon, _) = strict_amps_daemon(&s, k, "hsstsh", extra);
        let shell_file = s.path(&format!("shell-{k}"));
        let mut sh = Command::new(&shell)
            .args([
                "-c",
                &format!("echo $$ > {}; sleep 30", shell_file.display()),
            ])
            .spawn()
            .unwrap();
        let shell_pid = pid_in(&shell_file);
        s.doom(shell_pid);
        assert!(
            wait_until(Duration::from_secs(5), || mask_of(shell_pid)
                .is_some_and(|m| m != all)),
            "{extra:?}: the managed shell was never pinned ({:?})",
            mask_of(shell_pid)
        );
        let pin = mask_of(shell_pid).unwrap();
        // The stranger: a process group of its own, its parent gone at once, the shell's pin.
        let stranger_file = s.path(&format!("stranger-{k}"));
        let status = Command::new("sh")
            .args([
                "-c",
                &format!(
                    "(taskset -c {pin} sleep 30 & echo $! > {})",
                    stranger_file.display()
                ),
            ])
            .process_group(0)
            .status()
            .unwrap();
        assert!(status.success());
        let stranger = pid_in(&stranger_file);
        s.doom(stranger);
        // Many intervals and scans of /proc, then the daemon stops and restores what it changed.
        std::thread::sleep(Duration::from_millis(800));
        let during = mask_of(stranger);
        kill(daemon.id(), libc::SIGTERM);
        let status = daemon.wait().unwrap();
        let mut err = String::new();
        Read::read_to_string(&mut daemon.stderr.take().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{err}");
        assert_eq!(
            during.as_deref(),
            Some(pin.as_str()),
            "{extra:?}: while running\n{err}"
        );
        assert_eq!(
            mask_of(stranger).as_deref(),
            Some(pin.as_str()),
            "{extra:?}: after the daemon\n{err}"
        );
        assert_eq!(
            mask_of(shell_pid).as_deref(),
            Some(all.as_str()),
            "{extra:?}\n{err}"
        );
        kill(stranger, libc::SIGKILL);
        let _ = sh.kill();
        let _ = sh.wait();
    }
}

/// The daemon's socket paths: a file that is not a socket is refused and kept (before, it was
/// deleted and replaced), a missing directory outside the state directory is not made, a socket
/// a running daemon answers on is refused by a second daemon over another state directory
/// (before, it took the first one's sockets), and a daemon that cannot start leaves no journal
/// and no socket behind.
#[test]
fn the_daemon_takes_only_free_socket_paths_and_a_failed_start_leaves_nothing() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("daemon-sockets");
    let config = |name: &str, hint: &Path, stats: &Path, extra: &str| {
        let p = s.path(name);
        std::fs::write(
            &p,
            format!(
                "{extra}hint_socket = \"{}\"\nstats_socket = \"{}\"\n[[rule]]\npolicy = \"amps\"\nmatch = {{ comm = \"no-such-program\" }}\n",
                hint.display(),
                stats.display()
            ),
        )
        .unwrap();
        p
    };
    let daemon = |config: &Path, state: &Path| {
        let mut c = s.hetsched();
        c.env("HETSCHED_STATE_DIR", state)
            .args(["daemon", "--config"])
            .arg(config)
            .arg("--machine")
            .arg(s.machine());
        c
    };
    let leftovers = |state: &Path| -> Vec<String> {
        let mut v = Vec::new();
        for e in walk(state) {
            let name = e.file_name().unwrap().to_string_lossy().to_string();
            if name != "daemon.lock" {
                v.push(e.display().to_string());
            }
        }
        v
    };
    // A regular file where a socket should be: refused, named, kept.
    let victim = s.path("notes.txt");
    std::fs::write(&victim, "important data").unwrap();
    let c = config("victim.toml", &victim, &s.path("s1.sock"), "");
    let state = s.path("state-victim");
    let out = daemon(&c, &state).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&victim.display().to_string()) && error_lines(&err) == 1,
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "important data");
    assert!(leftovers(&state).is_empty(), "{:?}", leftovers(&state));
    // A directory that does not exist, outside the state directory: not made.
    let c = config(
        "nodir.toml",
        &s.path("h.sock"),
        &s.path("no/such/dir/s.sock"),
        "",
    );
    let out = daemon(&c, &state).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no/such/dir"), "{err}");
    assert!(!s.path("no").exists() && !s.path("h.sock").exists());
    // A daemon running; a second over another state directory with the same sockets refuses
    // and the first keeps both.
    let (hint, stats) = (s.path("hint.sock"), s.path("stats.sock"));
    let c = config("a.toml", &hint, &stats, "");
    let mut first = daemon(&c, &s.path("state-a"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(5), || stats.exists() && hint.exists()));
    let out = daemon(&c, &s.path("state-b")).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("in use") && error_lines(&err) == 1, "{err}");
    assert!(hint.exists());
    let again = Command::new(HETSCHED)
        .args(["stats", "--json", "--socket"])
        .arg(&stats)
        .output()
        .unwrap();
    assert!(again.status.success(), "the first daemon stopped answering");
    assert!(leftovers(&s.path("state-b")).is_empty());
    kill(first.id(), libc::SIGTERM);
    assert!(first.wait().unwrap().success());
    assert!(!stats.exists() && !hint.exists());
    // A metrics port in use: exit 1, and no journal or socket is left.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let state = s.path("state-port");
    let c = config(
        "port.toml",
        &state.join("hint.sock"),
        &state.join("stats.sock"),
        &format!("metrics = \"127.0.0.1:{port}\"\n"),
    );
    let out = daemon(&c, &state).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("Address already in use"), "{err}");
    assert!(leftovers(&state).is_empty(), "{:?}", leftovers(&state));
    drop(busy);
}

/// Every file and directory under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// `emulate --period-us` has an upper bound (before, a period of 2^64 - 1 µs made a real-time
/// thread spin for good, deaf to SIGTERM).
#[test]
fn emulate_refuses_a_period_past_its_bound() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("emulate-period");
    for period in ["100001", "2000000", "18446744073709551615"] {
        let out = s
            .hetsched()
            .args([
                "emulate",
                "--slow",
                "1",
                "--duty",
                "0.5",
                "--period-us",
                period,
            ])
            .args(["--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{period}: {err}");
        assert!(
            err.contains("--period-us") && error_lines(&err) == 1,
            "{err}"
        );
    }
    // The longest period allowed still ends with its command at once.
    let t = Instant::now();
    let out = s
        .hetsched()
        .args([
            "emulate",
            "--slow",
            "1",
            "--duty",
            "0.5",
            "--period-us",
            "100000",
        ])
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

/// A relative `HETSCHED_STATE_DIR` is made absolute (the program gets an absolute hint socket,
/// which still works after it changes directory), and a state directory that is a file is an
/// error naming it.
#[test]
fn the_state_directory_is_absolute_and_named_when_unusable() {
    root_only!();
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = Scratch::new("state-dir");
    let out = Command::new(HETSCHED)
        .env("HETSCHED_STATE_DIR", "rel-state")
        .current_dir(&s.dir)
        .args(["run", "--", "sh", "-c", "echo $HETSCHED_HINT_SOCKET"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let socket = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        Path::new(&socket).is_absolute()
            && socket.starts_with(&s.dir.join("rel-state").display().to_string()),
        "{socket}"
    );
    let file = s.path("a-file");
    std::fs::write(&file, "").unwrap();
    for cmd in [
        &["run", "--", "true"][..],
        &["emulate", "--slow", "1", "--duty", "0.5", "--", "true"][..],
    ] {
        let out = Command::new(HETSCHED)
            .env("HETSCHED_STATE_DIR", &file)
            .args(cmd)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&file.display().to_string())
                && err.contains("state directory")
                && error_lines(&err) == 1,
            "{err}"
        );
    }
}
