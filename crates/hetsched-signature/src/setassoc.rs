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
//! One pass serves every set count: a reference visits one set per set count (14 for 64-byte
//! lines). A reference to the line referenced just before (global distance 0) is first in every
//! set and visits none; with the exact engine the global stack distance bounds the search, since
//! a line's per-set distance is at most its distance among all lines, and a first reference is not
//! searched for. Memory is fixed by the grid:
//! `sets × D` line numbers per set count (just under 10 MiB for 64-byte lines), whatever the trace.

use crate::histogram::{Histogram, SetHits};
use hetsched_core::signature::{SIGNATURE_ASSOC, SIGNATURE_SIZES};

/// An empty place in a set (line numbers are addresses shifted right, never `u64::MAX`).
const EMPTY: u64 = u64::MAX;

/// The cache of one number of sets.
struct Level {
    /// Number of sets − 1 (the number of sets is a power of two).
    mask: u64,
    /// Lines each set keeps: the largest associativity asked of this number of sets.
    depth: usize,
    /// `sets × depth` lines, each set's most recent first.
    lines: Vec<u64>,
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

/// Per-set stack distances for every set count of the grid, into a histogram's `set_hits`.
pub struct SetIndexed {
    levels: Vec<Level>,
    /// The line referenced last (at global distance 0 if referenced next).
    last: u64,
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
            last: EMPTY,
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
        SetIndexed {
            levels: by_sets
                .into_iter()
                .map(|(sets, depth)| Level {
                    mask: sets - 1,
                    depth,
                    lines: vec![EMPTY; sets as usize * depth],
                })
                .collect(),
            last: EMPTY,
        }
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

    /// Bring the sets `line` will visit into cache, the first cache line of each (a hint; no
    /// effect on results). Each visit would otherwise wait on memory once per set count.
    #[inline(always)]
    pub fn prefetch(&self, line: u64) {
        #[cfg(target_arch = "x86_64")]
        for level in &self.levels {
            let set = (line & level.mask) as usize;
            // SAFETY: a prefetch is a hint; it reads nothing into the program and cannot fault,
            // and the offset stays inside the allocation (set < sets).
            unsafe {
                let p = level.lines.as_ptr().add(set * level.depth);
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    p.cast::<i8>(),
                );
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = line;
    }

    /// Reference `line`, whose global stack distance is `global` (`None`: first reference).
    #[inline]
    pub fn access_after(&mut self, line: u64, global: Option<u64>, hist: &mut Histogram) {
        match global {
            Some(0) => self.repeat(line, hist),
            // A line's per-set distance is at most its global one: no need to look further.
            Some(d) => self.visit(line, (d as usize).saturating_add(1), hist),
            None => self.visit(line, 0, hist),
        }
    }

    /// Reference `line`, its global stack distance unknown (a sampled engine).
    #[inline]
    pub fn access(&mut self, line: u64, hist: &mut Histogram) {
        if line == self.last {
            self.repeat(line, hist);
        } else {
            self.visit(line, usize::MAX, hist);
        }
    }

    /// The line referenced last again: first in every set, nothing moves.
    #[inline]
    fn repeat(&mut self, line: u64, hist: &mut Histogram) {
        if !self.levels.is_empty() {
            self.last = line;
            hist.set_refs += 1.0;
            hist.set_repeats += 1.0;
        }
    }

    /// Look for `line` among the first `reach` places of its set at every set count, count its
    /// place, and move it first.
    #[inline]
    fn visit(&mut self, line: u64, reach: usize, hist: &mut Histogram) {
        if self.levels.is_empty() {
            return;
        }
        self.last = line;
        hist.set_refs += 1.0;
        let hits = self.hits_of(hist);
        for (level, counts) in self.levels.iter_mut().zip(hits) {
            let depth = level.depth;
            let set = (line & level.mask) as usize;
            let stack = &mut level.lines[set * depth..(set + 1) * depth];
            let end = match stack[..reach.min(depth)].iter().position(|&l| l == line) {
                Some(p) => {
                    counts.hits[p] += 1.0;
                    p
                }
                None => depth - 1,
            };
            stack.copy_within(0..end, 1);
            stack[0] = line;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_for_64_byte_lines_has_14_set_counts_in_10_mib() {
        let s = SetIndexed::for_grid(64);
        let sets: Vec<u64> = s.levels.iter().map(|l| l.mask + 1).collect();
        assert_eq!(sets, (3..=16).map(|e| 1u64 << e).collect::<Vec<_>>());
        let depths: Vec<usize> = s.levels.iter().map(|l| l.depth).collect();
        // 8 sets only at 16 KiB 32-way; 65,536 sets only at 16 MiB 4-way.
        assert_eq!(depths[0], 32);
        assert_eq!(depths[13], 4);
        assert_eq!(depths[12], 8);
        let bytes: usize = s.levels.iter().map(|l| l.lines.len() * 8).sum();
        // (8 + ... + 8192) x 32 + 16384 x 16 + 32768 x 8 + 65536 x 4 lines of 8 bytes.
        assert_eq!(bytes, 16_376 * 32 * 8 + 3 * (2 << 20));
    }

    #[test]
    fn lines_four_sets_apart_share_a_set_of_two() {
        // 4 sets of 2 ways: lines 0, 4, 8 map to set 0.
        let mut s = SetIndexed::for_caches(&[(4, 2)]);
        let mut h = Histogram::default();
        for (line, global) in [(0, None), (4, None), (1, None)] {
            s.access_after(line, global, &mut h);
        }
        // 0 again: global distance 2, but one line (4) of its set since: per-set distance 1.
        s.access_after(0, Some(2), &mut h);
        assert_eq!(h.set_hits[0].hits, vec![0.0, 1.0]);
        s.access_after(8, None, &mut h);
        // 4: per-set distance 2 (0 and 8 since), beyond the 2 ways kept: a miss.
        s.access(4, &mut h);
        s.access(4, &mut h);
        assert_eq!(h.set_hits[0].hits, vec![0.0, 1.0]);
        assert_eq!((h.set_refs, h.set_repeats), (7.0, 1.0));
        assert_eq!(h.misses_set_indexed(4, 2), Some(5.0));
        // Direct mapped, 0 missed its second time too.
        assert_eq!(h.misses_set_indexed(4, 1), Some(6.0));
        assert_eq!(h.misses_set_indexed(8, 1), None);
    }
}
