//! Synthetic traces with known structure, seeded, for tests and benchmarks: an instruction fetch
//! then a data reference, the data drawn from a mix of a small hot set, a large random working set
//! and a sequential stream.

use crate::trace::{Kind, Ref};
use hetsched_core::rng::SeededRng;

/// The mix of a synthetic trace.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    /// Lines of the hot set, referenced with probability `hot`.
    pub hot_lines: u64,
    pub hot: f64,
    /// Lines of the large working set, referenced with probability `large`.
    pub large_lines: u64,
    pub large: f64,
    // The rest: a sequential stream that never returns.
}

impl Default for Mix {
    fn default() -> Self {
        // A program-like footprint: 4 MB used half the time, 64 MB of data used randomly.
        Mix {
            hot_lines: 1 << 16,
            hot: 0.5,
            large_lines: 1 << 20,
            large: 0.3,
        }
    }
}

/// `n` references (half instruction fetches, half data), made with `seed`.
pub fn trace(n: u64, mix: Mix, seed: u64) -> impl Iterator<Item = Ref> {
    let mut rng = SeededRng::new(seed);
    let mut stream = 1u64 << 40;
    let mut pc = 0x40_0000u64;
    (0..n).map(move |i| {
        if i % 2 == 0 {
            pc = 0x40_0000 + (pc + 4 - 0x40_0000) % 4096;
            return Ref {
                kind: Kind::Instr,
                addr: pc,
                size: 4,
            };
        }
        let u = rng.unit();
        let addr = if u < mix.hot {
            (1u64 << 32) + rng.below(mix.hot_lines as usize) as u64 * 64
        } else if u < mix.hot + mix.large {
            (1u64 << 36) + rng.below(mix.large_lines as usize) as u64 * 64
        } else {
            stream += 8;
            stream
        };
        Ref {
            kind: if u < 0.8 { Kind::Load } else { Kind::Store },
            addr,
            size: 8,
        }
    })
}
