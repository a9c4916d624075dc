//! Splits of interchangeable items into bins: how many items of each kind every bin gets, with
//! each kind fully placed and no bin over its capacity. The static assignments of HASS's
//! `static-best` (apps into partitions) and Pinter's multi-CPU optimum (tasks onto CPUs) are both
//! such splits.

/// What sees each split: the matrix `[kind][bin]` and each bin's capacity left; false stops.
pub type Visit<'a> = dyn FnMut(&[Vec<u32>], &[u32]) -> bool + 'a;

/// Call `visit` with every split of `counts[i]` items of kind `i` into bins of `capacity`, as a
/// matrix `[kind][bin]`, and the capacity each bin has left. The order is fixed: the first bin
/// takes as many of the first kind as it can first. `visit` returns false to stop; the function
/// returns false when it was stopped.
pub fn for_each_split(counts: &[u32], capacity: &[u32], visit: &mut Visit<'_>) -> bool {
    let mut room = capacity.to_vec();
    let mut current = vec![vec![0; capacity.len()]; counts.len()];
    place(
        counts,
        0,
        0,
        counts.first().copied().unwrap_or(0),
        &mut room,
        &mut current,
        visit,
    )
}

/// Put the `left` remaining items of kind `i` into bins `bin..`, then go on to kind `i + 1`.
fn place(
    counts: &[u32],
    i: usize,
    bin: usize,
    left: u32,
    room: &mut Vec<u32>,
    current: &mut Vec<Vec<u32>>,
    visit: &mut Visit<'_>,
) -> bool {
    if i == counts.len() {
        return visit(current, room);
    }
    if bin == room.len() {
        let next = counts.get(i + 1).copied().unwrap_or(0);
        return left > 0 || place(counts, i + 1, 0, next, room, current, visit);
    }
    for take in (0..=left.min(room[bin])).rev() {
        room[bin] -= take;
        current[i][bin] = take;
        let go_on = place(counts, i, bin + 1, left - take, room, current, visit);
        room[bin] += take;
        current[i][bin] = 0;
        if !go_on {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_split_once_within_capacity() {
        // Two kinds of 2 items into bins of 2 and 3: (2,0),(1,1),(0,2) for the first, the second
        // what fits; both kinds all in the second bin (4 items) would not.
        let mut seen = Vec::new();
        for_each_split(&[2, 2], &[2, 3], &mut |m, room| {
            assert!(room.iter().zip([2, 3]).all(|(r, c)| *r <= c));
            seen.push(m.to_vec());
            true
        });
        assert_eq!(
            seen,
            vec![
                vec![vec![2, 0], vec![0, 2]],
                vec![vec![1, 1], vec![1, 1]],
                vec![vec![1, 1], vec![0, 2]],
                vec![vec![0, 2], vec![2, 0]],
                vec![vec![0, 2], vec![1, 1]],
            ]
        );
        let mut n = 0;
        assert!(!for_each_split(&[2, 2], &[2, 3], &mut |_, _| {
            n += 1;
            n < 3
        }));
        assert_eq!(n, 3, "stops when asked");
    }
}
