//! Cores in key order, kept up to date move by move at small cost.
//!
//! A core's key is its scaled load, then its power (descending), then its id ([`CoreKey`]). Loads
//! and powers take few distinct values: a load is a run-queue length over one of the machine's
//! few powers. So the cores are kept in buckets, one a distinct (load, power), in an ordered map,
//! each bucket a bitset of core ids read in id order. Moving a core between keys is two lookups
//! in a map of a few dozen buckets and two bit flips, where a set of all the keys spends two
//! tree operations over every core. The order read out is the same as that set's.

use std::cmp::Reverse;
use std::collections::BTreeMap;

/// Order key of a core: scaled load ascending, then power descending (at equal load the slower
/// core counts as more loaded), then id. The first key is the best destination, the last the
/// busiest source.
pub(super) type CoreKey = (u64, Reverse<u64>, u32);

/// The cores of one (load, power): a bitset of ids and how many are set.
#[derive(Clone, Debug)]
struct Bucket {
    len: u32,
    words: Vec<u64>,
}

/// Cores in [`CoreKey`] order.
#[derive(Clone, Debug, Default)]
pub(super) struct CoreOrder {
    /// Bitset words a bucket needs for the largest id.
    words: usize,
    /// Buckets by (load, power); an emptied bucket stays, so that a key that comes back costs no
    /// allocation.
    buckets: BTreeMap<(u64, Reverse<u64>), Bucket>,
}

impl CoreOrder {
    /// An empty order for core ids below `cores`.
    pub(super) fn new(cores: usize) -> Self {
        CoreOrder {
            words: cores.div_ceil(64).max(1),
            buckets: BTreeMap::new(),
        }
    }

    /// An order of `keys`, ids below `cores`.
    pub(super) fn of(cores: usize, keys: impl IntoIterator<Item = CoreKey>) -> Self {
        let mut order = Self::new(cores);
        for k in keys {
            order.insert(k);
        }
        order
    }

    pub(super) fn insert(&mut self, (load, power, id): CoreKey) {
        let words = self.words;
        let bucket = self.buckets.entry((load, power)).or_insert_with(|| Bucket {
            len: 0,
            words: vec![0; words],
        });
        let (w, bit) = (id as usize / 64, 1u64 << (id % 64));
        debug_assert_eq!(bucket.words[w] & bit, 0, "core {id} is in the order once");
        bucket.words[w] |= bit;
        bucket.len += 1;
    }

    pub(super) fn remove(&mut self, (load, power, id): CoreKey) {
        let Some(bucket) = self.buckets.get_mut(&(load, power)) else {
            debug_assert!(false, "core {id} removed under a key it does not have");
            return;
        };
        let (w, bit) = (id as usize / 64, 1u64 << (id % 64));
        debug_assert_ne!(
            bucket.words[w] & bit,
            0,
            "core {id} removed under a key it does not have"
        );
        bucket.words[w] &= !bit;
        bucket.len -= 1;
    }

    /// The keys in ascending order.
    pub(super) fn iter(&self) -> impl Iterator<Item = CoreKey> + '_ {
        self.buckets
            .iter()
            .filter(|(_, b)| b.len > 0)
            .flat_map(|(&(load, power), b)| {
                ids_ascending(&b.words).map(move |id| (load, power, id))
            })
    }

    /// The keys in descending order.
    pub(super) fn iter_rev(&self) -> impl Iterator<Item = CoreKey> + '_ {
        self.buckets
            .iter()
            .rev()
            .filter(|(_, b)| b.len > 0)
            .flat_map(|(&(load, power), b)| {
                ids_descending(&b.words).map(move |id| (load, power, id))
            })
    }
}

/// The set bits of `words`, lowest first.
fn ids_ascending(words: &[u64]) -> impl Iterator<Item = u32> + '_ {
    words.iter().enumerate().flat_map(|(w, &word)| {
        let mut m = word;
        std::iter::from_fn(move || {
            (m != 0).then(|| {
                let b = m.trailing_zeros();
                m &= m - 1;
                w as u32 * 64 + b
            })
        })
    })
}

/// The set bits of `words`, highest first.
fn ids_descending(words: &[u64]) -> impl Iterator<Item = u32> + '_ {
    words.iter().enumerate().rev().flat_map(|(w, &word)| {
        let mut m = word;
        std::iter::from_fn(move || {
            (m != 0).then(|| {
                let b = 63 - m.leading_zeros();
                m &= !(1u64 << b);
                w as u32 * 64 + b
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Random keys inserted, moved and removed: the order reads out as a sorted set of the same
    /// keys would, both ways.
    #[test]
    fn reads_out_as_a_sorted_set() {
        let cores = 200usize;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let key_of = |runnable: u64, class: u64, id: u32| -> CoreKey {
            let power = [1.0f64, 2.55, 3.4][class as usize];
            (
                (runnable as f64 / power).to_bits(),
                Reverse(power.to_bits()),
                id,
            )
        };
        let mut keys: Vec<CoreKey> = (0..cores as u32)
            .map(|id| key_of(next() % 5, id as u64 % 3, id))
            .collect();
        let mut order = CoreOrder::of(cores, keys.iter().copied());
        let mut set: BTreeSet<CoreKey> = keys.iter().copied().collect();
        for _ in 0..5_000 {
            let id = (next() % cores as u64) as usize;
            let new = key_of(next() % 7, id as u64 % 3, id as u32);
            order.remove(keys[id]);
            set.remove(&keys[id]);
            order.insert(new);
            set.insert(new);
            keys[id] = new;
        }
        assert!(order.iter().eq(set.iter().copied()));
        assert!(order.iter_rev().eq(set.iter().rev().copied()));
        assert_eq!(order.iter().count(), cores);
    }
}
