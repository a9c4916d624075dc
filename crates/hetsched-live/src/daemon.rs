//! `hetsched daemon --config FILE`: manage the processes that match configured rules, each rule
//! with its own policy, until SIGTERM or SIGINT; serve statistics as JSON on a local socket and,
//! when configured, OpenMetrics on a loopback port (per policy and core class, never a series per
//! thread).
//!
//! ```toml
//! interval_ms = 100                         # observation interval
//! hint_socket = "/run/hetsched/hint.sock"   # default
//! stats_socket = "/run/hetsched/stats.sock" # default
//! metrics = "127.0.0.1:9464"                # optional; loopback addresses only
//! dry_run = false
//! strict_placement = false                 # true: no upward widening
//!
//! [[rule]]
//! policy = "amps"
//! match = { comm = "ffmpeg" }               # comm, exe, cgroup (prefix), uid; all given must hold
//! ```

use crate::counters::CounterPlan;
use crate::engine::{Engine, EngineConfig};
use crate::event_loop::{interval_from_ms, EventLoop, Source};
use crate::hints::{HintServer, Received};
use crate::instance::InstanceLock;
use crate::journal::{self, Journal};
use crate::procfs::Proc;
use crate::run::restore_on_panic;
use crate::signals::{self, Signals};
use crate::socket_file::{self, BoundSocket};
use crate::sys::{self, CpuMap};
use crate::tracker::{Changes, Match, Scope, Tracker};
use hetsched_core::policies::{policy_names, policy_with_options, PolicyOptions};
use hetsched_core::{CpuSet, InputError, Topology};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Default location of the daemon's hint socket.
pub const DEFAULT_HINT_SOCKET: &str = "/run/hetsched/hint.sock";
/// Default location of the daemon's statistics socket.
pub const DEFAULT_STATS_SOCKET: &str = "/run/hetsched/stats.sock";

fn default_interval() -> u64 {
    100
}

/// One rule: processes matching `match` run under `policy`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub policy: String,
    #[serde(rename = "match")]
    #[serde(skip_serializing)]
    pub matcher: Match,
}

/// The daemon's configuration file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    #[serde(default = "default_interval")]
    pub interval_ms: u64,
    pub hint_socket: Option<PathBuf>,
    pub stats_socket: Option<PathBuf>,
    pub metrics: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
    /// Apply placements exactly (no upward widening; see [`crate::engine::widen_upward`]).
    #[serde(default)]
    pub strict_placement: bool,
    #[serde(rename = "rule", default)]
    pub rules: Vec<Rule>,
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl DaemonConfig {
    /// Parse and check a configuration; errors name the file and the field.
    pub fn parse(text: &str, source: &str) -> Result<DaemonConfig, ConfigError> {
        let c: DaemonConfig = toml::from_str(text)
            .map_err(|e| ConfigError(InputError::from_toml(source, text, &e).to_string()))?;
        if c.rules.is_empty() {
            return Err(ConfigError(format!(
                "{source}: no [[rule]]: nothing to manage"
            )));
        }
        if let Err(e) = interval_from_ms(c.interval_ms as f64) {
            return Err(ConfigError(format!("{source}: interval_ms: {e}")));
        }
        for (i, r) in c.rules.iter().enumerate() {
            if policy_with_options(&r.policy, &PolicyOptions::default()).is_none() {
                return Err(ConfigError(format!(
                    "{source}: rule {}: unknown policy {:?} (policies: {})",
                    i + 1,
                    r.policy,
                    policy_names().collect::<Vec<_>>().join(", ")
                )));
            }
            if r.matcher.is_empty() {
                return Err(ConfigError(format!(
                    "{source}: rule {}: an empty match would manage every process; give comm, exe, cgroup or uid",
                    i + 1
                )));
            }
        }
        let (hint, stats) = (c.hint_path(), c.stats_path());
        if hint == stats {
            let line = text
                .lines()
                .position(|l| {
                    let l = l.trim_start();
                    l.starts_with("stats_socket") || l.starts_with("hint_socket")
                })
                .map_or(String::new(), |i| format!("line {}: ", i + 1));
            return Err(ConfigError(format!(
                "{source}: {line}hint_socket and stats_socket are both {}; each needs a path of its own",
                hint.display()
            )));
        }
        if let Some(m) = &c.metrics {
            let addr: SocketAddr = m.parse().map_err(|_| {
                ConfigError(format!("{source}: metrics {m:?}: not an address:port"))
            })?;
            if !addr.ip().is_loopback() {
                return Err(ConfigError(format!(
                    "{source}: metrics {m:?}: only loopback addresses are allowed"
                )));
            }
        }
        Ok(c)
    }
}

impl DaemonConfig {
    /// Where the hint socket is.
    pub fn hint_path(&self) -> PathBuf {
        self.hint_socket
            .clone()
            .unwrap_or_else(|| DEFAULT_HINT_SOCKET.into())
    }

    /// Where the statistics socket is.
    pub fn stats_path(&self) -> PathBuf {
        self.stats_socket
            .clone()
            .unwrap_or_else(|| DEFAULT_STATS_SOCKET.into())
    }
}

/// One rule's statistics.
#[derive(Clone, Debug, Serialize)]
pub struct RuleStats {
    /// The rule's place in the configuration, from 1 (two rules may run the same policy).
    pub rule: usize,
    pub policy: String,
    pub threads_live: usize,
    pub decisions: crate::engine::Decisions,
    /// Per core class: live threads last seen there, CPU seconds spent there.
    pub classes: Vec<ClassStats>,
    /// Signature store lookups, for a rule whose policy places by signatures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_signatures: Option<crate::stored::StoreCounts>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ClassStats {
    pub class: String,
    pub threads: u32,
    pub cpu_s: f64,
}

/// What `hetsched stats` shows.
#[derive(Clone, Debug, Serialize)]
pub struct DaemonStats {
    pub uptime_s: f64,
    pub daemon_cpu_s: f64,
    pub fraction_of_one_core: f64,
    /// The daemon's resident memory now and at its peak, kB.
    pub rss_kb: u64,
    pub peak_rss_kb: u64,
    pub connector: bool,
    pub hints: crate::hints::HintCounts,
    pub rules: Vec<RuleStats>,
}

/// The daemon's statistics as metrics, for the `prometheus-client` encoder: one series per rule,
/// policy and core class, never one per thread.
#[derive(Debug)]
struct StatsCollector(DaemonStats);

impl Collector for StatsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let labels = |r: &RuleStats, class: Option<&str>| {
            let mut l = vec![
                ("rule".to_string(), r.rule.to_string()),
                ("policy".to_string(), r.policy.clone()),
            ];
            if let Some(c) = class {
                l.push(("class".to_string(), c.to_string()));
            }
            l
        };
        let mut m = encoder.encode_descriptor(
            "hetsched_threads",
            "Managed threads by rule, policy and the core class they were last seen on.",
            None,
            MetricType::Gauge,
        )?;
        for r in &s.rules {
            for c in &r.classes {
                let l = labels(r, Some(&c.class));
                ConstGauge::new(i64::from(c.threads)).encode(m.encode_family(&l)?)?;
            }
        }
        let mut m = encoder.encode_descriptor(
            "hetsched_cpu_seconds",
            "CPU time of managed threads by rule, policy and core class.",
            None,
            MetricType::Counter,
        )?;
        for r in &s.rules {
            for c in &r.classes {
                let l = labels(r, Some(&c.class));
                ConstCounter::new(c.cpu_s).encode(m.encode_family(&l)?)?;
            }
        }
        let mut m = encoder.encode_descriptor(
            "hetsched_placements_applied",
            "Placements applied by rule.",
            None,
            MetricType::Counter,
        )?;
        for r in &s.rules {
            let l = labels(r, None);
            ConstCounter::new(r.decisions.applied).encode(m.encode_family(&l)?)?;
        }
        let mut m = encoder.encode_descriptor(
            "hetsched_hints",
            "Hints received, by what became of them.",
            None,
            MetricType::Counter,
        )?;
        for (k, v) in [
            ("accepted", s.hints.accepted),
            ("rejected", s.hints.rejected),
            ("malformed", s.hints.malformed),
            ("gone", s.hints.gone),
        ] {
            let l = [("result", k)];
            ConstCounter::new(v).encode(m.encode_family(&l)?)?;
        }
        let m = encoder.encode_descriptor(
            "hetsched_daemon_cpu_seconds",
            "CPU time of the daemon itself.",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(s.daemon_cpu_s).encode(m)?;
        let m = encoder.encode_descriptor(
            "hetsched_daemon_resident_bytes",
            "The daemon's resident memory.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(s.rss_kb * 1024).encode(m)?;
        Ok(())
    }
}

/// OpenMetrics text for `stats` (the `prometheus-client` text encoder).
pub fn openmetrics(s: &DaemonStats) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(StatsCollector(s.clone())));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String does not fail");
    out
}

/// The machine and counters every rule's engine shares.
pub struct DaemonSetup {
    pub topology: Topology,
    pub cpus: CpuMap,
    pub isolated: CpuSet,
    pub plan: CounterPlan,
    pub state_dir: PathBuf,
    pub use_connector: bool,
    /// The configuration file, read again at SIGHUP (`None`: no reloading).
    pub config_path: Option<PathBuf>,
    /// The signature store the rules' engines look programs up in when they start (for the
    /// policies that place by signatures).
    pub store: Option<hetsched_signature::store::Store>,
}

struct RuleEngine {
    rule: Rule,
    engine: Engine,
}

fn new_engine(
    rule: &Rule,
    s: &DaemonSetup,
    cfg: &EngineConfig,
    journal: Option<Journal>,
) -> Engine {
    let policy = policy_with_options(&rule.policy, &PolicyOptions::default())
        .expect("checked when the configuration was parsed");
    let mut engine = Engine::new(
        s.topology.clone(),
        s.cpus.clone(),
        &s.isolated,
        policy,
        s.plan.clone(),
        cfg.clone(),
        journal,
    );
    engine.set_stored_signatures(crate::stored::StoredSignatures::new(
        s.store.clone(),
        None,
        Proc::default(),
    ));
    engine
}

fn bind_stats(path: &Path) -> io::Result<(UnixListener, BoundSocket)> {
    let l = UnixListener::bind(path)?;
    let file = BoundSocket::new(path)?;
    l.set_nonblocking(true)?;
    Ok((l, file))
}

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// What was asked for cannot be used (a socket path naming something else, or in a directory
    /// that does not exist): nothing was changed.
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Make a configured socket path free ([`socket_file::prepare`]), naming the field in errors.
fn free_socket_path(field: &str, path: &Path, state_dir: &Path) -> Result<(), DaemonError> {
    socket_file::prepare(path, state_dir).map_err(|e| {
        if e.is_bad_input() {
            DaemonError::Config(format!("{field} {e}"))
        } else {
            let kind = io::Error::from(e);
            io::Error::new(kind.kind(), format!("{field} {kind}")).into()
        }
    })
}

/// Run the daemon until SIGTERM or SIGINT. Call from the process's only thread.
///
/// Everything that can fail is done before the first journal is written: a daemon that cannot
/// start (a busy metrics port, a socket path in use) leaves no journal and no socket behind.
pub fn run_daemon(mut config: DaemonConfig, s: DaemonSetup) -> Result<DaemonStats, DaemonError> {
    // Before any socket or state file: one daemon per state directory.
    let _lock = InstanceLock::acquire(&s.state_dir, "daemon")
        .map_err(|e| io::Error::other(format!("daemon {e}")))?;
    let proc = Proc::default();
    // Every journal under the state directory, whatever rules are configured now (logged there).
    journal::recover_stale(&s.state_dir, &proc);
    let signals = Signals::take()?;
    sys::raise_fd_limit();
    sys::tune_allocator();
    let cfg = EngineConfig {
        interval: Duration::from_millis(config.interval_ms),
        dry_run: config.dry_run,
        work_conserving: !config.strict_placement,
        ..Default::default()
    };
    let named = |what: String| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    // The metrics port first: taken by another program, it stops the start before any file is
    // made.
    let metrics_listener = match &config.metrics {
        Some(a) => Some(TcpListener::bind(a).map_err(named(format!("metrics {a}")))?),
        None => None,
    };
    let hint_path = config.hint_path();
    free_socket_path("hint_socket", &hint_path, &s.state_dir)?;
    let hints = HintServer::bind(&hint_path)
        .map_err(named(format!("hint_socket {}", hint_path.display())))?;
    let stats_path = config.stats_path();
    free_socket_path("stats_socket", &stats_path, &s.state_dir)?;
    let (stats_listener, stats_file) =
        bind_stats(&stats_path).map_err(named(format!("stats_socket {}", stats_path.display())))?;
    // The metrics are served from a thread of their own, from the last interval's snapshot: a
    // slow or idle scraper never holds up placement.
    let metrics = match metrics_listener {
        Some(l) => {
            let snapshot = Arc::new(Mutex::new(String::new()));
            let served = snapshot.clone();
            std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || serve_metrics(&l, &served))?;
            Some(snapshot)
        }
        None => None,
    };
    let engines = rule_engines(&config, &s, &cfg)?;
    let rules: Vec<Match> = config.rules.iter().map(|r| r.matcher.clone()).collect();
    let mut daemon = Daemon {
        tracker: Tracker::new(proc.clone(), Scope::Rules(rules), s.use_connector),
        engines,
        hints,
        changes: Changes::default(),
        received: Vec::new(),
        cpu0: sys::process_cpu_s(),
        start: Instant::now(),
    };
    let mut events = EventLoop::new(cfg.interval);
    tracing::info!(
        "daemon: {} rule(s), hints at {}, stats at {}",
        daemon.engines.len(),
        hint_path.display(),
        stats_path.display()
    );
    events.set(Source::Signals, Some(signals.as_raw_fd()));
    events.set(Source::Hints, Some(daemon.hints.raw_fd()));
    events.set(Source::Stats, Some(stats_listener.as_raw_fd()));
    // Under systemd (`Type=notify`): ready once every socket is bound and every journal is
    // recovered; a no-op elsewhere.
    let status = format!(
        "{} rule(s), stats at {}",
        daemon.engines.len(),
        stats_path.display()
    );
    if let Err(e) = sd_notify::notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(&status),
    ]) {
        tracing::warn!("cannot tell the service manager the daemon is ready: {e}");
    }
    loop {
        events.set(Source::ProcessEvents, daemon.tracker.event_fd());
        let ready = events.wait();
        if ready.has(Source::Signals) {
            match signal_action(&signals) {
                SignalAction::Stop => break,
                SignalAction::Reload => daemon.reload(&mut config, &s, &cfg, &proc),
                SignalAction::None => {}
            }
        }
        let mut rescan = false;
        if ready.has(Source::ProcessEvents) {
            rescan = daemon.tracker.take_events(&mut daemon.changes);
            apply_changes(&mut daemon.changes, &mut daemon.engines);
        }
        if ready.has(Source::Hints) {
            daemon.on_hints();
        }
        if ready.has(Source::Stats) {
            daemon.serve_stats(&stats_listener);
        }
        let due = events.tick_due();
        if rescan {
            daemon.scan(true);
        }
        if due {
            daemon.scan(false);
            daemon.on_tick(events.elapsed_ns());
            events.ticked();
            if let Some(m) = &metrics {
                let text = openmetrics(&daemon.stats());
                *m.lock().unwrap_or_else(PoisonError::into_inner) = text;
            }
        }
    }
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    let final_stats = daemon.stats();
    daemon.stop();
    // The stats socket's file goes, if it is still ours (the hint socket's goes with `hints`).
    drop(stats_file);
    Ok(final_stats)
}

/// One engine per rule, each with its own journal in a directory of its own.
fn rule_engines(
    config: &DaemonConfig,
    s: &DaemonSetup,
    cfg: &EngineConfig,
) -> io::Result<Vec<RuleEngine>> {
    let mut engines: Vec<RuleEngine> = Vec::new();
    for (i, rule) in config.rules.iter().enumerate() {
        let journal = if cfg.dry_run {
            None
        } else {
            match Journal::create(&s.state_dir.join(format!("rule-{i}"))) {
                Ok(j) => Some(j),
                Err(e) => {
                    // The journals made so far go (they are empty: nothing was placed yet).
                    for (k, mut r) in engines.into_iter().enumerate() {
                        r.engine.finish();
                        let _ = std::fs::remove_dir(s.state_dir.join(format!("rule-{k}")));
                    }
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{}: {e}", s.state_dir.join(format!("rule-{i}")).display()),
                    ));
                }
            }
        };
        if i == 0 {
            if let Some(j) = &journal {
                restore_on_panic(j.path().to_path_buf());
            }
        }
        let mut engine = new_engine(rule, s, cfg, journal);
        for n in engine.take_notices() {
            tracing::warn!("rule {}: {n}", i + 1);
        }
        engines.push(RuleEngine {
            rule: rule.clone(),
            engine,
        });
    }
    Ok(engines)
}

/// What the signals received ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SignalAction {
    None,
    Reload,
    Stop,
}

/// Drain the signal descriptor: SIGCHLD reaps, SIGHUP asks to reload the configuration, any
/// other signal asks to stop (which wins).
fn signal_action(signals: &Signals) -> SignalAction {
    let mut action = SignalAction::None;
    for sig in signals.drain() {
        match sig.signo {
            libc::SIGCHLD => {
                signals::reap(0);
            }
            libc::SIGHUP if action == SignalAction::None => action = SignalAction::Reload,
            libc::SIGHUP => {}
            _ => action = SignalAction::Stop,
        }
    }
    action
}

/// What the daemon tracks while it runs.
struct Daemon {
    tracker: Tracker,
    engines: Vec<RuleEngine>,
    hints: HintServer,
    changes: Changes,
    received: Vec<Received>,
    cpu0: f64,
    start: Instant,
}

impl Daemon {
    /// SIGHUP: read the configuration again. A file that does not parse changes nothing (the
    /// error is logged). Changed rules take effect: every engine finishes (restoring each
    /// affinity it changed, so the threads of a removed rule are the kernel's again), the new
    /// rules' engines start, and the processes are matched afresh (the threads of rules that
    /// stay are placed again within an interval). Sockets, the interval and the placement mode
    /// need a restart; a change there is logged and not applied.
    fn reload(
        &mut self,
        config: &mut DaemonConfig,
        s: &DaemonSetup,
        cfg: &EngineConfig,
        proc: &Proc,
    ) {
        let Some(path) = &s.config_path else {
            tracing::info!("SIGHUP: no configuration file to read again");
            return;
        };
        let new = match std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: {e}", path.display())))
            .and_then(|text| DaemonConfig::parse(&text, &path.display().to_string()))
        {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(
                    "SIGHUP: configuration not reloaded, the daemon goes on as it was: {e}"
                );
                return;
            }
        };
        let fixed = [
            ("interval_ms", new.interval_ms != config.interval_ms),
            ("hint_socket", new.hint_socket != config.hint_socket),
            ("stats_socket", new.stats_socket != config.stats_socket),
            ("metrics", new.metrics != config.metrics),
            ("dry_run", new.dry_run != config.dry_run),
            (
                "strict_placement",
                new.strict_placement != config.strict_placement,
            ),
        ];
        for (field, changed) in fixed {
            if changed {
                tracing::warn!("SIGHUP: {field} changed; it takes effect at the next start");
            }
        }
        if new.rules == config.rules {
            tracing::info!("SIGHUP: rules unchanged");
            return;
        }
        // The old engines finish first: the new ones' journals take the same files.
        for r in &mut self.engines {
            r.engine.finish();
        }
        self.engines = match rule_engines(&new, s, cfg) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!("SIGHUP: the new rules cannot start ({e}); the old ones go on");
                rule_engines(config, s, cfg).unwrap_or_default()
            }
        };
        let rules: Vec<Match> = new.rules.iter().map(|r| r.matcher.clone()).collect();
        self.tracker = Tracker::new(proc.clone(), Scope::Rules(rules), s.use_connector);
        self.scan(true);
        tracing::info!("SIGHUP: {} rule(s) now", new.rules.len());
        config.rules = new.rules;
    }

    /// Track: a full reconciliation with /proc (`full`), else the interval's tracking. The
    /// engines' pins go to the tracker first, so that a process whose managed parent exited
    /// before it was seen is known by the mask it inherited.
    fn scan(&mut self, full: bool) {
        self.give_pins();
        if full {
            self.tracker.scan(&mut self.changes);
        } else {
            self.tracker.periodic(&mut self.changes);
        }
        apply_changes(&mut self.changes, &mut self.engines);
    }

    /// Give every affinity back: first catch up with what happened since the last look (a child
    /// a managed process forked a moment ago carries its pin), then restore, then give back the
    /// masks of threads made in between by managed threads before their own restore.
    fn stop(&mut self) {
        self.give_pins();
        self.tracker.catch_up(&mut self.changes);
        apply_changes(&mut self.changes, &mut self.engines);
        for r in &mut self.engines {
            r.engine.finish();
        }
        let engines = &mut self.engines;
        self.tracker.late_starts(&mut self.changes, |f| {
            if let Some(r) = engines.get_mut(f.group) {
                r.engine.restore_late(&f);
            }
        });
    }

    /// The engines' pins, to the tracker.
    fn give_pins(&mut self) {
        let pins = self
            .engines
            .iter()
            .enumerate()
            .flat_map(|(g, r)| r.engine.pins().map(move |p| (g, p)))
            .collect();
        self.tracker.set_pins(pins);
    }

    /// The statistics now.
    fn stats(&self) -> DaemonStats {
        let (rss_kb, peak_rss_kb) = sys::process_memory_kb();
        DaemonStats {
            rss_kb,
            peak_rss_kb,
            uptime_s: self.start.elapsed().as_secs_f64(),
            daemon_cpu_s: sys::process_cpu_s() - self.cpu0,
            fraction_of_one_core: (sys::process_cpu_s() - self.cpu0)
                / self.start.elapsed().as_secs_f64().max(1e-9),
            connector: self.tracker.uses_connector(),
            hints: self.hints.counts,
            rules: self
                .engines
                .iter()
                .enumerate()
                .map(|(i, r)| RuleStats {
                    rule: i + 1,
                    policy: r.rule.policy.clone(),
                    threads_live: r.engine.live_threads(),
                    decisions: r.engine.decisions(),
                    stored_signatures: r.engine.stored_counts(),
                    classes: r
                        .engine
                        .class_totals()
                        .into_iter()
                        .map(|(class, cpu_s, threads)| ClassStats {
                            class,
                            threads,
                            cpu_s,
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// Hints from managed threads, each to the engine that manages its sender.
    fn on_hints(&mut self) {
        let engines = &self.engines;
        self.hints.drain_tracked(
            &mut self.tracker,
            |t| engines.iter().any(|r| r.engine.manages(t)),
            &mut self.changes,
            &mut self.received,
        );
        apply_changes(&mut self.changes, &mut self.engines);
        for h in &self.received {
            if let Some(r) = self.engines.iter_mut().find(|r| r.engine.manages(h.tid)) {
                r.engine.hint(h.tid, &h.hint);
            }
        }
    }

    /// Answer every waiting statistics client with one JSON document.
    fn serve_stats(&self, listener: &UnixListener) {
        while let Ok((mut conn, _)) = listener.accept() {
            let _ = conn.set_write_timeout(Some(Duration::from_millis(200)));
            let text = serde_json::to_string(&self.stats()).unwrap_or_default();
            let _ = conn.write_all(text.as_bytes());
        }
    }

    /// One interval: every rule's engine ticks.
    fn on_tick(&mut self, now_ns: u64) {
        for (i, r) in self.engines.iter_mut().enumerate() {
            r.engine.tick(now_ns);
            for n in r.engine.take_notices() {
                tracing::warn!("rule {}: {n}", i + 1);
            }
        }
    }
}

fn apply_changes(changes: &mut Changes, engines: &mut [RuleEngine]) {
    for tid in changes.exited.drain(..) {
        for r in engines.iter_mut() {
            r.engine.remove(tid);
        }
    }
    for pid in changes.renamed.drain(..) {
        for r in engines.iter_mut() {
            r.engine.process_renamed(pid);
        }
    }
    changes.sort();
    for (i, r) in engines.iter_mut().enumerate() {
        r.engine
            .reserve(changes.started.iter().filter(|f| f.group == i).count());
    }
    for f in changes.started.drain(..) {
        if let Some(r) = engines.get_mut(f.group) {
            r.engine.add(f);
        }
    }
    for r in engines.iter_mut() {
        r.engine.sync_journal();
    }
}

/// Answer metrics clients, one at a time, with the latest snapshot over HTTP/1.0 (the daemon's
/// `metrics` thread; it ends with the process).
fn serve_metrics(listener: &TcpListener, snapshot: &Mutex<String>) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
        let _ = conn.set_write_timeout(Some(Duration::from_millis(200)));
        let mut req = [0u8; 1024];
        let _ = conn.read(&mut req);
        let body = snapshot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let _ = write!(
            conn,
            "HTTP/1.0 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
    }
}

/// Read the statistics of a running daemon.
pub fn read_stats(socket: &Path) -> io::Result<String> {
    // A daemon busy taking in a burst of threads may have its queue of waiting clients full for
    // a moment: try again for up to 5 s.
    let give_up = Instant::now() + Duration::from_secs(5);
    let mut s = loop {
        match std::os::unix::net::UnixStream::connect(socket) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(50));
            }
            r => break r?,
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_name_the_problem() {
        let ok = "interval_ms = 50\n[[rule]]\npolicy = \"amps\"\nmatch = { comm = \"x\" }\n";
        let c = DaemonConfig::parse(ok, "d.toml").unwrap();
        assert_eq!(c.rules[0].matcher.comm.as_deref(), Some("x"));
        let e = DaemonConfig::parse("", "d.toml").unwrap_err().0;
        assert!(e.contains("no [[rule]]"), "{e}");
        let e = DaemonConfig::parse(&ok.replace("amps", "nope"), "d.toml")
            .unwrap_err()
            .0;
        assert!(e.contains("unknown policy \"nope\""), "{e}");
        let e = DaemonConfig::parse(&ok.replace("comm = \"x\"", ""), "d.toml")
            .unwrap_err()
            .0;
        assert!(e.contains("empty match"), "{e}");
        let e = DaemonConfig::parse(&format!("metrics = \"0.0.0.0:9\"\n{ok}"), "d.toml")
            .unwrap_err()
            .0;
        assert!(e.contains("loopback"), "{e}");
        let e = DaemonConfig::parse(&format!("bogus = 1\n{ok}"), "d.toml")
            .unwrap_err()
            .0;
        assert!(e.contains("bogus"), "{e}");
        // One line, with the file and line of the mistake.
        assert!(!e.contains('\n'), "{e}");
        assert!(e.starts_with("d.toml: line 1"), "{e}");
        let e = DaemonConfig::parse(
            &ok.replace("interval_ms = 50", "interval_ms = \"x\""),
            "d.toml",
        )
        .unwrap_err()
        .0;
        assert!(
            e.starts_with("d.toml: line 1: interval_ms:") && !e.contains('\n'),
            "{e}"
        );
        for bad in ["0", "1000000000000"] {
            let e = DaemonConfig::parse(&ok.replace("50", bad), "d.toml")
                .unwrap_err()
                .0;
            assert!(
                e.contains("interval_ms") && e.contains("1 ms .. 1 h"),
                "{e}"
            );
        }
    }

    /// Matches that could never work, or would take every process, and two sockets on one
    /// path are refused with the file and line.
    #[test]
    fn matches_that_never_or_always_hold_and_one_path_for_two_sockets_are_refused() {
        let rule =
            |m: &str| format!("interval_ms = 50\n[[rule]]\npolicy = \"amps\"\nmatch = {{ {m} }}\n");
        for (m, says) in [
            ("comm = \"sleeper-with-long-name\"", "at most 15"),
            ("comm = \"\"", "empty"),
            ("exe = \"\"", "empty"),
            ("cgroup = \"\"", "every process"),
            ("cgroup = \"/\"", "every process"),
            ("uid = 0, cgroup = \"//\"", "every process"),
        ] {
            let e = DaemonConfig::parse(&rule(m), "d.toml").unwrap_err().0;
            assert!(
                e.starts_with("d.toml: line 4") && e.contains(says) && !e.contains('\n'),
                "{m}: {e}"
            );
        }
        // Fifteen bytes is the most the kernel keeps, and matches.
        let c = DaemonConfig::parse(&rule("comm = \"sleeper-with-lo\""), "d.toml").unwrap();
        assert_eq!(c.rules[0].matcher.comm.as_deref(), Some("sleeper-with-lo"));
        let same = format!(
            "hint_socket = \"/tmp/x.sock\"\nstats_socket = \"/tmp/x.sock\"\n{}",
            rule("comm = \"x\"")
        );
        let e = DaemonConfig::parse(&same, "d.toml").unwrap_err().0;
        assert!(
            e.starts_with("d.toml: line 1:") && e.contains("/tmp/x.sock") && !e.contains('\n'),
            "{e}"
        );
        // A path given for one that is the other's default is the same path too.
        let e = DaemonConfig::parse(
            &format!(
                "stats_socket = \"{DEFAULT_HINT_SOCKET}\"\n{}",
                rule("comm = \"x\"")
            ),
            "d.toml",
        )
        .unwrap_err()
        .0;
        assert!(e.contains("hint_socket and stats_socket"), "{e}");
    }

    #[test]
    fn metrics_are_per_policy_and_class() {
        let s = DaemonStats {
            uptime_s: 1.0,
            daemon_cpu_s: 0.01,
            fraction_of_one_core: 0.01,
            rss_kb: 6000,
            peak_rss_kb: 9000,
            connector: false,
            hints: Default::default(),
            rules: vec![RuleStats {
                rule: 1,
                policy: "amps".into(),
                threads_live: 3,
                decisions: Default::default(),
                classes: vec![
                    ClassStats {
                        class: "fast".into(),
                        threads: 2,
                        cpu_s: 1.5,
                    },
                    ClassStats {
                        class: "slow".into(),
                        threads: 1,
                        cpu_s: 0.5,
                    },
                ],
                stored_signatures: None,
            }],
        };
        let mut s = s;
        // A second rule with the same policy: its series are its own.
        let mut second = s.rules[0].clone();
        second.rule = 2;
        s.rules.push(second);
        let m = openmetrics(&s);
        assert!(m.contains("hetsched_threads{rule=\"1\",policy=\"amps\",class=\"fast\"} 2\n"));
        assert!(m.contains(
            "hetsched_cpu_seconds_total{rule=\"2\",policy=\"amps\",class=\"slow\"} 0.5\n"
        ));
        let series: Vec<&str> = m
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit_once(' ').unwrap().0)
            .collect();
        let unique: std::collections::HashSet<&&str> = series.iter().collect();
        assert_eq!(unique.len(), series.len(), "duplicate series in\n{m}");
        assert!(m.contains("hetsched_daemon_resident_bytes 6144000\n"));
        assert!(m.ends_with("# EOF\n"));
    }
}
