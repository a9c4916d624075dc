//! A set-indexed LRU cache written plainly, the definition the set-indexed model is checked
//! against: shared by the crate's unit tests (`setassoc`) and its integration tests.

/// Misses of an LRU cache of `sets` sets and `ways` ways whose set of a line is
/// `set_of(line) % sets`, reference by reference.
pub fn lru_misses(lines: &[u64], sets: u64, ways: usize, set_of: impl Fn(u64) -> u64) -> u64 {
    let mut cache: Vec<Vec<u64>> = vec![Vec::new(); sets as usize];
    let mut misses = 0;
    for &l in lines {
        let set = &mut cache[(set_of(l) % sets) as usize];
        match set.iter().position(|&x| x == l) {
            Some(p) => {
                set.remove(p);
            }
            None => {
                misses += 1;
                if set.len() == ways {
                    set.pop();
                }
            }
        }
        set.insert(0, l);
    }
    misses
}

/// Misses of an LRU cache of `sets` sets and `ways` ways whose set of a line is its number modulo
/// `sets`, reference by reference.
pub fn indexed_misses(lines: &[u64], sets: u64, ways: usize) -> u64 {
    lru_misses(lines, sets, ways, |l| l)
}
