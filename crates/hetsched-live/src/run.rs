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
use crate::event_loop::{EventLoop, Source};
use crate::hints::{HintCounts, HintServer, Received};
use crate::journal::{self, Journal, Restored};
use crate::procfs::Proc;
use crate::signals::{self, Exit, Signals};
use crate::stored::StoredSignatures;
use crate::sys::{self, CpuMap};
use crate::tracker::{Changes, Scope, Tracker};
use hetsched_core::policy::Policy;
use hetsched_core::{CpuSet, Topology};
use serde::Serialize;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
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
    /// How long to wait for the program after a stop signal before leaving it running.
    pub stop_grace: Duration,
    /// The signature store programs' signatures are looked up in when they start (for a policy
    /// that places by signatures).
    pub store: Option<hetsched_signature::store::Store>,
    /// The signature of the launched program (`--signature FILE`), before any store entry.
    pub signature: Option<std::sync::Arc<hetsched_core::Signature>>,
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
    /// hetsched's own peak resident memory, kB (the program's is not in it).
    pub peak_rss_kb: u64,
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
    /// The program was still running the grace period after that signal and was left running.
    pub detached: bool,
    pub overhead: Overhead,
}

impl RunReport {
    /// How hetsched should exit: as the program did; 128 + the stop signal when it left the
    /// program running.
    pub fn exit(&self) -> Exit {
        if let (true, Some(sig)) = (self.detached, self.stopped_by_signal) {
            return Exit::Code(128 + sig);
        }
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
    /// The state directory cannot be used (the error names it).
    #[error("{0}")]
    State(io::Error),
}

fn setup(what: &str) -> impl FnOnce(io::Error) -> RunError + '_ {
    move |source| RunError::Setup {
        what: what.into(),
        source,
    }
}

/// How long `run` waits for the program after a stop signal before it leaves it running, by
/// default.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// Launch `command` and manage it until it exits. Call from the process's only thread.
pub fn run(command: &[String], s: RunSetup) -> Result<RunReport, RunError> {
    let proc = Proc::default();
    journal::ensure_state_dir(&s.state_dir).map_err(RunError::State)?;
    // Every journal under the state directory, the daemon's rule engines' too (logged there).
    let recovered = journal::recover_stale(&s.state_dir, &proc);
    let signals = Signals::take().map_err(setup("signalfd"))?;
    signals::become_subreaper();
    sys::raise_fd_limit();
    sys::tune_allocator();
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
    let hints = crate::socket_file::prepare(&hint_path, &s.state_dir)
        .map_err(io::Error::from)
        .and_then(|()| HintServer::bind(&hint_path))
        .map_err(setup("hint socket"));
    let hints = match hints {
        Ok(h) => h,
        Err(e) => {
            // Nothing was placed; this removes the journal.
            if let Some(mut j) = journal {
                j.restore_all(&proc);
            }
            return Err(e);
        }
    };
    let machine = s.topology.name().to_string();
    let mut engine = Engine::new(
        s.topology,
        s.cpus,
        &s.isolated,
        s.policy,
        s.plan,
        s.engine.clone(),
        journal,
    );
    for n in engine.take_notices() {
        tracing::warn!("{n}");
    }
    let cpu0 = sys::process_cpu_s();
    let mut events = EventLoop::new(s.engine.interval);
    let root = match spawn(command, &hint_path, s.program_stdout_to_stderr) {
        Ok(pid) => pid,
        Err(e) => {
            // Nothing was placed; this removes the journal, so no empty one is left behind.
            engine.restore_all();
            return Err(e);
        }
    };
    // Before the tracker reports the program's first thread.
    engine.set_stored_signatures(StoredSignatures::new(
        s.store,
        s.signature.map(|sig| (root, sig)),
        proc.clone(),
    ));
    let mut session = Session {
        tracker: Tracker::new(proc.clone(), Scope::Tree { root }, s.use_connector),
        engine,
        hints,
        root,
        changes: Changes::default(),
        received: Vec::new(),
        exit: None,
        stopped_by: None,
        summary: None,
        detached: false,
        intervals: 0,
        threads_peak: 0,
        last_start: (cpu0, events.start()),
    };
    events.set(
        Source::Signals,
        Some(std::os::fd::AsRawFd::as_raw_fd(&signals)),
    );
    events.set(Source::Hints, Some(session.hints.raw_fd()));
    let grace = s.stop_grace;
    let mut stopped_at: Option<Instant> = None;
    while session.exit.is_none() {
        if session.summary.is_none() {
            events.set(Source::ProcessEvents, session.tracker.event_fd());
        }
        let ready = events.wait();
        if ready.has(Source::Signals) {
            session.on_signals(&signals);
        }
        if session.summary.is_some() {
            // Stopped managing: wait for the program on the signals alone (nothing else is read
            // any more, so nothing else may wake the loop), for at most the grace period.
            let since = *stopped_at.get_or_insert_with(|| {
                events.set(Source::ProcessEvents, None);
                events.set(Source::Hints, None);
                let now = Instant::now();
                events.wake_at(now + grace);
                now
            });
            if session.exit.is_none() && since.elapsed() >= grace {
                tracing::warn!(
                    "the program is still running {:.1} s after the stop signal; leaving it (affinities restored)",
                    grace.as_secs_f64()
                );
                session.detached = true;
                break;
            }
            continue;
        }
        let mut full_scan = false;
        if ready.has(Source::ProcessEvents) {
            full_scan = session.tracker.take_events(&mut session.changes);
            session.apply_changes();
        }
        if ready.has(Source::Hints) {
            session.on_hints();
        }
        let due = events.tick_due();
        if full_scan {
            session.tracker.scan(&mut session.changes);
            session.apply_changes();
        }
        if due {
            session.tracker.periodic(&mut session.changes);
            session.apply_changes();
        }
        if due && session.exit.is_none() {
            session.on_tick(events.elapsed_ns());
            events.ticked();
        }
    }
    Ok(session.report(command, machine, recovered, cpu0, &events))
}

/// Start the program with the hint socket in its environment and the signals it should see
/// unblocked; its pid.
fn spawn(command: &[String], hint_path: &Path, stdout_to_stderr: bool) -> Result<u32, RunError> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .env(hetsched_hint::SOCKET_ENV, hint_path);
    if stdout_to_stderr {
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
    Ok(child.id())
}

/// What `run` tracks while it manages the program.
struct Session {
    engine: Engine,
    tracker: Tracker,
    hints: HintServer,
    /// The program's pid.
    root: u32,
    changes: Changes,
    received: Vec<Received>,
    exit: Option<Exit>,
    stopped_by: Option<i32>,
    /// Set when a signal stopped the management (affinities restored then).
    summary: Option<EngineSummary>,
    /// The program outlived the grace period after a stop signal and was left running.
    detached: bool,
    intervals: u64,
    threads_peak: usize,
    /// CPU time and instant of the last thread start.
    last_start: (f64, Instant),
}

impl Session {
    /// Threads that exited leave the engine, new ones join it.
    fn apply_changes(&mut self) {
        for tid in self.changes.exited.drain(..) {
            self.engine.remove(tid);
        }
        for pid in self.changes.renamed.drain(..) {
            self.engine.process_renamed(pid);
        }
        if !self.changes.started.is_empty() {
            self.changes.sort();
            self.engine.reserve(self.changes.started.len());
            for f in self.changes.started.drain(..) {
                self.engine.add(f);
            }
            self.engine.sync_journal();
            self.last_start = (sys::process_cpu_s(), Instant::now());
        }
    }

    /// Give every affinity back: first catch up with what happened since the last look (a child
    /// forked a moment ago carries its creator's pin), then restore, then give back the masks of
    /// threads made in between by managed threads before their own restore.
    fn finish(&mut self) -> EngineSummary {
        self.tracker.catch_up(&mut self.changes);
        self.apply_changes();
        let mut summary = self.engine.finish();
        let engine = &mut self.engine;
        self.tracker.late_starts(&mut self.changes, |f| {
            if engine.restore_late(&f) {
                summary.restore.restored += 1;
            }
        });
        summary
    }

    /// SIGCHLD reaps the program; a stop signal restores every affinity at once and stops
    /// managing, and one sent by a process is passed on to the program.
    fn on_signals(&mut self, signals: &Signals) {
        for sig in signals.drain() {
            if sig.signo == libc::SIGCHLD {
                if let Some(e) = signals::reap(self.root) {
                    self.exit = Some(e);
                }
                continue;
            }
            if self.summary.is_none() {
                self.stopped_by = Some(sig.signo);
                tracing::warn!(
                    "signal {}: restoring affinities, no longer managing",
                    sig.signo
                );
                self.summary = Some(self.finish());
            }
            if sig.from_process {
                signals::send(self.root, sig.signo);
            }
        }
    }

    /// Hints from the program's threads (a sender not yet tracked is looked up first).
    fn on_hints(&mut self) {
        let engine = &self.engine;
        self.hints.drain_tracked(
            &mut self.tracker,
            |t| engine.manages(t),
            &mut self.changes,
            &mut self.received,
        );
        self.apply_changes();
        for r in &self.received {
            self.engine.hint(r.tid, &r.hint);
        }
    }

    /// One interval: the policy sees the threads and places them.
    fn on_tick(&mut self, now_ns: u64) {
        self.threads_peak = self.threads_peak.max(self.engine.live_threads());
        self.engine.tick(now_ns);
        for n in self.engine.take_notices() {
            tracing::warn!("{n}");
        }
        self.intervals += 1;
    }

    /// The report, once the program has exited.
    fn report(
        mut self,
        command: &[String],
        machine: String,
        recovered: Restored,
        cpu0: f64,
        events: &EventLoop,
    ) -> RunReport {
        let engine_summary = match self.summary.take() {
            Some(s) => s,
            None => self.finish(),
        };
        let wall_s = events.start().elapsed().as_secs_f64();
        let cpu_now = sys::process_cpu_s();
        let cpu = cpu_now - cpu0;
        let steady_cpu_s = cpu_now - self.last_start.0;
        let steady_wall_s = self.last_start.1.elapsed().as_secs_f64();
        // A program left running (detached) has no exit status yet: neither field is set.
        let exit = self.exit;
        RunReport {
            command: command.to_vec(),
            exit_code: match exit {
                Some(Exit::Code(c)) => Some(c),
                _ => None,
            },
            exit_signal: match exit {
                Some(Exit::Signal(s)) => Some(s),
                _ => None,
            },
            wall_s,
            interval_ms: events.interval().as_secs_f64() * 1e3,
            machine,
            engine: engine_summary,
            tracking: TrackingSummary {
                connector: self.tracker.uses_connector(),
                events: self.tracker.events_seen,
                events_lost: self.tracker.events_lost,
                scans: self.tracker.scans,
            },
            hint_socket: self.hints.path().display().to_string(),
            hints: self.hints.counts,
            recovered,
            stopped_by_signal: self.stopped_by,
            detached: self.detached,
            overhead: Overhead {
                daemon_cpu_s: cpu,
                fraction_of_one_core: if wall_s > 0.0 { cpu / wall_s } else { 0.0 },
                intervals: self.intervals,
                threads_peak: self.engine.threads_peak(),
                steady_cpu_s,
                steady_wall_s,
                steady_fraction_of_one_core: if steady_wall_s > 0.0 {
                    steady_cpu_s / steady_wall_s
                } else {
                    0.0
                },
                peak_rss_kb: sys::process_memory_kb().1,
            },
        }
    }
}
