//! One level's pass over a batch of references: the search and shift, or the insert, of each one's
//! set, in each instruction set the model runs (plain code for any depth, AVX2, and AVX-512;
//! module doc of [`super`]).

use super::Level;

/// Sets of a prefetched level are brought into cache this many references ahead of their search
/// or insert.
const AHEAD: usize = 16;

/// The batch's references: their lines and numbers, and for each the largest depth of a level
/// where its line was not found (0: none yet; `u32::MAX` for a line referenced for the first
/// time, in no set at all).
pub(super) struct Batch<'a> {
    pub(super) lines: &'a [u64],
    pub(super) ids: &'a [u32],
    pub(super) missed: &'a mut [u32],
}

/// Where a level's pass reads and writes: every level's sets and counts, as
/// [`super::SetIndexed`] holds them.
#[derive(Clone, Copy)]
pub(super) struct Store {
    pub(super) ids: *mut u32,
    pub(super) places: *mut u64,
}

/// Take each reference of the batch at `level`, in order. One whose line was not found at a level
/// of more sets and at least this depth is not here either (the sets there split this level's
/// sets, so a line has at least as many others before it in its set here): its line goes first,
/// every other place one down, with `insert_first`, no search (unless `ALL`, a check that this
/// changes nothing). Any other is searched and shifted with `search_and_shift` (the place where
/// it found the line, if it did); its place is counted in the place's slot or, not found, in the
/// level's last slot (so that counting does not branch; that slot is not read: a miss is a
/// reference counted at no place), and the depth noted. `depth` is the level's, a constant where the form is
/// written for one; with `PREFETCH`, each set is prefetched [`AHEAD`] references before.
///
/// # Safety
/// `store` holds every level's sets and `depth + 1` counts a level (as [`super::SetIndexed`]
/// makes them), `level` is one of its levels, of `depth` places a set, and `search_and_shift` and
/// `insert_first` read and write `depth` places.
#[inline(always)]
unsafe fn pass<const ALL: bool, const PREFETCH: bool>(
    level: &Level,
    depth: usize,
    store: Store,
    batch: &mut Batch<'_>,
    mut search_and_shift: impl FnMut(*mut u32, u32) -> Option<usize>,
    mut insert_first: impl FnMut(*mut u32, u32),
) {
    debug_assert_eq!(depth, level.depth);
    let n = batch
        .lines
        .len()
        .min(batch.ids.len())
        .min(batch.missed.len());
    let (lines, ids, missed) = (batch.lines, batch.ids, &mut *batch.missed);
    // SAFETY (this block and the loop's): the caller's: the level's sets lie in `store.ids` from
    // `level.start`, `depth` places a set, and its `depth + 1` counts in `store.places` from
    // `level.places`; `i` and `i + AHEAD` are below `n`, checked or by construction.
    let (sets, counts) = unsafe { (store.ids.add(level.start), store.places.add(level.places)) };
    let set_of = |line: u64| (line & level.mask) as usize * depth;
    // SAFETY: a set of the level, as in the loop.
    let prefetch = |i: usize| unsafe {
        let set = sets.add(set_of(*lines.get_unchecked(i)));
        hetsched_core::prefetch::prefetch(&*set);
        if depth > 16 {
            hetsched_core::prefetch::prefetch(&*set.add(16));
        }
    };
    if PREFETCH {
        // The first references' sets at once, the rest each `AHEAD` references before its search.
        (0..AHEAD.min(n)).for_each(prefetch);
    }
    for i in 0..n {
        unsafe {
            if PREFETCH && i + AHEAD < n {
                prefetch(i + AHEAD);
            }
            let (set, id) = (
                sets.add(set_of(*lines.get_unchecked(i))),
                *ids.get_unchecked(i),
            );
            let missed = missed.get_unchecked_mut(i);
            if !ALL && *missed as usize >= depth {
                insert_first(set, id);
            } else {
                let place = search_and_shift(set, id).unwrap_or(depth);
                *counts.add(place) += 1;
                if place == depth {
                    *missed = (*missed).max(depth as u32);
                }
            }
        }
    }
}

/// [`pass`] with or without prefetching, as the level asks.
///
/// # Safety
/// As [`pass`].
#[inline(always)]
unsafe fn pass_as_asked<const ALL: bool>(
    level: &Level,
    depth: usize,
    store: Store,
    batch: &mut Batch<'_>,
    search_and_shift: impl FnMut(*mut u32, u32) -> Option<usize>,
    insert_first: impl FnMut(*mut u32, u32),
) {
    // SAFETY: the caller's.
    unsafe {
        if level.prefetch {
            pass::<ALL, true>(level, depth, store, batch, search_and_shift, insert_first);
        } else {
            pass::<ALL, false>(level, depth, store, batch, search_and_shift, insert_first);
        }
    }
}

/// A level's pass in plain code, for any depth.
///
/// # Safety
/// As [`pass`].
pub(super) unsafe fn pass_scalar<const ALL: bool>(
    level: &Level,
    store: Store,
    batch: &mut Batch<'_>,
) {
    let d = level.depth;
    // SAFETY: the caller's.
    unsafe {
        pass_as_asked::<ALL>(
            level,
            d,
            store,
            batch,
            |s, id| set_scalar(s, d, id),
            |s, id| insert_scalar(s, d, id),
        );
    }
}

/// Put line `id` first in the set of `depth` places at `set`, every other place one down (the
/// last dropped).
///
/// # Safety
/// `set` starts `depth` places, borrowed by nothing else.
#[inline(always)]
unsafe fn insert_scalar(set: *mut u32, depth: usize, id: u32) {
    // SAFETY: the caller's.
    let set = unsafe { std::slice::from_raw_parts_mut(set, depth) };
    set.copy_within(0..depth - 1, 1);
    set[0] = id;
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
/// An insert of a line known to miss is the rotation and blend alone.
#[cfg(target_arch = "x86_64")]
pub(super) mod vector {
    use super::{pass_as_asked, Batch, Level, Store};
    use std::arch::x86_64::*;

    /// As [`super::pass_scalar`].
    ///
    /// # Safety
    /// As [`super::pass_scalar`], on a CPU with AVX2.
    #[target_feature(enable = "avx2")]
    pub(in crate::setassoc) unsafe fn pass_of<const ALL: bool>(
        level: &Level,
        store: Store,
        batch: &mut Batch<'_>,
    ) {
        // SAFETY: the caller's; each form reads and writes the level's depth.
        unsafe {
            match level.depth {
                32 => pass_as_asked::<ALL>(
                    level,
                    32,
                    store,
                    batch,
                    |s, id| set_of_8s::<4>(s, id),
                    |s, id| insert_of_8s::<4>(s, id),
                ),
                16 => pass_as_asked::<ALL>(
                    level,
                    16,
                    store,
                    batch,
                    |s, id| set_of_8s::<2>(s, id),
                    |s, id| insert_of_8s::<2>(s, id),
                ),
                8 => pass_as_asked::<ALL>(
                    level,
                    8,
                    store,
                    batch,
                    |s, id| set_of_8s::<1>(s, id),
                    |s, id| insert_of_8s::<1>(s, id),
                ),
                4 => pass_as_asked::<ALL>(
                    level,
                    4,
                    store,
                    batch,
                    |s, id| set_of_4(s, id),
                    |s, id| super::insert_scalar(s, 4, id),
                ),
                // Sets of 1 or 2 ways (caches of very long lines, tests).
                d => pass_as_asked::<ALL>(
                    level,
                    d,
                    store,
                    batch,
                    |s, id| super::set_scalar(s, d, id),
                    |s, id| super::insert_scalar(s, d, id),
                ),
            }
        }
    }

    /// Line `id` first in the set of `8 × N` line numbers at `set`, every other place one down.
    #[inline(always)]
    unsafe fn insert_of_8s<const N: usize>(set: *mut u32, id: u32) {
        let p = set.cast::<__m256i>();
        // SAFETY: the caller's: `set` starts a set of `8 × N` line numbers.
        unsafe {
            let rotate = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
            let v: [__m256i; N] = std::array::from_fn(|i| _mm256_loadu_si256(p.add(i)));
            let mut carry = _mm256_set1_epi32(id as i32);
            for (i, vi) in v.iter().enumerate() {
                let r = _mm256_permutevar8x32_epi32(*vi, rotate);
                _mm256_storeu_si256(p.add(i), _mm256_blend_epi32::<1>(r, carry));
                carry = r;
            }
        }
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
/// them when it was not there). Two compares, two alignments and two stores for a set of 32; an
/// insert of a line known to miss, the two alignments and two full stores.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use super::{pass_as_asked, Batch, Level, Store};
    use std::arch::x86_64::*;

    /// As [`super::pass_scalar`].
    ///
    /// # Safety
    /// As [`super::pass_scalar`], on a CPU with AVX-512F and VL.
    #[target_feature(enable = "avx512f,avx512vl")]
    pub(in crate::setassoc) unsafe fn pass_of<const ALL: bool>(
        level: &Level,
        store: Store,
        batch: &mut Batch<'_>,
    ) {
        // SAFETY: the caller's; each form reads and writes the level's depth.
        unsafe {
            match level.depth {
                32 => pass_as_asked::<ALL>(
                    level,
                    32,
                    store,
                    batch,
                    |s, id| set_of_16s::<2>(s.cast(), id),
                    |s, id| insert_of_16s::<2>(s.cast(), id),
                ),
                16 => pass_as_asked::<ALL>(
                    level,
                    16,
                    store,
                    batch,
                    |s, id| set_of_16s::<1>(s.cast(), id),
                    |s, id| insert_of_16s::<1>(s.cast(), id),
                ),
                8 => pass_as_asked::<ALL>(
                    level,
                    8,
                    store,
                    batch,
                    |s, id| set_of_8(s.cast(), id),
                    |s, id| insert_of_8(s.cast(), id),
                ),
                4 => pass_as_asked::<ALL>(
                    level,
                    4,
                    store,
                    batch,
                    |s, id| set_of_4(s.cast(), id),
                    |s, id| super::insert_scalar(s, 4, id),
                ),
                // Sets of 1 or 2 ways (caches of very long lines, tests).
                d => pass_as_asked::<ALL>(
                    level,
                    d,
                    store,
                    batch,
                    |s, id| super::set_scalar(s, d, id),
                    |s, id| super::insert_scalar(s, d, id),
                ),
            }
        }
    }

    /// Line `id` first in the set of `16 × N` line numbers at `set`, every other place one down:
    /// one lane alignment and one store a vector.
    #[inline(always)]
    unsafe fn insert_of_16s<const N: usize>(set: *mut i32, id: u32) {
        // SAFETY: the caller's: `set` starts a set of `16 × N` line numbers.
        unsafe {
            let v: [__m512i; N] = std::array::from_fn(|i| _mm512_loadu_epi32(set.add(16 * i)));
            let mut before = _mm512_set1_epi32(id as i32);
            for (i, vi) in v.iter().enumerate() {
                _mm512_storeu_epi32(set.add(16 * i), _mm512_alignr_epi32::<15>(*vi, before));
                before = *vi;
            }
        }
    }

    /// Line `id` first in the set of 8 line numbers at `set`, every other place one down.
    #[inline(always)]
    unsafe fn insert_of_8(set: *mut i32, id: u32) {
        // SAFETY: the caller's: `set` starts a set of 8 line numbers.
        unsafe {
            let v = _mm256_loadu_epi32(set);
            _mm256_storeu_epi32(
                set,
                _mm256_alignr_epi32::<7>(v, _mm256_set1_epi32(id as i32)),
            );
        }
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
