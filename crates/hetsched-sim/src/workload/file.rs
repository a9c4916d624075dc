//! The workload file format (`docs/workload-format.md`): the TOML as written, its limits, and its
//! resolution against a machine into a [`Workload`].

use super::{
    profile_signature, AppSpec, MissCurve, Phase, PhaseEnd, ThreadSpec, Workload, CURVE_MIN_BYTES,
};
use hetsched_core::machine_file::SizeField;
use hetsched_core::{CpuSet, InputError, Signature, Topology};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
#[derive(Clone)]
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
    let too_large = || format!("{expr:?} is too large a count");
    let n = (cores as i64).checked_mul(mul).ok_or_else(too_large)?;
    if rest.is_empty() {
        return Ok(n);
    }
    let (op, num) = rest.split_at(1);
    let m: i64 = num.parse().map_err(|_| bad())?;
    match op {
        "+" => n.checked_add(m).ok_or_else(too_large),
        "-" => n.checked_sub(m).ok_or_else(too_large),
        "/" if m > 0 => Ok(n / m),
        _ => Err(bad()),
    }
}

/// A count as the file wrote it, for an error: the number, or the expression and what it came to
/// on this machine.
fn count_text(c: &Option<Count>, value: i64, cores: usize) -> String {
    match c {
        Some(Count::Expr(e)) if e.trim().parse::<i64>().is_err() => {
            format!("{e:?} comes to {value} on this {cores}-core machine")
        }
        _ => value.to_string(),
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

/// Count `c` (1 when absent) for a machine of `cores` cores, checked to lie within
/// `least..=MAX_THREADS`; below `least` the message starts with `below`.
fn thread_count(c: &Option<Count>, cores: usize, least: i64, below: &str) -> Result<i64, String> {
    let v = count_of(c, cores, 1)?;
    if v < least {
        return Err(format!("{below}, got {}", count_text(c, v, cores)));
    }
    if v as u64 > MAX_THREADS {
        return Err(format!(
            "{}, more than {MAX_THREADS} threads at once",
            count_text(c, v, cores)
        ));
    }
    Ok(v)
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
        let text = hetsched_core::input::read_bounded(path, MAX_WORKLOAD_FILE_BYTES)
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
            // The field to lower: the copies of a copied app, else its largest thread group.
            let field = if app.copies > 1 {
                format!("apps[{ai}].copies")
            } else {
                let ti = (0..app.threads.len())
                    .max_by_key(|&ti| (app.threads[ti].count, std::cmp::Reverse(ti)))
                    .unwrap_or(0);
                format!("apps[{ai}].threads[{ti}].count")
            };
            return Err((
                field,
                format!("more than {MAX_THREADS} threads at once (the workload comes to {total} by this app)"),
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
    let copies =
        thread_count(&a.copies, cores, 1, "must be at least 1").map_err(|m| (at("copies"), m))?;
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
    let counts: Vec<Option<Count>> = a.threads.iter().map(|t| t.count.clone()).collect();
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
        // Every group's count is 0 (a count of the cores divided, on a small machine).
        return Err((
            at("threads[0].count"),
            format!(
                "{}: the app has no threads",
                count_text(&counts[0], 0, cores)
            ),
        ));
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
    let count =
        thread_count(&t.count, cores, 0, "must not be negative").map_err(|m| (tat("count"), m))?;
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
