//! A core's run queue: the threads waiting for it, ordered by (virtual runtime, thread id).
//!
//! Queues are short (tens of threads at most per core) and scanned at every tick of every core, so
//! they are flat vectors of keys that pack both orderings into one `u128`: the virtual runtime,
//! sign-flipped so that unsigned order is signed order, in the high half and the thread id in the
//! low half. A minimum is then one branch-free comparison per entry, and the least key is kept at
//! hand so a tick asks "would a queued thread preempt?" without a scan.

use hetsched_core::ThreadId;

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
}

impl RunQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self {
            keys: Vec::new(),
            min: Key::MAX,
            min_pos: 0,
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
    }

    /// Remove and return the thread with the least (vruntime, id).
    pub fn pop_first(&mut self) -> Option<ThreadId> {
        if self.keys.is_empty() {
            return None;
        }
        let first = self.min;
        self.keys.swap_remove(self.min_pos);
        self.find_least();
        Some(thread_of(first))
    }

    /// Remove `thread` if queued; returns its vruntime.
    pub fn remove(&mut self, thread: ThreadId) -> Option<i64> {
        let pos = self.keys.iter().position(|&k| thread_of(k) == thread)?;
        let k = self.keys.swap_remove(pos);
        if k == self.min {
            self.find_least();
        } else if self.min_pos == self.keys.len() {
            // The least key was last: swap_remove moved it into the freed slot.
            self.min_pos = pos;
        }
        Some(vruntime_of(k))
    }

    /// (vruntime, thread) of every queued thread, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (i64, ThreadId)> + '_ {
        self.keys.iter().map(|&k| (vruntime_of(k), thread_of(k)))
    }

    /// The packed keys themselves (to prefetch them).
    #[inline]
    pub(crate) fn keys(&self) -> &[u128] {
        &self.keys
    }

    /// The queued threads, in no particular order.
    pub fn threads(&self) -> impl DoubleEndedIterator<Item = ThreadId> + '_ {
        self.keys.iter().map(|&k| thread_of(k))
    }
}

impl RunQueue {
    /// Set `min` and `min_pos` from the keys.
    #[inline]
    fn find_least(&mut self) {
        let (mut min, mut pos) = (Key::MAX, 0);
        for (i, &k) in self.keys.iter().enumerate() {
            if k < min {
                min = k;
                pos = i;
            }
        }
        self.min = min;
        self.min_pos = pos;
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
            ops in proptest::collection::vec((0u8..3, -50i64..50, 0u32..24), 0..200)
        ) {
            let mut q = RunQueue::new();
            let mut model = std::collections::BTreeSet::new();
            for (op, vr, id) in ops {
                let t = ThreadId(id);
                match op {
                    0 if !model.iter().any(|&(_, x)| x == id) => {
                        q.push(vr, t);
                        model.insert((vr, id));
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
