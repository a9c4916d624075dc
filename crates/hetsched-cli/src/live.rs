//! The live commands: `run`, `emulate`, `daemon`, `stats`.

use crate::bad_input;
use crate::machine::resolve_machine;
use crate::provenance::{Input, Provenance, ProvenanceBesideCommand};
use clap::Args;
use hetsched_core::policies::{policy_names, policy_with_options, PolicyOptions};
use hetsched_core::Topology;
use hetsched_live::counters::CounterPlan;
use hetsched_live::daemon::{self, DaemonConfig, DaemonSetup, DaemonStats};
use hetsched_live::emulate::{self, DutyCycle};
use hetsched_live::engine::EngineConfig;
use hetsched_live::journal::state_dir;
use hetsched_live::procfs::Proc;
use hetsched_live::run::{self, RunReport, RunSetup};
use hetsched_live::signals::{self, Exit, Signals};
use hetsched_live::sys::{CpuMap, OsMask};
use hetsched_signature::store::Store;
use serde::Serialize;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Name of the emulated machine file in the state directory.
const EMULATED_FILE: &str = "emulated.toml";

/// The longest `--min-dwell`, ms: an hour, as for `--interval`.
const MAX_MIN_DWELL_MS: f64 = 3_600_000.0;

/// `run --json`: what produced it, then the run's report. The report's `command` is the program
/// run, so hetsched's own command line is `hetsched_command` here.
#[derive(Serialize)]
struct RunJson<'a> {
    #[serde(flatten)]
    provenance: ProvenanceBesideCommand,
    #[serde(flatten)]
    report: &'a RunReport,
}

/// `emulate --json`: what produced it, then what was emulated, for how long, and how the program
/// (if one was given) exited.
#[derive(Serialize)]
struct EmulateJson {
    #[serde(flatten)]
    provenance: Provenance,
    slow: Vec<u32>,
    duty: f64,
    period_us: u64,
    machine_file: String,
    wall_s: f64,
    exit_code: Option<i32>,
}

/// `daemon --json`: what produced it, then the daemon's final statistics.
#[derive(Serialize)]
struct DaemonJson {
    #[serde(flatten)]
    provenance: Provenance,
    #[serde(flatten)]
    stats: DaemonStats,
}

#[derive(Args, Debug, Default)]
pub struct RunArgs {
    /// Placement policy (see `hetsched simulate --help` for the list).
    #[arg(long, default_value = hetsched_core::policies::amps::NAME)]
    pub policy: String,
    /// Observation interval, ms.
    #[arg(long, default_value_t = 100.0)]
    pub interval: f64,
    /// Decide and log, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// A machine file or preset with this machine's core count (default: the machine `hetsched
    /// emulate` is making, else this machine from sysfs).
    #[arg(long)]
    pub machine: Option<String>,
    /// A thread moved less than this long ago stays, ms (0 to 1 h).
    #[arg(long, default_value_t = 200.0, allow_negative_numbers = true)]
    pub min_dwell: f64,
    /// Most threads moved per interval.
    #[arg(long, default_value_t = 16)]
    pub max_moves: usize,
    /// Poll /proc only; do not subscribe to the process events connector.
    #[arg(long)]
    pub no_connector: bool,
    /// Apply placements exactly; by default a thread placed on slower cores may also run on the
    /// faster cores of its node, so the kernel keeps them busy between intervals (docs/live.md).
    #[arg(long)]
    pub strict_placement: bool,
    /// A summary as one JSON document on stdout (the program's stdout goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// After a stop signal (SIGTERM, SIGINT...), wait this many seconds for the program to exit,
    /// then leave it running (affinities already restored) and exit 128 + the signal.
    #[arg(long, default_value_t = 10.0, allow_negative_numbers = true)]
    pub stop_grace: f64,
    /// The signature store: with a policy that places by signatures (hass, hetsched), each
    /// program of the tree is looked up there by its executable when it starts (default:
    /// $HETSCHED_STORE, else /var/lib/hetsched/signatures for root, else
    /// $XDG_DATA_HOME/hetsched/signatures; docs/signature-format.md).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// A signature file (TOML, JSON, `signature --json` output or a store entry) for the launched
    /// program, before any store entry.
    #[arg(long, value_name = "FILE")]
    pub signature: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct EmulateArgs {
    /// CPUs to make slow (kernel cpulist: `1`, `2-3`).
    #[arg(long)]
    pub slow: String,
    /// Fraction of each period the slow CPUs give to programs, in [0.05, 1).
    #[arg(long)]
    pub duty: f64,
    /// Modulation period, µs.
    #[arg(long, default_value_t = 1000)]
    pub period_us: u64,
    /// A summary as one JSON document on stdout (the program's stdout goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Run this program while the cores are slow, then stop (default: until SIGINT or SIGTERM).
    #[arg(last = true)]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// The configuration file (TOML: interval, sockets, metrics address, rules).
    #[arg(long)]
    pub config: PathBuf,
    /// A machine file or preset (default: as for `run`).
    #[arg(long)]
    pub machine: Option<String>,
    /// Poll /proc only.
    #[arg(long)]
    pub no_connector: bool,
    /// At the stop, the daemon's statistics as one JSON document on stdout (as `hetsched stats
    /// --json` gives them), instead of the one-line summary on stderr.
    #[arg(long)]
    pub json: bool,
    /// The signature store the rules running hass or hetsched look programs up in when they
    /// start (default: as for `run`).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The daemon's statistics socket.
    #[arg(long, default_value = daemon::DEFAULT_STATS_SOCKET)]
    pub socket: PathBuf,
    /// Print the JSON document as the daemon sent it.
    #[arg(long)]
    pub json: bool,
    /// Ask again every this many seconds until interrupted (with --json, one document a line).
    #[arg(long, value_name = "SECONDS")]
    pub watch: Option<f64>,
}

/// `hetsched doctor`.
#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// One JSON document: every check with `name`, `ok`, `detail` and `without`.
    #[arg(long)]
    pub json: bool,
}

pub fn run_doctor(args: &DoctorArgs) -> anyhow::Result<()> {
    let checks = hetsched_live::doctor::checks(Path::new("/"));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
        return Ok(());
    }
    println!("What this machine and these privileges give hetsched's live backend:");
    for c in &checks {
        println!(
            "  {:<8} {}: {}",
            if c.ok { "ok" } else { "missing" },
            c.name,
            c.detail
        );
        if !c.ok {
            println!("           without it: {}", c.without);
        }
    }
    Ok(())
}

/// The machine a live command manages, its CPU mapping, and what the kernel isolates.
fn live_machine(
    machine: Option<&str>,
) -> anyhow::Result<(Topology, CpuMap, hetsched_core::CpuSet)> {
    let d = hetsched_live::discover(Path::new("/"));
    let cpus = CpuMap::new(&d.topology);
    let topology = match machine {
        Some(m) => resolve_machine(m)?,
        None => match emulated_machine()? {
            Some(t) => t,
            None => {
                for w in &d.warnings {
                    tracing::info!("{w}");
                }
                d.topology.clone()
            }
        },
    };
    if topology.num_cores() != d.topology.num_cores() {
        return Err(bad_input(format!(
            "--machine {}: {} cores, but this machine has {} online CPUs",
            machine.unwrap_or("(emulated)"),
            topology.num_cores(),
            d.topology.num_cores()
        )));
    }
    Ok((topology, cpus, d.isolated))
}

/// The machine `hetsched emulate` is making now, if one runs.
fn emulated_machine() -> anyhow::Result<Option<Topology>> {
    let path = state_dir().join(EMULATED_FILE);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    let owner: Option<(u32, u64)> = text.lines().find_map(|l| {
        let rest = l.strip_prefix("# owner: ")?;
        let mut it = rest.split_whitespace();
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    });
    let alive = owner.is_some_and(|(pid, start)| {
        Proc::default()
            .process_stat(pid)
            .is_some_and(|s| s.start_ticks == start)
    });
    if !alive {
        let _ = std::fs::remove_file(&path);
        return Ok(None);
    }
    tracing::info!(
        "using the machine `hetsched emulate` is making ({})",
        path.display()
    );
    hetsched_core::machine_file::load_machine_file(&path)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The signature store `--store DIR` names, else the default one.
pub fn store_of(dir: Option<&Path>) -> Store {
    Store::new(dir.map_or_else(hetsched_signature::store::default_dir, Path::to_path_buf))
}

/// Whether `program` names an executable file, as `exec` would find it (a path, or a name looked
/// up in `PATH`): bad input naming it if not. The launch itself may still fail; this only puts
/// the common mistakes first.
fn startable(program: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let executable =
        |p: &Path| std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        return match executable(Path::new(program)) {
            Ok(true) => Ok(()),
            Ok(false) => Err(bad_input(format!(
                "cannot start {program:?}: not an executable file"
            ))),
            Err(e) => Err(bad_input(format!("cannot start {program:?}: {e}"))),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|d| executable(&d.join(program)).unwrap_or(false)) {
        Ok(())
    } else {
        Err(bad_input(format!(
            "cannot start {program:?}: no executable of that name in PATH"
        )))
    }
}

fn counter_plan() -> CounterPlan {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let plan = CounterPlan::probe(Path::new("/"), &cpuinfo);
    if !plan.has_hardware() {
        tracing::warn!(
            "no hardware performance counters here (a VM?): using {} and /proc",
            if plan.roles().is_empty() {
                "no perf events".to_string()
            } else {
                plan.roles()
                    .iter()
                    .map(|r| r.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
    plan
}

pub fn run_run(args: &RunArgs) -> anyhow::Result<u8> {
    let interval = hetsched_live::event_loop::interval_from_ms(args.interval)
        .map_err(|e| bad_input(format!("--interval {e}")))?;
    if !(args.min_dwell.is_finite() && (0.0..=MAX_MIN_DWELL_MS).contains(&args.min_dwell)) {
        return Err(bad_input(format!(
            "--min-dwell {}: must be between 0 and {MAX_MIN_DWELL_MS} ms (1 h)",
            args.min_dwell
        )));
    }
    let min_dwell = Duration::from_secs_f64(args.min_dwell / 1e3);
    let policy = policy_with_options(
        &args.policy,
        &PolicyOptions {
            interval_ns: None,
            ..Default::default()
        },
    )
    .ok_or_else(|| {
        bad_input(format!(
            "--policy {:?}: no such policy (policies: {})",
            args.policy,
            policy_names().collect::<Vec<_>>().join(", ")
        ))
    })?;
    if args.max_moves == 0 {
        return Err(bad_input("--max-moves 0: at least one move per interval"));
    }
    if !(args.stop_grace.is_finite() && (0.0..=3600.0).contains(&args.stop_grace)) {
        return Err(bad_input(format!(
            "--stop-grace {}: must be between 0 and 3600 s",
            args.stop_grace
        )));
    }
    let uses_signatures = policy
        .needs()
        .contains(&hetsched_core::policy::Signal::Signatures);
    if args.signature.is_some() && !uses_signatures {
        tracing::warn!(
            "--signature: policy {} does not place by signatures; the signature is not used",
            args.policy
        );
    }
    let signature = match &args.signature {
        Some(path) => Some(std::sync::Arc::new(
            hetsched_core::Signature::load(path)
                .map_err(|e| bad_input(format!("--signature {e}")))?,
        )),
        None => None,
    };
    // A program that cannot start is the one line the user sees, before any probe warns.
    if let Some(program) = args.command.first() {
        startable(program)?;
    }
    let (topology, cpus, isolated) = live_machine(args.machine.as_deref())?;
    // Taken before the run, so a machine file is hashed as it was used.
    let provenance = Provenance::new(args.machine.as_deref());
    let setup = RunSetup {
        topology,
        cpus,
        isolated,
        policy,
        plan: counter_plan(),
        engine: EngineConfig {
            interval,
            dry_run: args.dry_run,
            min_dwell,
            max_moves: args.max_moves,
            work_conserving: !args.strict_placement,
            ..Default::default()
        },
        state_dir: state_dir(),
        program_stdout_to_stderr: args.json,
        use_connector: !args.no_connector,
        stop_grace: Duration::from_secs_f64(args.stop_grace),
        store: Some(store_of(args.store.as_deref())),
        signature,
    };
    let report = run::run(&args.command, setup).map_err(|e| match e {
        run::RunError::Spawn { .. } => bad_input(e.to_string()),
        other => anyhow::anyhow!("{other}"),
    })?;
    if args.json {
        let doc = RunJson {
            provenance: provenance.into(),
            report: &report,
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_report(&report);
    }
    Ok(report.exit().shell_code().clamp(0, 255) as u8)
}

fn print_report(r: &RunReport) {
    let e = &r.engine;
    eprintln!(
        "hetsched run: {} on {}{}: {:.2} s, {} thread(s) seen ({} at most at once), {} placement(s) applied of {} asked ({} held by dwell, {} by the cap)",
        e.policy,
        r.machine,
        if e.dry_run { " (dry run)" } else { "" },
        r.wall_s,
        e.threads_seen,
        e.threads_peak,
        e.decisions.applied,
        e.decisions.placements,
        e.decisions.held_by_dwell,
        e.decisions.held_by_cap
    );
    let classes: Vec<String> = e
        .class_s
        .iter()
        .map(|(k, v)| format!("{k} {v:.2} s"))
        .collect();
    eprintln!("  CPU time by core class: {}", classes.join(", "));
    // The busiest process names (the JSON has every one, up to the engine's cap).
    for p in e.processes.iter().take(5) {
        eprintln!(
            "  {}: {} process(es), {} thread(s), {:.2} CPU s, {} placement(s)",
            p.name, p.processes, p.threads, p.cpu_s, p.placements_applied
        );
    }
    eprintln!(
        "  counters: {}{}",
        e.counters.join(", "),
        if e.hardware_counters {
            ""
        } else {
            " (no hardware counters)"
        }
    );
    eprintln!(
        "  hetsched's own CPU: {:.3} s ({:.2}% of one core); hints {} accepted, {} rejected, {} malformed, {} about threads already gone",
        r.overhead.daemon_cpu_s,
        r.overhead.fraction_of_one_core * 100.0,
        r.hints.accepted,
        r.hints.rejected,
        r.hints.malformed,
        r.hints.gone
    );
    if let Some(c) = &e.stored_signatures {
        eprintln!(
            "  signature store: {} program(s) looked up, {} with a signature, {} without, {} unusable",
            c.lookups, c.found, c.missing, c.rejected
        );
    }
    if let Some(why) = &e.policy_disabled {
        eprintln!("  policy disabled: {why}");
    }
}

pub fn run_emulate(args: &EmulateArgs) -> anyhow::Result<u8> {
    let slow_mask = OsMask::parse_list(&args.slow).ok_or_else(|| {
        bad_input(format!(
            "--slow {:?}: not a CPU list (like 1 or 2-3)",
            args.slow
        ))
    })?;
    let slow: Vec<u32> = slow_mask.cpus().collect();
    let d = hetsched_live::discover(Path::new("/"));
    let online: Vec<u32> = d.topology.cores().iter().map(|c| c.os_cpu).collect();
    emulate::check(&args.slow, &slow, args.duty, &online).map_err(|e| bad_input(e.to_string()))?;
    if !(emulate::MIN_PERIOD_US..=emulate::MAX_PERIOD_US).contains(&args.period_us) {
        return Err(bad_input(format!(
            "--period-us {}: must be between {} and {} (a longer period stalls the CPU instead of slowing it)",
            args.period_us,
            emulate::MIN_PERIOD_US,
            emulate::MAX_PERIOD_US
        )));
    }
    // One emulation per state directory, checked before anything is started or written.
    let dir = state_dir();
    let _lock = hetsched_live::instance::InstanceLock::acquire(&dir, "emulate")
        .map_err(|e| anyhow::anyhow!("emulate {e}"))?;
    // Signals first, while this is the only thread; the stealing threads inherit the mask.
    let signals = Signals::take()?;
    let mut dc = DutyCycle::start(&slow, args.duty, Duration::from_micros(args.period_us))?;
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(EMULATED_FILE);
    let me = std::process::id();
    let start_ticks = Proc::default()
        .process_stat(me)
        .map_or(0, |s| s.start_ticks);
    let text = format!(
        "# owner: {me} {start_ticks}\n{}",
        emulate::emulated_machine_toml(&d.topology, &slow, args.duty)
    );
    std::fs::write(&path, text)?;
    eprintln!(
        "hetsched emulate: CPUs {} at duty {} (period {} µs); machine file {}",
        slow_mask.to_list(),
        args.duty,
        args.period_us,
        path.display()
    );
    let start = Instant::now();
    let mut exit: Option<Exit> = None;
    let result = (|| -> anyhow::Result<()> {
        let child = if args.command.is_empty() {
            None
        } else {
            let mut cmd = std::process::Command::new(&args.command[0]);
            cmd.args(&args.command[1..]);
            if args.json {
                use std::os::fd::AsFd;
                if let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() {
                    cmd.stdout(std::process::Stdio::from(fd));
                }
            }
            // SAFETY: the closure only makes an async-signal-safe call.
            unsafe {
                cmd.pre_exec(signals::unblock_in_child);
            }
            Some(
                cmd.spawn()
                    .map_err(|e| bad_input(format!("cannot start {:?}: {e}", args.command[0])))?
                    .id(),
            )
        };
        loop {
            let ready = signals::wait_readable(
                &[std::os::fd::AsRawFd::as_raw_fd(&signals)],
                Duration::from_secs(3600),
            );
            if !ready[0] {
                continue;
            }
            for sig in signals.drain() {
                match (sig.signo, child) {
                    (libc::SIGCHLD, Some(pid)) => {
                        if let Some(e) = signals::reap(pid) {
                            exit = Some(e);
                        }
                    }
                    (libc::SIGCHLD, None) => {}
                    (s, Some(pid)) => {
                        if sig.from_process {
                            signals::send(pid, s);
                        }
                    }
                    (_, None) => return Ok(()),
                }
            }
            if exit.is_some() {
                return Ok(());
            }
        }
    })();
    dc.stop();
    let _ = std::fs::remove_file(&path);
    result?;
    if args.json {
        let doc = EmulateJson {
            provenance: Provenance::new([]),
            slow,
            duty: args.duty,
            period_us: args.period_us,
            machine_file: path.display().to_string(),
            wall_s: start.elapsed().as_secs_f64(),
            exit_code: exit.map(Exit::shell_code),
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(exit.map_or(0, |e| e.shell_code().clamp(0, 255) as u8))
}

pub fn run_daemon(args: &DaemonArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.config)
        .map_err(|e| bad_input(format!("--config {}: {e}", args.config.display())))?;
    let config = DaemonConfig::parse(&text, &args.config.display().to_string())
        .map_err(|e| bad_input(e.to_string()))?;
    let (topology, cpus, isolated) = live_machine(args.machine.as_deref())?;
    // The inputs: the configuration as read here, at the start (a reload on SIGHUP may read
    // another version later), and the machine, if one was named.
    let mut inputs = vec![Input::of_bytes(
        args.config.display().to_string(),
        text.as_bytes(),
    )];
    inputs.extend(args.machine.as_deref().map(Input::named));
    let provenance = Provenance::with_inputs(inputs);
    let setup = DaemonSetup {
        topology,
        cpus,
        isolated,
        plan: counter_plan(),
        state_dir: state_dir(),
        use_connector: !args.no_connector,
        config_path: Some(args.config.clone()),
        store: Some(store_of(args.store.as_deref())),
    };
    let stats = daemon::run_daemon(config, setup).map_err(|e| match e {
        daemon::DaemonError::Config(m) => bad_input(m),
        daemon::DaemonError::Io(e) => anyhow::anyhow!("{e}"),
    })?;
    if args.json {
        let doc = DaemonJson { provenance, stats };
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    eprintln!(
        "hetsched daemon: stopped after {:.1} s; own CPU {:.3} s ({:.2}% of one core)",
        stats.uptime_s,
        stats.daemon_cpu_s,
        stats.fraction_of_one_core * 100.0
    );
    Ok(())
}

pub fn run_stats(args: &StatsArgs) -> anyhow::Result<()> {
    let Some(every) = args.watch else {
        return print_stats(args);
    };
    if !(0.1..=3600.0).contains(&every) {
        return Err(bad_input(format!(
            "--watch {every}: must be 0.1 .. 3600 seconds"
        )));
    }
    loop {
        print_stats(args)?;
        if !args.json {
            println!();
        }
        std::io::Write::flush(&mut std::io::stdout())?;
        std::thread::sleep(Duration::from_secs_f64(every));
    }
}

fn print_stats(args: &StatsArgs) -> anyhow::Result<()> {
    let text = daemon::read_stats(&args.socket).map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            anyhow::anyhow!(
                "{}: permission denied (connecting to the daemon needs write access to its stats socket)",
                args.socket.display()
            )
        } else {
            anyhow::anyhow!("no daemon answers at {} ({e})", args.socket.display())
        }
    })?;
    if args.json {
        println!("{text}");
        return Ok(());
    }
    let v: serde_json::Value = serde_json::from_str(&text)?;
    println!(
        "up {:.1} s, own CPU {:.3} s ({:.2}% of one core), connector {}",
        v["uptime_s"].as_f64().unwrap_or(0.0),
        v["daemon_cpu_s"].as_f64().unwrap_or(0.0),
        v["fraction_of_one_core"].as_f64().unwrap_or(0.0) * 100.0,
        v["connector"]
    );
    println!(
        "hints: {} accepted, {} rejected, {} malformed, {} about threads already gone",
        v["hints"]["accepted"], v["hints"]["rejected"], v["hints"]["malformed"], v["hints"]["gone"]
    );
    for r in v["rules"].as_array().into_iter().flatten() {
        let classes: Vec<String> = r["classes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                format!(
                    "{}: {} thread(s), {:.2} CPU s",
                    c["class"].as_str().unwrap_or("?"),
                    c["threads"],
                    c["cpu_s"].as_f64().unwrap_or(0.0)
                )
            })
            .collect();
        println!(
            "{}: {} live thread(s), {} placement(s) applied; {}",
            r["policy"].as_str().unwrap_or("?"),
            r["threads_live"],
            r["decisions"]["applied"],
            classes.join("; ")
        );
    }
    Ok(())
}
