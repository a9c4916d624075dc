//! Cores in key order, kept up to date move by move at small cost.
//!
//! A core's key is its scaled load, then its power (descending), then its id ([`CoreKey`]). Loads
//! and powers take few distinct values: a load is a run-queue length over one of the machine's
//! few powers. So the cores are kept in buckets, one a distinct (load, power), each a bitset of
//! core ids read in id order; the keys are numbered once for all the orders of a balance
//! ([`Keys`]), which read their buckets in key order. Moving a core between keys is a lookup in a
//! map of a few dozen keys and two bit flips in each order the core is in, where a set of all the
//! keys spent two tree operations over every core per order. The order read out is the same as
//! that set's.

use std::cmp::Reverse;
use std::collections::BTreeMap;

/// Order key of a core: scaled load ascending, then power descending (at equal load the slower
/// core counts as more loaded), then id. The first key is the best destination, the last the
/// busiest source.
pub(super) type CoreKey = (u64, Reverse<u64>, u32);

/// What a search makes of a bucket of cores, from its load and power alone.
pub(super) enum Bucketwise {
    /// Read its cores.
    Look,
    /// None of its cores will do; go on to the next bucket.
    Skip,
    /// Neither its cores nor any after them will do.
    Stop,
}

/// A distinct (load, power) of the cores, numbered in order of first use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct BucketId(u32);

/// The distinct (load, power) keys of the cores, shared by all the orders: a key is looked up
/// once per change of a core, however many orders the core is in. A key no core has any more can
/// be forgotten and its id given to the next new key.
#[derive(Clone, Debug, Default)]
pub(super) struct Keys {
    ids: BTreeMap<(u64, Reverse<u64>), BucketId>,
    /// The last key looked up and its id: neighbouring cores often share a key.
    last: Option<((u64, Reverse<u64>), BucketId)>,
    /// By id: its key, and the scaled load a core of that key would have with one more thread
    /// (worked out once, not at every search that reads the bucket).
    of: Vec<((u64, Reverse<u64>), f64)>,
    /// Ids of forgotten keys, free for new ones.
    free: Vec<BucketId>,
}

impl Keys {
    /// The id of (`load`, `power`), numbered now if new.
    pub(super) fn id(&mut self, (load, power, _): CoreKey) -> BucketId {
        if let Some((key, id)) = self.last {
            if key == (load, power) {
                return id;
            }
        }
        let (of, free) = (&mut self.of, &mut self.free);
        let id = *self.ids.entry((load, power)).or_insert_with(|| {
            // The run-queue length the load stands for (load × power is within an ulp of it).
            let p = f64::from_bits(power.0);
            let n = (f64::from_bits(load) * p).round() as u32;
            let entry = ((load, power), super::scaled_load(n + 1, p));
            match free.pop() {
                Some(b) => {
                    of[b.0 as usize] = entry;
                    b
                }
                None => {
                    of.push(entry);
                    BucketId(of.len() as u32 - 1)
                }
            }
        });
        self.last = Some(((load, power), id));
        id
    }

    /// The key of id `b`.
    fn key(&self, b: BucketId) -> (u64, Reverse<u64>) {
        self.of[b.0 as usize].0
    }

    /// Forget the keys whose ids `unused` says no order holds a core under, their ids free for
    /// new keys.
    pub(super) fn forget_where(&mut self, mut unused: impl FnMut(BucketId) -> bool) {
        let free = &mut self.free;
        self.ids.retain(|_, &mut b| {
            let keep = !unused(b);
            if !keep {
                free.push(b);
            }
            keep
        });
        self.last = None;
    }
}

/// The cores of one (load, power): a bitset of ids and how many are set.
#[derive(Clone, Debug, Default)]
struct Bucket {
    len: u32,
    words: Vec<u64>,
}

/// Cores in [`CoreKey`] order, their keys numbered by a [`Keys`].
#[derive(Clone, Debug, Default)]
pub(super) struct CoreOrder {
    /// The first bitset word a bucket holds (of the lowest id the order may hold) and how many
    /// (to the highest): an LLC's or a node's order spans its own cores' ids, not the machine's.
    base: usize,
    words: usize,
    /// By bucket id; an emptied bucket stays, so that a key that comes back costs no allocation.
    buckets: Vec<Bucket>,
    /// The ids of the non-empty buckets, in key order: a search reads only the keys this order's
    /// cores have (an LLC's few), not every key of the machine.
    present: Vec<BucketId>,
}

impl CoreOrder {
    /// An empty order for the core ids in `lo..=hi`.
    pub(super) fn new(lo: u32, hi: u32) -> Self {
        let base = lo as usize / 64;
        CoreOrder {
            base,
            words: (hi as usize / 64 + 1).saturating_sub(base).max(1),
            buckets: Vec::new(),
            present: Vec::new(),
        }
    }

    pub(super) fn insert(&mut self, keys: &Keys, b: BucketId, id: u32) {
        let i = b.0 as usize;
        if self.buckets.len() <= i {
            self.buckets.resize_with(i + 1, Bucket::default);
        }
        let bucket = &mut self.buckets[i];
        if bucket.words.is_empty() {
            bucket.words = vec![0; self.words];
        }
        let (w, bit) = (id as usize / 64 - self.base, 1u64 << (id % 64));
        debug_assert_eq!(bucket.words[w] & bit, 0, "core {id} is in the order once");
        bucket.words[w] |= bit;
        bucket.len += 1;
        if bucket.len == 1 {
            let key = keys.key(b);
            let at = self.present.partition_point(|&x| keys.key(x) < key);
            self.present.insert(at, b);
        }
    }

    /// Whether no core is in bucket `b`.
    pub(super) fn is_empty_at(&self, b: BucketId) -> bool {
        self.buckets.get(b.0 as usize).is_none_or(|k| k.len == 0)
    }

    pub(super) fn remove(&mut self, keys: &Keys, b: BucketId, id: u32) {
        let (w, bit) = (id as usize / 64 - self.base, 1u64 << (id % 64));
        let Some(bucket) = self.buckets.get_mut(b.0 as usize).filter(|k| k.len > 0) else {
            debug_assert!(false, "core {id} removed from a bucket it is not in");
            return;
        };
        debug_assert_ne!(
            bucket.words[w] & bit,
            0,
            "core {id} removed from a bucket it is not in"
        );
        bucket.words[w] &= !bit;
        bucket.len -= 1;
        if bucket.len == 0 {
            let key = keys.key(b);
            let at = self.present.partition_point(|&x| keys.key(x) < key);
            debug_assert_eq!(self.present.get(at), Some(&b));
            self.present.remove(at);
        }
    }

    /// The non-empty buckets in key order, with their keys and the load a core of theirs would
    /// have with one more thread.
    fn buckets<'a>(
        &'a self,
        keys: &'a Keys,
    ) -> impl DoubleEndedIterator<Item = ((u64, Reverse<u64>), f64, &'a Bucket)> + 'a {
        self.present.iter().map(|&b| {
            let (key, after) = keys.of[b.0 as usize];
            (key, after, &self.buckets[b.0 as usize])
        })
    }

    /// The keys in ascending order.
    #[cfg(test)]
    pub(super) fn iter<'a>(&'a self, keys: &'a Keys) -> impl Iterator<Item = CoreKey> + 'a {
        let first = 64 * self.base as u32;
        self.buckets(keys).flat_map(move |((load, power), _, b)| {
            ids_ascending(&b.words).map(move |id| (load, power, first + id))
        })
    }

    /// The least of `bound` over this order's buckets (given a bucket's load, and the load its
    /// cores would have with one more thread), or `f64::MAX` when it holds no core.
    pub(super) fn least(&self, keys: &Keys, bound: impl Fn(f64, f64) -> f64) -> f64 {
        self.buckets(keys)
            .map(|((load, _), after, _)| bound(f64::from_bits(load), after))
            .fold(f64::MAX, f64::min)
    }

    /// The first of `core`'s answers over the cores in ascending key order, reading only the
    /// buckets `bucket` (given a bucket's load, and the load its cores would have with one more
    /// thread) says to.
    pub(super) fn find_ascending<T>(
        &self,
        keys: &Keys,
        mut bucket: impl FnMut(f64, f64) -> Bucketwise,
        mut core: impl FnMut(u32) -> Option<T>,
    ) -> Option<T> {
        let first = 64 * self.base as u32;
        for ((load, _), after, b) in self.buckets(keys) {
            match bucket(f64::from_bits(load), after) {
                Bucketwise::Stop => return None,
                Bucketwise::Skip => continue,
                Bucketwise::Look => {}
            }
            if let Some(found) = ids_ascending(&b.words).find_map(|id| core(first + id)) {
                return Some(found);
            }
        }
        None
    }

    /// The keys in descending order.
    #[cfg(test)]
    pub(super) fn iter_rev<'a>(&'a self, keys: &'a Keys) -> impl Iterator<Item = CoreKey> + 'a {
        self.iter_rev_below(keys, None)
    }

    /// The keys below `below` (all of them for `None`) in descending order.
    pub(super) fn iter_rev_below<'a>(
        &'a self,
        keys: &'a Keys,
        below: Option<CoreKey>,
    ) -> impl Iterator<Item = CoreKey> + 'a {
        let first = 64 * self.base as u32;
        let bucket_below = below.map(|(load, power, _)| (load, power));
        self.buckets(keys)
            .rev()
            .skip_while(move |(key, _, _)| bucket_below.is_some_and(|b| *key > b))
            .flat_map(move |(key, _, b)| {
                // In the bucket of `below` itself, the ids below its id; in the others, all.
                let limit = below
                    .filter(|&(load, power, _)| (load, power) == key)
                    .map_or(u32::MAX, |(_, _, id)| id.saturating_sub(first));
                ids_descending_below(&b.words, limit).map(move |id| (key.0, key.1, first + id))
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

/// The set bits of `words` below bit `limit`, highest first.
fn ids_descending_below(words: &[u64], limit: u32) -> impl Iterator<Item = u32> + '_ {
    let limit = limit as usize;
    let end = words.len().min(limit / 64 + 1);
    words[..end]
        .iter()
        .enumerate()
        .rev()
        .flat_map(move |(w, &word)| {
            let mut m = if w == limit / 64 {
                word & ((1u64 << (limit % 64)) - 1)
            } else {
                word
            };
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
        let mut ids = Keys::default();
        let mut order = CoreOrder::new(0, cores as u32 - 1);
        for &k in &keys {
            let b = ids.id(k);
            order.insert(&ids, b, k.2);
        }
        let mut set: BTreeSet<CoreKey> = keys.iter().copied().collect();
        for _ in 0..5_000 {
            let id = (next() % cores as u64) as usize;
            let new = key_of(next() % 7, id as u64 % 3, id as u32);
            let b = ids.id(keys[id]);
            order.remove(&ids, b, id as u32);
            set.remove(&keys[id]);
            let b = ids.id(new);
            order.insert(&ids, b, id as u32);
            set.insert(new);
            keys[id] = new;
        }
        assert!(order.iter(&ids).eq(set.iter().copied()));
        assert!(order.iter_rev(&ids).eq(set.iter().rev().copied()));
        assert_eq!(order.iter(&ids).count(), cores);
    }

    /// An order of the cores 70-199 (ids that start past a bitset word): read downward from any
    /// key, held or not, it gives the keys below it as a sorted set does; its least bound is
    /// the least over its keys.
    #[test]
    fn reads_down_from_any_key() {
        let (lo, hi) = (70u32, 199u32);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let powers = [1.0f64, 2.55, 3.4];
        let key_of = |runnable: u64, class: usize, id: u32| -> CoreKey {
            let power = powers[class];
            (
                (runnable as f64 / power).to_bits(),
                Reverse(power.to_bits()),
                id,
            )
        };
        let mut ids = Keys::default();
        let mut order = CoreOrder::new(lo, hi);
        let mut set = BTreeSet::new();
        for id in lo..=hi {
            let k = key_of(next() % 6, id as usize % 3, id);
            let b = ids.id(k);
            order.insert(&ids, b, id);
            set.insert(k);
        }
        assert!(order
            .iter_rev_below(&ids, None)
            .eq(set.iter().rev().copied()));
        for _ in 0..500 {
            let id = lo + (next() % u64::from(hi - lo + 3)) as u32;
            let below = key_of(next() % 7, (next() % 3) as usize, id);
            let want: Vec<CoreKey> = set.range(..below).rev().copied().collect();
            let got: Vec<CoreKey> = order.iter_rev_below(&ids, Some(below)).collect();
            assert_eq!(got, want, "below {below:?}");
        }
        let after = |load: f64| load * 1.5 + 0.25;
        let least = set
            .iter()
            .map(|k| after(f64::from_bits(k.0)))
            .fold(f64::MAX, f64::min);
        assert_eq!(order.least(&ids, |load, _| after(load)), least);
    }
}
