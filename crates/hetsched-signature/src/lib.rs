//! Architectural signatures from memory traces (HASS section 3): read a trace (valgrind lackey,
//! Dinero din, or our binary hsb; plain, gzip or zstd), compute LRU stack distances over cache
//! lines, exactly ([`exact`]) or by SHARDS sampling ([`shards`]), and turn the histogram into
//! miss-ratio curves and the signature matrix of misses per 4096 instructions for cache sizes
//! 16 KB..16 MB and associativities 4..32 ([`histogram`]), the set-associative misses from exact
//! per-set stack distances of set-indexed caches ([`setassoc`]). Recorded signatures are kept in a
//! store keyed by executable ([`store`]).

pub mod exact;
pub mod histogram;
pub mod hsb;
mod huge_pages;
pub mod input;
mod linemap;
pub mod profile;
pub mod readers;
pub mod record;
pub mod setassoc;
pub mod shards;
pub mod store;
pub mod synthetic;
pub mod trace;

pub use histogram::Histogram;
pub use profile::{ProfileConfig, Profiler, Sampling, SetModel, WindowProfile};
pub use trace::{Format, Kind, Ref, TraceError};

/// Profile a whole trace: (windows, trace references read, input bytes).
pub fn profile_reader(
    reader: impl std::io::Read,
    format: Format,
    cfg: ProfileConfig,
) -> Result<(Vec<WindowProfile>, readers::ReadStats, f64), TraceError> {
    let mut p = Profiler::new(cfg);
    let stats = readers::read_trace_into(reader, format, &mut p)?;
    let rate = p.sample_rate();
    Ok((p.finish(), stats, rate))
}
