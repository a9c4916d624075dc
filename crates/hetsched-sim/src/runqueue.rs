//! A core's run queue: the threads waiting for it, ordered by (virtual runtime, thread id).
//!
//! Queues are short (tens of threads at most per core) and change at every tick of every core, so
//! they are flat vectors of keys that pack both orderings into one `u128`: the virtual runtime,
//! sign-flipped so that unsigned order is signed order, in the high half and the thread id in the
//! low half. Beside the keys, a short queue keeps their positions sorted by key, one byte each:
//! the least key is the last position, so taking it needs no scan of the keys, and a thread
//! queued at a tick (most often the greatest key) goes in at the front of a few bytes. The least
//! key is also kept at hand so a tick asks "would a queued thread preempt?" in one comparison.
//!
//! A queue that grows past [`INDEX_FROM`] entries (hundreds of thousands of threads on a few
//! cores) also keeps its keys in order and each thread's position, so that finding the next least
//! key and removing a thread cost a logarithm instead of a scan per pick. The flat vector keeps its
//! order either way, so what a caller iterates is the same with or without the index.

use hetsched_core::prefetch::prefetch;
use hetsched_core::ThreadId;
use std::collections::{BTreeSet, HashMap};

/// Queue length from which the ordered index is kept: below it the sorted positions (a few cache
/// lines of keys, one byte of order per key) are faster than the index's upkeep. At most 256, so
/// that a position fits in the byte of `RunQueue::order`.
const INDEX_FROM: usize = 64;

/// One queue entry, packed. Keys are unique because thread ids are.
type Key = u128;

const SIGN: u64 = 1 << 63;

#[inline]
fn key(vruntime: i64, thread: ThreadId) -> Key {
    (((vruntime as u64) ^ SIGN) as u128) << 64 | thread.0 as u128
}

#[inline]
fn vruntime_of(k: Key) -> i64 {
    (((k >> 64) as u64) ^ SIGN) as i64
}

#[inline]
fn thread_of(k: Key) -> ThreadId {
    ThreadId(k as u32)
}

/// The queued threads of one core.
#[derive(Clone, Debug, Default)]
pub struct RunQueue {
    keys: Vec<Key>,
    /// The least key, or `Key::MAX` when empty.
    min: Key,
    /// Where the least key is in `keys` (0 when empty).
    min_pos: usize,
    /// Without the index: every position of `keys`, sorted by key from the greatest to the least
    /// (the least is popped from the end, and a thread that just ran joins at the front).
    order: Vec<u8>,
    /// Without the index: the greatest key, or 0 when empty (a key joining the front is found so
    /// without reading the keys).
    max: Key,
    /// On a long queue: the keys in order, and each queued thread's position in `keys`.
    index: Option<Box<Index>>,
}

/// The ordered index of a long queue.
#[derive(Clone, Debug, Default)]
struct Index {
    sorted: BTreeSet<Key>,
    pos: HashMap<u32, usize>,
}

impl RunQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self {
            keys: Vec::new(),
            min: Key::MAX,
            min_pos: 0,
            order: Vec::new(),
            max: 0,
            index: None,
        }
    }

    /// Number of waiting threads.
    #[inline]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// No thread waits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The queued thread with the least (vruntime, id) and its vruntime.
    #[inline]
    pub fn first(&self) -> Option<(i64, ThreadId)> {
        (!self.keys.is_empty()).then(|| (vruntime_of(self.min), thread_of(self.min)))
    }

    /// The least queued vruntime, or `i64::MAX` when empty.
    #[inline]
    pub fn min_vruntime(&self) -> i64 {
        if self.keys.is_empty() {
            i64::MAX
        } else {
            vruntime_of(self.min)
        }
    }

    /// Queue `thread` with its virtual runtime.
    pub fn push(&mut self, vruntime: i64, thread: ThreadId) {
        let k = key(vruntime, thread);
        self.keys.push(k);
        if k < self.min {
            self.min = k;
            self.min_pos = self.keys.len() - 1;
        }
        if let Some(ix) = &mut self.index {
            ix.sorted.insert(k);
            ix.pos.insert(thread.0, self.keys.len() - 1);
        } else if self.keys.len() <= INDEX_FROM {
            self.insert_order(self.keys.len() - 1);
        } else {
            self.order.clear();
            self.index = Some(Box::new(Index {
                sorted: self.keys.iter().copied().collect(),
                pos: self
                    .keys
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| (thread_of(k).0, i))
                    .collect(),
            }));
        }
    }

    /// Remove and return the thread with the least (vruntime, id).
    pub fn pop_first(&mut self) -> Option<ThreadId> {
        if self.keys.is_empty() {
            return None;
        }
        let first = self.min;
        if self.index.is_some() {
            self.remove_indexed(self.min_pos);
            return Some(thread_of(first));
        }
        let pos = self.min_pos;
        self.order.pop();
        self.keys.swap_remove(pos);
        self.moved_to(pos);
        if self.order.is_empty() {
            // The least was also the greatest.
            self.max = 0;
        }
        self.least_from_order();
        Some(thread_of(first))
    }

    /// Queue `thread` with its virtual runtime and take the thread with the least (vruntime, id),
    /// as [`RunQueue::push`] then [`RunQueue::pop_first`] would, leaving the keys in the same
    /// order: a thread preempted at a tick goes back to its queue and the least one runs.
    pub fn push_pop_first(&mut self, vruntime: i64, thread: ThreadId) -> ThreadId {
        let k = key(vruntime, thread);
        if self.index.is_some() || k < self.min {
            self.push(vruntime, thread);
            return self.pop_first().unwrap_or(thread);
        }
        // The pushed key would go last and, the least being elsewhere, move into the least's
        // slot: it takes that slot at once.
        let pos = self.min_pos;
        let first = std::mem::replace(&mut self.keys[pos], k);
        self.order.pop();
        self.insert_order(pos);
        self.least_from_order();
        thread_of(first)
    }

    /// Remove `thread` if queued; returns its vruntime.
    pub fn remove(&mut self, thread: ThreadId) -> Option<i64> {
        if let Some(ix) = &self.index {
            let pos = *ix.pos.get(&thread.0)?;
            return Some(vruntime_of(self.remove_indexed(pos)));
        }
        let pos = self.keys.iter().position(|&k| thread_of(k) == thread)?;
        let k = self.keys.swap_remove(pos);
        let at = self.order.iter().position(|&p| usize::from(p) == pos);
        if let Some(at) = at {
            self.order.remove(at);
        }
        self.moved_to(pos);
        if k == self.max {
            self.max = self.order.first().map_or(0, |&p| self.keys[usize::from(p)]);
        }
        self.least_from_order();
        Some(vruntime_of(k))
    }

    /// (vruntime, thread) of every queued thread, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (i64, ThreadId)> + '_ {
        self.keys.iter().map(|&k| (vruntime_of(k), thread_of(k)))
    }

    /// Bring into cache what taking the least thread reads first: the sorted positions and the
    /// least key (a hint; no effect on results).
    #[inline]
    pub(crate) fn prefetch(&self) {
        if let Some(first) = self.order.first() {
            prefetch(first);
        }
        if let Some(least) = self.keys.get(self.min_pos) {
            prefetch(least);
        }
    }

    /// Once the positions are in cache: bring in the key that is least after the least leaves
    /// (a hint; no effect on results).
    #[inline]
    pub(crate) fn prefetch_next_least(&self) {
        let next = self.order.len().checked_sub(2).map(|i| self.order[i]);
        if let Some(key) = next.and_then(|p| self.keys.get(usize::from(p))) {
            prefetch(key);
        }
    }

    /// The queued threads, in no particular order.
    pub fn threads(&self) -> impl DoubleEndedIterator<Item = ThreadId> + '_ {
        self.keys.iter().map(|&k| thread_of(k))
    }
}

impl RunQueue {
    /// Remove the key at `pos` of an indexed queue, as the flat queue does (the last key moves into
    /// its slot), and keep the index and the least key right; returns the removed key. The index
    /// goes once the queue is short again.
    fn remove_indexed(&mut self, pos: usize) -> Key {
        let k = self.keys.swap_remove(pos);
        let Some(ix) = &mut self.index else {
            unreachable!("remove_indexed on a queue without an index")
        };
        ix.sorted.remove(&k);
        ix.pos.remove(&thread_of(k).0);
        if let Some(&moved) = self.keys.get(pos) {
            ix.pos.insert(thread_of(moved).0, pos);
        }
        match ix.sorted.first() {
            Some(&least) => {
                self.min = least;
                self.min_pos = ix.pos[&thread_of(least).0];
            }
            None => {
                self.min = Key::MAX;
                self.min_pos = 0;
            }
        }
        if self.keys.len() <= INDEX_FROM / 2 {
            self.index = None;
            let keys = &self.keys;
            self.order = (0..keys.len() as u8).collect();
            self.order
                .sort_unstable_by(|&a, &b| keys[usize::from(b)].cmp(&keys[usize::from(a)]));
            self.max = keys[usize::from(self.order[0])];
        }
        k
    }

    /// Put position `pos` of `keys` into `order`, by its key.
    #[inline]
    fn insert_order(&mut self, pos: usize) {
        let k = self.keys[pos];
        // Most often the greatest key (a thread that just ran): at the front, in one comparison.
        if self.order.is_empty() || k > self.max {
            self.max = k;
            self.order.insert(0, pos as u8);
            return;
        }
        let keys = &self.keys;
        let at = self.order.partition_point(|&p| keys[usize::from(p)] > k);
        self.order.insert(at, pos as u8);
    }

    /// After a `swap_remove` at `pos`: the key that was last is now at `pos`, so `order` names it
    /// there.
    #[inline]
    fn moved_to(&mut self, pos: usize) {
        let last = self.keys.len();
        if pos != last {
            if let Some(p) = self.order.iter_mut().find(|p| usize::from(**p) == last) {
                *p = pos as u8;
            }
        }
    }

    /// Set `min` and `min_pos` from `order`.
    #[inline]
    fn least_from_order(&mut self) {
        match self.order.last() {
            Some(&p) => {
                self.min_pos = usize::from(p);
                self.min = self.keys[self.min_pos];
            }
            None => {
                self.min = Key::MAX;
                self.min_pos = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_vruntime_then_id_order_including_negative_vruntimes() {
        let mut q = RunQueue::new();
        for (vr, t) in [(5, 1), (-3, 7), (5, 0), (i64::MIN + 1, 9), (0, 2), (-3, 4)] {
            q.push(vr, ThreadId(t));
        }
        assert_eq!(q.first(), Some((i64::MIN + 1, ThreadId(9))));
        let order: Vec<u32> = std::iter::from_fn(|| q.pop_first()).map(|t| t.0).collect();
        assert_eq!(order, vec![9, 4, 7, 2, 0, 1]);
        assert!(q.is_empty());
        assert_eq!(q.min_vruntime(), i64::MAX);
    }

    proptest::proptest! {
        /// Any mix of pushes, pops and removals gives what an ordered set of (vruntime, id) gives:
        /// the same least entry after every step and the same pops.
        #[test]
        fn agrees_with_an_ordered_set(
            ops in proptest::collection::vec((0u8..4, -50i64..50, 0u32..24), 0..200)
        ) {
            let mut q = RunQueue::new();
            let mut model = BTreeSet::new();
            for (op, vr, id) in ops {
                let t = ThreadId(id);
                let queued = model.iter().any(|&(_, x)| x == id);
                match op {
                    0 if !queued => {
                        q.push(vr, t);
                        model.insert((vr, id));
                    }
                    3 if !queued => {
                        model.insert((vr, id));
                        let want = model.pop_first().map(|(_, x)| ThreadId(x));
                        proptest::prop_assert_eq!(Some(q.push_pop_first(vr, t)), want);
                    }
                    1 => {
                        let want = model.pop_first().map(|(_, x)| ThreadId(x));
                        proptest::prop_assert_eq!(q.pop_first(), want);
                    }
                    _ => {
                        let want = model.iter().find(|&&(_, x)| x == id).copied();
                        if let Some(e) = want {
                            model.remove(&e);
                        }
                        proptest::prop_assert_eq!(q.remove(t), want.map(|(v, _)| v));
                    }
                }
                let first = model.first().map(|&(v, x)| (v, ThreadId(x)));
                proptest::prop_assert_eq!(q.first(), first);
                proptest::prop_assert_eq!(q.len(), model.len());
            }
        }
    }

    proptest::proptest! {
        /// Across the length where the ordered index is built and dropped, the queue pops the
        /// same threads as an ordered set and keeps its keys in the order of a flat vector with
        /// swap-removal (what callers iterate does not depend on the index).
        #[test]
        fn long_queues_keep_the_flat_order(
            ops in proptest::collection::vec((0u8..6, -20i64..20, 0u32..200), 0..1500)
        ) {
            let mut q = RunQueue::new();
            let mut model = BTreeSet::new();
            let mut flat: Vec<(i64, u32)> = Vec::new();
            for (op, vr, id) in ops {
                let t = ThreadId(id);
                let queued = model.iter().any(|&(_, x)| x == id);
                match op {
                    0..=2 if !queued => {
                        q.push(vr, t);
                        model.insert((vr, id));
                        flat.push((vr, id));
                    }
                    5 if !queued => {
                        // As a push then a pop of the least.
                        model.insert((vr, id));
                        flat.push((vr, id));
                        let want = model.pop_first().unwrap();
                        let pos = flat.iter().position(|&f| f == want).unwrap();
                        flat.swap_remove(pos);
                        proptest::prop_assert_eq!(q.push_pop_first(vr, t), ThreadId(want.1));
                    }
                    3 => {
                        let want = model.pop_first();
                        if let Some(e) = want {
                            let pos = flat.iter().position(|&f| f == e).unwrap();
                            flat.swap_remove(pos);
                        }
                        proptest::prop_assert_eq!(q.pop_first(), want.map(|(_, x)| ThreadId(x)));
                    }
                    _ => {
                        let want = model.iter().find(|&&(_, x)| x == id).copied();
                        if let Some(e) = want {
                            model.remove(&e);
                            let pos = flat.iter().position(|&f| f == e).unwrap();
                            flat.swap_remove(pos);
                        }
                        proptest::prop_assert_eq!(q.remove(t), want.map(|(v, _)| v));
                    }
                }
                let first = model.first().map(|&(v, x)| (v, ThreadId(x)));
                proptest::prop_assert_eq!(q.first(), first);
                let order: Vec<(i64, u32)> = q.entries().map(|(v, t)| (v, t.0)).collect();
                proptest::prop_assert_eq!(&order, &flat);
            }
        }
    }

    /// Picking every thread of a queue of 200,000 costs a logarithm per pick, not a scan: a scan
    /// per pick takes about 2e10 key comparisons here, minutes rather than well under a second.
    #[test]
    fn a_long_queue_drains_without_a_scan_per_pick() {
        let n = 200_000u32;
        let start = std::time::Instant::now();
        let mut q = RunQueue::new();
        for i in 0..n {
            q.push(i64::from(i.wrapping_mul(2_654_435_761) % 1000), ThreadId(i));
        }
        for i in (0..n).step_by(2) {
            assert!(q.remove(ThreadId(i)).is_some());
        }
        let mut last = i64::MIN;
        while let Some((vr, t)) = q.first() {
            assert!(vr >= last);
            last = vr;
            assert_eq!(q.pop_first(), Some(t));
        }
        let took = start.elapsed().as_secs_f64();
        assert!(took < 10.0, "draining took {took:.1} s");
    }

    #[test]
    fn remove_keeps_the_minimum_right() {
        let mut q = RunQueue::new();
        q.push(10, ThreadId(1));
        q.push(3, ThreadId(2));
        q.push(7, ThreadId(3));
        assert_eq!(q.remove(ThreadId(2)), Some(3));
        assert_eq!(q.first(), Some((7, ThreadId(3))));
        assert_eq!(q.remove(ThreadId(2)), None);
        assert_eq!(q.remove(ThreadId(1)), Some(10));
        assert_eq!(q.len(), 1);
        assert_eq!(q.min_vruntime(), 7);
        assert_eq!(q.threads().collect::<Vec<_>>(), vec![ThreadId(3)]);
    }
}
