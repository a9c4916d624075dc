//! `hetsched signature`: architectural signatures from memory traces (HASS section 3).

use crate::bad_input;
use crate::provenance::{hashing_reader, Input, InputHash, Provenance};
use clap::Args;
use hetsched_core::signature::{SIGNATURE_ASSOC, SIGNATURE_SIZES};
use hetsched_core::Signature;
use hetsched_live::signals::{self, Signals};
use hetsched_signature::hsb::HsbWriter;
use hetsched_signature::input::{open, open_reader, OpenTrace};
use hetsched_signature::readers::{read_trace, read_trace_into, ReadStats};
use hetsched_signature::store::{self, ExecutableKey};
use hetsched_signature::{record, Format, ProfileConfig, Profiler, Sampling, SetModel, TraceError};
use serde::Serialize;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Args, Debug, Default)]
pub struct SignatureArgs {
    /// The trace: a file, or `-` for stdin; plain, gzip or zstd (told by content). Not with
    /// --record.
    trace: Option<PathBuf>,
    /// Trace format: lackey, din or hsb (default: recognised from the content).
    #[arg(long)]
    format: Option<String>,
    /// SHARDS sampling at this rate in [2^-24, 1] (default: exact distances); the rate used is
    /// the nearest multiple of 2^-24 (reported as engine.sample_rate).
    #[arg(long)]
    sample_rate: Option<f64>,
    /// SHARDS sampling keeping at most this many cache lines (fixed size).
    #[arg(long, conflicts_with = "sample_rate")]
    sample_size: Option<usize>,
    /// Cache line size, bytes (a power of two).
    #[arg(long, default_value_t = 64)]
    line: u32,
    /// How set-associative misses are found: `indexed` (exact LRU per set, a line's set its
    /// number modulo the number of sets) or `binomial` (an approximation from the fully
    /// associative distances, lines assumed to fall into sets at random: cheaper, and wrong for
    /// working sets about the cache's size).
    #[arg(long, default_value = "indexed")]
    set_model: String,
    /// One signature per this many instructions (phase signatures).
    #[arg(long)]
    window: Option<u64>,
    /// Count instruction fetches as cache references too (default: data references only).
    #[arg(long)]
    include_instructions: bool,
    /// The signature's name (default: the trace's file name, or the command).
    #[arg(long)]
    name: Option<String>,
    /// Write the signature file (TOML) here; with --window, one file per window (NAME-0.toml, ...).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the trace as hsb here instead of profiling it.
    #[arg(long)]
    convert: Option<PathBuf>,
    /// Print one JSON document on stdout (with --record, the program's standard output goes to
    /// our standard error, so standard output is the document alone).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV on stdout: a header, then one row per associativity and cache size, for the whole
    /// trace and then each window (docs/json.md); with --record, the program's standard output
    /// goes to our standard error.
    #[arg(long)]
    csv: bool,
    /// Run the command after `--` under valgrind lackey and profile its trace as it is made; the
    /// program's exit status is ours (after the signature is printed).
    #[arg(long)]
    record: bool,
    /// With --record: keep the signature in the signature store, keyed by the command's
    /// executable (its canonical path and the SHA-256 of its content), for `run` and the daemon
    /// to give the program when it starts. Not saved when the program fails.
    #[arg(long, requires = "record")]
    save: bool,
    /// The signature store's directory (default: $HETSCHED_STORE, else
    /// /var/lib/hetsched/signatures for root, else $XDG_DATA_HOME/hetsched/signatures).
    #[arg(long, value_name = "DIR", requires = "save")]
    store: Option<PathBuf>,
    /// The command to record.
    #[arg(last = true)]
    command: Vec<String>,
}

impl SignatureArgs {
    /// Whether it runs a program under valgrind (`--record`).
    pub fn records(&self) -> bool {
        self.record
    }
}

/// `signature --json`, fields as in DESIGN.md plus the sampling and the windows.
#[derive(Serialize)]
struct SignatureJson {
    /// What produced this document, the trace's hash among its inputs (docs/json.md).
    #[serde(flatten)]
    provenance: Provenance,
    name: String,
    instructions: u64,
    refs: u64,
    line_refs: u64,
    line_bytes: u32,
    sizes_bytes: Vec<u64>,
    assoc: Vec<u32>,
    misses_per_4096: Vec<Vec<f64>>,
    /// Fully associative LRU miss ratio at each size.
    miss_ratio: Vec<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    windows: Vec<WindowJson>,
    engine: EngineJson,
}

#[derive(Serialize)]
struct WindowJson {
    first_instruction: u64,
    instructions: u64,
    misses_per_4096: Vec<Vec<f64>>,
}

#[derive(Serialize)]
struct EngineJson {
    wall_s: f64,
    /// CPU time of the thread that read and profiled the trace.
    cpu_s: f64,
    /// Trace references per second of `cpu_s`: our engine's speed, whatever fed it.
    refs_per_s: f64,
    /// With --record: valgrind's CPU time (the program's run under lackey), apart from ours.
    #[serde(skip_serializing_if = "Option::is_none")]
    valgrind_cpu_s: Option<f64>,
    /// With --record: the traced program's exit status (128 + signal when killed).
    #[serde(skip_serializing_if = "Option::is_none")]
    program_exit: Option<i32>,
    input_bytes: u64,
    input_mb_per_s: f64,
    /// The rate used (a multiple of 2^-24 nearest the one asked for; 1 when exact).
    sample_rate: f64,
    /// The --sample-rate asked for, when the rate used is another.
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_rate_requested: Option<f64>,
    /// Distinct cache lines the fully associative engine held (the sample's, with SHARDS).
    sampled_lines: u64,
    /// Why the sampled `miss_ratio` is not to be trusted, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_warning: Option<String>,
    sampling: String,
    /// `set-indexed` or `binomial approximation`.
    set_model: &'static str,
    compression: String,
    format: String,
}

/// One row of `signature --csv`: one cell of a signature matrix.
#[derive(Serialize)]
struct CsvRow<'a> {
    name: &'a str,
    /// Empty for the whole trace; else the window's number, from 0.
    window: Option<usize>,
    first_instruction: u64,
    instructions: u64,
    line_bytes: u32,
    cache_bytes: u64,
    assoc: u32,
    misses_per_4096_instr: f64,
}

fn trace_error(e: TraceError, source: &str) -> anyhow::Error {
    bad_input(format!("{source}: {e}"))
}

/// Open the trace at `path` (`-` for stdin) as [`open`] does, its bytes (compressed, as stored)
/// hashed as they are read, so a trace is read only once.
fn open_hashed(path: &Path, format: Option<Format>) -> Result<(OpenTrace, InputHash), TraceError> {
    let raw: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(path)
            .map_err(|e| TraceError::whole(format!("cannot open the trace: {e}")))?;
        Box::new(f)
    };
    let (reader, hash) = hashing_reader(raw);
    Ok((open_reader(Box::new(reader), format)?, hash))
}

/// The finest SHARDS rate: one hash value in 2^24 (`hetsched_signature::shards::MODULUS`).
const MIN_SAMPLE_RATE: f64 = 1.0 / hetsched_signature::shards::MODULUS as f64;

/// Fewer sampled lines than this and the sampled curve is flagged: a count estimated from `n`
/// sampled lines has a relative standard error of about `1 / sqrt(n)` (binomial sampling), over
/// 3% below 1,000.
const MIN_SAMPLED_LINES: u64 = 1000;

/// CPU time of the calling thread, seconds.
fn thread_cpu_s() -> f64 {
    // SAFETY: an all-zero timespec is valid, and clock_gettime writes into it.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// CPU time (user + system) of this process's waited-for children, seconds.
fn children_cpu_s() -> f64 {
    // SAFETY: an all-zero rusage is valid, and getrusage writes into it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid `who` and a pointer to an rusage we own.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &raw mut u) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    s(u.ru_utime) + s(u.ru_stime)
}

/// A recording's stop signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT), read by a thread of their own
/// while the main thread reads the trace. As `run` does, a signal sent by a process is passed on
/// to valgrind (a terminal's ^C reached it already, with the rest of its process group); valgrind
/// still running `STOP_GRACE` later, or at a second signal, is killed. Valgrind's exit then ends
/// the trace, and the recording ends without a signature.
struct StopWatch {
    shared: std::sync::Arc<StopShared>,
}

#[derive(Default)]
struct StopShared {
    /// The first stop signal received, 0 before one.
    signal: std::sync::atomic::AtomicI32,
    /// Set before valgrind is reaped: its pid may then name another process, and no signal is
    /// sent to it any more (a signal is sent only with this lock held and this false).
    reaping: std::sync::Mutex<bool>,
}

impl StopWatch {
    fn start(signals: Signals, pid: u32) -> StopWatch {
        use std::os::fd::AsRawFd;
        use std::sync::atomic::Ordering;
        use std::time::Duration;
        let shared = std::sync::Arc::new(StopShared::default());
        let s = shared.clone();
        let send = move |signo| {
            let reaping = s
                .reaping
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !*reaping {
                signals::send(pid, signo);
            }
        };
        let s = shared.clone();
        std::thread::spawn(move || {
            let mut deadline: Option<Instant> = None;
            loop {
                let timeout = deadline.map_or(Duration::from_secs(3600), |d| {
                    d.saturating_duration_since(Instant::now())
                });
                signals::wait_readable(&[signals.as_raw_fd()], timeout);
                let mut kill = deadline.is_some_and(|d| Instant::now() >= d);
                for sig in signals.drain() {
                    if sig.signo == libc::SIGCHLD {
                        continue;
                    }
                    if deadline.is_some() {
                        kill = true;
                        continue;
                    }
                    s.signal.store(sig.signo, Ordering::SeqCst);
                    deadline = Some(Instant::now() + hetsched_live::run::STOP_GRACE);
                    if sig.from_process {
                        send(sig.signo);
                    }
                }
                if kill {
                    send(libc::SIGKILL);
                    return;
                }
            }
        });
        StopWatch { shared }
    }

    /// Valgrind is about to be reaped: no signal goes to its pid from now on.
    fn reaping(&self) {
        *self
            .shared
            .reaping
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
    }

    /// The recording is over: the stop signals act on us as on any program again (one already
    /// waiting acts now).
    fn release(&self) {
        let _ = signals::unblock_in_child();
    }

    /// The stop signal received, if one was.
    fn signal(&self) -> Option<i32> {
        Some(self.shared.signal.load(std::sync::atomic::Ordering::SeqCst)).filter(|&s| s != 0)
    }
}

/// `signature`: prints the signature; the exit status to leave with (the recorded program's
/// with --record, else 0).
pub fn run_signature(args: &SignatureArgs) -> anyhow::Result<u8> {
    run_signature_to(args, &mut std::io::stdout().lock())
}

/// `signature --json` from arguments as on the command line after `signature` (the trace and
/// flags; `--record` is refused: a library does not run programs under valgrind). Returns the
/// JSON document. Bad arguments are exit-2 errors with clap's first line.
pub fn signature_json(argv: &[String]) -> anyhow::Result<String> {
    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: SignatureArgs,
    }
    let parsed = <Wrapper as clap::Parser>::try_parse_from(
        std::iter::once("signature".to_string()).chain(argv.iter().cloned()),
    )
    .map_err(|e| {
        let text = e.to_string();
        bad_input(
            text.lines()
                .next()
                .unwrap_or("bad arguments")
                .trim_start_matches("error: "),
        )
    })?;
    let mut args = parsed.args;
    if args.record {
        return Err(bad_input(
            "--record: not available here (profile a trace file)",
        ));
    }
    args.json = true;
    args.csv = false;
    let mut out = Vec::new();
    run_signature_to(&args, &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// [`run_signature`], the JSON document written to `out` (the other outputs go to stdout).
fn run_signature_to(args: &SignatureArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let format = match &args.format {
        None => None,
        Some(f) => Some(
            Format::parse(f)
                .ok_or_else(|| bad_input(format!("--format: {f:?} is not lackey, din or hsb")))?,
        ),
    };
    if !args.line.is_power_of_two() || args.line < 8 {
        return Err(bad_input(format!(
            "--line: {} is not a power of two of at least 8",
            args.line
        )));
    }
    let sampling = match (args.sample_rate, args.sample_size) {
        (Some(r), _) if !(r > 0.0 && r <= 1.0) => {
            return Err(bad_input(format!("--sample-rate: {r} is not in (0, 1]")))
        }
        (Some(r), _) if r < MIN_SAMPLE_RATE => {
            return Err(bad_input(format!(
                "--sample-rate: {r} is below 2^-24 ({MIN_SAMPLE_RATE:.3e}), the finest rate SHARDS's 24-bit line hash can sample"
            )))
        }
        (Some(r), _) => Sampling::Rate(r),
        (None, Some(0)) => return Err(bad_input("--sample-size: must be at least 1")),
        (None, Some(n)) => Sampling::Size(n),
        (None, None) => Sampling::Exact,
    };
    let set_model = match args.set_model.as_str() {
        "indexed" => SetModel::Indexed,
        "binomial" => SetModel::Binomial,
        other => {
            return Err(bad_input(format!(
                "--set-model: {other:?} is not indexed or binomial"
            )))
        }
    };
    if args.window == Some(0) {
        return Err(bad_input("--window: must be at least 1 instruction"));
    }
    let mut recording: Option<record::Recording> = None;
    let mut stop: Option<StopWatch> = None;
    // With --save: the store entry's key, taken before the program runs.
    let mut save_key = None;
    // The trace's hash, for the JSON document's inputs (a recorded trace is not an input: the
    // command line names the program).
    let mut input_hash = None;
    let (opened, source, default_name) = if args.record {
        if args.trace.is_some() {
            return Err(bad_input(
                "--record takes the command after `--`, not a trace",
            ));
        }
        let Some(program) = args.command.first() else {
            return Err(bad_input("--record needs a command after `--`"));
        };
        // A program that cannot be started is said as a shell says it, with its status (127 not
        // found, 126 not executable), before valgrind is asked to run it.
        let executable = match record::runnable(program) {
            Ok(path) => path,
            Err(e) => {
                eprintln!("hetsched: {}", e.message);
                return Ok(e.status);
            }
        };
        if args.save {
            save_key = Some(executable_key(program, &executable)?);
            let store = crate::live::store_of(args.store.as_deref());
            store.check_writable().map_err(|e| {
                bad_input(format!(
                    "--save: cannot write into the signature store {}: {e}",
                    store.dir().display()
                ))
            })?;
        }
        // A machine-readable standard output is ours alone: the program's goes to our stderr.
        let program_stdout = if args.json || args.csv {
            std::io::stderr().as_fd().try_clone_to_owned()?.into()
        } else {
            std::process::Stdio::inherit()
        };
        // Stop signals are read from a descriptor from here on, before any thread starts (the
        // threads inherit the mask); valgrind starts with none blocked.
        let signals = Signals::take()?;
        let rec = record::start(&args.command, program_stdout, signals::unblock_in_child)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        stop = Some(StopWatch::start(signals, rec.child.id()));
        let reader = rec.reader()?;
        recording = Some(rec);
        let opened = open_reader(Box::new(reader), Some(Format::Lackey))
            .map_err(|e| anyhow::anyhow!("the recorded trace: {e}"))?;
        let name = Path::new(&args.command[0])
            .file_name()
            .map_or_else(|| args.command[0].clone(), |n| n.to_string_lossy().into());
        (opened, "the recorded trace".to_string(), name)
    } else {
        let Some(path) = &args.trace else {
            return Err(bad_input(
                "give a trace (a file or -), or --record -- CMD to trace a program",
            ));
        };
        if !args.command.is_empty() {
            return Err(bad_input("a command after `--` needs --record"));
        }
        let source = path.display().to_string();
        let opened = if args.json {
            let (opened, hash) = open_hashed(path, format).map_err(|e| trace_error(e, &source))?;
            input_hash = Some(hash);
            opened
        } else {
            open(path, format).map_err(|e| trace_error(e, &source))?
        };
        let name = path
            .file_name()
            .map_or_else(|| "stdin".to_string(), |n| n.to_string_lossy().into());
        let name = name
            .split('.')
            .next()
            .filter(|s| !s.is_empty())
            .unwrap_or("trace")
            .to_string();
        (opened, source, name)
    };
    let name = args.name.clone().unwrap_or(default_name);
    if let Some(out) = &args.convert {
        return convert(opened, out, &source).map(|()| 0);
    }
    let OpenTrace {
        reader,
        format,
        compression,
    } = opened;
    let cfg = ProfileConfig {
        line_bytes: args.line,
        sampling,
        window: args.window,
        include_instructions: args.include_instructions,
        name: name.clone(),
        set_model,
    };
    let t0 = Instant::now();
    let cpu0 = thread_cpu_s();
    let mut profiler = Profiler::new(cfg);
    let stats = read_trace_into(reader, format, &mut profiler);
    let mut program_exit = None;
    let mut valgrind_cpu_s = None;
    if let Some(mut rec) = recording {
        let before = children_cpu_s();
        let stop = stop.take().expect("a recording has its stop watch");
        stop.reaping();
        let status = rec.child.wait()?;
        valgrind_cpu_s = Some(children_cpu_s() - before);
        // The FIFO and its directory go now; a stop signal from here on ends us as it would any
        // program.
        drop(rec);
        stop.release();
        if let Some(signo) = stop.signal() {
            eprintln!(
                "hetsched: signal {signo}: the recording stopped, no signature (valgrind: {status})"
            );
            return Ok((128 + signo).clamp(0, 255) as u8);
        }
        let code = status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1);
        if !status.success() && stats.is_err() {
            return Err(anyhow::anyhow!(
                "valgrind exited with {status}; the trace: {}",
                stats.err().map(|e| e.to_string()).unwrap_or_default()
            ));
        }
        program_exit = Some(code);
    }
    let stats: ReadStats = stats.map_err(|e| trace_error(e, &source))?;
    let rate = profiler.sample_rate();
    let sampled_lines = profiler.sampled_lines();
    let windows = profiler.finish();
    let cpu_s = thread_cpu_s() - cpu0;
    let wall_s = t0.elapsed().as_secs_f64();
    let sample_warning = (sampling != Sampling::Exact && sampled_lines < MIN_SAMPLED_LINES).then(|| {
        // The indexed model sees every line reference whatever the sample; the binomial model's
        // cells come from the sampled distances, so they are as noisy as the miss ratio.
        let cells = match set_model {
            SetModel::Indexed => "the set-associative cells (set-indexed model) are exact regardless",
            SetModel::Binomial => "so are the set-associative cells, which the binomial model computes from the sampled distances",
        };
        format!(
            "the sample held {sampled_lines} distinct lines (fewer than {MIN_SAMPLED_LINES}): the sampled miss_ratio is noise, and {cells}; use a higher --sample-rate"
        )
    });
    // The rate used is a multiple of 2^-24 (the line hash's 24 bits), the one nearest the rate
    // asked for.
    let requested_rate = match sampling {
        Sampling::Rate(r) if r != rate => Some(r),
        _ => None,
    };
    if let Some(r) = requested_rate {
        eprintln!(
            "hetsched: --sample-rate {r}: sampling at {}, the nearest rate the 24-bit line hash can sample",
            rate_used(rate)
        );
    }
    if let Some(w) = &sample_warning {
        eprintln!("hetsched: warning: {w}");
    }
    let instructions: u64 = windows.iter().map(|w| w.instructions).sum();
    if instructions == 0 {
        return Err(bad_input(format!(
            "{source}: the trace has no instruction fetches, and a signature counts misses per 4096 instructions"
        )));
    }
    // The whole-trace histogram: the windows' summed.
    let mut whole = hetsched_signature::Histogram::default();
    for w in &windows {
        whole.merge(&w.histogram);
    }
    let signature = whole.signature(&name, instructions, args.line);
    let line_refs: u64 = windows.iter().map(|w| w.line_refs).sum();
    let window_sigs: Vec<Signature> = if args.window.is_some() {
        windows
            .iter()
            .enumerate()
            .map(|(i, w)| w.signature(&format!("{name}-{i}"), args.line))
            .collect()
    } else {
        Vec::new()
    };
    if let Some(out) = &args.out {
        if window_sigs.is_empty() {
            write_signature(out, &signature)?;
        } else {
            for (i, s) in window_sigs.iter().enumerate() {
                write_signature(&numbered(out, i), s)?;
            }
        }
    }
    let mut save_failure = None;
    let mut engine = EngineJson {
        wall_s,
        cpu_s,
        refs_per_s: stats.refs as f64 / cpu_s.max(1e-9),
        valgrind_cpu_s,
        program_exit,
        input_bytes: stats.bytes,
        input_mb_per_s: stats.bytes as f64 / 1e6 / wall_s.max(1e-9),
        sample_rate: rate,
        sample_rate_requested: requested_rate,
        sampled_lines,
        sample_warning,
        sampling: match sampling {
            Sampling::Exact => "exact".into(),
            Sampling::Rate(r) if r == rate => format!("shards fixed rate {r}"),
            Sampling::Rate(r) => format!("shards fixed rate {} (requested {r})", rate_used(rate)),
            Sampling::Size(n) => format!("shards fixed size {n} lines"),
        },
        set_model: set_model.name(),
        compression: compression.into(),
        format: format!("{format:?}").to_lowercase(),
    };
    if args.json || save_key.is_some() {
        let inputs = match input_hash {
            Some(hash) => vec![Input {
                name: source.clone(),
                sha256: Some(
                    hash.finish()
                        .map_err(|e| anyhow::anyhow!("{source}: cannot read the trace: {e}"))?,
                ),
            }],
            None => Vec::new(),
        };
        let doc = SignatureJson {
            provenance: Provenance::with_inputs(inputs),
            name: name.clone(),
            instructions,
            refs: stats.refs,
            line_refs,
            line_bytes: args.line,
            sizes_bytes: SIGNATURE_SIZES.to_vec(),
            assoc: SIGNATURE_ASSOC.to_vec(),
            misses_per_4096: signature.misses.clone(),
            miss_ratio: whole.miss_ratio_curve(args.line),
            windows: windows
                .iter()
                .zip(&window_sigs)
                .map(|(w, s)| WindowJson {
                    first_instruction: w.first_instruction,
                    instructions: w.instructions,
                    misses_per_4096: s.misses.clone(),
                })
                .collect(),
            engine,
        };
        // A failure to save is said once the signature is printed, so the recording is not lost.
        if let Some(key) = &save_key {
            save_failure = save_entry(key, &doc, program_exit, args).err();
        }
        if args.json {
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            return Ok(exit_status(program_exit, save_failure));
        }
        engine = doc.engine;
    }
    if args.csv {
        let whole = (0, instructions, &signature);
        let parts = windows
            .iter()
            .zip(&window_sigs)
            .map(|(w, s)| (w.first_instruction, w.instructions, s));
        write_csv(
            &name,
            std::iter::once(whole).chain(parts),
            args.line,
            std::io::stdout().lock(),
        )?;
        return Ok(exit_status(program_exit, save_failure));
    }
    println!(
        "{name}: {instructions} instructions, {} references ({} cache lines of {} B), {}, {}",
        stats.refs, line_refs, args.line, engine.sampling, engine.set_model
    );
    println!("LLC misses per 4,096 instructions, by associativity (ways) and cache size:");
    print_table(&signature);
    for (w, s) in windows.iter().zip(&window_sigs) {
        println!(
            "\nwindow from instruction {} ({} instructions):",
            w.first_instruction, w.instructions
        );
        print_table(s);
    }
    eprintln!(
        "read {:.1} MB in {:.2} s: {:.1} M references/s of our CPU time ({:.2} s), {:.0} MB/s",
        stats.bytes as f64 / 1e6,
        wall_s,
        engine.refs_per_s / 1e6,
        cpu_s,
        engine.input_mb_per_s
    );
    if let Some(v) = valgrind_cpu_s {
        eprintln!("valgrind (the program under lackey) took {v:.2} s of CPU time");
    }
    Ok(exit_status(program_exit, save_failure))
}

/// The store key of `path`, the executable the command's `program` names. A script is refused:
/// `run` finds a program's entry by the executable the kernel runs, for a script its interpreter,
/// so the script's entry would never be found (and the signature recorded would be the
/// interpreter's, reading the script).
fn executable_key(program: &str, path: &Path) -> anyhow::Result<ExecutableKey> {
    let script = store::is_script(path)
        .map_err(|e| bad_input(format!("--save: {}: {e}", path.display())))?;
    if script {
        return Err(bad_input(format!(
            "--save: {program} is a script (it starts with #!), and `run` identifies a program by its executable, for a script its interpreter, so the entry would never be found; record without --save (--out FILE) and start it with `run --signature FILE`"
        )));
    }
    ExecutableKey::of_path(path).map_err(|e| bad_input(format!("--save: {}: {e}", path.display())))
}

/// Write the store entry of `key`: the signature document without its windows (a store entry is
/// the whole run's signature), unless the program failed.
fn save_entry(
    key: &ExecutableKey,
    doc: &SignatureJson,
    program_exit: Option<i32>,
    args: &SignatureArgs,
) -> anyhow::Result<()> {
    if let Some(code @ 1..) = program_exit {
        eprintln!(
            "hetsched: the signature of {} is not saved: the program exited with status {code}",
            key.path.display()
        );
        return Ok(());
    }
    let serde_json::Value::Object(mut map) = serde_json::to_value(doc)? else {
        unreachable!("a signature document is a JSON object");
    };
    map.remove("windows");
    let store = crate::live::store_of(args.store.as_deref());
    let path = store.save(key, map).map_err(|e| {
        anyhow::anyhow!(
            "cannot save into the signature store {}: {e}",
            store.dir().display()
        )
    })?;
    eprintln!(
        "hetsched: saved the signature of {} (sha256 {}) to {}",
        key.path.display(),
        key.sha256,
        path.display()
    );
    Ok(())
}

/// Our exit status: the recorded program's (said on stderr when not 0); else 1 when the signature
/// could not be saved (said on stderr); else 0.
fn exit_status(program_exit: Option<i32>, save_failure: Option<anyhow::Error>) -> u8 {
    if let Some(e) = &save_failure {
        eprintln!("hetsched: {e:#}");
    }
    match program_exit {
        Some(0) | None => u8::from(save_failure.is_some()),
        Some(code) => {
            eprintln!("hetsched: the recorded program exited with status {code}");
            code.clamp(0, 255) as u8
        }
    }
}

/// The signatures of the trace `name` as CSV rows, given as (first instruction, instructions,
/// signature): the whole trace's first, then each window's. Each signature gives a row per
/// associativity and size, associativity-major, as the rows and columns of its matrix.
fn write_csv<'a>(
    name: &str,
    signatures: impl Iterator<Item = (u64, u64, &'a Signature)>,
    line_bytes: u32,
    out: impl Write,
) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    for (i, (first_instruction, instructions, s)) in signatures.enumerate() {
        for (&assoc, row) in s.assoc.iter().zip(&s.misses) {
            for (&cache_bytes, &misses) in s.sizes_bytes.iter().zip(row) {
                w.serialize(CsvRow {
                    name,
                    // The first signature is the whole trace's.
                    window: i.checked_sub(1),
                    first_instruction,
                    instructions,
                    line_bytes,
                    cache_bytes,
                    assoc,
                    misses_per_4096_instr: misses,
                })?;
            }
        }
    }
    w.flush()?;
    Ok(())
}

/// `out.toml` → `out-3.toml`.
fn numbered(out: &Path, i: usize) -> PathBuf {
    let stem = out
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into());
    let ext = out
        .extension()
        .map_or_else(String::new, |e| format!(".{}", e.to_string_lossy()));
    out.with_file_name(format!("{stem}-{i}{ext}"))
}

fn write_signature(path: &Path, s: &Signature) -> anyhow::Result<()> {
    let mut text = String::from(
        "# Architectural signature (HASS section 3): LLC misses per 4096 instructions, one row per\n# associativity, one column per cache size; made by `hetsched signature`.\n",
    );
    text.push_str(&format!("name = {:?}\n", s.name));
    text.push_str(&format!("sizes_bytes = {:?}\n", s.sizes_bytes));
    text.push_str(&format!("assoc = {:?}\n", s.assoc));
    text.push_str("misses_per_4096 = [\n");
    for row in &s.misses {
        let cells: Vec<String> = row.iter().map(|v| format!("{v:.3}")).collect();
        text.push_str(&format!("  [{}],\n", cells.join(", ")));
    }
    text.push_str("]\n");
    std::fs::write(path, text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

fn size_label(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{}MiB", b >> 20)
    } else {
        format!("{}KiB", b >> 10)
    }
}

/// The paper's table: associativity down, size across.
fn print_table(s: &Signature) {
    print!("{:>6}", "ways");
    for &b in &s.sizes_bytes {
        print!("{:>8}", size_label(b));
    }
    println!();
    for (a, row) in s.assoc.iter().zip(&s.misses) {
        print!("{a:>6}");
        for v in row {
            print!("{:>8}", table_cell(*v));
        }
        println!();
    }
}

/// A cell of the table, at most 7 characters, so that a column of 8 keeps a space before it:
/// two decimals below 100, none below 10^7, else scientific notation.
fn table_cell(v: f64) -> String {
    if v < 100.0 {
        format!("{v:.2}")
    } else if v < 9_999_999.5 {
        format!("{v:.0}")
    } else {
        format!("{v:.1e}")
    }
}

/// A sampling rate used, a multiple of 2^-24: its value and the multiple.
fn rate_used(rate: f64) -> String {
    let multiple = (rate * hetsched_signature::shards::MODULUS as f64).round();
    format!("{rate:.6e} = {multiple}/2^24")
}

fn convert(opened: OpenTrace, out: &Path, source: &str) -> anyhow::Result<()> {
    let file = std::fs::File::create(out)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?;
    let mut w = HsbWriter::new(std::io::BufWriter::new(file))?;
    let mut io_error = None;
    let stats = read_trace(opened.reader, opened.format, &mut |r| {
        if io_error.is_none() {
            if let Err(e) = w.push(r) {
                io_error = Some(e);
            }
        }
    });
    if let Some(e) = io_error {
        return Err(anyhow::anyhow!("cannot write {}: {e}", out.display()));
    }
    let stats = match stats {
        Ok(s) => s,
        Err(e) => {
            drop(w);
            let _ = std::fs::remove_file(out);
            return Err(trace_error(e, source));
        }
    };
    let mut inner = w.finish()?;
    inner.flush()?;
    let written = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "{}: {} references, {:.1} MB in, {:.1} MB hsb out",
        out.display(),
        stats.refs,
        stats.bytes as f64 / 1e6,
        written as f64 / 1e6
    );
    Ok(())
}
