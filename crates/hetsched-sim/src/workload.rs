//! Workloads: apps (processes) made of threads made of phases. A workload file is TOML (format in
//! `docs/workload-format.md`); presets are workload files compiled in (`presets/*.toml`).
//!
//! Thread counts may depend on the machine (`count = "cores"`, `"2*cores"`, `"cores-1"`,
//! `"cores/2"`), as the papers size their runs ("number of OpenMP threads equal to the number of
//! cores", AMPS Table 2), so a workload is resolved against a topology by [`Workload::resolve`].

use hetsched_core::machine_file::SizeField;
use hetsched_core::signature::{SIGNATURE_INSTRUCTIONS, SIGNATURE_SIZES};
use hetsched_core::{CpuSet, InputError, Signature, Topology};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// LLC misses per kilo-instruction as a function of the cache capacity a thread gets.
#[derive(Clone, Debug, PartialEq)]
pub enum MissCurve {
    /// `mpki_max` at 16 KiB and below, falling linearly in log2(size) to `mpki_min` at the working
    /// set size `ws_bytes` and beyond: the shape of the HASS 179.art signature (HASS section 3),
    /// whose misses fall from 427 to ~0 over 256 KB..16 MB.
    Knee {
        /// Misses per kilo-instruction with 16 KiB or less.
        mpki_max: f64,
        /// Misses per kilo-instruction once the working set fits.
        mpki_min: f64,
        /// The working set, bytes: where the curve reaches `mpki_min`.
        ws_bytes: u64,
    },
    /// Values at 16 KiB, 32 KiB, ... (powers of two), log-interpolated; beyond the last, the last.
    /// This is a HASS signature row (misses per 4096 instructions converted to per 1000).
    Table {
        /// Misses per kilo-instruction at 16 KiB, 32 KiB, ...
        mpki: Vec<f64>,
    },
}

/// Smallest cache size of a miss curve (the HASS signature's first column).
pub const CURVE_MIN_BYTES: u64 = 16 << 10;

impl MissCurve {
    /// A thread with no LLC misses and a tiny footprint.
    pub fn none() -> Self {
        MissCurve::Knee {
            mpki_max: 0.0,
            mpki_min: 0.0,
            ws_bytes: CURVE_MIN_BYTES,
        }
    }

    /// Misses per kilo-instruction with the smallest cache (16 KiB): the references that reach
    /// the last-level cache.
    pub fn mpki_smallest(&self) -> f64 {
        match self {
            MissCurve::Knee { mpki_max, .. } => *mpki_max,
            MissCurve::Table { mpki } => mpki.first().copied().unwrap_or(0.0),
        }
    }

    /// Misses per kilo-instruction with `cache_bytes` of cache.
    #[inline]
    pub fn mpki(&self, cache_bytes: f64) -> f64 {
        self.prepared().mpki(cache_bytes)
    }

    /// The curve with what does not depend on the cache size worked out once, for a caller that
    /// evaluates it at every rate change (the simulator's hot path).
    pub fn prepared(&self) -> PreparedCurve<'_> {
        match self {
            MissCurve::Knee {
                mpki_max,
                mpki_min,
                ws_bytes,
            } => PreparedCurve::Knee {
                mpki_max: *mpki_max,
                mpki_min: *mpki_min,
                span: fast_log2(*ws_bytes as f64 / CURVE_MIN_BYTES as f64),
            },
            MissCurve::Table { mpki } => PreparedCurve::Table(mpki),
        }
    }

    /// The footprint: the cache size beyond which misses stop falling.
    pub fn working_set_bytes(&self) -> u64 {
        match self {
            MissCurve::Knee { ws_bytes, .. } => *ws_bytes,
            MissCurve::Table { mpki } => {
                let last = mpki.last().copied().unwrap_or(0.0);
                let i = mpki
                    .iter()
                    .position(|&m| (m - last).abs() <= 1e-9 * (1.0 + last))
                    .unwrap_or(0);
                CURVE_MIN_BYTES << i
            }
        }
    }
}

/// A [`MissCurve`] ready to evaluate ([`MissCurve::prepared`]): the same values, bit for bit.
#[derive(Clone, Copy, Debug)]
pub enum PreparedCurve<'a> {
    /// A knee curve with log2(working set / 16 KiB), the span of its slope, computed.
    Knee {
        /// Misses per kilo-instruction with 16 KiB or less.
        mpki_max: f64,
        /// Misses per kilo-instruction once the working set fits.
        mpki_min: f64,
        /// log2(working set / 16 KiB).
        span: f64,
    },
    /// A table curve.
    Table(&'a [f64]),
}

impl PreparedCurve<'_> {
    /// Misses per kilo-instruction with `cache_bytes` of cache.
    #[inline]
    pub fn mpki(&self, cache_bytes: f64) -> f64 {
        let x = fast_log2(cache_bytes.max(CURVE_MIN_BYTES as f64) / CURVE_MIN_BYTES as f64);
        match *self {
            PreparedCurve::Knee {
                mpki_max,
                mpki_min,
                span,
            } => {
                if span <= 0.0 || x >= span {
                    mpki_min
                } else {
                    mpki_max + (mpki_min - mpki_max) * (x / span)
                }
            }
            PreparedCurve::Table(mpki) => {
                let i = x.floor() as usize;
                if i + 1 >= mpki.len() {
                    return *mpki.last().unwrap_or(&0.0);
                }
                let f = x - i as f64;
                mpki[i] + (mpki[i + 1] - mpki[i]) * f
            }
        }
    }
}

/// log2 of a positive finite normal x to within 1e-9, faster than the libm call: the exponent from
/// the bits, the mantissa folded into [√½, √2), and its log2 from the series 2·atanh(t)/ln 2 with
/// t = (m−1)/(m+1), |t| ≤ 0.172, to the t⁹ term (the next term is below 1e-9). Deterministic.
#[inline]
pub fn fast_log2(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut exp = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        exp += 1;
    }
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let series = t * (1.0 + t2 * (1.0 / 3.0 + t2 * (1.0 / 5.0 + t2 * (1.0 / 7.0 + t2 / 9.0))));
    exp as f64 + series * (2.0 / std::f64::consts::LN_2)
}

/// What a thread does when a phase's instructions are done.
#[derive(Clone, Debug, PartialEq)]
pub enum PhaseEnd {
    /// Go on to the next phase.
    Next,
    /// Wait until every live thread of the app reaches the same barrier (OpenMP-style, blocking).
    Barrier,
    /// Sleep, then go on.
    Sleep {
        /// How long, ns.
        ns: u64,
    },
}

/// A stretch of execution with constant behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// Instructions the phase retires.
    pub instructions: f64,
    /// Cycles per instruction with a perfect LLC on the reference pipeline.
    pub cpi: f64,
    /// LLC misses per kilo-instruction by the cache share the thread gets.
    pub miss: MissCurve,
    /// Fraction of cycles the FPU is busy with this phase's work when it runs alone.
    pub fp_fraction: f64,
    /// Memory-level parallelism: LLC misses the phase keeps in flight at once (prefetch streams,
    /// independent loads), so each costs `latency / mlp` of stall. 1 for dependent misses (pointer
    /// chasing); streaming code reaches about 10 on a core with 10 line-fill buffers (Intel
    /// Optimization Reference Manual, Nehalem L1D fill buffers).
    pub mlp: f64,
    /// Index into the app's data fragments.
    pub data_fragment: Option<usize>,
    /// Whether the phase writes its data fragment (write-invalidate, Pinter section 2.1).
    pub df_writes: bool,
    /// Bytes the phase allocates (first touch, spread over its instructions).
    pub alloc_bytes: u64,
    /// Bytes of the process's memory the phase frees when it ends, oldest pages first (the pages
    /// leave their owners' resident sets: AMPS section 2.4.2, owner lists).
    pub free_bytes: u64,
    /// Run only in the first pass of a repeated phase list (initialisation).
    pub once: bool,
    /// What happens when the phase's instructions are done.
    pub end: PhaseEnd,
}

/// A group of identical threads.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadSpec {
    /// Threads in the group.
    pub count: u32,
    /// What each thread runs, in order.
    pub phases: Vec<Phase>,
    /// How many times the phase list runs.
    pub repeat: u32,
    /// The architectural signature the threads carry (HASS section 3): given in the workload, or
    /// profiled from the phases by [`profile_signature`].
    pub signature: Arc<Signature>,
}

impl ThreadSpec {
    /// A thread group carrying the signature profiled from its phases.
    pub fn new(name: &str, count: u32, phases: Vec<Phase>, repeat: u32) -> Self {
        let signature = Arc::new(profile_signature(name, &phases, repeat));
        ThreadSpec {
            count,
            phases,
            repeat,
            signature,
        }
    }
}

/// The signature an offline profiler would record for a thread running `phases` `repeat` times
/// (HASS section 3: one signature per program, from a whole run): at each cache size, the misses
/// per 4096 instructions averaged over the run, weighted by instructions. The simulator's miss
/// curves do not depend on associativity, so every associativity row is the same.
pub fn profile_signature(name: &str, phases: &[Phase], repeat: u32) -> Signature {
    let weight = |p: &Phase| p.instructions * if p.once { 1.0 } else { repeat as f64 };
    let total: f64 = phases.iter().map(weight).sum();
    let row: Vec<f64> = SIGNATURE_SIZES
        .iter()
        .map(|&size| {
            let misses: f64 = phases
                .iter()
                .map(|p| weight(p) * p.miss.mpki(size as f64))
                .sum();
            if total > 0.0 {
                misses / total * SIGNATURE_INSTRUCTIONS / 1000.0
            } else {
                0.0
            }
        })
        .collect();
    Signature::from_row(name, &row)
}

/// An application: a process of threads.
#[derive(Clone, Debug, PartialEq)]
pub struct AppSpec {
    /// The app's name, as results report it.
    pub name: String,
    /// The service whose requests it serves, if any: apps of one service (several request kinds,
    /// each its own app) count as one application in a workload's headline figure.
    pub service: Option<String>,
    /// Instances running at once.
    pub copies: u32,
    /// Start time, ns.
    pub arrival_ns: u64,
    /// Closed loop: start a new instance when one exits (HASS section 5, AMPS Ogg methodology).
    pub restart: bool,
    /// With `restart`, stop each copy after this many completions.
    pub runs: Option<u32>,
    /// Its thread groups.
    pub threads: Vec<ThreadSpec>,
    /// Sizes of the app's data fragments, bytes.
    pub data_fragments: Vec<u64>,
    /// The CPUs its threads may use (the user's affinity mask, as `taskset` sets it); `None`: all.
    pub cpus: Option<CpuSet>,
}

impl AppSpec {
    /// Threads of one instance.
    pub fn num_threads(&self) -> u32 {
        self.threads.iter().map(|t| t.count).sum()
    }
    /// Instructions of one instance.
    pub fn instructions(&self) -> f64 {
        self.threads
            .iter()
            .map(|t| {
                let per_pass: f64 = t
                    .phases
                    .iter()
                    .filter(|p| !p.once)
                    .map(|p| p.instructions)
                    .sum();
                let once: f64 = t
                    .phases
                    .iter()
                    .filter(|p| p.once)
                    .map(|p| p.instructions)
                    .sum();
                t.count as f64 * (once + t.repeat as f64 * per_pass)
            })
            .sum()
    }
}

/// A resolved workload: every count is a number.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// The workload's name.
    pub name: String,
    /// One line on what it is.
    pub description: String,
    /// Its applications.
    pub apps: Vec<AppSpec>,
}

// ---- the file format ------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileWorkload {
    name: String,
    #[serde(default)]
    description: String,
    apps: Vec<FileApp>,
}

#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "a count: an integer, or \"cores\", \"K*cores\", \"cores+M\", \"cores-M\" or \"cores/K\""
)]
enum Count {
    Int(i64),
    Expr(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileApp {
    name: String,
    service: Option<String>,
    copies: Option<Count>,
    #[serde(default)]
    arrival_s: f64,
    #[serde(default)]
    restart: bool,
    runs: Option<i64>,
    #[serde(default)]
    data_fragments: Vec<SizeField>,
    cpus: Option<String>,
    threads: Vec<FileThreads>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileThreads {
    count: Option<Count>,
    repeat: Option<i64>,
    signature: Option<FileSignature>,
    phases: Vec<FilePhase>,
}

/// A thread group's signature: inline (`signature = { misses_per_4096 = [...] }`), or the path
/// of a signature file (`signature = "prog.json"`, relative to the workload file's directory).
#[derive(Debug)]
enum FileSignature {
    Inline(Signature),
    File(String),
}

impl<'de> Deserialize<'de> for FileSignature {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = FileSignature;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a signature table or the path of a signature file")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FileSignature, E> {
                Ok(FileSignature::File(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<FileSignature, A::Error> {
                // The inline table read as a signature, so its errors keep their field and line.
                Signature::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(FileSignature::Inline)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMiss {
    max: f64,
    min: f64,
    ws: SizeField,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePhase {
    instructions: f64,
    cpi: f64,
    mpki: Option<FileMiss>,
    /// A miss-curve table over 16 KiB, 32 KiB, ... in misses per kilo-instruction.
    mpki_table: Option<Vec<f64>>,
    #[serde(default)]
    fp: f64,
    mlp: Option<f64>,
    df: Option<i64>,
    #[serde(default)]
    df_writes: bool,
    alloc: Option<SizeField>,
    free: Option<SizeField>,
    #[serde(default)]
    barrier: bool,
    sleep_ms: Option<f64>,
    #[serde(default)]
    once: bool,
}

/// Evaluate a thread-count expression: an integer, or `[K*]cores[+-M]`, or `cores/K`.
pub fn eval_count(expr: &str, cores: usize) -> Result<i64, String> {
    let e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let bad = || {
        format!("{expr:?} is not a count (an integer, \"cores\", \"K*cores\", \"cores+M\", \"cores-M\" or \"cores/K\")")
    };
    if let Ok(v) = e.parse::<i64>() {
        return Ok(v);
    }
    let (mul, rest) = match e.split_once('*') {
        Some((k, r)) => (k.parse::<i64>().map_err(|_| bad())?, r),
        None => (1, e.as_str()),
    };
    let rest = rest.strip_prefix("cores").ok_or_else(bad)?;
    let n = cores as i64 * mul;
    if rest.is_empty() {
        return Ok(n);
    }
    let (op, num) = rest.split_at(1);
    let m: i64 = num.parse().map_err(|_| bad())?;
    match op {
        "+" => Ok(n + m),
        "-" => Ok(n - m),
        "/" if m > 0 => Ok(n / m),
        _ => Err(bad()),
    }
}

fn size_of(s: &SizeField) -> Result<u64, String> {
    s.bytes()
}

fn count_of(c: &Option<Count>, cores: usize, default: i64) -> Result<i64, String> {
    match c {
        None => Ok(default),
        Some(Count::Int(v)) => Ok(*v),
        Some(Count::Expr(e)) => eval_count(e, cores),
    }
}

/// Most threads one workload may create at once (a guard against a typo such as `1000*cores`).
pub const MAX_THREADS: u64 = 1 << 20;

/// Most instructions one phase may have: 1e15, about six days of one core at 2 GHz, far beyond any
/// run's simulated duration (larger values are typos, not workloads).
pub const MAX_PHASE_INSTRUCTIONS: f64 = 1e15;

/// Most phases one instance of an app may run (over its threads, repeats and phases). Each phase
/// end is an event; beyond this a run could not finish in bounded time, however short its phases.
pub const MAX_PHASE_RUNS: f64 = 1e9;

/// Largest value a per-instruction rate (CPI, misses per kilo-instruction, memory-level
/// parallelism) may take; real ones are below 100.
pub const MAX_RATE: f64 = 1e4;

/// Largest workload file read, bytes (the largest preset is a few kB).
pub const MAX_WORKLOAD_FILE_BYTES: u64 = 16 << 20;

impl Workload {
    /// Parse a workload file and resolve its counts against a machine. A signature file it names
    /// by a relative path is looked for from the current directory.
    pub fn parse(
        text: &str,
        source_name: &str,
        topology: &Topology,
    ) -> Result<Workload, InputError> {
        Workload::parse_in(text, source_name, Path::new(""), topology)
    }

    /// [`parse`](Self::parse), relative signature file paths taken from directory `dir`.
    pub fn parse_in(
        text: &str,
        source_name: &str,
        dir: &Path,
        topology: &Topology,
    ) -> Result<Workload, InputError> {
        let file: FileWorkload =
            toml::from_str(text).map_err(|e| InputError::from_toml(source_name, text, &e))?;
        resolve(file, topology.num_cores(), dir)
            .map_err(|(field, msg)| InputError::at(source_name, &field, msg))
    }

    /// Read a workload file (signature files it names are relative to its directory).
    pub fn load(path: &Path, topology: &Topology) -> Result<Workload, InputError> {
        let name = path.display().to_string();
        let text = hetsched_core::signature::read_bounded(path, MAX_WORKLOAD_FILE_BYTES)
            .map_err(|e| InputError::unreadable(&name, &e))?;
        let dir = path.parent().unwrap_or(Path::new(""));
        Workload::parse_in(&text, &name, dir, topology)
    }

    /// Threads alive at once when every copy runs.
    pub fn peak_threads(&self) -> u64 {
        self.apps
            .iter()
            .map(|a| a.copies as u64 * a.num_threads() as u64)
            .sum()
    }

    /// True when every app eventually ends (no unbounded closed loop).
    pub fn is_finite(&self) -> bool {
        self.apps.iter().all(|a| !a.restart || a.runs.is_some())
    }
}

/// A number as a person reads it in an error: plain, or in exponent form when very large or small.
fn readable(v: f64) -> String {
    if v != 0.0 && !(1e-6..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// A field path and what is wrong with it.
type FieldError = (String, String);

fn resolve(file: FileWorkload, cores: usize, dir: &Path) -> Result<Workload, FieldError> {
    if file.name.trim().is_empty() {
        return Err(("name".into(), "must not be empty".into()));
    }
    if file.apps.is_empty() {
        return Err(("apps".into(), "at least one app is needed".into()));
    }
    let mut apps = Vec::new();
    let mut total: u64 = 0;
    for (ai, a) in file.apps.into_iter().enumerate() {
        let app = resolve_app(ai, a, cores, dir)?;
        total += app.copies as u64 * app.num_threads() as u64;
        if total > MAX_THREADS {
            return Err((
                format!("apps[{ai}].copies"),
                format!("more than {MAX_THREADS} threads at once"),
            ));
        }
        apps.push(app);
    }
    Ok(Workload {
        name: file.name,
        description: file.description,
        apps,
    })
}

/// App `ai` of the file, checked, with counts evaluated for a machine of `cores` cores.
fn resolve_app(ai: usize, a: FileApp, cores: usize, dir: &Path) -> Result<AppSpec, FieldError> {
    let at = |f: &str| format!("apps[{ai}].{f}");
    let copies = count_of(&a.copies, cores, 1).map_err(|m| (at("copies"), m))?;
    if copies < 1 {
        return Err((at("copies"), format!("must be at least 1, got {copies}")));
    }
    if !(a.arrival_s.is_finite() && (0.0..=1e6).contains(&a.arrival_s)) {
        return Err((
            at("arrival_s"),
            format!(
                "must be a time between 0 and 1e6 s, got {}",
                readable(a.arrival_s)
            ),
        ));
    }
    let runs = match a.runs {
        Some(r) if r < 1 => return Err((at("runs"), format!("must be at least 1, got {r}"))),
        Some(_) if !a.restart => {
            return Err((at("runs"), "only makes sense with restart = true".into()))
        }
        r => r.map(|r| r as u32),
    };
    let mut dfs = Vec::new();
    for (di, d) in a.data_fragments.iter().enumerate() {
        let b = size_of(d).map_err(|m| (at(&format!("data_fragments[{di}]")), m))?;
        if b == 0 {
            return Err((
                at(&format!("data_fragments[{di}]")),
                "must be more than 0 bytes".into(),
            ));
        }
        dfs.push(b);
    }
    if a.threads.is_empty() {
        return Err((at("threads"), "at least one thread group is needed".into()));
    }
    let mut threads = Vec::new();
    for (ti, t) in a.threads.into_iter().enumerate() {
        threads.push(resolve_threads(ai, ti, t, &a.name, dfs.len(), cores, dir)?);
    }
    let cpus = match &a.cpus {
        None => None,
        Some(list) => Some(app_cpus(list, cores).map_err(|m| (at("cpus"), m))?),
    };
    if a.service.as_deref().is_some_and(|s| s.trim().is_empty()) {
        return Err((at("service"), "an empty service name".into()));
    }
    let app = AppSpec {
        cpus,
        name: a.name,
        service: a.service,
        copies: copies as u32,
        arrival_ns: (a.arrival_s * 1e9) as u64,
        restart: a.restart,
        runs,
        threads,
        data_fragments: dfs,
    };
    if app.num_threads() == 0 {
        return Err((at("threads"), "the app has no threads".into()));
    }
    let phase_runs: f64 = app
        .threads
        .iter()
        .map(|t| f64::from(t.count) * f64::from(t.repeat) * t.phases.len() as f64)
        .sum();
    if phase_runs > MAX_PHASE_RUNS {
        return Err((
            at("threads"),
            format!(
                "its threads would run {phase_runs:.3e} phases, more than the {MAX_PHASE_RUNS:.0e} a run can finish (lower repeat or count)"
            ),
        ));
    }
    Ok(app)
}

/// Thread group `ti` of app `ai` (named `app`, with `dfs` data fragments), checked; its signature
/// given inline, read from a file (a relative path from `dir`), or profiled from its phases.
fn resolve_threads(
    ai: usize,
    ti: usize,
    t: FileThreads,
    app: &str,
    dfs: usize,
    cores: usize,
    dir: &Path,
) -> Result<ThreadSpec, FieldError> {
    let tat = |f: &str| format!("apps[{ai}].threads[{ti}].{f}");
    let count = count_of(&t.count, cores, 1).map_err(|m| (tat("count"), m))?;
    if count < 0 {
        return Err((tat("count"), format!("must not be negative, got {count}")));
    }
    let repeat = t.repeat.unwrap_or(1);
    if repeat < 1 {
        return Err((tat("repeat"), format!("must be at least 1, got {repeat}")));
    }
    if t.phases.is_empty() {
        return Err((tat("phases"), "at least one phase is needed".into()));
    }
    if t.phases.iter().all(|p| p.once) && repeat > 1 {
        return Err((
            tat("phases"),
            "with repeat > 1, at least one phase must not be `once`".into(),
        ));
    }
    let mut phases = Vec::new();
    for (pi, p) in t.phases.into_iter().enumerate() {
        let pat = |f: &str| format!("apps[{ai}].threads[{ti}].phases[{pi}].{f}");
        phases.push(resolve_phase(p, dfs, &pat)?);
    }
    let signature = match t.signature {
        Some(FileSignature::Inline(sig)) => {
            sig.validate()
                .map_err(|(f, m)| (tat(&format!("signature.{f}")), m))?;
            sig
        }
        Some(FileSignature::File(path)) => {
            if path.trim().is_empty() {
                return Err((tat("signature"), "an empty file name".into()));
            }
            let path: PathBuf = dir.join(&path);
            // The error names the signature file and what is wrong in it, after the field.
            Signature::load(&path).map_err(|e| (tat("signature"), e.to_string()))?
        }
        None => profile_signature(app, &phases, repeat as u32),
    };
    Ok(ThreadSpec {
        count: count as u32,
        phases,
        repeat: repeat as u32,
        signature: Arc::new(signature),
    })
}

/// One phase, checked; `pat` names a field of it, `dfs` is its app's number of data fragments.
fn resolve_phase(
    p: FilePhase,
    dfs: usize,
    pat: &dyn Fn(&str) -> String,
) -> Result<Phase, FieldError> {
    if !(p.instructions.is_finite()
        && p.instructions > 0.0
        && p.instructions <= MAX_PHASE_INSTRUCTIONS)
    {
        return Err((
            pat("instructions"),
            format!(
                "must be positive and at most {MAX_PHASE_INSTRUCTIONS:.0e}, got {}",
                readable(p.instructions)
            ),
        ));
    }
    if !(p.cpi.is_finite() && p.cpi > 0.0 && p.cpi <= MAX_RATE) {
        return Err((
            pat("cpi"),
            format!(
                "must be positive and at most {MAX_RATE:.0e}, got {}",
                readable(p.cpi)
            ),
        ));
    }
    if !(0.0..=1.0).contains(&p.fp) {
        return Err((
            pat("fp"),
            format!("must be a fraction in [0, 1], got {}", readable(p.fp)),
        ));
    }
    let miss = miss_curve(p.mpki, p.mpki_table, pat)?;
    let data_fragment = match p.df {
        Some(d) if d < 0 || d as usize >= dfs => {
            return Err((
                pat("df"),
                format!("no data fragment {d} (the app has {dfs})"),
            ))
        }
        Some(d) => Some(d as usize),
        None => None,
    };
    if p.df_writes && data_fragment.is_none() {
        return Err((pat("df_writes"), "needs a df".into()));
    }
    let alloc_bytes = match &p.alloc {
        Some(s) => size_of(s).map_err(|e| (pat("alloc"), e))?,
        None => 0,
    };
    let free_bytes = match &p.free {
        Some(s) => size_of(s).map_err(|e| (pat("free"), e))?,
        None => 0,
    };
    let end = phase_end(p.barrier, p.sleep_ms, pat)?;
    let mlp = p.mlp.unwrap_or(1.0);
    if !(mlp.is_finite() && (1.0..=MAX_RATE).contains(&mlp)) {
        return Err((
            pat("mlp"),
            format!(
                "must be between 1 and {MAX_RATE:.0e}, got {}",
                readable(mlp)
            ),
        ));
    }
    Ok(Phase {
        instructions: p.instructions,
        cpi: p.cpi,
        miss,
        fp_fraction: p.fp,
        mlp,
        data_fragment,
        df_writes: p.df_writes,
        alloc_bytes,
        free_bytes,
        once: p.once,
        end,
    })
}

/// A phase's miss curve: a knee (`mpki`), a table (`mpki_table`), or none.
fn miss_curve(
    knee: Option<FileMiss>,
    table: Option<Vec<f64>>,
    pat: &dyn Fn(&str) -> String,
) -> Result<MissCurve, FieldError> {
    Ok(match (knee, table) {
        (Some(_), Some(_)) => {
            return Err((pat("mpki"), "give mpki or mpki_table, not both".into()))
        }
        (Some(m), None) => {
            let ws = size_of(&m.ws).map_err(|e| (pat("mpki.ws"), e))?;
            if !(m.max.is_finite() && m.min.is_finite() && m.min >= 0.0 && m.max >= m.min)
                || m.max > MAX_RATE
            {
                return Err((
                    pat("mpki"),
                    format!(
                        "need 0 <= min <= max <= {MAX_RATE:.0e}, got min {} max {}",
                        m.min, m.max
                    ),
                ));
            }
            MissCurve::Knee {
                mpki_max: m.max,
                mpki_min: m.min,
                ws_bytes: ws.max(CURVE_MIN_BYTES),
            }
        }
        (None, Some(t)) => {
            if t.is_empty()
                || t.iter()
                    .any(|v| !(v.is_finite() && (0.0..=MAX_RATE).contains(v)))
            {
                return Err((
                    pat("mpki_table"),
                    format!("needs values between 0 and {MAX_RATE:.0e}"),
                ));
            }
            MissCurve::Table { mpki: t }
        }
        (None, None) => MissCurve::none(),
    })
}

/// How a phase ends: a barrier, a sleep, or the next phase.
fn phase_end(
    barrier: bool,
    sleep_ms: Option<f64>,
    pat: &dyn Fn(&str) -> String,
) -> Result<PhaseEnd, FieldError> {
    Ok(match (barrier, sleep_ms) {
        (true, Some(_)) => {
            return Err((
                pat("barrier"),
                "a phase ends in a barrier or a sleep, not both".into(),
            ))
        }
        (true, None) => PhaseEnd::Barrier,
        (false, Some(ms)) if ms.is_finite() && ms > 0.0 && ms <= 3.6e6 => PhaseEnd::Sleep {
            ns: (ms * 1e6) as u64,
        },
        (false, Some(ms)) => {
            return Err((
                pat("sleep_ms"),
                format!(
                    "must be positive and at most an hour (3.6e6 ms), got {}",
                    readable(ms)
                ),
            ))
        }
        (false, None) => PhaseEnd::Next,
    })
}

/// An app's CPU list, on a machine of `cores` cores.
fn app_cpus(list: &str, cores: usize) -> Result<CpuSet, String> {
    let set = CpuSet::parse_list(list)?;
    if set.is_empty() {
        return Err("must name at least one CPU".into());
    }
    if let Some(last) = set.iter().last() {
        if last.index() >= cores {
            return Err(format!(
                "CPU {} is not on this machine ({cores} cores)",
                last.0
            ));
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::presets::machine_preset;

    fn smp() -> Topology {
        machine_preset("amps-smp").unwrap().unwrap()
    }

    #[test]
    fn counts() {
        assert_eq!(eval_count("cores", 8), Ok(8));
        assert_eq!(eval_count("4*cores", 8), Ok(32));
        assert_eq!(eval_count("cores-1", 8), Ok(7));
        assert_eq!(eval_count("2 * cores + 3", 8), Ok(19));
        assert_eq!(eval_count("cores/2", 8), Ok(4));
        assert_eq!(eval_count("12", 8), Ok(12));
        assert!(eval_count("threads", 8).is_err());
        assert!(eval_count("cores/0", 8).is_err());
    }

    #[test]
    fn fast_log2_is_accurate() {
        for &x in &[
            1.0,
            1.5,
            2.0,
            3.0,
            1024.0,
            1e6,
            12345.678,
            1.0000001,
            65536.0 * 1.9999,
        ] {
            assert!(
                (fast_log2(x) - f64::log2(x)).abs() < 1e-9,
                "{x}: {}",
                fast_log2(x) - f64::log2(x)
            );
        }
    }

    #[test]
    fn knee_curve_shape() {
        let c = MissCurve::Knee {
            mpki_max: 40.0,
            mpki_min: 2.0,
            ws_bytes: 16 << 20,
        };
        assert_eq!(c.mpki(1024.0), 40.0);
        assert_eq!(c.mpki((16u64 << 20) as f64), 2.0);
        assert_eq!(c.mpki(1e12), 2.0);
        let mid = c.mpki((512u64 << 10) as f64); // halfway in log2 from 16 KiB to 16 MiB
        assert!((mid - 21.0).abs() < 1e-9, "{mid}");
        assert_eq!(c.working_set_bytes(), 16 << 20);
    }

    #[test]
    fn table_curve_interpolates() {
        let c = MissCurve::Table {
            mpki: vec![100.0, 50.0, 10.0, 10.0],
        };
        assert_eq!(c.mpki(16384.0), 100.0);
        assert!((c.mpki(16384.0 * 2f64.sqrt()) - 75.0).abs() < 1e-6);
        assert_eq!(c.mpki(1e9), 10.0);
        assert_eq!(c.working_set_bytes(), 64 << 10);
    }

    const GOOD: &str = r#"
name = "w"
[[apps]]
name = "omp"
data_fragments = ["1 MiB"]
[[apps.threads]]
count = "cores"
repeat = 3
[[apps.threads.phases]]
instructions = 1e8
cpi = 1.0
mpki = { max = 20, min = 1, ws = "8 MiB" }
fp = 0.5
df = 0
barrier = true
"#;

    #[test]
    fn parses_and_resolves_against_the_machine() {
        let w = Workload::parse(GOOD, "w.toml", &smp()).unwrap();
        assert_eq!(w.apps[0].threads[0].count, 8);
        assert_eq!(w.apps[0].instructions(), 8.0 * 3.0 * 1e8);
        assert_eq!(w.apps[0].threads[0].phases[0].end, PhaseEnd::Barrier);
        assert_eq!(w.peak_threads(), 8);
        assert!(w.is_finite());
    }

    #[test]
    fn malformed_workloads_name_the_field() {
        let cases = [
            (("cpi = 1.0", "cpi = -1.0"), "w.toml: apps[0].threads[0].phases[0].cpi: must be positive and at most 1e4, got -1"),
            (("fp = 0.5", "fp = 1.5"), "w.toml: apps[0].threads[0].phases[0].fp: must be a fraction in [0, 1], got 1.5"),
            (("fp = 0.5", "fp = 0.5\nmlp = 0.5"), "w.toml: apps[0].threads[0].phases[0].mlp: must be between 1 and 1e4, got 0.5"),
            (("df = 0", "df = 3"), "w.toml: apps[0].threads[0].phases[0].df: no data fragment 3 (the app has 1)"),
            (("count = \"cores\"", "count = \"lots\""), "w.toml: apps[0].threads[0].count: \"lots\" is not a count (an integer, \"cores\", \"K*cores\", \"cores+M\", \"cores-M\" or \"cores/K\")"),
            (("count = \"cores\"", "count = \"2000000*cores\""), "w.toml: apps[0].copies: more than 1048576 threads at once"),
            (("barrier = true", "barrier = true\nsleep_ms = 3"), "w.toml: apps[0].threads[0].phases[0].barrier: a phase ends in a barrier or a sleep, not both"),
            (("repeat = 3", "repeat = 0"), "w.toml: apps[0].threads[0].repeat: must be at least 1, got 0"),
            (("min = 1", "min = 30"), "w.toml: apps[0].threads[0].phases[0].mpki: need 0 <= min <= max <= 1e4, got min 30 max 20"),
            (("cpi = 1.0", "cpi = 1e300"), "w.toml: apps[0].threads[0].phases[0].cpi: must be positive and at most 1e4, got 1e300"),
            (("repeat = 3", "repeat = 3e9"), "w.toml: line 8: repeat: invalid type: floating point `3000000000.0`, expected i64"),
            (("cpi = 1.0", "cpu = 1.0"), "w.toml: line 11: unknown field `cpu`, expected one of `instructions`, `cpi`, `mpki`, `mpki_table`, `fp`, `mlp`, `df`, `df_writes`, `alloc`, `free`, `barrier`, `sleep_ms`, `once`"),
        ];
        for ((from, to), want) in cases {
            let text = GOOD.replacen(from, to, 1);
            assert_ne!(text, GOOD);
            assert_eq!(
                Workload::parse(&text, "w.toml", &smp())
                    .unwrap_err()
                    .to_string(),
                want
            );
        }
    }

    #[test]
    fn signatures_are_profiled_from_the_phases_or_given() {
        let w = Workload::parse(GOOD, "w.toml", &smp()).unwrap();
        let sig = &w.apps[0].threads[0].signature;
        // The knee: 20 misses per kilo-instruction at 16 KiB = 81.92 per 4096, 1 beyond 8 MiB.
        assert!((sig.misses_at(16 << 10, 8) - 20.0 * 4.096).abs() < 1e-9);
        assert!((sig.misses_at(16 << 20, 8) - 4.096).abs() < 1e-9);
        // Two phases of equal instructions: the average.
        let two = GOOD.replace(
            "barrier = true\n",
            "barrier = true\n[[apps.threads.phases]]\ninstructions = 1e8\ncpi = 1.0\n",
        );
        let w2 = Workload::parse(&two, "w.toml", &smp()).unwrap();
        let s2 = &w2.apps[0].threads[0].signature;
        assert!((s2.misses_at(16 << 10, 8) - 10.0 * 4.096).abs() < 1e-9);
        // Given in the file.
        let given = GOOD.replace(
            "repeat = 3\n",
            "repeat = 3\nsignature = { misses_per_4096 = [[427, 1], [427, 1]], assoc = [4, 8], sizes_bytes = [262144, 16777216] }\n",
        );
        let w3 = Workload::parse(&given, "w.toml", &smp()).unwrap();
        assert_eq!(
            w3.apps[0].threads[0].signature.misses_at(256 << 10, 4),
            427.0
        );
        let bad = given.replace("[427, 1], [427, 1]", "[427, 1]");
        assert_eq!(
            Workload::parse(&bad, "w.toml", &smp()).unwrap_err().to_string(),
            "w.toml: apps[0].threads[0].signature.misses_per_4096: needs one row per associativity (2), got 1"
        );
    }

    #[test]
    fn a_signature_may_be_a_file_next_to_the_workload() {
        let dir = std::env::temp_dir().join(format!("hs-wl-sig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("art.json"),
            r#"{"name": "art", "misses_per_4096": [[427, 1], [427, 1]], "assoc": [4, 8], "sizes_bytes": [262144, 16777216]}"#,
        )
        .unwrap();
        let named = |file: &str| {
            GOOD.replace(
                "repeat = 3\n",
                &format!("repeat = 3\nsignature = \"{file}\"\n"),
            )
        };
        let wl = dir.join("w.toml");
        std::fs::write(&wl, named("art.json")).unwrap();
        let w = Workload::load(&wl, &smp()).unwrap();
        let sig = &w.apps[0].threads[0].signature;
        assert_eq!(sig.name, "art");
        assert_eq!(sig.misses_at(256 << 10, 4), 427.0);
        assert_eq!(sig.misses_at(16 << 20, 8), 1.0);
        // A missing file: one line naming the workload, the field and the file.
        std::fs::write(&wl, named("gone.json")).unwrap();
        let e = Workload::load(&wl, &smp()).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: apps[0].threads[0].signature: {}: cannot read: No such file or directory (os error 2)",
                wl.display(),
                dir.join("gone.json").display()
            )
        );
        // A malformed one: the field, the file and its own field.
        std::fs::write(dir.join("bad.json"), r#"{"misses_per_4096": [[1]]}"#).unwrap();
        std::fs::write(&wl, named("bad.json")).unwrap();
        let e = Workload::load(&wl, &smp()).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: apps[0].threads[0].signature: {}: misses_per_4096: needs one row per associativity (4), got 1",
                wl.display(),
                dir.join("bad.json").display()
            )
        );
        // A value of neither form.
        let e = Workload::parse(&named("x").replace("\"x\"", "3"), "w.toml", &smp())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("signature")
                && e.contains("a signature table or the path of a signature file"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn app_cpu_masks_are_checked_against_the_machine() {
        let on = |cpus: &str| {
            GOOD.replacen(
                "name = \"omp\"\n",
                &format!("name = \"omp\"\ncpus = \"{cpus}\"\n"),
                1,
            )
        };
        let w = Workload::parse(&on("2-3"), "w.toml", &smp()).unwrap();
        assert_eq!(w.apps[0].cpus.as_ref().unwrap().to_list(), "2-3");
        assert_eq!(
            Workload::parse(&on("6-9"), "w.toml", &smp())
                .unwrap_err()
                .to_string(),
            "w.toml: apps[0].cpus: CPU 9 is not on this machine (8 cores)"
        );
        assert!(Workload::parse(&on("x"), "w.toml", &smp())
            .unwrap_err()
            .to_string()
            .starts_with("w.toml: apps[0].cpus: "));
    }
}
