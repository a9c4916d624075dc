//! Stack-distance histograms and what follows from them: miss-ratio curves of fully associative
//! LRU caches, misses of set-indexed LRU caches from per-set distances ([`crate::setassoc`]), the
//! binomial model as an approximation of them, and the HASS signature matrix.
//!
//! Distances are binned exactly below 1024 lines and, above, into 64 bins an octave (1.6% wide),
//! whose edges include every power of two: a fully associative cache of a power-of-two number of
//! lines (every size of the signature grid) reads its misses exactly.

use hetsched_core::signature::{SIGNATURE_ASSOC, SIGNATURE_INSTRUCTIONS, SIGNATURE_SIZES};
use hetsched_core::Signature;

const EXACT_BELOW: u64 = 1024;
const SUB_BITS: u32 = 6;
const EXACT_BITS: u32 = 10;

/// Bin of a distance.
#[inline]
pub fn bin_of(d: u64) -> usize {
    if d < EXACT_BELOW {
        d as usize
    } else {
        let e = 63 - d.leading_zeros();
        let m = (d >> (e - SUB_BITS)) & ((1 << SUB_BITS) - 1);
        (EXACT_BELOW + ((e - EXACT_BITS) as u64) * (1 << SUB_BITS) + m) as usize
    }
}

/// Smallest distance of a bin.
pub fn bin_low(b: usize) -> u64 {
    let b = b as u64;
    if b < EXACT_BELOW {
        b
    } else {
        let k = b - EXACT_BELOW;
        let e = EXACT_BITS as u64 + k / (1 << SUB_BITS);
        let m = k % (1 << SUB_BITS);
        ((1 << SUB_BITS) + m) << (e - SUB_BITS as u64)
    }
}

/// Width of a bin, in distances.
pub fn bin_width(b: usize) -> u64 {
    bin_low(b + 1) - bin_low(b)
}

/// References of one number of sets by per-set stack distance, for the references at a global
/// distance of at least 1 (those at 0 are `Histogram::set_repeats`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SetHits {
    pub sets: u64,
    /// `hits[p]`: references at per-set distance `p`, below the largest associativity asked.
    pub hits: Vec<f64>,
}

/// A histogram of stack distances (in cache lines), weighted (sampling scales counts).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    pub bins: Vec<f64>,
    /// First references (infinite distance).
    pub cold: f64,
    /// Line references the set-indexed model counted (every one, sampled engine or not).
    pub set_refs: f64,
    /// Of those, references to the line referenced just before: hits at every set count.
    pub set_repeats: f64,
    /// Per-set distances of set-indexed caches, one entry per number of sets (empty when the
    /// set-indexed model did not run).
    pub set_hits: Vec<SetHits>,
}

impl Histogram {
    #[inline]
    pub fn add(&mut self, distance: u64, weight: f64) {
        let b = bin_of(distance);
        if b >= self.bins.len() {
            self.bins.resize(b + 1, 0.0);
        }
        self.bins[b] += weight;
    }

    #[inline]
    pub fn add_cold(&mut self, weight: f64) {
        self.cold += weight;
    }

    /// Every reference counted.
    pub fn total(&self) -> f64 {
        self.cold + self.bins.iter().sum::<f64>()
    }

    /// Add another histogram's counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        self.cold += other.cold;
        if self.bins.len() < other.bins.len() {
            self.bins.resize(other.bins.len(), 0.0);
        }
        for (a, b) in self.bins.iter_mut().zip(&other.bins) {
            *a += b;
        }
        self.set_refs += other.set_refs;
        self.set_repeats += other.set_repeats;
        for o in &other.set_hits {
            match self.set_hits.iter_mut().find(|s| s.sets == o.sets) {
                Some(s) => {
                    if s.hits.len() < o.hits.len() {
                        s.hits.resize(o.hits.len(), 0.0);
                    }
                    for (a, b) in s.hits.iter_mut().zip(&o.hits) {
                        *a += b;
                    }
                }
                None => self.set_hits.push(o.clone()),
            }
        }
    }

    /// Multiply every count of the fully associative distances by `f` (a sample's rate
    /// changed); the set-indexed counts, never sampled, stay.
    pub fn scale(&mut self, f: f64) {
        self.cold *= f;
        for b in &mut self.bins {
            *b *= f;
        }
    }

    /// Misses of a set-indexed LRU cache of `sets` sets and `ways` ways (line number modulo
    /// `sets`), from the per-set distances: every reference but repeats of the line just
    /// referenced and those at per-set distance below `ways`. `None` when the set-indexed model
    /// did not count this cache.
    pub fn misses_set_indexed(&self, sets: u64, ways: u32) -> Option<f64> {
        let s = self.set_hits.iter().find(|s| s.sets == sets)?;
        if s.hits.len() < ways as usize {
            return None;
        }
        let hits = self.set_repeats + s.hits[..ways as usize].iter().sum::<f64>();
        Some((self.set_refs - hits).max(0.0))
    }

    /// Misses of an LRU cache of `sets` sets and `ways` ways: set-indexed when it was counted,
    /// else by the binomial approximation.
    pub fn misses(&self, sets: u64, ways: u32) -> f64 {
        self.misses_set_indexed(sets, ways)
            .unwrap_or_else(|| self.misses_set_associative(sets, ways))
    }

    /// Misses of a fully associative LRU cache of `lines` lines: references at distance ≥ lines,
    /// and first references. Exact when `lines` is below 1024 or a power of two.
    pub fn misses_fully_associative(&self, lines: u64) -> f64 {
        let first = bin_of(lines);
        // A bin straddling `lines` (only above 1024 and off the bin edges) counts in proportion.
        let mut m = self.cold;
        for (b, &c) in self.bins.iter().enumerate().skip(first) {
            if b == first && bin_low(b) < lines {
                let frac = (bin_low(b) + bin_width(b) - lines) as f64 / bin_width(b) as f64;
                m += c * frac;
            } else {
                m += c;
            }
        }
        m
    }

    /// Misses of an LRU cache of `sets` sets and `ways` ways with the binomial model (Smith 1978;
    /// Hill and Smith 1989), an approximation: it assumes lines fall into sets at random, which
    /// overstates the misses of a contiguous working set about the cache's size. A reference at stack distance `d` misses when at least `ways` of the
    /// `d` distinct lines since its last use map to its set, each independently with probability
    /// `1 / sets`: `P(X ≥ ways)`, `X ~ Binomial(d, 1/sets)`. A bin is evaluated at its middle.
    pub fn misses_set_associative(&self, sets: u64, ways: u32) -> f64 {
        if sets <= 1 {
            return self.misses_fully_associative(ways as u64);
        }
        let mut m = self.cold;
        for (b, &c) in self.bins.iter().enumerate() {
            if c == 0.0 {
                continue;
            }
            let d = if bin_width(b) == 1 {
                bin_low(b) as f64
            } else {
                bin_low(b) as f64 + (bin_width(b) as f64 - 1.0) / 2.0
            };
            m += c * binomial_tail(d, 1.0 / sets as f64, ways);
        }
        m
    }

    /// The HASS signature (section 3): misses per 4096 instructions for every size and
    /// associativity of the grid, with `line_bytes` lines; set-indexed where counted (see
    /// [`Histogram::misses`]).
    pub fn signature(&self, name: &str, instructions: u64, line_bytes: u32) -> Signature {
        let per = SIGNATURE_INSTRUCTIONS / instructions.max(1) as f64;
        let caches = crate::setassoc::grid_caches(line_bytes);
        let misses = caches
            .chunks(SIGNATURE_SIZES.len())
            .map(|row| {
                row.iter()
                    .map(|&(sets, ways)| self.misses(sets, ways) * per)
                    .collect()
            })
            .collect();
        Signature {
            name: name.to_string(),
            sizes_bytes: SIGNATURE_SIZES.to_vec(),
            assoc: SIGNATURE_ASSOC.to_vec(),
            misses,
        }
    }

    /// Fully associative miss ratios at the grid's sizes.
    pub fn miss_ratio_curve(&self, line_bytes: u32) -> Vec<f64> {
        let total = self.total().max(f64::MIN_POSITIVE);
        SIGNATURE_SIZES
            .iter()
            .map(|&size| self.misses_fully_associative(size / line_bytes as u64) / total)
            .collect()
    }
}

/// `P(X ≥ k)` for `X ~ Binomial(n, p)`, `n` real (a bin's middle), by summing `P(X < k)`.
pub fn binomial_tail(n: f64, p: f64, k: u32) -> f64 {
    if n < k as f64 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let q = 1.0 - p;
    // log of the k = 0 term: n ln(1 - p).
    let mut log_term = n * q.ln();
    let ratio = (p / q).ln();
    let mut below = 0.0;
    for i in 0..k {
        below += log_term.exp();
        log_term += ((n - i as f64) / (i as f64 + 1.0)).ln() + ratio;
    }
    (1.0 - below).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_cover_every_distance_once_and_powers_of_two_are_edges() {
        let mut prev = None;
        for d in 0..200_000u64 {
            let b = bin_of(d);
            assert!(bin_low(b) <= d && d < bin_low(b) + bin_width(b), "{d}");
            if let Some(p) = prev {
                assert!(b == p || b == p + 1);
            }
            prev = Some(b);
        }
        for e in 0..40 {
            assert_eq!(bin_low(bin_of(1u64 << e)), 1u64 << e);
        }
    }

    #[test]
    fn binomial_tail_matches_direct_sums() {
        // P(X >= 2), X ~ Bin(3, 0.5) = 4/8.
        assert!((binomial_tail(3.0, 0.5, 2) - 0.5).abs() < 1e-12);
        assert_eq!(binomial_tail(1.0, 0.5, 2), 0.0);
        // Large n, tiny p: Poisson(2), P(X >= 1) = 1 - e^-2.
        let t = binomial_tail(2e6, 1e-6, 1);
        assert!((t - (1.0 - (-2.0f64).exp())).abs() < 1e-5, "{t}");
        assert!(binomial_tail(1e9, 0.5, 32) > 0.999_999);
    }

    #[test]
    fn fully_associative_misses_count_long_distances_and_cold() {
        let mut h = Histogram::default();
        h.add(3, 2.0);
        h.add(100, 1.0);
        h.add(5000, 1.0);
        h.add_cold(4.0);
        assert_eq!(h.misses_fully_associative(4), 4.0 + 2.0);
        assert_eq!(h.misses_fully_associative(101), 4.0 + 1.0);
        assert_eq!(h.misses_fully_associative(4096), 4.0 + 1.0);
        assert_eq!(h.misses_fully_associative(8192), 4.0);
        // A direct-mapped cache of many sets misses a distance-1 reference with probability 1/sets.
        let mut one = Histogram::default();
        one.add(1, 1.0);
        assert!((one.misses_set_associative(64, 1) - 1.0 / 64.0).abs() < 1e-12);
    }
}
