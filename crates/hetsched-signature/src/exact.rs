//! Exact LRU stack distances (Mattson et al. 1970) in O(log n) a reference: Olken's method (1981),
//! as Bennett and Kruskal first proposed it (1975). A hash map gives each line the time of its last
//! reference; the times that are some line's last reference are marked. The distance of a
//! reference to a line last seen at time `t` is the number of marks after `t`: the distinct lines
//! referenced since. Marks are bits of a bitset, counted at three levels: a popcount within a
//! 64-bit word, a byte of marks per word summed within a group of 8 words (one 8-byte load), and a
//! Fenwick tree over the groups (1/512 of the times, small enough to stay in the first-level
//! cache). When the times run out, the live marks are renumbered 0..distinct in time order
//! (compaction), so memory stays proportional to the distinct lines, not to the trace. A reference
//! to the line referenced just before takes no time of its own: it leaves the stack as it was.

use crate::linemap::LineMap;

/// Words of the bitset a group counts.
const GROUP: usize = 8;

/// Marks in group `g`, from its words' counts.
fn group_marks(counts: &[u8], g: usize) -> u32 {
    counts[g * GROUP..(g + 1) * GROUP]
        .iter()
        .map(|&c| c as u32)
        .sum()
}

/// The exact stack-distance engine.
pub struct ExactStack {
    map: LineMap,
    /// One bit a time: set when the time is some line's last reference.
    bits: Vec<u64>,
    /// Marks in each word of `bits` (at most 64).
    counts: Vec<u8>,
    /// Fenwick tree (1-indexed) over the groups of `GROUP` words: marks per group, for the groups
    /// before `open_group`.
    tree: Vec<u32>,
    /// The group `now` is in: its marks are counted from its words' counts, and go into the tree
    /// when `now` moves on (so marking the newest time, once a reference, touches no tree node).
    open_group: usize,
    now: u32,
    live: u32,
    /// The line referenced last (`u64::MAX`: none), and its number.
    last: u64,
    last_id: u32,
}

/// What one reference found: its stack distance and the line's number, which the set-indexed
/// model names lines by in its sets ([`crate::setassoc`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reuse {
    /// Distinct other lines since the line's last reference; `None` the first time.
    pub distance: Option<u64>,
    /// The line's number: 0, 1, 2, ... in order of first reference, the same for the line's
    /// whole life in the engine (compactions renumber times, not lines; a line removed and seen
    /// again takes a new number).
    pub id: u32,
}

impl Default for ExactStack {
    fn default() -> Self {
        Self::new()
    }
}

impl ExactStack {
    pub fn new() -> Self {
        Self::with_capacity(1 << 16)
    }

    /// Room for `cap` times (a multiple of 512) before the first compaction.
    pub(crate) fn with_capacity(cap: usize) -> Self {
        let groups = cap.div_ceil(64 * GROUP).max(1);
        ExactStack {
            map: LineMap::with_capacity(cap / 4),
            bits: vec![0; groups * GROUP],
            counts: vec![0; groups * GROUP],
            tree: vec![0; groups + 1],
            open_group: 0,
            now: 0,
            live: 0,
            last: u64::MAX,
            last_id: 0,
        }
    }

    /// Distinct lines seen (and not removed).
    pub fn distinct(&self) -> u64 {
        self.live as u64
    }

    /// Reference `line` (any but `u64::MAX`): its stack distance (distinct other lines since its
    /// last reference), or `None` the first time.
    #[inline(always)]
    pub fn access(&mut self, line: u64) -> Option<u64> {
        self.access_numbered(line).distance
    }

    /// Reference `line` (any but `u64::MAX`): its distance and number. A repeat of the line
    /// referenced just before has distance 0 and the number of that line.
    #[inline(always)]
    pub fn access_numbered(&mut self, line: u64) -> Reuse {
        if line == self.last {
            // The stack is unchanged: no new time, no mark moves.
            return Reuse {
                distance: Some(0),
                id: self.last_id,
            };
        }
        if self.now as usize == self.bits.len() * 64 {
            self.compact();
        }
        self.last = line;
        let t = self.now;
        self.now += 1;
        let (prev, id) = self.map.insert_numbered(line, t);
        self.last_id = id;
        self.mark(t);
        match prev {
            Some(old) => {
                // Marks after `old`: every live mark but those at or before it (its own included).
                let d = self.live - self.marks_through(old);
                self.unmark(old);
                Reuse {
                    distance: Some(d as u64),
                    id,
                }
            }
            None => {
                self.live += 1;
                Reuse { distance: None, id }
            }
        }
    }

    /// Bring what `access(line)` will read first into cache (a hint; no effect on results).
    #[inline(always)]
    pub fn prefetch(&self, line: u64) {
        self.map.prefetch(line);
    }

    /// Forget `line` (SHARDS's fixed-size sampling evicts lines from the sample).
    pub fn remove(&mut self, line: u64) {
        if line == self.last {
            self.last = u64::MAX;
        }
        if let Some(t) = self.map.remove(line) {
            self.unmark(t);
            self.live -= 1;
        }
    }

    /// Marks at times 0..=t.
    #[inline(always)]
    fn marks_through(&self, t: u32) -> u32 {
        let w = (t / 64) as usize;
        let g = w / GROUP;
        let within_word = (self.bits[w] & (u64::MAX >> (63 - t % 64))).count_ones();
        // The counts of the group's words before `w`: eight bytes, the later ones masked off,
        // summed in 16-bit lanes (each lane at most 2 × 64).
        let group = &self.counts[g * GROUP..g * GROUP + GROUP];
        let bytes = u64::from_le_bytes([
            group[0], group[1], group[2], group[3], group[4], group[5], group[6], group[7],
        ]);
        let before = bytes & ((1u64 << (8 * (w % GROUP))) - 1);
        const LANES: u64 = 0x00ff_00ff_00ff_00ff;
        let pairs = (before & LANES) + ((before >> 8) & LANES);
        let within_group = (pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48) as u32;
        let mut s = within_word + within_group;
        let mut i = g; // Fenwick prefix over groups 0..g (1-indexed: through index g).
        while i > 0 {
            s += self.tree[i];
            i &= i - 1;
        }
        s
    }

    /// Mark `t`, the newest time.
    #[inline]
    fn mark(&mut self, t: u32) {
        let w = (t / 64) as usize;
        let g = w / GROUP;
        if g != self.open_group {
            let closed = self.open_group;
            self.tree_add(closed, group_marks(&self.counts, closed));
            self.open_group = g;
        }
        self.bits[w] |= 1 << (t % 64);
        self.counts[w] += 1;
    }

    #[inline]
    fn unmark(&mut self, t: u32) {
        let w = (t / 64) as usize;
        self.bits[w] &= !(1 << (t % 64));
        self.counts[w] -= 1;
        let g = w / GROUP;
        if g != self.open_group {
            self.tree_add(g, u32::MAX);
        }
    }

    /// Add `v` (wrapping: `u32::MAX` is −1) to group `g`'s count.
    #[inline]
    fn tree_add(&mut self, g: usize, v: u32) {
        let n = self.tree.len();
        let mut i = g + 1;
        while i < n {
            self.tree[i] = self.tree[i].wrapping_add(v);
            i += i & i.wrapping_neg();
        }
    }

    /// Renumber the live marks 0..live in time order, doubling the room while they would fill
    /// more than a quarter of it (so compactions, each a pass over the map, come at least every
    /// three times as many references as there are distinct lines).
    fn compact(&mut self) {
        let mut cap = self.bits.len() * 64;
        while self.live as usize * 4 > cap {
            cap *= 2;
        }
        // New time of each old time: its rank among the marks.
        let mut rank = vec![0u32; self.bits.len() * 64];
        let mut k = 0u32;
        for (w, &word) in self.bits.iter().enumerate() {
            let mut m = word;
            while m != 0 {
                let b = m.trailing_zeros();
                rank[w * 64 + b as usize] = k;
                k += 1;
                m &= m - 1;
            }
        }
        debug_assert_eq!(k, self.live);
        self.map.map_values(|t| rank[t as usize]);
        let groups = cap / (64 * GROUP);
        let mut bits = vec![0u64; groups * GROUP];
        let mut counts = vec![0u8; groups * GROUP];
        for t in 0..k as usize {
            bits[t / 64] |= 1 << (t % 64);
            counts[t / 64] += 1;
        }
        // Linear-time Fenwick build over the counts of the groups before the open one.
        let open_group = k as usize / (64 * GROUP);
        let mut tree = vec![0u32; groups + 1];
        for i in 1..=groups {
            if i - 1 < open_group {
                tree[i] = tree[i].wrapping_add(group_marks(&counts, i - 1));
            }
            let j = i + (i & i.wrapping_neg());
            if j <= groups {
                tree[j] = tree[j].wrapping_add(tree[i]);
            }
        }
        self.bits = bits;
        self.counts = counts;
        self.tree = tree;
        self.open_group = open_group;
        self.now = k;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_of_a_small_sequence() {
        let mut s = ExactStack::new();
        // a b c a b b d a
        let seq = [1, 2, 3, 1, 2, 2, 4, 1];
        let got: Vec<Option<u64>> = seq.iter().map(|&l| s.access(l)).collect();
        assert_eq!(
            got,
            vec![None, None, None, Some(2), Some(2), Some(0), None, Some(2)]
        );
        assert_eq!(s.distinct(), 4);
    }

    #[test]
    fn many_compactions_match_a_plain_stack() {
        // Room for 512 times (one group): compactions every few hundred references, the open
        // word at every position, removals in between.
        let mut s = ExactStack::with_capacity(512);
        let mut stack: Vec<u64> = Vec::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let line = x % (20 + i % 300);
            if x.is_multiple_of(53) {
                s.remove(line);
                stack.retain(|&l| l != line);
                continue;
            }
            let want = stack.iter().position(|&l| l == line);
            if let Some(p) = want {
                stack.remove(p);
            }
            stack.insert(0, line);
            assert_eq!(s.access(line), want.map(|p| p as u64), "reference {i}");
        }
        assert_eq!(s.distinct(), stack.len() as u64);
    }

    #[test]
    fn compaction_keeps_distances() {
        let mut s = ExactStack::with_capacity(512);
        // A cyclic walk over 5 lines: every reference after the first pass is at distance 4.
        for i in 0..1000u64 {
            let d = s.access(i % 5);
            if i >= 5 {
                assert_eq!(d, Some(4), "reference {i}");
            }
        }
        s.remove(3);
        assert_eq!(s.distinct(), 4);
        assert_eq!(s.access(0), Some(3));
    }
}
