//! `hetsched validate`: the simulator checked against this machine. A fixed set of
//! `hetsched-work` programs runs live, under the kernel alone and under policies, on the machine
//! as it is and with a CPU made slow by duty-cycle emulation; each program's simulated twin is
//! built from solo calibration runs on an unmodified CPU (measured, never fitted per case), the
//! same cases are simulated on a machine file of this machine (and of its emulated form), and
//! every case prints the measured time beside the predicted one.

use crate::bad_input;
use crate::provenance::Provenance;
use clap::Args;
use hetsched_core::policies::{linux_default, policy_with_options, PolicyOptions};
use hetsched_core::Topology;
use hetsched_sim::baseline::{baseline_by_name, linux_6};
use hetsched_sim::batch::{run_jobs, Job};
use hetsched_sim::{SimConfig, Workload};
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Short mode: smaller programs, fewer cases, one run each (what the test suite runs).
    #[arg(long)]
    pub quick: bool,
    /// Live runs per case, in rounds over all cases; the shortest is kept (the machine is shared
    /// and noisy).
    #[arg(long, default_value_t = 5)]
    pub runs: u32,
    /// The CPU made slow for the emulated cases.
    #[arg(long, default_value_t = 1)]
    pub slow: u32,
    /// Its duty cycle.
    #[arg(long, default_value_t = 0.5)]
    pub duty: f64,
    /// Simulated seeds per case; the prediction is their mean.
    #[arg(long, default_value_t = 10)]
    pub seeds: u64,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A prediction within this fraction of the measured time counts as right.
pub const GOAL: f64 = 0.10;

/// The policies every case runs under: the kernel alone, then each placement policy.
const POLICIES: [&str; 3] = [linux_default::NAME, "amps", "hetsched"];

/// One `hetsched-work` program of a case, and how its twin is built.
#[derive(Clone, Debug)]
enum Program {
    Int {
        threads: u32,
        work: u64,
    },
    Fp {
        threads: u32,
        work: u64,
    },
    Stream {
        threads: u32,
        mib: u64,
        passes: u32,
    },
    Omp {
        threads: u32,
        phases: u32,
        parallel: u64,
        serial: u64,
    },
    Phases {
        threads: u32,
        phases: u32,
        work: u64,
        mib: u64,
    },
}

impl Program {
    fn args(&self) -> Vec<String> {
        let s = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        match self {
            Program::Int { threads, work } => s(&[
                "int",
                "--threads",
                &threads.to_string(),
                "--work",
                &work.to_string(),
            ]),
            Program::Fp { threads, work } => s(&[
                "fp",
                "--threads",
                &threads.to_string(),
                "--work",
                &work.to_string(),
            ]),
            Program::Stream {
                threads,
                mib,
                passes,
            } => s(&[
                "stream",
                "--threads",
                &threads.to_string(),
                "--mib",
                &mib.to_string(),
                "--passes",
                &passes.to_string(),
            ]),
            Program::Omp {
                threads,
                phases,
                parallel,
                serial,
            } => s(&[
                "omp",
                "--threads",
                &threads.to_string(),
                "--phases",
                &phases.to_string(),
                "--parallel-work",
                &parallel.to_string(),
                "--serial-work",
                &serial.to_string(),
            ]),
            Program::Phases {
                threads,
                phases,
                work,
                mib,
            } => s(&[
                "phases",
                "--threads",
                &threads.to_string(),
                "--phases",
                &phases.to_string(),
                "--work",
                &work.to_string(),
                "--mib",
                &mib.to_string(),
            ]),
        }
    }
}

/// A case: programs started together; its time is the last one's.
struct Case {
    name: &'static str,
    programs: Vec<Program>,
}

/// Integer (or FP) units of a one-thread program at the quick size: about 0.17 s alone here.
const INT_UNITS: u64 = 60;
/// A streaming program's array, MiB (larger than this machine's last-level cache).
const STREAM_MIB: u64 = 32;
/// Its passes at the quick size: about as long alone as `INT_UNITS`, so that streaming cases are
/// not dominated by the array's first touch and timer noise.
const STREAM_PASSES: u64 = 32;

fn cases(quick: bool) -> Vec<Case> {
    // Full mode: about a second of solo work per program; quick mode: about a fifth.
    let k = if quick { 1 } else { 5 };
    let mut all = vec![
        Case {
            name: "int, 1 thread",
            programs: vec![Program::Int {
                threads: 1,
                work: INT_UNITS * k,
            }],
        },
        Case {
            name: "fp, 1 thread",
            programs: vec![Program::Fp {
                threads: 1,
                work: INT_UNITS * k,
            }],
        },
        Case {
            name: "stream, 1 thread",
            programs: vec![Program::Stream {
                threads: 1,
                mib: STREAM_MIB,
                passes: (STREAM_PASSES * k) as u32,
            }],
        },
        Case {
            name: "omp barrier job, 2 threads",
            programs: vec![Program::Omp {
                threads: 2,
                phases: 10,
                parallel: 4 * k,
                serial: k,
            }],
        },
        Case {
            name: "int + stream together",
            programs: vec![
                Program::Int {
                    threads: 1,
                    work: INT_UNITS * k,
                },
                Program::Stream {
                    threads: 1,
                    mib: STREAM_MIB,
                    passes: (STREAM_PASSES * k) as u32,
                },
            ],
        },
        Case {
            name: "int, 4 threads",
            programs: vec![Program::Int {
                threads: 4,
                work: INT_UNITS / 2 * k,
            }],
        },
        Case {
            name: "phase-changing, 1 thread",
            programs: vec![Program::Phases {
                threads: 1,
                phases: 4 * k as u32,
                work: 10,
                mib: 16,
            }],
        },
    ];
    if quick {
        all.truncate(4);
    }
    all
}

/// Solo times on an unmodified CPU, s: what every twin is built from.
#[derive(Clone, Copy, Debug, Default, Serialize)]
struct Calibration {
    int_unit_s: f64,
    fp_unit_s: f64,
    /// One pass over a MiB of a streaming array (allocation and first touch included).
    stream_mib_pass_s: f64,
}

/// The binaries beside this one.
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let p = me.with_file_name(name);
    if !p.exists() {
        anyhow::bail!(
            "{} not found beside {} (build it: cargo build --release -p hetsched-cli)",
            name,
            me.display()
        );
    }
    Ok(p)
}

/// The `wall_s` of every `hetsched-work` JSON line in `out`.
fn wall_times(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["wall_s"].as_f64())
        .collect()
}

/// Run `programs` together once (under `hetsched run --policy` unless the policy is the
/// kernel's): the case's time (its last program's), s.
fn measure_once(
    programs: &[Program],
    policy: &str,
    work_bin: &Path,
    me: &Path,
) -> anyhow::Result<f64> {
    let script = programs
        .iter()
        .map(|p| {
            let mut line = shell_quote(&work_bin.display().to_string());
            for a in p.args() {
                line.push(' ');
                line.push_str(&a);
            }
            line.push_str(" &");
            line
        })
        .collect::<Vec<_>>()
        .join(" ")
        + " wait";
    let mut cmd = if policy == linux_default::NAME {
        let mut c = Command::new("sh");
        c.args(["-c", &script]);
        c
    } else {
        let mut c = Command::new(me);
        c.args(["run", "--policy", policy, "--", "sh", "-c", &script]);
        c
    };
    let out = cmd.stderr(Stdio::null()).output()?;
    if !out.status.success() {
        anyhow::bail!("{policy}: {script}: exited with {}", out.status);
    }
    let times = wall_times(&String::from_utf8_lossy(&out.stdout));
    if times.len() != programs.len() {
        anyhow::bail!(
            "{policy}: {script}: {} of {} programs reported",
            times.len(),
            programs.len()
        );
    }
    Ok(times.iter().copied().fold(0.0, f64::max))
}

/// The shortest and the longest of a case's live runs, s.
#[derive(Clone, Copy, Debug)]
struct Timing {
    best: f64,
    worst: f64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            best: f64::INFINITY,
            worst: 0.0,
        }
    }
}

impl Timing {
    fn add(&mut self, t: f64) {
        self.best = self.best.min(t);
        self.worst = self.worst.max(t);
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The solo runs a calibration is made of, before any CPU is made slow, placed by the kernel as
/// the live cases are: the `hetsched-work` arguments of each and the units of work it does
/// (integer units, FP units, MiB passes), in `Calibration`'s order.
fn calibration_runs(quick: bool) -> [(Vec<String>, f64); 3] {
    let k = if quick { 1 } else { 5 };
    let (units, passes) = (INT_UNITS * k, STREAM_PASSES * k);
    let args = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    [
        (args(&["int", "--work", &units.to_string()]), units as f64),
        (args(&["fp", "--work", &units.to_string()]), units as f64),
        (
            args(&[
                "stream",
                "--mib",
                &STREAM_MIB.to_string(),
                "--passes",
                &passes.to_string(),
            ]),
            (STREAM_MIB * passes) as f64,
        ),
    ]
}

/// One solo run of `hetsched-work args`, s.
fn solo_once(work_bin: &Path, args: &[String]) -> anyhow::Result<f64> {
    let out = Command::new(work_bin)
        .args(args)
        .stderr(Stdio::null())
        .output()?;
    wall_times(&String::from_utf8_lossy(&out.stdout))
        .first()
        .copied()
        .ok_or_else(|| anyhow::anyhow!("calibration run {args:?} reported nothing"))
}

/// Seconds per unit of each kind of work from the shortest solo run of each.
fn calibration(quick: bool, best: &[Timing; 3]) -> Calibration {
    let runs = calibration_runs(quick);
    Calibration {
        int_unit_s: best[0].best / runs[0].1,
        fp_unit_s: best[1].best / runs[1].1,
        stream_mib_pass_s: best[2].best / runs[2].1,
    }
}

/// The twin of `programs` as a workload file: each program an app whose phases take, alone on
/// an unmodified core, the calibrated time (`rate` instructions per second at CPI 1).
fn twin_toml(programs: &[Program], cal: &Calibration, rate: f64) -> String {
    let ins = |s: f64| (s * rate).max(1.0);
    let mut t = String::from("name = \"validate twin\"\n");
    for (i, p) in programs.iter().enumerate() {
        let phase = |out: &mut String, seconds: f64, end: &str| {
            let _ = writeln!(
                out,
                "[[apps.threads.phases]]\ninstructions = {:.0}\ncpi = 1.0\n{end}",
                ins(seconds)
            );
        };
        let _ = writeln!(t, "\n[[apps]]\nname = \"p{i}\"");
        match p {
            Program::Int { threads, work } | Program::Fp { threads, work } => {
                let unit = if matches!(p, Program::Int { .. }) {
                    cal.int_unit_s
                } else {
                    cal.fp_unit_s
                };
                let _ = writeln!(t, "[[apps.threads]]\ncount = {threads}");
                phase(&mut t, unit * *work as f64, "");
            }
            Program::Stream {
                threads,
                mib,
                passes,
            } => {
                let _ = writeln!(t, "[[apps.threads]]\ncount = {threads}");
                phase(
                    &mut t,
                    cal.stream_mib_pass_s * (*mib * *passes as u64) as f64,
                    "",
                );
            }
            Program::Omp {
                threads,
                phases,
                parallel,
                serial,
            } => {
                // The master runs the sequential part between two barriers; the others wait.
                let _ = writeln!(t, "[[apps.threads]]\ncount = 1\nrepeat = {phases}");
                phase(&mut t, cal.int_unit_s * *parallel as f64, "barrier = true");
                phase(&mut t, cal.int_unit_s * *serial as f64, "barrier = true");
                if *threads > 1 {
                    let _ = writeln!(
                        t,
                        "[[apps.threads]]\ncount = {}\nrepeat = {phases}",
                        threads - 1
                    );
                    phase(&mut t, cal.int_unit_s * *parallel as f64, "barrier = true");
                    phase(&mut t, 1e-6, "barrier = true");
                }
            }
            Program::Phases {
                threads,
                phases,
                work,
                mib,
            } => {
                let _ = writeln!(t, "[[apps.threads]]\ncount = {threads}\nrepeat = {phases}");
                phase(&mut t, cal.int_unit_s * *work as f64, "");
                phase(&mut t, cal.stream_mib_pass_s * *mib as f64, "");
            }
        }
    }
    t
}

/// Instructions per simulated second at CPI 1 on the machine's fastest core, from a solo run.
fn instructions_per_second(topo: &Topology) -> anyhow::Result<f64> {
    let w = Workload::parse(
        "name = \"probe\"\n[[apps]]\nname = \"probe\"\n[[apps.threads]]\ncount = 1\n[[apps.threads.phases]]\ninstructions = 1e9\ncpi = 1.0\n",
        "probe",
        topo,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let r = simulate(topo, &w, linux_default::NAME, 1)?;
    Ok(1e9 / r)
}

/// Mean makespan over `seeds` of `policy` on the twin, s.
fn simulate(
    topo: &Topology,
    w: &Workload,
    policy: &'static str,
    seeds: u64,
) -> anyhow::Result<f64> {
    let baseline = baseline_by_name(linux_6::NAME).expect("registered");
    let jobs: Vec<Job<'_>> = (1..=seeds.max(1))
        .map(|seed| Job {
            topology: topo,
            workload: w,
            make_policy: Box::new(move || {
                policy_with_options(
                    policy,
                    &PolicyOptions {
                        seed,
                        ..Default::default()
                    },
                )
                .expect("registered")
            }),
            cfg: SimConfig {
                seed,
                baseline,
                duration_ns: 600_000_000_000,
                ..Default::default()
            },
            label: format!("{policy} seed {seed}"),
        })
        .collect();
    let runs = run_jobs(&jobs, &|_, _, _| {});
    Ok(runs.iter().map(|r| r.makespan_s).sum::<f64>() / runs.len().max(1) as f64)
}

/// One case under one policy on one machine state.
#[derive(Serialize)]
struct CaseJson {
    name: String,
    emulated: bool,
    policy: &'static str,
    measured_s: f64,
    predicted_s: f64,
    /// (predicted - measured) / measured.
    error: f64,
    within_goal: bool,
    /// The kernel-alone time over this policy's, measured and predicted (1 for the kernel).
    measured_speedup: f64,
    predicted_speedup: f64,
    /// The run-to-run spread of this case under the kernel alone (longest over shortest run, less
    /// 1, at least 2%): a measured speedup within it has no direction.
    noise: f64,
    /// Both speedups on the same side of 1, each within its noise counting as no change.
    direction_agrees: bool,
}

#[derive(Serialize)]
struct ValidateJson {
    #[serde(flatten)]
    provenance: Provenance,
    machine: String,
    slow_cpu: u32,
    duty: f64,
    runs: u32,
    seeds: u64,
    kernel_baseline: &'static str,
    goal: f64,
    calibration: Calibration,
    cases: Vec<CaseJson>,
    within_goal: usize,
    directions_agree: usize,
}

/// Speedups within this of 1 count as "no change" on both sides.
const NOISE: f64 = 0.02;

fn side(s: f64, noise: f64) -> i8 {
    if s > 1.0 + noise {
        1
    } else if s < 1.0 - noise {
        -1
    } else {
        0
    }
}

/// Most live runs per case (each round runs every case under every policy, seconds each).
pub const MAX_RUNS: u32 = 1000;

pub fn run_validate(args: &ValidateArgs) -> anyhow::Result<()> {
    if args.runs > MAX_RUNS {
        return Err(bad_input(format!(
            "--runs {}: at most {MAX_RUNS}",
            args.runs
        )));
    }
    if args.seeds > u64::from(crate::simulate::MAX_SEEDS) {
        return Err(bad_input(format!(
            "--seeds {}: at most {}",
            args.seeds,
            crate::simulate::MAX_SEEDS
        )));
    }
    if !(args.duty > 0.0 && args.duty < 1.0) {
        return Err(bad_input(format!(
            "--duty {}: must be in (0, 1)",
            args.duty
        )));
    }
    let d = hetsched_live::discover(Path::new("/"));
    let online: Vec<u32> = d.topology.cores().iter().map(|c| c.os_cpu).collect();
    if online.len() < 2 {
        return Err(bad_input(
            "validate needs at least 2 online CPUs".to_string(),
        ));
    }
    if !online.contains(&args.slow) {
        return Err(bad_input(format!(
            "--slow {}: not an online CPU (online: {online:?})",
            args.slow
        )));
    }
    let work_bin = sibling("hetsched-work")?;
    let me = std::env::current_exe()?;
    let runs = if args.quick { 1 } else { args.runs.max(1) };
    let cases = cases(args.quick);
    let state_name = |emulated: bool| if emulated { "emulated" } else { "as is" };
    // Live runs go in rounds: every case under every policy once a round (the calibration's solo
    // runs too, on the machine as it is), so that a spell of noise from the machine's other
    // tenants costs one run of many cases, not every run of one case.
    let live_rounds = |emulated: bool,
                       mut solo: Option<&mut [Timing; 3]>,
                       timings: &mut [Timing]|
     -> anyhow::Result<()> {
        for round in 1..=runs {
            if let Some(solo) = solo.as_deref_mut() {
                eprintln!(
                    "validate: round {round}/{runs} · calibration (solo runs, no CPU slowed)"
                );
                for (timing, (args, _)) in solo.iter_mut().zip(calibration_runs(args.quick)) {
                    timing.add(solo_once(&work_bin, &args)?);
                }
            }
            for (i, case) in cases.iter().enumerate() {
                for (j, policy) in POLICIES.iter().enumerate() {
                    eprintln!(
                        "validate: round {round}/{runs} · {} · {} · {policy}",
                        case.name,
                        state_name(emulated)
                    );
                    timings[i * POLICIES.len() + j].add(measure_once(
                        &case.programs,
                        policy,
                        &work_bin,
                        &me,
                    )?);
                }
            }
        }
        Ok(())
    };
    let mut solo = [Timing::default(); 3];
    let mut plain_timings = vec![Timing::default(); cases.len() * POLICIES.len()];
    live_rounds(false, Some(&mut solo), &mut plain_timings)?;
    let cal = calibration(args.quick, &solo);
    let plain = d.topology.clone();
    let emulated_text =
        hetsched_live::emulate::emulated_machine_toml(&d.topology, &[args.slow], args.duty);
    let emulated = hetsched_core::machine_file::parse_machine(&emulated_text, "emulated machine")
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut emulated_timings = vec![Timing::default(); cases.len() * POLICIES.len()];
    {
        // The emulation runs beside every live case of the emulated state.
        let mut child = Command::new(&me)
            .args([
                "emulate",
                "--slow",
                &args.slow.to_string(),
                "--duty",
                &args.duty.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        // Let it start its stealing threads and write the machine file `run` reads.
        std::thread::sleep(Duration::from_millis(500));
        let result = live_rounds(true, None, &mut emulated_timings);
        // SAFETY: kill sends a signal to our own child.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let _ = child.wait();
        result?;
    }
    eprintln!("validate: simulating the twins ...");
    let mut out = Vec::new();
    for (is_emulated, topo, timings) in [
        (false, &plain, &plain_timings),
        (true, &emulated, &emulated_timings),
    ] {
        let rate = instructions_per_second(topo)?;
        for (i, case) in cases.iter().enumerate() {
            let w = Workload::parse(&twin_toml(&case.programs, &cal, rate), "twin", topo)
                .map_err(|e| anyhow::anyhow!("twin of {}: {e}", case.name))?;
            let mut kernel = (0.0, 0.0);
            let mut noise = NOISE;
            for (j, &policy) in POLICIES.iter().enumerate() {
                let Timing {
                    best: measured,
                    worst: slowest,
                } = timings[i * POLICIES.len() + j];
                let predicted = simulate(topo, &w, policy, args.seeds)?;
                if policy == linux_default::NAME {
                    kernel = (measured, predicted);
                    noise = (slowest / measured - 1.0).max(NOISE);
                }
                let (ms, ps) = (kernel.0 / measured, kernel.1 / predicted);
                let error = (predicted - measured) / measured;
                out.push(CaseJson {
                    name: case.name.to_string(),
                    emulated: is_emulated,
                    policy,
                    measured_s: measured,
                    predicted_s: predicted,
                    error,
                    within_goal: error.abs() <= GOAL,
                    measured_speedup: ms,
                    predicted_speedup: ps,
                    noise,
                    direction_agrees: side(ms, noise) == side(ps, NOISE),
                });
            }
        }
    }
    let within = out.iter().filter(|c| c.within_goal).count();
    let agree = out.iter().filter(|c| c.direction_agrees).count();
    let doc = ValidateJson {
        provenance: Provenance::new([]),
        machine: d.topology.name().to_string(),
        slow_cpu: args.slow,
        duty: args.duty,
        runs,
        seeds: args.seeds,
        kernel_baseline: linux_6::NAME,
        goal: GOAL,
        calibration: cal,
        within_goal: within,
        directions_agree: agree,
        cases: out,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", table(&doc));
    }
    Ok(())
}

fn table(doc: &ValidateJson) -> String {
    let mut s = format!(
        "machine {} · CPU {} at duty {} when emulated · best of {} live runs · {} simulated seeds under {}\n",
        doc.machine, doc.slow_cpu, doc.duty, doc.runs, doc.seeds, doc.kernel_baseline
    );
    let _ = writeln!(
        s,
        "{:<28} {:<8} {:<14} {:>10} {:>11} {:>7} {:>9} {:>9}",
        "case", "machine", "policy", "measured_s", "predicted_s", "error", "speedup", "sim"
    );
    for c in &doc.cases {
        let _ = writeln!(
            s,
            "{:<28} {:<8} {:<14} {:>10.3} {:>11.3} {:>+6.1}% {:>9.3} {:>9.3}{}{}",
            c.name,
            if c.emulated { "emulated" } else { "as is" },
            c.policy,
            c.measured_s,
            c.predicted_s,
            c.error * 100.0,
            c.measured_speedup,
            c.predicted_speedup,
            if c.within_goal { "" } else { "  (outside 10%)" },
            if c.direction_agrees {
                ""
            } else {
                "  (speedup direction differs)"
            },
        );
    }
    let _ = writeln!(
        s,
        "{} of {} within {:.0}% of the measured time; speedup directions agree in {} of {}",
        doc.within_goal,
        doc.cases.len(),
        doc.goal * 100.0,
        doc.directions_agree,
        doc.cases.len()
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_twin_takes_the_calibrated_time_per_program() {
        let cal = Calibration {
            int_unit_s: 0.01,
            fp_unit_s: 0.02,
            stream_mib_pass_s: 0.001,
        };
        let t = twin_toml(
            &[Program::Int {
                threads: 2,
                work: 100,
            }],
            &cal,
            1e9,
        );
        // 100 units of 10 ms at 1e9 instructions per second: 1e9 instructions per thread.
        assert!(
            t.contains("count = 2") && t.contains("instructions = 1000000000"),
            "{t}"
        );
        let omp = twin_toml(
            &[Program::Omp {
                threads: 3,
                phases: 5,
                parallel: 4,
                serial: 1,
            }],
            &cal,
            1e9,
        );
        assert_eq!(omp.matches("barrier = true").count(), 4, "{omp}");
        assert!(omp.contains("count = 2\nrepeat = 5"), "{omp}");
    }

    #[test]
    fn speedups_within_noise_have_no_direction() {
        assert_eq!(side(1.01, NOISE), 0);
        assert_eq!(side(1.05, NOISE), 1);
        assert_eq!(side(1.05, 0.06), 0);
        assert_eq!(side(0.9, NOISE), -1);
    }
}
