//! From references to signatures: cache lines of each reference through a stack-distance engine
//! (exact or SHARDS) into a histogram, one per window of instructions when asked.

use crate::exact::ExactStack;
use crate::histogram::Histogram;
use crate::setassoc::SetIndexed;
use crate::shards::Shards;
use crate::trace::{Kind, Ref};
use hetsched_core::Signature;

/// How distances are computed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    Exact,
    /// SHARDS at a fixed rate.
    Rate(f64),
    /// SHARDS with at most this many lines in the sample.
    Size(usize),
}

/// How the misses of set-associative caches are found.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum SetModel {
    /// Exact per-set stack distances of set-indexed caches (line number modulo the number of
    /// sets), every set count of the grid in the same pass ([`crate::setassoc`]).
    #[default]
    Indexed,
    /// The binomial approximation from the fully associative distances alone (lines assumed to
    /// fall into sets at random); cheaper, and wrong for working sets about the cache's size.
    Binomial,
}

impl SetModel {
    pub fn name(self) -> &'static str {
        match self {
            SetModel::Indexed => "set-indexed",
            SetModel::Binomial => "binomial approximation",
        }
    }
}

/// Profiling settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileConfig {
    /// Cache line size, bytes (a power of two).
    pub line_bytes: u32,
    pub sampling: Sampling,
    /// Emit one signature per this many instructions (HASS section 7's phase signatures).
    pub window: Option<u64>,
    /// Instruction fetches reference the cache too (the LLC is unified); default: data only, as
    /// MICA's data-stream reuse distance, which HASS used.
    pub include_instructions: bool,
    /// The signature's name.
    pub name: String,
    pub set_model: SetModel,
}

impl Default for ProfileConfig {
    fn default() -> Self {
        ProfileConfig {
            line_bytes: 64,
            sampling: Sampling::Exact,
            window: None,
            include_instructions: false,
            name: String::new(),
            set_model: SetModel::Indexed,
        }
    }
}

/// Lines the exact engine looks up ahead of processing them: the hash-map slot of a line is
/// prefetched this many references before its distance is taken, which hides most of a memory
/// latency when the working set is larger than the caches.
const LOOKAHEAD: usize = 16;

/// References the two-pass path takes in one batch (an hsb block holds at most as many; a larger
/// batch is split).
const NOTE_CAPACITY: usize = crate::hsb::MAX_BLOCK_RECORDS;

/// The first and last cache lines of an access of `size` bytes at `addr` (a size of 0 counts
/// as 1).
#[inline(always)]
fn lines(addr: u64, size: u32, shift: u32) -> (u64, u64) {
    let first = addr >> shift;
    let last = addr.saturating_add(size.max(1) as u64 - 1) >> shift;
    (first, last)
}

/// The data references (address, size) a batch's first pass notes: `NOTE_CAPACITY` of each once
/// used.
#[derive(Default)]
struct Noted {
    addr: Vec<u64>,
    size: Vec<u32>,
}

impl Noted {
    /// Both arrays, made on first use.
    fn arrays(&mut self) -> (&mut [u64; NOTE_CAPACITY], &mut [u32; NOTE_CAPACITY]) {
        if self.addr.is_empty() {
            // Zeroed allocations: pages the batches never reach are never touched.
            self.addr = vec![0; NOTE_CAPACITY];
            self.size = vec![0; NOTE_CAPACITY];
        }
        match (
            self.addr.as_mut_slice().try_into(),
            self.size.as_mut_slice().try_into(),
        ) {
            (Ok(addr), Ok(size)) => (addr, size),
            _ => unreachable!("the notes hold NOTE_CAPACITY references"),
        }
    }
}

/// One line reference through the exact engine and the set-indexed model.
#[inline(always)]
fn exact_ref(e: &mut ExactStack, set: &mut SetIndexed, line: u64, hist: &mut Histogram) {
    let reuse = e.access_numbered(line);
    match reuse.distance {
        Some(d) => hist.add(d, 1.0),
        None => hist.add_cold(1.0),
    }
    set.access_after(line, reuse);
}

/// The second pass of a batch for the exact engine: the noted references' lines, each hash-map
/// slot prefetched `LOOKAHEAD` references ahead; the line references counted.
#[inline(always)]
fn feed_exact(
    e: &mut ExactStack,
    set: &mut SetIndexed,
    (addrs, sizes): (&[u64], &[u32]),
    shift: u32,
    hist: &mut Histogram,
) -> u64 {
    let mut line_refs = 0;
    for (i, (&addr, &size)) in addrs.iter().zip(sizes).enumerate() {
        if let Some(&ahead) = addrs.get(i + LOOKAHEAD) {
            e.prefetch(ahead >> shift);
        }
        let (first, last) = lines(addr, size, shift);
        line_refs += last - first + 1;
        for line in first..=last {
            exact_ref(e, set, line, hist);
        }
    }
    line_refs
}

/// `feed_exact` compiled for the popcnt instruction: a count within a bitset word, once a
/// reference, is one instruction instead of a dozen (baseline x86-64 has no popcnt).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn feed_exact_popcnt(
    e: &mut ExactStack,
    set: &mut SetIndexed,
    noted: (&[u64], &[u32]),
    shift: u32,
    hist: &mut Histogram,
) -> u64 {
    feed_exact(e, set, noted, shift, hist)
}

/// `feed_exact` in the fastest form this CPU runs.
fn feed_exact_fastest(
    e: &mut ExactStack,
    set: &mut SetIndexed,
    noted: (&[u64], &[u32]),
    shift: u32,
    hist: &mut Histogram,
) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has popcnt (checked just above).
        return unsafe { feed_exact_popcnt(e, set, noted, shift, hist) };
    }
    feed_exact(e, set, noted, shift, hist)
}

/// The first pass of a batch: (data references, how many were noted). Each data reference is
/// written to the next free place and kept there when `keep` says so: no branch on `keep`.
#[inline(always)]
fn note_data(
    refs: impl Iterator<Item = Ref>,
    noted_addr: &mut [u64; NOTE_CAPACITY],
    noted_size: &mut [u32; NOTE_CAPACITY],
    keep: impl Fn(u64, u32) -> bool,
) -> (u64, usize) {
    let (data, kept) = refs.fold((0u64, 0usize), |(data, kept), r| {
        if r.kind == Kind::Instr {
            return (data, kept);
        }
        // The mask keeps the index in the arrays (`kept` is below the batch's length anyway).
        noted_addr[kept % NOTE_CAPACITY] = r.addr;
        noted_size[kept % NOTE_CAPACITY] = r.size;
        (data + 1, kept + keep(r.addr, r.size) as usize)
    });
    (data, kept.min(NOTE_CAPACITY))
}

enum Engine {
    Exact(ExactStack),
    Shards(Shards),
}

/// One window's (or the whole trace's) result.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowProfile {
    /// Instructions before the window started.
    pub first_instruction: u64,
    pub instructions: u64,
    /// Cache-line references counted.
    pub line_refs: u64,
    pub histogram: Histogram,
}

impl WindowProfile {
    pub fn signature(&self, name: &str, line_bytes: u32) -> Signature {
        self.histogram
            .signature(name, self.instructions, line_bytes)
    }
}

/// Streams references into windows.
pub struct Profiler {
    cfg: ProfileConfig,
    shift: u32,
    engine: Engine,
    /// The set-indexed model: fed every line reference, whichever the engine (empty with the
    /// binomial approximation).
    sets: SetIndexed,
    current: WindowProfile,
    done: Vec<WindowProfile>,
    /// Lines waiting for the exact engine (prefetched), oldest at `ahead_start`.
    ahead: [u64; LOOKAHEAD],
    ahead_len: usize,
    ahead_start: usize,
    /// Trace references (records that are memory accesses) seen.
    pub refs: u64,
    /// The references a batch's first pass notes for the engine.
    noted: Noted,
}

impl Profiler {
    /// A profiler; `line_bytes` must be a power of two (checked by the caller's input parsing).
    pub fn new(cfg: ProfileConfig) -> Self {
        let shift = cfg.line_bytes.max(1).trailing_zeros();
        let sets = match (cfg.set_model, cfg.sampling) {
            (SetModel::Indexed, Sampling::Exact) => SetIndexed::for_grid(cfg.line_bytes),
            // A sampled engine knows only its sample's lines: the model keeps every line's time.
            (SetModel::Indexed, _) => SetIndexed::for_grid(cfg.line_bytes).with_clock(),
            (SetModel::Binomial, _) => SetIndexed::none(),
        };
        let engine = match cfg.sampling {
            Sampling::Exact => Engine::Exact(ExactStack::new()),
            Sampling::Rate(r) => Engine::Shards(Shards::fixed_rate(r)),
            Sampling::Size(n) => Engine::Shards(Shards::fixed_size(n)),
        };
        Profiler {
            cfg,
            shift,
            engine,
            sets,
            current: WindowProfile {
                first_instruction: 0,
                instructions: 0,
                line_refs: 0,
                histogram: Histogram::default(),
            },
            done: Vec::new(),
            ahead: [0; LOOKAHEAD],
            ahead_len: 0,
            ahead_start: 0,
            refs: 0,
            noted: Noted::default(),
        }
    }

    /// Process one reference.
    #[inline(always)]
    pub fn push(&mut self, r: Ref) {
        self.refs += 1;
        if r.kind == Kind::Instr {
            self.current.instructions += 1;
            if let Some(w) = self.cfg.window {
                if self.current.instructions >= w {
                    self.close_window();
                }
            }
            if !self.cfg.include_instructions {
                return;
            }
        }
        let (first, last) = lines(r.addr, r.size, self.shift);
        self.current.line_refs += last - first + 1;
        let hist = &mut self.current.histogram;
        match &mut self.engine {
            Engine::Shards(s) => {
                for line in first..=last {
                    s.access(line, hist);
                    self.sets.access(line);
                }
            }
            Engine::Exact(e) => {
                let set = &mut self.sets;
                for line in first..=last {
                    e.prefetch(line);
                    if self.ahead_len == LOOKAHEAD {
                        let old = self.ahead[self.ahead_start];
                        exact_ref(e, set, old, hist);
                        self.ahead[self.ahead_start] = line;
                        self.ahead_start = (self.ahead_start + 1) % LOOKAHEAD;
                    } else {
                        self.ahead[(self.ahead_start + self.ahead_len) % LOOKAHEAD] = line;
                        self.ahead_len += 1;
                    }
                }
            }
        }
    }

    /// Take the distances of the lines still waiting (before a window closes).
    fn drain(&mut self) {
        if let Engine::Exact(e) = &mut self.engine {
            let set = &mut self.sets;
            let hist = &mut self.current.histogram;
            for k in 0..self.ahead_len {
                let line = self.ahead[(self.ahead_start + k) % LOOKAHEAD];
                exact_ref(e, set, line, hist);
            }
        }
        self.ahead_len = 0;
        self.ahead_start = 0;
    }

    /// Process a batch of references.
    pub fn push_all(&mut self, refs: &[Ref]) {
        for chunk in refs.chunks(NOTE_CAPACITY) {
            self.push_iter(chunk.iter().copied());
        }
    }

    /// Process references as an iterator yields them (a decoder's, fused into this loop).
    ///
    /// Without windows and instruction references, a batch goes in two passes. The first, fused
    /// with the decoder, keeps its state in registers and calls nothing (a call in the loop would
    /// push that state to the stack): it counts, and notes in order the data references the
    /// engine must see: all of them for the exact engine; for SHARDS those whose first line's
    /// hash is in the sample and those that span lines (the hash is checked again, per line, in
    /// the second pass). The second pass hands the noted references' lines to the engine.
    #[inline(always)]
    pub fn push_iter(&mut self, refs: impl ExactSizeIterator<Item = Ref>) {
        let n = refs.len();
        if self.cfg.window.is_some()
            || self.cfg.include_instructions
            || !(1..=NOTE_CAPACITY).contains(&n)
        {
            // `for_each` rather than a loop: it folds, which keeps a decoder's state in registers.
            refs.for_each(|r| self.push(r));
            return;
        }
        // Lines the per-reference path left waiting go first.
        self.drain();
        let shift = self.shift;
        let (noted_addr, noted_size) = self.noted.arrays();
        let hist = &mut self.current.histogram;
        let (data, line_refs) = match &mut self.engine {
            Engine::Shards(s) if self.sets.is_empty() => {
                let threshold = s.threshold();
                let line_offset = (1u64 << shift) - 1;
                let (data, kept) = note_data(refs, noted_addr, noted_size, |addr, size| {
                    let spans = (addr & line_offset) + size as u64 > line_offset + 1;
                    Shards::in_sample(addr >> shift, threshold) | spans
                });
                let mut line_refs = data;
                for (&addr, &size) in noted_addr[..kept].iter().zip(&noted_size[..kept]) {
                    let (first, last) = lines(addr, size, shift);
                    line_refs += last - first;
                    for line in first..=last {
                        s.access(line, hist);
                    }
                }
                (data, line_refs)
            }
            Engine::Shards(s) => {
                // The set-indexed model sees every reference.
                let (data, kept) = note_data(refs, noted_addr, noted_size, |_, _| true);
                let mut line_refs = 0;
                let addrs = &noted_addr[..kept];
                for (i, (&addr, &size)) in addrs.iter().zip(&noted_size[..kept]).enumerate() {
                    if let Some(&ahead) = addrs.get(i + LOOKAHEAD) {
                        self.sets.prefetch(ahead >> shift);
                    }
                    let (first, last) = lines(addr, size, shift);
                    line_refs += last - first + 1;
                    for line in first..=last {
                        s.access(line, hist);
                        self.sets.access(line);
                    }
                }
                (data, line_refs)
            }
            Engine::Exact(e) => {
                let set = &mut self.sets;
                let (data, kept) = note_data(refs, noted_addr, noted_size, |_, _| true);
                let noted = (&noted_addr[..kept], &noted_size[..kept]);
                (data, feed_exact_fastest(e, set, noted, shift, hist))
            }
        };
        self.refs += n as u64;
        self.current.instructions += n as u64 - data;
        self.current.line_refs += line_refs;
    }

    fn close_window(&mut self) {
        self.drain();
        self.sets.count_into(&mut self.current.histogram);
        if let Engine::Shards(s) = &mut self.engine {
            s.finish(self.current.line_refs, &mut self.current.histogram);
        }
        let next = WindowProfile {
            first_instruction: self.current.first_instruction + self.current.instructions,
            instructions: 0,
            line_refs: 0,
            histogram: Histogram::default(),
        };
        self.done.push(std::mem::replace(&mut self.current, next));
    }

    /// Distinct lines the fully associative engine holds: every line seen when exact, the sample's
    /// lines with SHARDS.
    pub fn sampled_lines(&self) -> u64 {
        match &self.engine {
            Engine::Exact(e) => e.distinct(),
            Engine::Shards(s) => s.sampled_lines(),
        }
    }

    /// The sampling rate in force at the end (1 for exact).
    pub fn sample_rate(&self) -> f64 {
        match &self.engine {
            Engine::Exact(_) => 1.0,
            Engine::Shards(s) => s.rate(),
        }
    }

    /// End of the trace: every window (one without `window`), the last partial one included when
    /// it has instructions or is the only one.
    pub fn finish(mut self) -> Vec<WindowProfile> {
        if self.current.instructions > 0 || self.done.is_empty() {
            self.close_window();
        }
        self.done
    }

    pub fn config(&self) -> &ProfileConfig {
        &self.cfg
    }
}

impl crate::readers::RefSink for Profiler {
    /// Not inlined: a batch's loop compiled on its own has the registers to itself (inlined
    /// into a reader's loop, its state went to the stack).
    #[inline(never)]
    fn refs(&mut self, refs: impl ExactSizeIterator<Item = Ref>) {
        self.push_iter(refs);
    }

    /// Instruction fetches are counted; their addresses matter only when they reference the cache.
    fn needs_instruction_addresses(&self) -> bool {
        self.cfg.include_instructions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(addr: u64) -> Ref {
        Ref {
            kind: Kind::Load,
            addr,
            size: 8,
        }
    }
    fn instr() -> Ref {
        Ref {
            kind: Kind::Instr,
            addr: 0x400000,
            size: 4,
        }
    }

    #[test]
    fn a_reference_across_a_line_boundary_touches_both_lines() {
        let mut p = Profiler::new(ProfileConfig::default());
        p.push(instr());
        p.push(Ref {
            kind: Kind::Store,
            addr: 60,
            size: 8,
        });
        let w = p.finish();
        assert_eq!(w[0].line_refs, 2);
        assert_eq!(w[0].histogram.cold, 2.0);
    }

    #[test]
    fn windows_split_by_instructions_and_keep_the_cache_state() {
        let mut p = Profiler::new(ProfileConfig {
            window: Some(10),
            ..Default::default()
        });
        for i in 0..30u64 {
            p.push(instr());
            p.push(data((i % 5) * 64));
        }
        let w = p.finish();
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].instructions, 10);
        assert_eq!(w[1].first_instruction, 10);
        // The second window's lines were seen in the first: no cold references.
        assert_eq!(w[1].histogram.cold, 0.0);
        assert_eq!(w[0].histogram.cold, 5.0);
        // The set-indexed model's counts go to the window they were made in: the five lines have
        // a set each at 8 sets, so every reference but the first five is found first in its set.
        for (k, w) in w.iter().enumerate() {
            let h = &w.histogram;
            assert_eq!(h.set_refs, w.line_refs as f64, "window {k}");
            assert_eq!(h.set_hits[0].hits[0], h.set_refs - h.cold, "window {k}");
            assert_eq!(h.set_hits[0].hits[1..].iter().sum::<f64>(), 0.0);
        }
    }

    #[test]
    fn the_exact_pass_gives_the_same_distances_in_either_build() {
        let refs: Vec<Ref> = crate::synthetic::trace(60_000, Default::default(), 8)
            .filter(|r| r.kind != Kind::Instr)
            .collect();
        let addrs: Vec<u64> = refs.iter().map(|r| r.addr + (r.addr % 7) * 9).collect();
        let sizes: Vec<u32> = refs.iter().map(|r| r.size).collect();
        let (mut plain, mut fastest) = (ExactStack::new(), ExactStack::new());
        let (mut hp, mut hf) = (Histogram::default(), Histogram::default());
        let (mut sp, mut sf) = (SetIndexed::for_grid(64), SetIndexed::for_grid(64));
        let lp = feed_exact(&mut plain, &mut sp, (&addrs, &sizes), 6, &mut hp);
        let lf = feed_exact_fastest(&mut fastest, &mut sf, (&addrs, &sizes), 6, &mut hf);
        sp.count_into(&mut hp);
        sf.count_into(&mut hf);
        assert_eq!(hp.set_refs, lp as f64);
        assert_eq!((lp, &hp), (lf, &hf));
        assert!(lp > addrs.len() as u64, "some references span lines");
    }

    #[test]
    fn batches_and_single_references_give_the_same_profile() {
        let mut refs: Vec<Ref> = crate::synthetic::trace(50_000, Default::default(), 4).collect();
        // Some references spanning lines (the sampled path notes them whatever their hash),
        // one of size 0, and one a line from the top of the address space.
        for (i, r) in refs
            .iter_mut()
            .enumerate()
            .filter(|(_, r)| r.kind != Kind::Instr)
        {
            match i % 97 {
                1 => (r.addr, r.size) = (r.addr + 60, 8),
                3 => (r.addr, r.size) = (r.addr + 1, 300),
                _ => {}
            }
        }
        refs[1].size = 0;
        refs[3].addr = u64::MAX - 10;
        for sampling in [Sampling::Exact, Sampling::Rate(0.1), Sampling::Size(500)] {
            let cfg = ProfileConfig {
                sampling,
                ..Default::default()
            };
            let mut one = Profiler::new(cfg.clone());
            for &r in &refs {
                one.push(r);
            }
            let mut batched = Profiler::new(cfg);
            for chunk in refs.chunks(777) {
                batched.push_all(chunk);
            }
            assert_eq!(one.finish(), batched.finish(), "{sampling:?}");
        }
    }
}
