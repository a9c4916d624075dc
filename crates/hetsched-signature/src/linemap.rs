//! An open-addressing hash map from cache-line numbers to 32-bit values, for the stack-distance
//! engines' hot path: one multiply to hash, linear probing, no allocation per entry, backward-shift
//! deletion (no tombstones). Each line also gets a number of its own when first inserted, 0, 1, 2,
//! ... in order of insertion, kept in the entry's spare 4 bytes (the set-indexed model names lines
//! by it).

const EMPTY: u64 = u64::MAX;

/// A key, its value and its number side by side: one cache line holds them (one miss a lookup),
/// in the 16 bytes a key and a value take with their padding.
#[derive(Clone, Copy)]
struct Entry {
    key: u64,
    value: u32,
    id: u32,
}

const VACANT: Entry = Entry {
    key: EMPTY,
    value: 0,
    id: 0,
};

pub struct LineMap {
    entries: Vec<Entry>,
    len: usize,
    /// Keys ever inserted: the next new key's number (wrapping; a removed key's number is not
    /// given again).
    inserted: u32,
    mask: usize,
    /// 64 − log2(slots): the hash's top bits index the table.
    shift: u32,
}

#[inline]
fn hash(line: u64) -> u64 {
    // Fibonacci hashing (Knuth, TAOCP 6.4): the high bits of line × 2^64/φ.
    line.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// `len` vacant entries, in huge pages where the kernel has them (a table of megabytes probed at
/// random otherwise misses the TLB on most lookups).
fn vacant_entries(len: usize) -> Vec<Entry> {
    crate::huge_pages::filled(len, VACANT)
}

impl LineMap {
    pub fn with_capacity(n: usize) -> Self {
        let cap = (n.max(8) * 2).next_power_of_two();
        LineMap {
            entries: vacant_entries(cap),
            len: 0,
            inserted: 0,
            mask: cap - 1,
            shift: 64 - cap.trailing_zeros(),
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn slot(&self, line: u64) -> usize {
        (hash(line) >> self.shift) as usize & self.mask
    }

    /// Set `line` to `v`; the previous value, if any.
    #[cfg(test)]
    pub fn insert(&mut self, line: u64, v: u32) -> Option<u32> {
        self.insert_numbered(line, v).0
    }

    /// Set `line` to `v`: the previous value, if any, and the line's number (a new line takes
    /// the next one). `line` is never `u64::MAX` (line numbers are addresses shifted right by at
    /// least one bit).
    #[inline]
    pub fn insert_numbered(&mut self, line: u64, v: u32) -> (Option<u32>, u32) {
        debug_assert_ne!(line, EMPTY);
        if (self.len + 1) * 2 > self.entries.len() {
            self.grow();
        }
        let mut i = self.slot(line);
        loop {
            let e = &mut self.entries[i];
            if e.key == line {
                let old = e.value;
                e.value = v;
                return (Some(old), e.id);
            }
            if e.key == EMPTY {
                let id = self.inserted;
                *e = Entry {
                    key: line,
                    value: v,
                    id,
                };
                self.len += 1;
                self.inserted = id.wrapping_add(1);
                return (None, id);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Ask the CPU to bring `line`'s slot into cache (a hint; no effect on results).
    #[inline(always)]
    pub fn prefetch(&self, line: u64) {
        let e = &self.entries[self.slot(line)];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint; it reads nothing into the program and cannot fault.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (e as *const Entry).cast::<i8>(),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = e;
    }

    /// Replace every value by `f(value)`.
    pub fn map_values(&mut self, mut f: impl FnMut(u32) -> u32) {
        for e in self.entries.iter_mut().filter(|e| e.key != EMPTY) {
            e.value = f(e.value);
        }
    }

    #[cfg(test)]
    pub fn get(&self, line: u64) -> Option<u32> {
        let mut i = self.slot(line);
        loop {
            let e = self.entries[i];
            if e.key == line {
                return Some(e.value);
            }
            if e.key == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    pub fn remove(&mut self, line: u64) -> Option<u32> {
        let mut i = self.slot(line);
        loop {
            let k = self.entries[i].key;
            if k == EMPTY {
                return None;
            }
            if k == line {
                break;
            }
            i = (i + 1) & self.mask;
        }
        let v = self.entries[i].value;
        // Backward-shift deletion: move later entries of the probe run into the hole.
        let mut hole = i;
        let mut j = (i + 1) & self.mask;
        loop {
            let k = self.entries[j].key;
            if k == EMPTY {
                break;
            }
            let home = self.slot(k);
            // Entry at j may fill the hole if its home is not in (hole, j] cyclically.
            let between = if hole <= j {
                home > hole && home <= j
            } else {
                home > hole || home <= j
            };
            if !between {
                self.entries[hole] = self.entries[j];
                hole = j;
            }
            j = (j + 1) & self.mask;
        }
        self.entries[hole] = VACANT;
        self.len -= 1;
        Some(v)
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.entries);
        let cap = old.len() * 2;
        self.entries = vacant_entries(cap);
        self.mask = cap - 1;
        self.shift = 64 - cap.trailing_zeros();
        // Keys are distinct: each goes to the first vacant slot from its home, no comparison of
        // keys. A slot's home is the hash's top bits, so in order the old slots fill the new
        // table front to back, near sequentially.
        for e in old.into_iter().filter(|e| e.key != EMPTY) {
            let mut i = self.slot(e.key);
            while self.entries[i].key != EMPTY {
                i = (i + 1) & self.mask;
            }
            self.entries[i] = e;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Keys whose probe runs wrap past the end of the table, then every kind of key through
    /// several doublings: each is found with its value after every one.
    #[test]
    fn doubling_keeps_keys_whose_runs_wrap() {
        let mut m = LineMap::with_capacity(8);
        let slots = m.entries.len();
        let at_end: Vec<u64> = (0u64..)
            .filter(|&k| m.slot(k) == slots - 1)
            .take(3)
            .collect();
        let mut keys = at_end.clone();
        for &k in &at_end {
            m.insert(k, k as u32);
        }
        // The run from the last slot wrapped into slots 0 and 1.
        assert!(m.entries[0].key != EMPTY && m.entries[1].key != EMPTY);
        for k in 0..5000u64 {
            let line = k * 977 + 13;
            m.insert(line, line as u32);
            keys.push(line);
            if k.is_power_of_two() {
                for &k in &keys {
                    assert_eq!(
                        m.get(k),
                        Some(k as u32),
                        "key {k} after {} slots",
                        m.entries.len()
                    );
                }
            }
        }
        assert_eq!(m.len(), keys.len());
    }

    #[test]
    fn behaves_like_a_hash_map() {
        let mut m = LineMap::with_capacity(4);
        let mut r: HashMap<u64, u32> = HashMap::new();
        let mut x = 12345u64;
        for i in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let line = x % 3000;
            match x % 3 {
                0 => assert_eq!(m.remove(line), r.remove(&line)),
                _ => assert_eq!(m.insert(line, i), r.insert(line, i)),
            }
            assert_eq!(m.len(), r.len());
        }
        for (k, v) in &r {
            assert_eq!(m.get(*k), Some(*v));
        }
    }

    /// Lines are numbered in order of first insertion; a number stays through doublings and the
    /// removal of other lines, and a line removed and inserted again takes a new one.
    #[test]
    fn lines_keep_their_numbers() {
        let mut m = LineMap::with_capacity(4);
        let mut numbers: HashMap<u64, u32> = HashMap::new();
        let mut next = 0;
        let mut x = 777u64;
        for i in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let line = x % 3000 + ((x >> 60) << 50);
            if x.is_multiple_of(5) {
                m.remove(line);
                numbers.remove(&line);
                continue;
            }
            let (_, id) = m.insert_numbered(line, i);
            let want = *numbers.entry(line).or_insert_with(|| {
                next += 1;
                next - 1
            });
            assert_eq!(id, want, "line {line}");
        }
    }
}
