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
//! A set holds its lines by the time of their last reference, not by their numbers: a line's
//! time names it as surely (no two lines share a last reference), takes 4 bytes instead of 8, and
//! the engine that feeds the model knows it already. The exact engine hands over its times
//! ([`crate::exact::Reuse`]); for a sampled engine, which does not see every line, the model keeps
//! a clock of its own. When the times are renumbered, so are the sets'.
//!
//! One pass serves every set count: a reference visits one set per set count (14 for 64-byte
//! lines): it looks for the line's previous time among the set's `D` times and moves the times
//! before it one place down, its new time first. On CPUs with AVX2 that is a handful of vector
//! compares, permutes and blends a set, with no branch on where the line was found. A reference to
//! the line referenced just before (global distance 0) is first in every set and visits none.
//! Memory is fixed by the grid: `sets × D` times per set count (5 MiB for 64-byte lines), whatever
//! the trace, plus, with a sampled engine, the clock's time of every distinct line.

use crate::exact::Reuse;
use crate::histogram::{Histogram, SetHits};
use crate::linemap::LineMap;
use hetsched_core::signature::{SIGNATURE_ASSOC, SIGNATURE_SIZES};

/// An empty place in a set (no reference ever takes the last time).
const EMPTY: u32 = u32::MAX;

/// 64 bytes of times: a level's storage, aligned so that no set straddles more cache lines than
/// its size needs.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u32; 16]);

/// Levels whose sets take more bytes than this are prefetched ahead of a reference; smaller ones
/// stay in the second-level cache.
const PREFETCH_ABOVE_BYTES: usize = 96 << 10;

/// The cache of one number of sets.
struct Level {
    /// Number of sets − 1 (the number of sets is a power of two).
    mask: u64,
    /// Lines each set keeps: the largest associativity asked of this number of sets.
    depth: usize,
    /// Where its `sets × depth` times start in [`Times`], each set's most recent first (`EMPTY`
    /// where a set is not full); a whole number of blocks.
    start: usize,
}

impl Level {
    /// The first time of `line`'s set.
    #[inline(always)]
    fn set_start(&self, line: u64) -> usize {
        self.start + (line & self.mask) as usize * self.depth
    }

    /// Times the level holds.
    fn len(&self) -> usize {
        (self.mask as usize + 1) * self.depth
    }
}

/// Every level's times in one allocation, so that the 5 MiB read at random can take huge pages.
struct Times(Vec<Block>);

impl Times {
    fn for_levels(levels: &[Level]) -> Self {
        let end = levels.iter().map(|l| l.start + l.len()).max().unwrap_or(0);
        Times(crate::huge_pages::filled(
            end.div_ceil(16),
            Block([EMPTY; 16]),
        ))
    }

    fn all(&self) -> &[u32] {
        // SAFETY: a Block is 16 u32 with no padding (repr(C)), so the blocks are `16 × len`
        // contiguous, initialised u32.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.0.len() * 16) }
    }

    fn all_mut(&mut self) -> &mut [u32] {
        // SAFETY: as in `all`, and the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), self.0.len() * 16) }
    }

    /// The times of `level`.
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

/// Every line's last reference time, for a sampled engine (which keeps only its sample's): times
/// advance on each reference that is not a repeat and are renumbered in order when they run out.
struct LineClock {
    times: LineMap,
    now: u32,
    /// Times run out here (below `EMPTY`; smaller in tests, to renumber often).
    limit: u32,
    /// The line referenced last.
    last: u64,
}

impl LineClock {
    fn new(limit: u32) -> Self {
        LineClock {
            times: LineMap::with_capacity(1 << 12),
            now: 0,
            limit: limit.min(EMPTY - 1),
            last: u64::MAX,
        }
    }

    /// The reference's previous and new times, or `None` for a repeat. When the times run out,
    /// the live ones are renumbered 0.. in order first and `renumbered` is told how.
    #[inline(always)]
    fn tick(
        &mut self,
        line: u64,
        renumbered: impl FnOnce(&dyn Fn(u32) -> u32),
    ) -> Option<(Option<u32>, u32)> {
        if line == self.last {
            return None;
        }
        if self.now == self.limit {
            let mut live: Vec<u32> = Vec::with_capacity(self.times.len());
            self.times.map_values(|t| {
                live.push(t);
                t
            });
            live.sort_unstable();
            let rank = |t: u32| live.partition_point(|&u| u < t) as u32;
            self.times.map_values(rank);
            renumbered(&rank);
            self.now = live.len() as u32;
        }
        self.last = line;
        let now = self.now;
        self.now += 1;
        Some((self.times.insert(line, now), now))
    }
}

/// Per-set stack distances for every set count of the grid, into a histogram's `set_hits`.
pub struct SetIndexed {
    levels: Vec<Level>,
    times: Times,
    /// The model's own clock, for an engine that hands over no times (sampled).
    clock: Option<LineClock>,
    /// The CPU runs AVX2: sets are searched and shifted with vector instructions.
    vector: bool,
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
            times: Times(Vec::new()),
            clock: None,
            vector: false,
        }
    }

    /// No set counts at all.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The set counts of `caches` (sets, ways), sets powers of two.
    pub fn for_caches(caches: &[(u64, u32)]) -> Self {
        let mut by_sets: Vec<(u64, usize)> = Vec::new();
        for &(sets, ways) in caches {
            debug_assert!(sets.is_power_of_two());
            match by_sets.iter_mut().find(|(s, _)| *s == sets) {
                Some((_, d)) => *d = (*d).max(ways as usize),
                None => by_sets.push((sets, ways as usize)),
            }
        }
        by_sets.sort_unstable();
        let mut start = 0;
        let levels: Vec<Level> = by_sets
            .into_iter()
            .map(|(sets, depth)| {
                let level = Level {
                    mask: sets - 1,
                    depth,
                    start,
                };
                // Each level starts a block: no set straddles more cache lines than it must.
                start += level.len().next_multiple_of(16);
                level
            })
            .collect();
        SetIndexed {
            times: Times::for_levels(&levels),
            levels,
            clock: None,
            vector: vector_sets_supported(),
        }
    }

    /// Keep a clock of line times, for use with [`Self::access`] (an engine that hands over
    /// none); the times are renumbered after `limit` of them.
    fn with_clock_limit(mut self, limit: u32) -> Self {
        if !self.levels.is_empty() {
            self.clock = Some(LineClock::new(limit));
        }
        self
    }

    /// The same model for a sampled engine: it keeps every line's time itself.
    pub fn with_clock(self) -> Self {
        self.with_clock_limit(EMPTY - 1)
    }

    /// The scalar search and shift even where the CPU has AVX2 (to check one against the other).
    #[cfg(test)]
    fn scalar(mut self) -> Self {
        self.vector = false;
        self
    }

    /// The histogram's per-set counts, one per set count, made when missing.
    fn hits_of<'h>(&self, hist: &'h mut Histogram) -> &'h mut [SetHits] {
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
        &mut hist.set_hits
    }

    /// Bring the sets `line` will visit into cache, those of the levels too large to stay there,
    /// and its clock entry (a hint; no effect on results).
    #[inline(always)]
    pub fn prefetch(&self, line: u64) {
        if let Some(clock) = &self.clock {
            clock.times.prefetch(line);
        }
        let times = self.times.all();
        for level in &self.levels {
            if level.len() * 4 > PREFETCH_ABOVE_BYTES {
                let start = level.set_start(line);
                hetsched_core::prefetch::prefetch(&times[start]);
                if level.depth > 16 {
                    hetsched_core::prefetch::prefetch(&times[start + 16]);
                }
            }
        }
    }

    /// Reference `line`, as the exact engine found it.
    #[inline]
    pub fn access_after(&mut self, line: u64, reuse: Reuse, hist: &mut Histogram) {
        if self.levels.is_empty() {
            return;
        }
        hist.set_refs += 1.0;
        if reuse.distance == Some(0) {
            // The line referenced last again: first in every set, nothing moves.
            hist.set_repeats += 1.0;
        } else {
            self.visit(line, reuse.previous, reuse.now, hist);
        }
    }

    /// The exact engine renumbered its times: `rank[t]` is the new time of each live time `t`.
    pub fn renumber(&mut self, rank: &[u32]) {
        renumber(&mut self.times, &|t| rank[t as usize]);
    }

    /// Reference `line` on the model's own clock (a sampled engine; see [`Self::with_clock`]).
    #[inline]
    pub fn access(&mut self, line: u64, hist: &mut Histogram) {
        let Some(clock) = self.clock.as_mut() else {
            debug_assert!(
                self.levels.is_empty(),
                "a model without a clock takes times"
            );
            return;
        };
        let times = &mut self.times;
        let tick = clock.tick(line, |rank| renumber(times, rank));
        hist.set_refs += 1.0;
        match tick {
            None => hist.set_repeats += 1.0,
            Some((previous, now)) => self.visit(line, previous, now, hist),
        }
    }

    /// Look for `line`'s previous time in its set at every set count, count its place, and move
    /// it first with its new time.
    #[inline]
    fn visit(&mut self, line: u64, previous: Option<u32>, now: u32, hist: &mut Histogram) {
        debug_assert!(now != EMPTY && previous != Some(EMPTY));
        let vector = self.vector;
        let hits = self.hits_of(hist);
        let times = self.times.all_mut();
        #[cfg(target_arch = "x86_64")]
        if vector {
            // SAFETY: `vector` is set only where the CPU runs AVX2.
            unsafe { vector::visit(&self.levels, times, hits, line, previous, now) };
            return;
        }
        let _ = vector;
        for (level, counts) in self.levels.iter().zip(hits.iter_mut()) {
            visit_scalar(level, times, counts, line, previous, now);
        }
    }
}

/// Look for `previous` in `line`'s set of `level`, count its place and move it first as `now`.
#[inline(always)]
fn visit_scalar(
    level: &Level,
    times: &mut [u32],
    counts: &mut SetHits,
    line: u64,
    previous: Option<u32>,
    now: u32,
) {
    let depth = level.depth;
    let start = level.set_start(line);
    let set = &mut times[start..start + depth];
    let found = previous.and_then(|t| set.iter().position(|&s| s == t));
    let end = match found {
        Some(p) => {
            counts.hits[p] += 1.0;
            p
        }
        None => depth - 1,
    };
    set.copy_within(0..end, 1);
    set[0] = now;
}

/// Give every time in the sets its new number.
fn renumber(times: &mut Times, new_time: &dyn Fn(u32) -> u32) {
    for t in times.all_mut().iter_mut().filter(|t| **t != EMPTY) {
        *t = new_time(*t);
    }
}

/// Whether this CPU runs the vector form of the search and shift.
fn vector_sets_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The search and shift of a set in AVX2: the place of the previous time from an equality mask,
/// then every place up to it takes its predecessor (a lane rotation, the last lane carried into
/// the next vector) where a lane compare says so, the new time first. Every set is read and
/// written whole, wherever the line was: no branch on it.
#[cfg(target_arch = "x86_64")]
mod vector {
    use super::{Level, SetHits, EMPTY};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn visit(
        levels: &[Level],
        times: &mut [u32],
        hits: &mut [SetHits],
        line: u64,
        previous: Option<u32>,
        now: u32,
    ) {
        for (level, counts) in levels.iter().zip(hits.iter_mut()) {
            let start = level.set_start(line);
            let set = times[start..start + level.depth].as_mut_ptr();
            // SAFETY (all four): `set` starts one set of `depth` times inside the level, and this
            // function runs only where the CPU has AVX2.
            let found = unsafe {
                match level.depth {
                    32 => set_of_8s::<4>(set, previous, now),
                    16 => set_of_8s::<2>(set, previous, now),
                    8 => set_of_8s::<1>(set, previous, now),
                    4 => set_of_4(set, previous, now),
                    // Sets of 1 or 2 ways (caches of very long lines, tests).
                    _ => {
                        super::visit_scalar(level, times, counts, line, previous, now);
                        continue;
                    }
                }
            };
            if let Some(p) = found {
                counts.hits[p] += 1.0;
            }
        }
    }

    /// A set of `8 × N` times at `set`: the place of `previous`, if there, and the shift.
    #[inline(always)]
    unsafe fn set_of_8s<const N: usize>(
        set: *mut u32,
        previous: Option<u32>,
        now: u32,
    ) -> Option<usize> {
        let p = set.cast::<__m256i>();
        // SAFETY: the caller's: `set` starts a set of `8 × N` times.
        unsafe {
            let mut v = [_mm256_setzero_si256(); N];
            let mut mask = 0u32;
            let want = _mm256_set1_epi32(previous.unwrap_or(EMPTY) as i32);
            for (i, vi) in v.iter_mut().enumerate() {
                *vi = _mm256_loadu_si256(p.add(i));
                let eq = _mm256_cmpeq_epi32(*vi, want);
                mask |= (_mm256_movemask_ps(_mm256_castsi256_ps(eq)) as u32) << (8 * i);
            }
            // A first reference matches nothing (its `EMPTY` would match empty places).
            let mask = if previous.is_some() { mask } else { 0 };
            let found = (mask != 0).then(|| mask.trailing_zeros() as usize);
            let through = _mm256_set1_epi32(found.unwrap_or(8 * N - 1) as i32 + 1);
            let rotate = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
            let mut carry = _mm256_set1_epi32(now as i32);
            for (i, vi) in v.iter().enumerate() {
                let r = _mm256_permutevar8x32_epi32(*vi, rotate);
                let shifted = _mm256_blend_epi32::<1>(r, carry);
                carry = r;
                let b = 8 * i as i32;
                let lane = _mm256_setr_epi32(b, b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7);
                let take = _mm256_cmpgt_epi32(through, lane);
                _mm256_storeu_si256(p.add(i), _mm256_blendv_epi8(*vi, shifted, take));
            }
            found
        }
    }

    /// A set of 4 times at `set`.
    #[inline(always)]
    unsafe fn set_of_4(set: *mut u32, previous: Option<u32>, now: u32) -> Option<usize> {
        let p = set.cast::<__m128i>();
        // SAFETY: the caller's: `set` starts a set of 4 times.
        unsafe {
            let v = _mm_loadu_si128(p);
            let want = _mm_set1_epi32(previous.unwrap_or(EMPTY) as i32);
            let mask = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, want))) as u32;
            let mask = if previous.is_some() { mask } else { 0 };
            let found = (mask != 0).then(|| mask.trailing_zeros() as usize);
            let through = _mm_set1_epi32(found.unwrap_or(3) as i32 + 1);
            let r = _mm_shuffle_epi32::<0b10_01_00_00>(v);
            let shifted = _mm_blend_epi32::<1>(r, _mm_set1_epi32(now as i32));
            let take = _mm_cmpgt_epi32(through, _mm_setr_epi32(0, 1, 2, 3));
            _mm_storeu_si128(p, _mm_blendv_epi8(v, shifted, take));
            found
        }
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
        assert_eq!(s.times.0.len() * 64, bytes);
        // (8 + ... + 8192) x 32 + 16384 x 16 + 32768 x 8 + 65536 x 4 times of 4 bytes.
        assert_eq!(bytes, 16_376 * 32 * 4 + 3 * (1 << 20));
    }

    /// Feed `lines` through the exact engine into `s`.
    fn through_exact(s: &mut SetIndexed, e: &mut ExactStack, lines: &[u64], h: &mut Histogram) {
        for &line in lines {
            let reuse = e.access_timed(line, |rank| s.renumber(rank));
            s.access_after(line, reuse, h);
        }
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
    fn times_renumbered_by_the_exact_engine_keep_the_sets_right() {
        let lines = mixed_lines(30_000, 7);
        for scalar in [false, true] {
            let mut s = SetIndexed::for_caches(&CACHES);
            if scalar {
                s = s.scalar();
            }
            // Room for 512 times: hundreds of renumberings.
            let mut e = ExactStack::with_capacity(512);
            let mut h = Histogram::default();
            through_exact(&mut s, &mut e, &lines, &mut h);
            check(&h, &lines);
        }
    }

    #[test]
    fn the_models_own_clock_renumbered_keeps_the_sets_right() {
        // At most 6,000 distinct lines, some 2^40 lines apart.
        let lines: Vec<u64> = mixed_lines(30_000, 11)
            .iter()
            .map(|&l| l % 2000 + (l >> 40 << 40))
            .collect();
        let ticks = lines.windows(2).filter(|w| w[0] != w[1]).count() as u32 + 1;
        for (limit, scalar) in [(EMPTY - 1, false), (7000, false), (7000, true)] {
            let mut s = SetIndexed::for_caches(&CACHES).with_clock_limit(limit);
            if scalar {
                s = s.scalar();
            }
            let mut h = Histogram::default();
            for &l in &lines {
                s.access(l, &mut h);
            }
            check(&h, &lines);
            let now = s.clock.as_ref().unwrap().now;
            if limit == 7000 {
                // Renumbered a few times over (each down to the live lines, under 6,000).
                assert!(now < 7000 && ticks > 20_000, "{now} of {ticks}");
            } else {
                assert_eq!(now, ticks);
            }
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
    fn vector_and_scalar_sets_hold_the_same_times() {
        if !vector_sets_supported() {
            return;
        }
        let lines = mixed_lines(20_000, 3);
        let mut v = SetIndexed::for_grid(64);
        let mut p = SetIndexed::for_grid(64).scalar();
        let (mut ev, mut ep) = (ExactStack::new(), ExactStack::new());
        let (mut hv, mut hp) = (Histogram::default(), Histogram::default());
        through_exact(&mut v, &mut ev, &lines, &mut hv);
        through_exact(&mut p, &mut ep, &lines, &mut hp);
        assert_eq!(hv, hp);
        for (a, b) in v.levels.iter().zip(&p.levels) {
            assert!(v.times.of(a) == p.times.of(b), "{} sets", a.mask + 1);
        }
    }
}
