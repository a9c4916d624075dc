//! `hetsched run -- CMD`: launch a program, manage its process tree with one policy until the
//! program exits, restore everything, report.
//!
//! One thread does everything: it waits in `poll` on the signal descriptor, the process events
//! connector and the hint socket, and ticks the engine every interval. On SIGINT, SIGTERM, SIGHUP
//! or SIGQUIT it restores every affinity at once and stops managing; a signal sent by a process (not
//! a terminal's, which reached the program already) is passed on to the program; then it waits for
//! the program and exits with its status.

use crate::counters::CounterPlan;
use crate::engine::{Engine, EngineConfig, EngineSummary};
use crate::hints::{HintCounts, HintServer};
use crate::journal::{self, Journal, Restored};
use crate::procfs::Proc;
use crate::signals::{self, Exit, Signals};
use crate::sys::{self, CpuMap};
use crate::tracker::{Changes, Scope, Tracker};
use hetsched_core::policy::Policy;
use hetsched_core::{CpuSet, Topology};
use serde::Serialize;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Everything a run needs besides the command.
pub struct RunSetup {
    pub topology: Topology,
    pub cpus: CpuMap,
    pub isolated: CpuSet,
    pub policy: Box<dyn Policy>,
    pub plan: CounterPlan,
    pub engine: EngineConfig,
    pub state_dir: PathBuf,
    /// Send the program's stdout to our stderr (when our stdout carries `--json`).
    pub program_stdout_to_stderr: bool,
    /// Subscribe to the process events connector (else poll /proc only).
    pub use_connector: bool,
}

/// Tracking figures.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct TrackingSummary {
    pub connector: bool,
    pub events: u64,
    pub events_lost: u64,
    pub scans: u64,
}

/// What the backend cost.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Overhead {
    /// CPU time of hetsched itself (all its threads, not the program's), s.
    pub daemon_cpu_s: f64,
    /// `daemon_cpu_s / wall_s`: the fraction of one core.
    pub fraction_of_one_core: f64,
    pub intervals: u64,
    pub threads_peak: usize,
    /// The same over the part of the run after the last thread appeared: the steady cost of
    /// watching, without the one-time cost of opening counters for new threads.
    pub steady_cpu_s: f64,
    pub steady_wall_s: f64,
    pub steady_fraction_of_one_core: f64,
}

/// The report of a run.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub wall_s: f64,
    pub interval_ms: f64,
    pub machine: String,
    #[serde(flatten)]
    pub engine: EngineSummary,
    pub tracking: TrackingSummary,
    pub hint_socket: String,
    pub hints: HintCounts,
    /// Journals of earlier, crashed runs restored at start.
    pub recovered: Restored,
    /// The signal that made hetsched stop managing, if any.
    pub stopped_by_signal: Option<i32>,
    pub overhead: Overhead,
}

impl RunReport {
    pub fn exit(&self) -> Exit {
        match (self.exit_code, self.exit_signal) {
            (_, Some(s)) => Exit::Signal(s),
            (Some(c), None) => Exit::Code(c),
            (None, None) => Exit::Code(1),
        }
    }
}

static PANIC_JOURNAL: OnceLock<PathBuf> = OnceLock::new();

/// Restore from the journal at `path` if this process panics, whatever the panic.
pub fn restore_on_panic(path: PathBuf) {
    if PANIC_JOURNAL.set(path).is_err() {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(p) = PANIC_JOURNAL.get() {
            journal::restore_from_file(p, &Proc::default());
        }
        previous(info);
    }));
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start {program:?}: {source}")]
    Spawn { program: String, source: io::Error },
    #[error("{what}: {source}")]
    Setup { what: String, source: io::Error },
}

fn setup(what: &str) -> impl FnOnce(io::Error) -> RunError + '_ {
    move |source| RunError::Setup {
        what: what.into(),
        source,
    }
}

/// Launch `command` and manage it until it exits. Call from the process's only thread.
pub fn run(command: &[String], s: RunSetup) -> Result<RunReport, RunError> {
    let proc = Proc::default();
    let recovered = journal::recover_stale(&s.state_dir, &proc);
    if recovered.restored > 0 {
        tracing::warn!(
            "restored {} thread(s) left pinned by an earlier hetsched that did not stop cleanly",
            recovered.restored
        );
    }
    let signals = Signals::take().map_err(setup("signalfd"))?;
    signals::become_subreaper();
    sys::raise_fd_limit();
    let journal = if s.engine.dry_run {
        None
    } else {
        let j = Journal::create(&s.state_dir).map_err(setup("affinity journal"))?;
        restore_on_panic(j.path().to_path_buf());
        Some(j)
    };
    let hint_path = s
        .state_dir
        .join(format!("hint-{}.sock", std::process::id()));
    let mut hints = HintServer::bind(&hint_path).map_err(setup("hint socket"))?;
    let machine = s.topology.name().to_string();
    let interval = s.engine.interval;
    let mut engine = Engine::new(
        s.topology,
        s.cpus,
        &s.isolated,
        s.policy,
        s.plan,
        s.engine,
        journal,
    );
    for n in engine.take_notices() {
        tracing::warn!("{n}");
    }

    let cpu0 = sys::process_cpu_s();
    let start = Instant::now();
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .env(hetsched_hint::SOCKET_ENV, &hint_path);
    if s.program_stdout_to_stderr {
        use std::os::fd::AsFd;
        if let Ok(fd) = io::stderr().as_fd().try_clone_to_owned() {
            cmd.stdout(Stdio::from(fd));
        }
    }
    // SAFETY: the closure only makes an async-signal-safe call.
    unsafe {
        cmd.pre_exec(signals::unblock_in_child);
    }
    let child = cmd.spawn().map_err(|source| RunError::Spawn {
        program: command[0].clone(),
        source,
    })?;
    let root = child.id();
    let mut tracker = Tracker::new(proc.clone(), Scope::Tree { root }, s.use_connector);
    let mut changes = Changes::default();
    let mut received = Vec::new();
    let mut exit: Option<Exit> = None;
    let mut stopped_by: Option<i32> = None;
    let mut summary: Option<EngineSummary> = None;
    let mut next_tick = start;
    let mut intervals = 0u64;
    let mut threads_peak = 0usize;

    // CPU time and instant of the last thread start.
    let mut last_start = (cpu0, start);
    let mut apply = |changes: &mut Changes, engine: &mut Engine| {
        for tid in changes.exited.drain(..) {
            engine.remove(tid);
        }
        if !changes.started.is_empty() {
            changes.sort();
            for f in changes.started.drain(..) {
                engine.add(f);
            }
            engine.sync_journal();
            last_start = (sys::process_cpu_s(), Instant::now());
        }
    };

    while exit.is_none() {
        let now = Instant::now();
        let timeout = next_tick.saturating_duration_since(now);
        let mut fds = vec![std::os::fd::AsRawFd::as_raw_fd(&signals), hints.raw_fd()];
        if let Some(fd) = tracker.event_fd() {
            fds.push(fd);
        }
        let ready = signals::wait_readable(&fds, timeout);
        if ready[0] {
            for sig in signals.drain() {
                if sig.signo == libc::SIGCHLD {
                    if let Some(e) = signals::reap(root) {
                        exit = Some(e);
                    }
                    continue;
                }
                if summary.is_none() {
                    stopped_by = Some(sig.signo);
                    tracing::warn!(
                        "signal {}: restoring affinities, no longer managing",
                        sig.signo
                    );
                    summary = Some(engine.finish());
                }
                if sig.from_process {
                    signals::send(root, sig.signo);
                }
            }
        }
        if summary.is_some() {
            // Stopped managing: only wait for the program.
            next_tick = Instant::now() + Duration::from_secs(3600);
            continue;
        }
        let mut full_scan = false;
        if ready.get(2).copied().unwrap_or(false) {
            full_scan = tracker.take_events(&mut changes);
            apply(&mut changes, &mut engine);
        }
        if ready[1] {
            hints.drain_tracked(
                &mut tracker,
                |t| engine.manages(t),
                &mut changes,
                &mut received,
            );
            apply(&mut changes, &mut engine);
            for r in &received {
                engine.hint(r.tid, &r.hint);
            }
        }
        let due = Instant::now() >= next_tick;
        if full_scan {
            tracker.scan(&mut changes);
            apply(&mut changes, &mut engine);
        }
        if due {
            tracker.periodic(&mut changes);
            apply(&mut changes, &mut engine);
        }
        if due && exit.is_none() {
            threads_peak = threads_peak.max(engine.live_threads());
            engine.tick(start.elapsed().as_nanos() as u64);
            for n in engine.take_notices() {
                tracing::warn!("{n}");
            }
            intervals += 1;
            next_tick += interval;
            if next_tick < Instant::now() {
                next_tick = Instant::now() + interval;
            }
        }
    }
    let engine_summary = match summary {
        Some(s) => s,
        None => engine.finish(),
    };
    let wall_s = start.elapsed().as_secs_f64();
    let cpu_now = sys::process_cpu_s();
    let cpu = cpu_now - cpu0;
    let steady_cpu_s = cpu_now - last_start.0;
    let steady_wall_s = last_start.1.elapsed().as_secs_f64();
    let exit = exit.unwrap_or(Exit::Code(1));
    Ok(RunReport {
        command: command.to_vec(),
        exit_code: match exit {
            Exit::Code(c) => Some(c),
            Exit::Signal(_) => None,
        },
        exit_signal: match exit {
            Exit::Signal(s) => Some(s),
            Exit::Code(_) => None,
        },
        wall_s,
        interval_ms: interval.as_secs_f64() * 1e3,
        machine,
        engine: engine_summary,
        tracking: TrackingSummary {
            connector: tracker.uses_connector(),
            events: tracker.events_seen,
            events_lost: tracker.events_lost,
            scans: tracker.scans,
        },
        hint_socket: hints.path().display().to_string(),
        hints: hints.counts,
        recovered,
        stopped_by_signal: stopped_by,
        overhead: Overhead {
            daemon_cpu_s: cpu,
            fraction_of_one_core: if wall_s > 0.0 { cpu / wall_s } else { 0.0 },
            intervals,
            threads_peak,
            steady_cpu_s,
            steady_wall_s,
            steady_fraction_of_one_core: if steady_wall_s > 0.0 {
                steady_cpu_s / steady_wall_s
            } else {
                0.0
            },
        },
    })
}
