//! Sets of cores, and the kernel's cpulist syntax (`0-3,8,10-11`) that sysfs, taskset and our
//! machine files all use.

use crate::ids::CoreId;
use std::fmt;

/// A set of cores as a bit set. Small, cheap to copy-compare, ordered iteration.
#[derive(Default)]
pub struct CpuSet {
    words: Vec<u64>,
}

impl Clone for CpuSet {
    fn clone(&self) -> Self {
        Self {
            words: self.words.clone(),
        }
    }
    /// Reuses this set's words (no allocation once large enough).
    fn clone_from(&mut self, source: &Self) {
        self.words.clone_from(&source.words);
    }
}

impl CpuSet {
    /// The bit words (bit i of word w is core 64·w + i).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The empty set.
    pub fn new() -> Self {
        Self { words: Vec::new() }
    }

    /// Every core `0..n`.
    pub fn all(n: usize) -> Self {
        let mut words = vec![u64::MAX; n / 64];
        if !n.is_multiple_of(64) {
            words.push((1u64 << (n % 64)) - 1);
        }
        Self { words }
    }

    /// One core.
    pub fn single(core: CoreId) -> Self {
        let mut s = Self::new();
        s.insert(core);
        s
    }

    pub fn insert(&mut self, core: CoreId) {
        let (w, b) = (core.index() / 64, core.index() % 64);
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1u64 << b;
    }

    pub fn remove(&mut self, core: CoreId) {
        let (w, b) = (core.index() / 64, core.index() % 64);
        if let Some(word) = self.words.get_mut(w) {
            *word &= !(1u64 << b);
        }
    }

    #[inline]
    pub fn contains(&self, core: CoreId) -> bool {
        let (w, b) = (core.index() / 64, core.index() % 64);
        self.words
            .get(w)
            .is_some_and(|word| word & (1u64 << b) != 0)
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The set is `{core}`: a pinned thread's mask (a word compare each, no count).
    pub fn is_only(&self, core: CoreId) -> bool {
        let (w, b) = (core.index() / 64, core.index() % 64);
        self.words.iter().enumerate().all(
            |(i, &word)| {
                if i == w {
                    word == 1u64 << b
                } else {
                    word == 0
                }
            },
        ) && w < self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The lowest core in the set.
    pub fn first(&self) -> Option<CoreId> {
        self.iter().next()
    }

    /// Cores in increasing order.
    pub fn iter(&self) -> Cores<'_> {
        Cores {
            words: &self.words,
            index: 0,
            word: self.words.first().copied().unwrap_or(0),
        }
    }

    /// Cores in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let words = self
            .words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| a & b)
            .collect();
        CpuSet { words }
    }

    /// Cores in both sets, without building a set.
    pub fn iter_intersection<'a>(&'a self, other: &'a CpuSet) -> impl Iterator<Item = CoreId> + 'a {
        self.words
            .iter()
            .zip(&other.words)
            .enumerate()
            .flat_map(|(wi, (&a, &b))| {
                let mut word = a & b;
                std::iter::from_fn(move || {
                    if word == 0 {
                        return None;
                    }
                    let bit = word.trailing_zeros();
                    word &= word - 1;
                    Some(CoreId(wi as u32 * 64 + bit))
                })
            })
    }

    /// Cores of `self` not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let words = self
            .words
            .iter()
            .enumerate()
            .map(|(i, a)| a & !other.words.get(i).copied().unwrap_or(0))
            .collect();
        CpuSet { words }
    }

    /// Add every core of `other`.
    pub fn union_with(&mut self, other: &CpuSet) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// True when the sets share a core.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// True when every core of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.words
            .iter()
            .enumerate()
            .all(|(i, &w)| w & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// Parse the kernel's cpulist syntax: comma-separated numbers and inclusive ranges, with an
    /// optional `:stride` (`0-15:2`), as in `Documentation/admin-guide/kernel-parameters.rst`.
    /// An empty or blank string is the empty set.
    pub fn parse_list(text: &str) -> Result<CpuSet, String> {
        let mut set = CpuSet::new();
        let text = text.trim();
        if text.is_empty() {
            return Ok(set);
        }
        for part in text.split(',') {
            let part = part.trim();
            let (range, stride) = match part.split_once(':') {
                Some((r, s)) => {
                    let stride: u32 = s
                        .trim()
                        .parse()
                        .map_err(|_| format!("bad stride {s:?} in {part:?}"))?;
                    if stride == 0 {
                        return Err(format!("stride 0 in {part:?}"));
                    }
                    (r, stride)
                }
                None => (part, 1),
            };
            let parse = |s: &str| -> Result<u32, String> {
                let v: u32 = s
                    .trim()
                    .parse()
                    .map_err(|_| format!("{s:?} is not a CPU number"))?;
                if v >= MAX_CPUS {
                    return Err(format!(
                        "CPU {v} is beyond the highest supported, {}",
                        MAX_CPUS - 1
                    ));
                }
                Ok(v)
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (parse(a)?, parse(b)?),
                None => {
                    let v = parse(range)?;
                    (v, v)
                }
            };
            if hi < lo {
                return Err(format!("range {part:?} runs backwards"));
            }
            let mut c = lo;
            while c <= hi {
                set.insert(CoreId(c));
                c += stride;
            }
        }
        Ok(set)
    }

    /// The cpulist form, ranges folded: `{0,1,2,3,8}` is `0-3,8`.
    pub fn to_list(&self) -> String {
        let mut out = String::new();
        let mut iter = self.iter().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while let Some(&next) = iter.peek() {
                if next.0 == end.0 + 1 {
                    end = next;
                    iter.next();
                } else {
                    break;
                }
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                out.push_str(&start.0.to_string());
            } else {
                out.push_str(&format!("{}-{}", start.0, end.0));
            }
        }
        out
    }
}

impl PartialEq for CpuSet {
    fn eq(&self, other: &Self) -> bool {
        let n = self.words.len().max(other.words.len());
        (0..n).all(|i| {
            self.words.get(i).copied().unwrap_or(0) == other.words.get(i).copied().unwrap_or(0)
        })
    }
}

impl Eq for CpuSet {}

/// The largest CPU number a cpulist may name. Linux's `NR_CPUS` maximum is 8192.
pub const MAX_CPUS: u32 = 8192;

/// The cores of a [`CpuSet`] in increasing order ([`CpuSet::iter`]): a word at a time, each core
/// one bit scan (a start rule reads every core of a 1,024-core machine at every thread start).
#[derive(Clone, Debug)]
pub struct Cores<'a> {
    words: &'a [u64],
    /// The word being read, and what is left of it.
    index: usize,
    word: u64,
}

impl Iterator for Cores<'_> {
    type Item = CoreId;

    #[inline]
    fn next(&mut self) -> Option<CoreId> {
        while self.word == 0 {
            self.index += 1;
            self.word = *self.words.get(self.index)?;
        }
        let b = self.word.trailing_zeros();
        self.word &= self.word - 1;
        Some(CoreId(self.index as u32 * 64 + b))
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({})", self.to_list())
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list())
    }
}

impl FromIterator<CoreId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = CoreId>>(iter: I) -> Self {
        let mut s = CpuSet::new();
        for c in iter {
            s.insert(c);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_kernel_cpulists() {
        let s = CpuSet::parse_list("0-3,8,10-11").unwrap();
        assert_eq!(
            s.iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(CpuSet::parse_list("0-7:2").unwrap().to_list(), "0,2,4,6");
        assert!(CpuSet::parse_list("").unwrap().is_empty());
        assert_eq!(CpuSet::parse_list(" 5 \n").unwrap().to_list(), "5");
    }

    #[test]
    fn rejects_bad_cpulists() {
        for bad in ["a", "3-1", "1-", "0-3:0", "1,,2", "99999"] {
            assert!(CpuSet::parse_list(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn set_operations() {
        let a = CpuSet::parse_list("0-3").unwrap();
        let b = CpuSet::parse_list("2-5,100").unwrap();
        assert_eq!(a.intersection(&b).to_list(), "2-3");
        assert_eq!(
            a.iter_intersection(&b).map(|c| c.0).collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert!(a.intersects(&b));
        assert!(CpuSet::parse_list("1-2").unwrap().is_subset(&a));
        assert!(!b.is_subset(&a));
        assert_eq!(b.len(), 5);
        assert_eq!(b.first(), Some(CoreId(2)));
        for n in [0, 1, 63, 64, 65, 130] {
            let all = CpuSet::all(n);
            assert_eq!(all.len(), n);
            assert_eq!(
                all.iter().last().map(|c| c.0),
                n.checked_sub(1).map(|x| x as u32)
            );
        }
    }

    proptest! {
        #[test]
        fn list_round_trips(cores in proptest::collection::btree_set(0u32..300, 0..40)) {
            let set: CpuSet = cores.iter().map(|&c| CoreId(c)).collect();
            let back = CpuSet::parse_list(&set.to_list()).unwrap();
            prop_assert_eq!(back.iter().map(|c| c.0).collect::<Vec<_>>(), cores.into_iter().collect::<Vec<_>>());
        }
    }
}
