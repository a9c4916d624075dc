//! The search and shift of one set at each level a reference visits, in each instruction set the
//! model runs: plain code for any depth, AVX2, and AVX-512 (module doc of [`super`]).

use super::{Level, Run};

/// Where a reference's visit reads and writes: every level's sets and counts, as
/// [`super::SetIndexed`] holds them, and the line.
#[derive(Clone, Copy)]
pub(super) struct Sets<'a> {
    pub(super) levels: &'a [Level],
    pub(super) ids: *mut u32,
    pub(super) places: *mut u64,
    pub(super) line: u64,
}

impl Sets<'_> {
    /// Search and shift the line's set at each level of `run` with `search_and_shift` (the place
    /// where it found the line, if it did), counting the place, up to the first level where the
    /// line was first already (each with `ALL`): that level, if any.
    ///
    /// # Safety
    /// `ids` and `places` hold every level's sets and counts (as [`super::SetIndexed`] makes them), and
    /// `run` is one of its runs; `search_and_shift` reads and writes `depth` places.
    #[inline(always)]
    unsafe fn visit_run<const ALL: bool>(
        self,
        run: Run,
        mut search_and_shift: impl FnMut(*mut u32) -> Option<usize>,
    ) -> Option<usize> {
        for k in run.start..run.end {
            // SAFETY: the caller's: `k` is a level, whose set of the line lies in `ids` and
            // whose counts lie in `places`, a place below its depth.
            unsafe {
                let level = self.levels.get_unchecked(k);
                match search_and_shift(self.ids.add(level.set_start(self.line))) {
                    Some(0) if !ALL => return Some(k),
                    Some(p) => *self.places.add(level.places + p) += 1,
                    None => {}
                }
            }
        }
        None
    }
}

/// The visit of every level up to the first where the line is first in its set (every level with
/// `ALL`): that level's index, or the number of levels. Plain code, for any depth.
///
/// # Safety
/// As [`Sets::visit_run`], for each of `runs`.
#[inline(always)]
pub(super) unsafe fn visit_scalar<const ALL: bool>(runs: &[Run], sets: Sets<'_>, id: u32) -> usize {
    for &run in runs {
        // SAFETY: the caller's.
        let stop = unsafe { sets.visit_run::<ALL>(run, |set| set_scalar(set, run.depth, id)) };
        if let Some(k) = stop {
            return k;
        }
    }
    sets.levels.len()
}

/// Look for line `id` in the set of `depth` places at `set` and move it first: its place, if
/// there.
///
/// # Safety
/// `set` starts `depth` places, borrowed by nothing else.
#[inline(always)]
unsafe fn set_scalar(set: *mut u32, depth: usize, id: u32) -> Option<usize> {
    // SAFETY: the caller's.
    let set = unsafe { std::slice::from_raw_parts_mut(set, depth) };
    let found = set.iter().position(|&s| s == id);
    set.copy_within(0..found.unwrap_or(depth - 1), 1);
    set[0] = id;
    found
}

/// The search and shift of a set in AVX2: the place of the line from an equality mask, then every
/// place up to it takes its predecessor (a lane rotation, the last lane carried into the next
/// vector) where a lane compare says so, the line first. A set whose first place holds the line
/// is left as it is; any other is read and written whole, wherever the line was: no branch on it.
#[cfg(target_arch = "x86_64")]
pub(super) mod vector {
    use super::{Run, Sets};
    use std::arch::x86_64::*;

    /// As [`super::visit_scalar`].
    ///
    /// # Safety
    /// As [`super::visit_scalar`], on a CPU with AVX2.
    #[target_feature(enable = "avx2")]
    pub(in crate::setassoc) unsafe fn visit<const ALL: bool>(
        runs: &[Run],
        sets: Sets<'_>,
        id: u32,
    ) -> usize {
        for &run in runs {
            // SAFETY: the caller's; each form reads and writes the run's depth.
            let stop = unsafe {
                match run.depth {
                    32 => sets.visit_run::<ALL>(run, |set| set_of_8s::<4>(set, id)),
                    16 => sets.visit_run::<ALL>(run, |set| set_of_8s::<2>(set, id)),
                    8 => sets.visit_run::<ALL>(run, |set| set_of_8s::<1>(set, id)),
                    4 => sets.visit_run::<ALL>(run, |set| set_of_4(set, id)),
                    // Sets of 1 or 2 ways (caches of very long lines, tests).
                    d => sets.visit_run::<ALL>(run, |set| super::set_scalar(set, d, id)),
                }
            };
            if let Some(k) = stop {
                return k;
            }
        }
        sets.levels.len()
    }

    /// A set of `8 × N` line numbers at `set`: the place of `id`, if there, and the shift.
    #[inline(always)]
    unsafe fn set_of_8s<const N: usize>(set: *mut u32, id: u32) -> Option<usize> {
        let p = set.cast::<__m256i>();
        // SAFETY: the caller's: `set` starts a set of `8 × N` line numbers.
        unsafe {
            let want = _mm256_set1_epi32(id as i32);
            let mut v = [_mm256_setzero_si256(); N];
            v[0] = _mm256_loadu_si256(p);
            let mut mask = eq_mask(v[0], want);
            if mask & 1 != 0 {
                // First already: nothing moves (and the rest of the set is not read).
                return Some(0);
            }
            for (i, vi) in v.iter_mut().enumerate().skip(1) {
                *vi = _mm256_loadu_si256(p.add(i));
                mask |= eq_mask(*vi, want) << (8 * i);
            }
            let found = (mask != 0).then(|| mask.trailing_zeros() as usize);
            let through = _mm256_set1_epi32(found.unwrap_or(8 * N - 1) as i32 + 1);
            let rotate = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
            let mut carry = want;
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

    /// The lanes of `v` equal to `want`, one bit each.
    #[inline(always)]
    unsafe fn eq_mask(v: __m256i, want: __m256i) -> u32 {
        // SAFETY: the caller runs with AVX2.
        unsafe { _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, want))) as u32 }
    }

    /// A set of 4 line numbers at `set`.
    #[inline(always)]
    unsafe fn set_of_4(set: *mut u32, id: u32) -> Option<usize> {
        let p = set.cast::<__m128i>();
        // SAFETY: the caller's: `set` starts a set of 4 line numbers.
        unsafe {
            let v = _mm_loadu_si128(p);
            let want = _mm_set1_epi32(id as i32);
            let mask = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, want))) as u32;
            if mask & 1 != 0 {
                return Some(0);
            }
            let found = (mask != 0).then(|| mask.trailing_zeros() as usize);
            let through = _mm_set1_epi32(found.unwrap_or(3) as i32 + 1);
            let r = _mm_shuffle_epi32::<0b10_01_00_00>(v);
            let shifted = _mm_blend_epi32::<1>(r, want);
            let take = _mm_cmpgt_epi32(through, _mm_setr_epi32(0, 1, 2, 3));
            _mm_storeu_si128(p, _mm_blendv_epi8(v, shifted, take));
            found
        }
    }
}

/// The search and shift of a set in AVX-512: the place of the line from a compare into a mask
/// register; each 16 places shift by one lane alignment with the vector before them (the line
/// before the first), and a masked store writes back only the places up to the line's (all of
/// them when it was not there). Two compares, two alignments and two stores for a set of 32.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use super::{Run, Sets};
    use std::arch::x86_64::*;

    /// As [`super::visit_scalar`].
    ///
    /// # Safety
    /// As [`super::visit_scalar`], on a CPU with AVX-512F and VL.
    #[target_feature(enable = "avx512f,avx512vl")]
    pub(in crate::setassoc) unsafe fn visit<const ALL: bool>(
        runs: &[Run],
        sets: Sets<'_>,
        id: u32,
    ) -> usize {
        for &run in runs {
            // SAFETY: the caller's; each form reads and writes the run's depth.
            let stop = unsafe {
                match run.depth {
                    32 => sets.visit_run::<ALL>(run, |set| set_of_16s::<2>(set.cast(), id)),
                    16 => sets.visit_run::<ALL>(run, |set| set_of_16s::<1>(set.cast(), id)),
                    8 => sets.visit_run::<ALL>(run, |set| set_of_8(set.cast(), id)),
                    4 => sets.visit_run::<ALL>(run, |set| set_of_4(set.cast(), id)),
                    // Sets of 1 or 2 ways (caches of very long lines, tests).
                    d => sets.visit_run::<ALL>(run, |set| super::set_scalar(set, d, id)),
                }
            };
            if let Some(k) = stop {
                return k;
            }
        }
        sets.levels.len()
    }

    /// The places that move for a line found at `found` (or not found, in a set of `depth`): one
    /// bit each, the line's own included.
    #[inline(always)]
    fn moving(found: Option<usize>, depth: usize) -> u32 {
        ((2u64 << found.unwrap_or(depth - 1)) - 1) as u32
    }

    /// A set of `16 × N` line numbers at `set`.
    #[inline(always)]
    unsafe fn set_of_16s<const N: usize>(set: *mut i32, id: u32) -> Option<usize> {
        // SAFETY: the caller's: `set` starts a set of `16 × N` line numbers.
        unsafe {
            let want = _mm512_set1_epi32(id as i32);
            let mut v = [want; N];
            v[0] = _mm512_loadu_epi32(set);
            let mut mask = _mm512_cmpeq_epi32_mask(v[0], want) as u32;
            if mask & 1 != 0 {
                // First already: nothing moves (and the rest of the set is not read).
                return Some(0);
            }
            for (i, vi) in v.iter_mut().enumerate().skip(1) {
                *vi = _mm512_loadu_epi32(set.add(16 * i));
                mask |= (_mm512_cmpeq_epi32_mask(*vi, want) as u32) << (16 * i);
            }
            let found = (mask != 0).then(|| mask.trailing_zeros() as usize);
            let take = moving(found, 16 * N);
            let mut before = want;
            for (i, vi) in v.iter().enumerate() {
                // Lane j takes lane j − 1; lane 0 the last lane of the vector before.
                let shifted = _mm512_alignr_epi32::<15>(*vi, before);
                before = *vi;
                _mm512_mask_storeu_epi32(set.add(16 * i), (take >> (16 * i)) as u16, shifted);
            }
            found
        }
    }

    /// A set of 8 line numbers at `set`.
    #[inline(always)]
    unsafe fn set_of_8(set: *mut i32, id: u32) -> Option<usize> {
        // SAFETY: the caller's: `set` starts a set of 8 line numbers.
        unsafe {
            let want = _mm256_set1_epi32(id as i32);
            let v = _mm256_loadu_epi32(set);
            let mask = _mm256_cmpeq_epi32_mask(v, want) as u32;
            if mask & 1 != 0 {
                return Some(0);
            }
            let found = (mask != 0).then(|| mask.trailing_zeros() as usize);
            let shifted = _mm256_alignr_epi32::<7>(v, want);
            _mm256_mask_storeu_epi32(set, moving(found, 8) as u8, shifted);
            found
        }
    }

    /// A set of 4 line numbers at `set`.
    #[inline(always)]
    unsafe fn set_of_4(set: *mut i32, id: u32) -> Option<usize> {
        // SAFETY: the caller's: `set` starts a set of 4 line numbers.
        unsafe {
            let want = _mm_set1_epi32(id as i32);
            let v = _mm_loadu_epi32(set);
            let mask = _mm_cmpeq_epi32_mask(v, want) as u32;
            if mask & 1 != 0 {
                return Some(0);
            }
            let found = (mask != 0).then(|| mask.trailing_zeros() as usize);
            let shifted = _mm_alignr_epi32::<3>(v, want);
            _mm_mask_storeu_epi32(set, moving(found, 4) as u8, shifted);
            found
        }
    }
}
