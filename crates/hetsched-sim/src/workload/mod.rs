//! Workloads: apps (processes) made of threads made of phases. A workload file is TOML (format in
//! `docs/workload-format.md`); presets are workload files compiled in (`presets/*.toml`).
//!
//! Thread counts may depend on the machine (`count = "cores"`, `"2*cores"`, `"cores-1"`,
//! `"cores/2"`), as the papers size their runs ("number of OpenMP threads equal to the number of
//! cores", AMPS Table 2), so a workload is resolved against a topology by [`Workload::resolve`].

use hetsched_core::signature::{SIGNATURE_INSTRUCTIONS, SIGNATURE_SIZES};
use hetsched_core::{CpuSet, Signature};
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

mod file;
pub use file::{
    eval_count, MAX_PHASE_INSTRUCTIONS, MAX_PHASE_RUNS, MAX_RATE, MAX_THREADS,
    MAX_WORKLOAD_FILE_BYTES,
};

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::presets::machine_preset;
    use hetsched_core::Topology;

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
            (("count = \"cores\"", "count = \"2000000*cores\""), "w.toml: apps[0].threads[0].count: \"2000000*cores\" comes to 16000000 on this 8-core machine, more than 1048576 threads at once"),
            (("count = \"cores\"", "count = 10000000"), "w.toml: apps[0].threads[0].count: 10000000, more than 1048576 threads at once"),
            (("name = \"omp\"", "name = \"omp\"\ncopies = 200000"), "w.toml: apps[0].copies: more than 1048576 threads at once (the workload comes to 1600000 by this app)"),
            (("count = \"cores\"", "count = 4294967297"), "w.toml: apps[0].threads[0].count: 4294967297, more than 1048576 threads at once"),
            (("count = \"cores\"", "count = \"9223372036854775807*cores\""), "w.toml: apps[0].threads[0].count: \"9223372036854775807*cores\" is too large a count"),
            (("count = \"cores\"", "count = \"cores/16\""), "w.toml: apps[0].threads[0].count: \"cores/16\" comes to 0 on this 8-core machine: the app has no threads"),
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
