//! Set-indexed LRU caches, exactly: for every number of sets in the signature grid, the per-set
//! stack distance of each reference, with the set of a line its number modulo the number of sets
//! (bit selection, as hardware indexes caches). An LRU cache of `S` sets and `W` ways hits a
//! reference exactly when fewer than `W` distinct lines of its set were referenced since its last
//! use (Mattson et al. 1970, applied within each set; Hill and Smith 1989 use the same per-set
//! stacks). The largest associativity the grid asks of a set count is its depth `D`: each set
//! keeps its `D` most recently used lines, most recent first, and a reference found at place `p`
//! has per-set distance `p`; one not found has a distance of at least `D` (a miss at every
//! associativity of that set count).
//!
//! A set holds its lines by their numbers in the engine that feeds the model (0, 1, 2, ... in
//! order of first reference, [`crate::exact::Reuse::id`]), not by their line numbers: 4 bytes
//! instead of 8, and a line keeps its number for good, so a set is written only when its order
//! changes. A sampled engine does not see every line; for it the model numbers the lines itself
//! ([`SetIndexed::with_clock`]).
//!
//! One model serves every set count (14 for 64-byte lines). References are held back in batches
//! of [`BATCH`] and taken one set count at a time, most sets first, each set count's references
//! in the order they came (as one reference at a time through every set count would take them):
//! a reference looks for its line among its set's `D` numbers and moves the numbers before it
//! one place down, its own first. A line not found at `S × 2^k` sets is not found at `S` sets with
//! no more depth: its set at `S` holds every line of its set at `S × 2^k` (lines equal modulo
//! `S × 2^k` are equal modulo `S`), so at least as many distinct lines came before it there. At
//! those set counts the line goes first without a search, and counts as a miss; so does a line
//! referenced for the first time, at every set count (it is in no set). On the grid's
//! eleven set counts of 32 ways, most references to lines outside the smaller caches are found
//! missing once, at the finest set count they miss at, and inserted from there on. Each set
//! count's pass is one loop of one depth and one form: on CPUs with AVX-512 a search and shift of
//! a set of 32 is two compares into mask registers, two lane alignments and two masked stores,
//! an insert two alignments and two stores; with AVX2, a handful of vector compares, permutes and
//! blends; the shift does not branch on where the line was found. The sets of the large set
//! counts are prefetched a few references ahead. Counts are integers kept in the model and added
//! to a histogram when it is read ([`SetIndexed::count_into`]). A reference to the line
//! referenced just before (global distance 0) is first in every set and is counted without a
//! visit. Memory is fixed by the grid: `sets × D` numbers per set count (5 MiB for 64-byte
//! lines), whatever the trace, plus, with a sampled engine, the number of every distinct line.

use crate::exact::Reuse;
use crate::histogram::{Histogram, SetHits};
use crate::linemap::LineMap;
use hetsched_core::signature::{SIGNATURE_ASSOC, SIGNATURE_SIZES};
#[cfg(target_arch = "x86_64")]
use search::{avx512, vector};
use search::{pass_scalar, Batch, Store};

mod search;

/// An empty place in a set. No line takes this number: lines are numbered in order of first
/// reference, and a trace of 2^32 − 1 distinct lines (256 GiB touched) is beyond the engines
/// (the exact engine's 32-bit times run out first).
const EMPTY: u32 = u32::MAX;

/// 64 bytes of line numbers: a level's storage, aligned so that no set straddles more cache
/// lines than its size needs.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u32; 16]);

/// Levels whose sets take more bytes than this are prefetched ahead of a reference; smaller ones
/// stay in the second-level cache.
const PREFETCH_ABOVE_BYTES: usize = 96 << 10;

/// References held back for the sets, then taken level by level: the pass over a level is one
/// loop of one form and one depth, and a reference known to miss there is not searched for.
const BATCH: usize = 1024;

/// The cache of one number of sets.
#[derive(Clone, Copy)]
struct Level {
    /// Number of sets − 1 (the number of sets is a power of two).
    mask: u64,
    /// Lines each set keeps: the largest associativity asked of this number of sets (a power of
    /// two).
    depth: usize,
    /// Where its `sets × depth` line numbers start in [`Ids`], each set's most recent first
    /// (`EMPTY` where a set is not full); a whole number of blocks.
    start: usize,
    /// Where its `depth + 1` counts start in [`Counts::places`]: references found at each place,
    /// then a slot that takes searches that found nothing (never read).
    places: usize,
    /// Whether its sets are prefetched ahead of their search (too large for the second-level
    /// cache).
    prefetch: bool,
}

impl Level {
    /// Places the level holds.
    fn len(&self) -> usize {
        (self.mask as usize + 1) * self.depth
    }
}

/// Every level's line numbers in one allocation, so that the 5 MiB read at random can take huge
/// pages.
struct Ids(Vec<Block>);

impl Ids {
    fn for_levels(levels: &[Level]) -> Self {
        let end = levels.iter().map(|l| l.start + l.len()).max().unwrap_or(0);
        Ids(crate::huge_pages::filled(
            end.div_ceil(16),
            Block([EMPTY; 16]),
        ))
    }

    #[cfg(test)]
    fn all(&self) -> &[u32] {
        // SAFETY: a Block is 16 u32 with no padding (repr(C)), so the blocks are `16 × len`
        // contiguous, initialised u32.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.0.len() * 16) }
    }

    fn all_mut(&mut self) -> &mut [u32] {
        // SAFETY: as in `all`, and the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), self.0.len() * 16) }
    }

    /// The line numbers of `level`.
    #[cfg(test)]
    fn of(&self, level: &Level) -> &[u32] {
        &self.all()[level.start..level.start + level.len()]
    }
}

/// The (sets, ways) of the grid's caches of `line_bytes` lines: a cache smaller than its
/// associativity in lines is one fully associative set of all its lines.
pub fn grid_caches(line_bytes: u32) -> Vec<(u64, u32)> {
    let mut caches = Vec::new();
    for &ways in &SIGNATURE_ASSOC {
        for &size in &SIGNATURE_SIZES {
            let lines = (size / line_bytes.max(1) as u64).max(1);
            let ways = (ways as u64).min(lines);
            caches.push((lines / ways, ways as u32));
        }
    }
    caches
}

/// The model's counts since they were last added to a histogram ([`SetIndexed::count_into`]):
/// integers, so that counting a reference is an add to a register-sized slot, not a
/// floating-point add through memory on a histogram's heap-held vectors.
#[derive(Default)]
struct Counts {
    /// Line references.
    refs: u64,
    /// Of those, repeats of the line referenced just before.
    repeats: u64,
    /// References by place at each level (at [`Level::places`]), then each level's slot for
    /// searches that found nothing.
    places: Vec<u64>,
}

/// The references held back for the sets ([`BATCH`]): line, number and the room for the depth of
/// the levels where each was not found, the first `len`.
struct Held {
    lines: Vec<u64>,
    ids: Vec<u32>,
    missed: Vec<u32>,
    len: usize,
}

/// Every line's number, for a sampled engine (which numbers only its sample's lines).
struct LineNumbers {
    ids: LineMap,
    /// The line referenced last.
    last: u64,
}

impl LineNumbers {
    fn new() -> Self {
        LineNumbers {
            ids: LineMap::with_capacity(1 << 12),
            last: u64::MAX,
        }
    }

    /// The line's number and whether it is new (referenced for the first time), or `None` for a
    /// repeat of the line referenced just before.
    #[inline(always)]
    fn number(&mut self, line: u64) -> Option<(u32, bool)> {
        if line == self.last {
            return None;
        }
        self.last = line;
        let (before, id) = self.ids.insert_numbered(line, 0);
        Some((id, before.is_none()))
    }
}

/// Per-set stack distances for every set count of the grid, into a histogram's `set_hits`.
pub struct SetIndexed {
    /// Fewest sets first (taken the other way round: a line not found at a set count is known
    /// to miss at the coarser ones of no more depth).
    levels: Vec<Level>,
    ids: Ids,
    held: Held,
    /// The model's own line numbers, for an engine that hands over none (sampled).
    numbers: Option<LineNumbers>,
    /// How sets are searched and shifted: the widest vectors this CPU runs.
    code: SetCode,
    counts: Counts,
}

/// The instructions a set's search and shift is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SetCode {
    Scalar,
    /// 256-bit vectors: a set of 32 places is four.
    Avx2,
    /// 512-bit vectors with mask registers: a set of 32 places is two, shifted by one lane
    /// alignment each and written back under a mask of the places that move.
    Avx512,
}

impl SetCode {
    /// The widest this CPU runs.
    fn fastest() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vl")
            {
                return SetCode::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return SetCode::Avx2;
            }
        }
        SetCode::Scalar
    }

    /// Every form this CPU runs (the tests check each against the scalar one).
    #[cfg(test)]
    fn supported() -> Vec<Self> {
        [SetCode::Scalar, SetCode::Avx2, SetCode::Avx512]
            .into_iter()
            .filter(|&c| c as u8 <= SetCode::fastest() as u8)
            .collect()
    }
}

impl SetIndexed {
    /// The set counts of the grid for `line_bytes` (a power of two), each as deep as its largest
    /// associativity.
    pub fn for_grid(line_bytes: u32) -> Self {
        Self::for_caches(&grid_caches(line_bytes))
    }

    /// No set counts: references pass through untouched (the binomial approximation).
    pub fn none() -> Self {
        SetIndexed {
            levels: Vec::new(),
            ids: Ids(Vec::new()),
            held: Held {
                lines: Vec::new(),
                ids: Vec::new(),
                missed: Vec::new(),
                len: 0,
            },
            numbers: None,
            code: SetCode::Scalar,
            counts: Counts::default(),
        }
    }

    /// No set counts at all.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The set counts of `caches` (sets, ways), both powers of two, as in every grid (its sizes,
    /// line sizes and associativities are); panics on other associativities.
    pub fn for_caches(caches: &[(u64, u32)]) -> Self {
        let mut by_sets: Vec<(u64, usize)> = Vec::new();
        for &(sets, ways) in caches {
            debug_assert!(sets.is_power_of_two());
            match by_sets.iter_mut().find(|(s, _)| *s == sets) {
                Some((_, d)) => *d = (*d).max(ways as usize),
                None => by_sets.push((sets, ways as usize)),
            }
        }
        // Fewest sets first: each level's sets are unions of the next one's.
        by_sets.sort_unstable();
        let (mut start, mut places) = (0, 0);
        let levels: Vec<Level> = by_sets
            .into_iter()
            .map(|(sets, depth)| {
                assert!(
                    depth.is_power_of_two(),
                    "associativities are powers of two ({depth})"
                );
                let len = (sets as usize) * depth;
                let level = Level {
                    mask: sets - 1,
                    depth,
                    start,
                    places,
                    prefetch: len * 4 > PREFETCH_ABOVE_BYTES,
                };
                // Each level starts a block: no set straddles more cache lines than it must.
                start += len.next_multiple_of(16);
                places += depth + 1;
                level
            })
            .collect();
        let counts = Counts {
            places: vec![0; places],
            ..Counts::default()
        };
        SetIndexed {
            ids: Ids::for_levels(&levels),
            levels,
            held: Held {
                lines: vec![0; BATCH],
                ids: vec![0; BATCH],
                missed: vec![0; BATCH],
                len: 0,
            },
            numbers: None,
            code: SetCode::fastest(),
            counts,
        }
    }

    /// The same model for a sampled engine: it numbers every line itself, for use with
    /// [`Self::access`].
    pub fn with_clock(mut self) -> Self {
        if !self.levels.is_empty() {
            self.numbers = Some(LineNumbers::new());
        }
        self
    }

    /// Search and shift sets in `code` (one the CPU runs), to check one form against another.
    #[cfg(test)]
    fn in_code(mut self, code: SetCode) -> Self {
        self.code = code;
        self
    }

    /// The scalar search and shift, whatever the CPU runs.
    #[cfg(test)]
    fn scalar(self) -> Self {
        self.in_code(SetCode::Scalar)
    }

    /// Add the references counted since the last call to `hist` (its per-set counts made when
    /// missing), and start counting afresh: before a histogram is read or closed.
    pub fn count_into(&mut self, hist: &mut Histogram) {
        if self.levels.is_empty() {
            return;
        }
        self.flush::<false>();
        if hist.set_hits.len() != self.levels.len() {
            hist.set_hits = self
                .levels
                .iter()
                .map(|l| SetHits {
                    sets: l.mask + 1,
                    hits: vec![0.0; l.depth],
                })
                .collect();
        }
        let c = &mut self.counts;
        hist.set_refs += c.refs as f64;
        hist.set_repeats += c.repeats as f64;
        for (level, counts) in self.levels.iter().zip(&mut hist.set_hits) {
            let places = &c.places[level.places..level.places + level.depth];
            for (h, &n) in counts.hits.iter_mut().zip(places) {
                *h += n as f64;
            }
        }
        c.refs = 0;
        c.repeats = 0;
        c.places.fill(0);
    }

    /// Bring the entry of `line`'s number into cache, for a model that numbers lines itself (a
    /// hint; no effect on results). Sets are prefetched as a batch is taken.
    #[inline(always)]
    pub fn prefetch(&self, line: u64) {
        if let Some(numbers) = &self.numbers {
            numbers.ids.prefetch(line);
        }
    }

    /// Reference `line`, as the exact engine found it (counted until [`Self::count_into`]).
    #[inline]
    pub fn access_after(&mut self, line: u64, reuse: Reuse) {
        if self.levels.is_empty() {
            return;
        }
        self.counts.refs += 1;
        if reuse.distance == Some(0) {
            // The line referenced last again: first in every set, nothing moves.
            self.counts.repeats += 1;
        } else {
            self.hold::<false>(line, reuse.id, reuse.distance.is_none());
        }
    }

    /// Reference `line` with the model's own numbers (a sampled engine; see [`Self::with_clock`]).
    /// Counted until [`Self::count_into`].
    #[inline]
    pub fn access(&mut self, line: u64) {
        let Some(numbers) = self.numbers.as_mut() else {
            debug_assert!(
                self.levels.is_empty(),
                "a model without its own numbers takes the engine's"
            );
            return;
        };
        let id = numbers.number(line);
        self.counts.refs += 1;
        match id {
            None => self.counts.repeats += 1,
            Some((id, new)) => self.hold::<false>(line, id, new),
        }
    }

    /// Hold back line `id` (at address line `line`) for the sets; take the batch when full
    /// ([`Self::flush`]). A line referenced for the first time (`new`) is in no set: it is known
    /// to miss at every level.
    #[inline(always)]
    fn hold<const ALL: bool>(&mut self, line: u64, id: u32, new: bool) {
        debug_assert!(id != EMPTY);
        let h = &mut self.held;
        if h.len >= h.lines.len().min(h.ids.len()).min(h.missed.len()) {
            self.flush::<ALL>();
        }
        let h = &mut self.held;
        h.lines[h.len] = line;
        h.ids[h.len] = id;
        h.missed[h.len] = if new { u32::MAX } else { 0 };
        h.len += 1;
    }

    /// Take the held references through the sets, one level at a time, most sets first: at each,
    /// look for each reference's line in its set, count the place and move the line first. A
    /// line not found at a level is not found at any level of fewer sets and no more depth (its
    /// set there holds its set here), where it goes first without a search (with `ALL`, a check,
    /// it is searched all the same). Each level sees the references in the order they came, as a
    /// reference at a time through every level would.
    fn flush<const ALL: bool>(&mut self) {
        let store = Store {
            ids: self.ids.all_mut().as_mut_ptr(),
            places: self.counts.places.as_mut_ptr(),
        };
        let h = &mut self.held;
        let n = h.len;
        let mut batch = Batch {
            lines: &h.lines[..n],
            ids: &h.ids[..n],
            missed: &mut h.missed[..n],
        };
        for level in self.levels.iter().rev() {
            // SAFETY: `store` points into this model's sets and counts, which `for_caches` made
            // to hold every level's; `code` names a form this CPU runs (`SetCode::fastest`, or a
            // test's choice among `SetCode::supported`).
            unsafe {
                match self.code {
                    #[cfg(target_arch = "x86_64")]
                    SetCode::Avx512 => avx512::pass_of::<ALL>(level, store, &mut batch),
                    #[cfg(target_arch = "x86_64")]
                    SetCode::Avx2 => vector::pass_of::<ALL>(level, store, &mut batch),
                    _ => pass_scalar::<ALL>(level, store, &mut batch),
                }
            }
        }
        h.len = 0;
    }
}

/// The plain simulation the tests check the model against (shared with the integration tests).
#[cfg(test)]
#[path = "../tests/support/plain_lru.rs"]
mod plain_lru;

#[cfg(test)]
mod tests {
    use super::plain_lru::indexed_misses;
    use super::*;
    use crate::exact::ExactStack;

    #[test]
    fn grid_for_64_byte_lines_has_14_set_counts_in_5_mib() {
        let s = SetIndexed::for_grid(64);
        let sets: Vec<u64> = s.levels.iter().map(|l| l.mask + 1).collect();
        assert_eq!(sets, (3..=16).map(|e| 1u64 << e).collect::<Vec<_>>());
        let depths: Vec<usize> = s.levels.iter().map(|l| l.depth).collect();
        // 8 sets only at 16 KiB 32-way; 65,536 sets only at 16 MiB 4-way.
        assert_eq!(depths[0], 32);
        assert_eq!(depths[13], 4);
        assert_eq!(depths[12], 8);
        let bytes: usize = s.levels.iter().map(|l| l.len() * 4).sum();
        assert_eq!(s.ids.0.len() * 64, bytes);
        // (8 + ... + 8192) x 32 + 16384 x 16 + 32768 x 8 + 65536 x 4 numbers of 4 bytes.
        assert_eq!(bytes, 16_376 * 32 * 4 + 3 * (1 << 20));
    }

    /// Feed `lines` through the exact engine into `s`, and its counts into `h`.
    fn through_exact(s: &mut SetIndexed, e: &mut ExactStack, lines: &[u64], h: &mut Histogram) {
        for &line in lines {
            let reuse = e.access_numbered(line);
            s.access_after(line, reuse);
        }
        s.count_into(h);
    }

    #[test]
    fn lines_four_sets_apart_share_a_set_of_two() {
        // 4 sets of 2 ways: lines 0, 4, 8 map to set 0.
        let mut s = SetIndexed::for_caches(&[(4, 2)]);
        let mut e = ExactStack::new();
        let mut h = Histogram::default();
        through_exact(&mut s, &mut e, &[0, 4, 1], &mut h);
        // 0 again: global distance 2, but one line (4) of its set since: per-set distance 1.
        through_exact(&mut s, &mut e, &[0], &mut h);
        assert_eq!(h.set_hits[0].hits, vec![0.0, 1.0]);
        through_exact(&mut s, &mut e, &[8], &mut h);
        // 4: per-set distance 2 (0 and 8 since), beyond the 2 ways kept: a miss; then a repeat.
        through_exact(&mut s, &mut e, &[4, 4], &mut h);
        assert_eq!(h.set_hits[0].hits, vec![0.0, 1.0]);
        assert_eq!((h.set_refs, h.set_repeats), (7.0, 1.0));
        assert_eq!(h.misses_set_indexed(4, 2), Some(5.0));
        // Direct mapped, 0 missed its second time too.
        assert_eq!(h.misses_set_indexed(4, 1), Some(6.0));
        assert_eq!(h.misses_set_indexed(8, 1), None);
    }

    /// Lines over a few thousand, with repeats, strides and lines far apart in the address space.
    fn mixed_lines(n: u64, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match i % 5 {
                    0 => x % 200,
                    1 => x % 6000 + ((x % 3) << 40),
                    2 => (i * 33) % 4000,
                    3 => i / 5 % 3000,
                    _ => (i - 1) / 5 % 3000,
                }
            })
            .collect()
    }

    const CACHES: [(u64, u32); 6] = [(1, 4), (4, 2), (16, 32), (64, 8), (256, 16), (1024, 4)];

    fn check(h: &Histogram, lines: &[u64]) {
        check_caches(h, lines, &CACHES);
    }

    fn check_caches(h: &Histogram, lines: &[u64], caches: &[(u64, u32)]) {
        for &(sets, ways) in caches {
            let want = indexed_misses(lines, sets, ways as usize) as f64;
            assert_eq!(
                h.misses_set_indexed(sets, ways),
                Some(want),
                "{sets} x {ways}"
            );
        }
    }

    #[test]
    fn compactions_of_the_exact_engine_keep_the_sets_right() {
        let lines = mixed_lines(30_000, 7);
        for code in SetCode::supported() {
            let mut s = SetIndexed::for_caches(&CACHES).in_code(code);
            // Room for 512 times: hundreds of compactions, which renumber times, not lines.
            let mut e = ExactStack::with_capacity(512);
            let mut h = Histogram::default();
            through_exact(&mut s, &mut e, &lines, &mut h);
            check(&h, &lines);
        }
    }

    #[test]
    fn the_models_own_numbers_keep_the_sets_right() {
        // At most 6,000 distinct lines, some 2^40 lines apart.
        let lines: Vec<u64> = mixed_lines(30_000, 11)
            .iter()
            .map(|&l| l % 2000 + (l >> 40 << 40))
            .collect();
        for code in SetCode::supported() {
            let mut s = SetIndexed::for_caches(&CACHES).with_clock().in_code(code);
            let mut h = Histogram::default();
            for &l in &lines {
                s.access(l);
            }
            s.count_into(&mut h);
            check(&h, &lines);
            let distinct = lines.iter().collect::<std::collections::HashSet<_>>().len();
            assert_eq!(s.numbers.as_ref().unwrap().ids.len(), distinct);
        }
    }

    /// `model` fed `lines` (through the exact engine `e`, or on its own numbers without one), each
    /// line searched for at every set count, whether or not it was found at the finer ones.
    fn searching_every_set(
        model: &mut SetIndexed,
        mut e: Option<&mut ExactStack>,
        lines: &[u64],
        h: &mut Histogram,
    ) {
        for &line in lines {
            let id = match e.as_deref_mut() {
                Some(e) => {
                    let reuse = e.access_numbered(line);
                    (reuse.distance != Some(0)).then_some((reuse.id, reuse.distance.is_none()))
                }
                None => model.numbers.as_mut().unwrap().number(line),
            };
            model.counts.refs += 1;
            match id {
                Some((id, new)) => model.hold::<true>(line, id, new),
                None => model.counts.repeats += 1,
            }
        }
        model.flush::<true>();
        model.count_into(h);
    }

    /// A line not found at some set count is not found at any coarser one of no more depth:
    /// inserting it there without a search gives the same counts and the same sets as searching
    /// every set count, on random streams of lines near and far apart, through the exact engine
    /// (compacting often or not) and on the model's own numbers, in every form of the search and
    /// shift this CPU runs, for lines of 8 to 4,096 bytes, and on a grid whose depths do not grow
    /// with fewer sets.
    #[test]
    fn inserting_known_misses_without_a_search_changes_nothing() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..12u64 {
            let n = 2_000 + 1_000 * round;
            let lines: Vec<u64> = (0..n)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Few lines or many; runs of neighbours; repeats; lines 2^k apart.
                    match x % 7 {
                        0 => x % (16 + round * 40),
                        1 => (x >> 8) % 100_000,
                        2 => i / 4,
                        3 => ((x >> 8) % 64) << (round % 20),
                        _ => (x >> 16) % (1 << (6 + round)),
                    }
                })
                .collect();
            let line_bytes = [8, 64, 64, 4096][round as usize % 4];
            let caches = grid_caches(line_bytes);
            let forms = SetCode::supported()
                .into_iter()
                .flat_map(|code| [(code, false, 1 << 16), (code, false, 512), (code, true, 0)]);
            for (code, sampled, capacity) in forms {
                let make = || {
                    let s = SetIndexed::for_grid(line_bytes).in_code(code);
                    if sampled {
                        s.with_clock()
                    } else {
                        s
                    }
                };
                let (mut known, mut all) = (make(), make());
                let (mut hs, mut ha) = (Histogram::default(), Histogram::default());
                let mut e = ExactStack::with_capacity(capacity.max(512));
                if sampled {
                    for &l in &lines {
                        known.access(l);
                    }
                    known.count_into(&mut hs);
                    searching_every_set(&mut all, None, &lines, &mut ha);
                } else {
                    through_exact(&mut known, &mut e, &lines, &mut hs);
                    let mut e = ExactStack::with_capacity(capacity.max(512));
                    searching_every_set(&mut all, Some(&mut e), &lines, &mut ha);
                }
                let what = format!("round {round}, {line_bytes} B, {code:?} {sampled} {capacity}");
                assert_eq!(hs, ha, "{what}");
                for (a, b) in known.levels.iter().zip(&all.levels) {
                    assert!(
                        known.ids.of(a) == all.ids.of(b),
                        "{what}: {} sets",
                        a.mask + 1
                    );
                }
                check_caches(&hs, &lines, &caches);
            }
        }
    }

    /// Depths that do not grow with fewer sets (1,024 sets of 4 ways, 256 of 16, 64 of 8, 16 of
    /// 32): a line missing at 256 sets of 16 ways is known to miss at 64 sets of 8 but not at 16
    /// sets of 32, and a line missing at 1,024 sets of 4 is not known to miss at 256 sets of 16.
    #[test]
    fn a_miss_is_known_only_at_no_more_depth() {
        let lines = mixed_lines(30_000, 13);
        for code in SetCode::supported() {
            let (mut known, mut all) = (
                SetIndexed::for_caches(&CACHES).in_code(code),
                SetIndexed::for_caches(&CACHES).in_code(code),
            );
            let (mut hk, mut ha) = (Histogram::default(), Histogram::default());
            through_exact(&mut known, &mut ExactStack::new(), &lines, &mut hk);
            searching_every_set(&mut all, Some(&mut ExactStack::new()), &lines, &mut ha);
            assert_eq!(hk, ha, "{code:?}");
            check(&hk, &lines);
        }
    }

    /// The grids of very short and very long lines have set counts of 1 and 2 ways (searched
    /// without vectors) and of a single set; every cache of them equals the plain simulation.
    #[test]
    fn grids_of_other_line_sizes_are_exact() {
        let lines = mixed_lines(20_000, 5);
        for line_bytes in [8, 4096, 1 << 20] {
            let caches = grid_caches(line_bytes);
            let mut s = SetIndexed::for_grid(line_bytes);
            let mut e = ExactStack::new();
            let mut h = Histogram::default();
            through_exact(&mut s, &mut e, &lines, &mut h);
            check_caches(&h, &lines, &caches);
        }
    }

    #[test]
    fn vector_and_scalar_sets_hold_the_same_lines() {
        let lines = mixed_lines(20_000, 3);
        for code in SetCode::supported() {
            let mut v = SetIndexed::for_grid(64).in_code(code);
            let mut p = SetIndexed::for_grid(64).scalar();
            let (mut ev, mut ep) = (ExactStack::new(), ExactStack::new());
            let (mut hv, mut hp) = (Histogram::default(), Histogram::default());
            // Counted into the histograms in pieces (as windows close): the same totals.
            for part in lines.chunks(7_000) {
                through_exact(&mut v, &mut ev, part, &mut hv);
            }
            through_exact(&mut p, &mut ep, &lines, &mut hp);
            assert_eq!(hv, hp, "{code:?}");
            for (a, b) in v.levels.iter().zip(&p.levels) {
                assert!(v.ids.of(a) == p.ids.of(b), "{code:?}: {} sets", a.mask + 1);
            }
        }
    }

    /// The grid's levels of more than 96 KiB (1,024 sets of 32 and up) are prefetched, and this
    /// CPU's fastest form is among those the tests check.
    #[test]
    fn the_large_levels_are_prefetched() {
        let s = SetIndexed::for_grid(64);
        let prefetched: Vec<u64> = s
            .levels
            .iter()
            .filter(|l| l.prefetch)
            .map(|l| l.mask + 1)
            .collect();
        assert_eq!(prefetched, (10..=16).map(|e| 1u64 << e).collect::<Vec<_>>());
        assert!(SetCode::supported().contains(&SetCode::fastest()));
    }
}
