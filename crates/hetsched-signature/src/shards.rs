//! SHARDS: spatially hashed sampling of stack distances (Waldspurger, Park, Garthwaite and Ahmad,
//! "Efficient MRC Construction with SHARDS", FAST 2015). A line is in the sample when the hash of
//! its number, modulo `P`, is below a threshold `T`: every reference to a sampled line is
//! processed, none to the others, so distances within the sample are the full trace's distances
//! scaled by the rate `R = T / P`. A sampled distance counts as `d / R`, a sampled reference as
//! `1 / R` references.
//!
//! - **Fixed rate**: `T = R × P` throughout; at the end the expected number of sampled references
//!   (`R ×` all of them) minus the number seen is added at distance 0 (SHARDS_adj, section 4.2),
//!   which removes most of the bias a few hot lines in or out of the sample cause.
//! - **Fixed size**: at most `s_max` lines in the sample; when one more would exceed it, the line
//!   of largest hash leaves, `T` falls to that hash, and the counts taken so far are rescaled by
//!   `T_new / T_old` (section 4.3), so the memory is bounded whatever the trace.

use crate::exact::ExactStack;
use crate::histogram::Histogram;
use std::collections::BinaryHeap;

/// The hash modulus `P` (2^24, as in the paper's evaluation).
pub const MODULUS: u64 = 1 << 24;

/// The hash of a line in [0, P): the top 24 bits of MurmurHash3's 64-bit finaliser (Appleby)
/// before its last xor-shift, which only mixes high bits into low ones, and we keep high ones.
#[inline(always)]
pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x >> (64 - MODULUS.trailing_zeros())
}

/// A SHARDS sampler feeding a histogram.
pub struct Shards {
    stack: ExactStack,
    threshold: u64,
    /// `Some(s_max)` for fixed-size sampling.
    max_lines: Option<usize>,
    /// Sampled lines by hash, largest first (fixed size only).
    heap: BinaryHeap<(u64, u64)>,
    /// Sampled references seen (unscaled), for SHARDS_adj.
    sampled: f64,
}

impl Shards {
    /// Fixed-rate sampling at `rate` in (0, 1].
    pub fn fixed_rate(rate: f64) -> Self {
        let threshold = ((rate.clamp(0.0, 1.0) * MODULUS as f64).round() as u64).clamp(1, MODULUS);
        Shards {
            stack: ExactStack::new(),
            threshold,
            max_lines: None,
            heap: BinaryHeap::new(),
            sampled: 0.0,
        }
    }

    /// Fixed-size sampling with at most `max_lines` lines, starting at rate 1.
    pub fn fixed_size(max_lines: usize) -> Self {
        Shards {
            stack: ExactStack::new(),
            threshold: MODULUS,
            max_lines: Some(max_lines.max(1)),
            heap: BinaryHeap::new(),
            sampled: 0.0,
        }
    }

    /// The current sampling rate.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / MODULUS as f64
    }

    /// Lines in the sample.
    pub fn sampled_lines(&self) -> u64 {
        self.stack.distinct()
    }

    /// The hash threshold `T` in force: lines hashing below it are in the sample.
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// `line` is in the sample at `threshold`.
    #[inline(always)]
    pub fn in_sample(line: u64, threshold: u64) -> bool {
        mix(line) < threshold
    }

    /// Reference `line`.
    #[inline(always)]
    pub fn access(&mut self, line: u64, hist: &mut Histogram) {
        let h = mix(line);
        if h >= self.threshold {
            return;
        }
        self.sample(line, h, hist);
    }

    #[inline(never)]
    fn sample(&mut self, line: u64, h: u64, hist: &mut Histogram) {
        let inv = MODULUS as f64 / self.threshold as f64;
        self.sampled += 1.0;
        match self.stack.access(line) {
            Some(d) => hist.add((d as f64 * inv) as u64, inv),
            None => {
                hist.add_cold(inv);
                if let Some(max) = self.max_lines {
                    self.heap.push((h, line));
                    if self.heap.len() > max {
                        self.lower_threshold(hist);
                    }
                }
            }
        }
    }

    /// Fixed size: drop the largest-hash lines, lower `T` to their hash, rescale the counts.
    fn lower_threshold(&mut self, hist: &mut Histogram) {
        let Some(&(top, _)) = self.heap.peek() else {
            return;
        };
        let old = self.threshold;
        self.threshold = top.max(1);
        while let Some(&(h, line)) = self.heap.peek() {
            if h < self.threshold {
                break;
            }
            self.heap.pop();
            self.stack.remove(line);
        }
        let f = self.threshold as f64 / old as f64;
        hist.scale(f);
        self.sampled *= f;
    }

    /// End of a trace (or window) of `refs` line references: the SHARDS_adj correction for fixed
    /// rate. Counts are already in full-trace units.
    pub fn finish(&mut self, refs: u64, hist: &mut Histogram) {
        if self.max_lines.is_none() {
            let rate = self.rate();
            let expected = refs as f64 * rate;
            let diff = (expected - self.sampled) / rate;
            // Never below zero in the first bin.
            let first = hist.bins.first().copied().unwrap_or(0.0);
            hist.add(0, diff.max(-first));
        }
        self.sampled = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_one_is_exact() {
        let mut s = Shards::fixed_rate(1.0);
        let mut e = ExactStack::new();
        let (mut hs, mut he) = (Histogram::default(), Histogram::default());
        for i in 0..10_000u64 {
            let line = (i * 7919) % 1000;
            s.access(line, &mut hs);
            match e.access(line) {
                Some(d) => he.add(d, 1.0),
                None => he.add_cold(1.0),
            }
        }
        s.finish(10_000, &mut hs);
        assert_eq!(hs, he);
    }

    #[test]
    fn fixed_size_keeps_its_bound_and_lowers_the_rate() {
        let mut s = Shards::fixed_size(100);
        let mut h = Histogram::default();
        for line in 0..1_000_000u64 {
            s.access(line % 50_000, &mut h);
        }
        assert!(s.sampled_lines() <= 100);
        assert!(s.rate() < 0.01 && s.rate() > 0.0005, "{}", s.rate());
        // 1e6 references estimated from the sample, give or take sampling noise.
        assert!((h.total() / 1e6 - 1.0).abs() < 0.3, "{}", h.total());
    }
}
