//! Pinter & Zalmanovici section 3: the context-switch penalty functions, the optimal single-CPU
//! batching, and the multi-CPU optimum for small instances.
//!
//! - `f(v_i, v_j)` (the full model): 0 when both use one DF and `v_i` did not invalidate it; `T_w`
//!   when they share the DF but `v_i`'s writes must be flushed; `l · t_r` when `v_j` reads `l` lines
//!   of another DF (or the CPU was empty) after a reader; `l · t_r + T_w` after a writer.
//! - `g(v_i, v_j)` (the simplified model, whole cache replaced on a DF change): 0 for the same DF,
//!   `T_r + T_w` otherwise.
//! - The penalty of an order `w` is `F(w) = Σ_{i=1}^{|w|-1} f(v_i, v_{i+1})`, and `F*(W)` its minimum
//!   over orders. Under `g`, batching the tasks of each DF together is optimal (the paper's O(n)
//!   algorithm): `F* = (d − 1)(T_r + T_w)` for `d` distinct DFs.
//! - Over `m` CPUs, the tasks are split into `m` subsets of `k = ⌈n/m⌉` (padding tasks cost
//!   nothing) and the objective is `T = min over splits of max over subsets of F*`. The paper solves
//!   the bin distribution by pseudo-polynomial partitioning; we search the splits exhaustively
//!   (tasks of one DF and write mode are interchangeable, so a split is how many of each kind
//!   every CPU gets), refusing instances whose count of splits, bounded without the size
//!   constraint by `Π_kinds C(count + m − 1, m − 1)`, exceeds [`MAX_SPLITS`].

use hetsched_sim::splits::for_each_split;
use std::collections::BTreeMap;

/// A task: its data fragment, whether it writes (invalidates) it, and the cache lines it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DfTask {
    pub df: u32,
    pub writes: bool,
    pub lines: u64,
}

/// The model's times: per line read `t_r`, whole-cache read `T_r`, flush `T_w`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwitchCosts {
    pub t_r: f64,
    pub big_t_r: f64,
    pub t_w: f64,
}

/// `f(v_i, v_j)`, the full penalty (section 3); `prev = None` is an empty CPU (φ).
pub fn penalty_f(prev: Option<&DfTask>, next: &DfTask, c: &SwitchCosts) -> f64 {
    let read = next.lines as f64 * c.t_r;
    match prev {
        Some(p) if p.df == next.df => {
            if p.writes {
                c.t_w
            } else {
                0.0
            }
        }
        Some(p) if p.writes => read + c.t_w,
        // An empty CPU, or another fragment read-only: the next one is read in.
        None | Some(_) => read,
    }
}

/// `g(v_i, v_j)`, the simplified penalty (equation 2).
pub fn penalty_g(prev: Option<&DfTask>, next: &DfTask, c: &SwitchCosts) -> f64 {
    match prev {
        Some(p) if p.df == next.df => 0.0,
        _ => c.big_t_r + c.t_w,
    }
}

/// `F(w)`: the penalties of consecutive switches in an order.
pub fn order_penalty(order: &[DfTask], pen: impl Fn(Option<&DfTask>, &DfTask) -> f64) -> f64 {
    order.windows(2).map(|w| pen(Some(&w[0]), &w[1])).sum()
}

/// The optimal single-CPU order under `g` (section 3): one bin per DF, in the order the DFs first
/// appear, tasks in arrival order within a bin. O(n) with a map from DF to bin.
pub fn batch_by_df(tasks: &[DfTask]) -> Vec<DfTask> {
    let mut bin_of: BTreeMap<u32, usize> = BTreeMap::new();
    let mut bins: Vec<Vec<DfTask>> = Vec::new();
    for t in tasks {
        let b = *bin_of.entry(t.df).or_insert_with(|| {
            bins.push(Vec::new());
            bins.len() - 1
        });
        bins[b].push(*t);
    }
    bins.concat()
}

/// `F*` under `g` for one CPU's tasks: `(d − 1)(T_r + T_w)`, `d` distinct DFs (0 when empty).
pub fn min_penalty_g(tasks: &[DfTask], c: &SwitchCosts) -> f64 {
    let d = tasks
        .iter()
        .map(|t| t.df)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    d.saturating_sub(1) as f64 * (c.big_t_r + c.t_w)
}

/// Most splits the exhaustive multi-CPU search may have to evaluate (by the bound in the module
/// doc): about a second of search.
pub const MAX_SPLITS: u64 = 1_000_000;

/// Ways to put `n` alike tasks on `m` CPUs, ignoring sizes: C(n + m − 1, m − 1), saturating.
fn multisets(n: u64, m: u64) -> u64 {
    let mut r: u64 = 1;
    for i in 1..m {
        r = r.saturating_mul(n + i) / i;
    }
    r
}

/// The multi-CPU optimum under `g`: `T` and one optimal split (tasks per CPU). `None` when the
/// instance has more than [`MAX_SPLITS`] splits.
pub fn optimal_split_g(
    tasks: &[DfTask],
    m: usize,
    c: &SwitchCosts,
) -> Option<(f64, Vec<Vec<DfTask>>)> {
    let m = m.max(1);
    let k = tasks.len().div_ceil(m);
    // Kinds of interchangeable tasks and how many of each.
    let mut kinds: BTreeMap<DfTask, u32> = BTreeMap::new();
    for t in tasks {
        *kinds.entry(*t).or_default() += 1;
    }
    let kinds: Vec<(DfTask, u32)> = kinds.into_iter().collect();
    let bound = kinds.iter().fold(1u64, |b, (_, n)| {
        b.saturating_mul(multisets(*n as u64, m as u64))
    });
    if bound > MAX_SPLITS {
        return None;
    }
    let mut best: Option<(f64, Vec<Vec<u32>>)> = None;
    let sizes: Vec<u32> = kinds.iter().map(|k| k.1).collect();
    for_each_split(&sizes, &vec![k as u32; m], &mut |counts, _| {
        let worst = (0..m)
            .map(|cpu| {
                let d = (0..kinds.len())
                    .filter(|&i| counts[i][cpu] > 0)
                    .map(|i| kinds[i].0.df)
                    .collect::<std::collections::BTreeSet<_>>()
                    .len();
                d.saturating_sub(1) as f64 * (c.big_t_r + c.t_w)
            })
            .fold(0.0, f64::max);
        if best.as_ref().is_none_or(|(b, _)| worst < *b) {
            best = Some((worst, counts.to_vec()));
        }
        true
    });
    let (t, counts) = best?;
    let split = (0..m)
        .map(|cpu| {
            let mut list = Vec::new();
            for (i, (kind, _)) in kinds.iter().enumerate() {
                list.extend(std::iter::repeat_n(*kind, counts[i][cpu] as usize));
            }
            list
        })
        .collect();
    Some((t, split))
}

/// Section 4.1's online placement, for comparison with the optimum: tasks in arrival order; a task
/// of a known DF joins that DF's CPU, a new DF goes to the CPU with the fewest tasks (the lowest
/// index on ties). Returns the tasks per CPU.
pub fn online_split(tasks: &[DfTask], m: usize) -> Vec<Vec<DfTask>> {
    let m = m.max(1);
    let mut cpu_of: BTreeMap<u32, usize> = BTreeMap::new();
    let mut cpus: Vec<Vec<DfTask>> = vec![Vec::new(); m];
    for t in tasks {
        let c = match cpu_of.get(&t.df) {
            Some(&c) => c,
            None => {
                let c = (0..m).min_by_key(|&c| (cpus[c].len(), c)).unwrap_or(0);
                cpu_of.insert(t.df, c);
                c
            }
        };
        cpus[c].push(*t);
    }
    cpus
}

/// `T` of a given split under `g`: the worst CPU's minimal penalty.
pub fn split_penalty_g(split: &[Vec<DfTask>], c: &SwitchCosts) -> f64 {
    split
        .iter()
        .map(|x| min_penalty_g(x, c))
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::rng::SeededRng;

    const C: SwitchCosts = SwitchCosts {
        t_r: 0.5,
        big_t_r: 4.0,
        t_w: 4.0,
    };

    fn t(df: u32, writes: bool) -> DfTask {
        DfTask {
            df,
            writes,
            lines: 8,
        }
    }

    #[test]
    fn f_has_the_four_cases_and_g_the_two() {
        let (r1, w1, r2) = (t(1, false), t(1, true), t(2, false));
        assert_eq!(
            penalty_f(Some(&r1), &r1, &C),
            0.0,
            "same DF, no invalidation"
        );
        assert_eq!(
            penalty_f(Some(&w1), &r1, &C),
            4.0,
            "same DF, flush of v_i's writes"
        );
        assert_eq!(
            penalty_f(Some(&r1), &r2, &C),
            8.0 * 0.5,
            "other DF: l · t_r"
        );
        assert_eq!(penalty_f(None, &r2, &C), 8.0 * 0.5, "empty CPU");
        assert_eq!(
            penalty_f(Some(&w1), &r2, &C),
            8.0 * 0.5 + 4.0,
            "l · t_r + T_w"
        );
        assert_eq!(penalty_g(Some(&w1), &r1, &C), 0.0);
        assert_eq!(penalty_g(Some(&r1), &r2, &C), 8.0);
        assert_eq!(penalty_g(None, &r1, &C), 8.0);
        // f is asymmetric.
        assert_ne!(penalty_f(Some(&w1), &r2, &C), penalty_f(Some(&r2), &w1, &C));
    }

    /// Batching is optimal under g: no order of the tasks has a lower F than the batched one.
    #[test]
    fn batching_by_df_is_the_single_cpu_optimum() {
        let tasks = [
            t(1, false),
            t(2, true),
            t(1, true),
            t(3, false),
            t(2, false),
            t(1, false),
        ];
        let g = |a: Option<&DfTask>, b: &DfTask| penalty_g(a, b, &C);
        let batched = batch_by_df(&tasks);
        assert_eq!(
            batched.iter().map(|x| x.df).collect::<Vec<_>>(),
            vec![1, 1, 1, 2, 2, 3]
        );
        let fb = order_penalty(&batched, g);
        assert_eq!(fb, min_penalty_g(&tasks, &C));
        assert_eq!(fb, 2.0 * 8.0);
        // Exhaustively: every permutation of 6 tasks.
        let mut idx: Vec<usize> = (0..tasks.len()).collect();
        let mut best = f64::MAX;
        permute(&mut idx, 0, &mut |p| {
            let order: Vec<DfTask> = p.iter().map(|&i| tasks[i]).collect();
            best = best.min(order_penalty(&order, g));
        });
        assert_eq!(best, fb);
    }

    fn permute(v: &mut Vec<usize>, k: usize, f: &mut dyn FnMut(&[usize])) {
        if k == v.len() {
            f(v);
            return;
        }
        for i in k..v.len() {
            v.swap(k, i);
            permute(v, k + 1, f);
            v.swap(k, i);
        }
    }

    #[test]
    fn the_multi_cpu_optimum_keeps_dfs_together_within_equal_sizes() {
        // 4 tasks of DF 1 and 4 of DF 2 on 2 CPUs of 4 slots: one DF each, no switch penalty.
        let tasks: Vec<DfTask> = (0..8).map(|i| t(1 + i % 2, false)).collect();
        let (best, split) = optimal_split_g(&tasks, 2, &C).unwrap();
        assert_eq!(best, 0.0);
        assert!(split.iter().all(|cpu| cpu.len() == 4));
        // 5 of DF 1 and 3 of DF 2: equal sizes force one DF 1 task onto DF 2's CPU: one switch.
        let mut uneven = vec![t(1, false); 5];
        uneven.extend([t(2, false); 3]);
        assert_eq!(optimal_split_g(&uneven, 2, &C).unwrap().0, 8.0);
        // The online placement (new DF to the least-loaded CPU) is optimal on the even case...
        assert_eq!(split_penalty_g(&online_split(&tasks, 2), &C), 0.0);
    }

    #[test]
    fn the_online_placement_stays_near_the_optimum_on_small_random_cases() {
        let mut rng = SeededRng::new(3);
        let mut worse = 0;
        for _ in 0..200 {
            let n = 4 + rng.below(7);
            let tasks: Vec<DfTask> = (0..n)
                .map(|_| t(rng.below(4) as u32, rng.below(2) == 1))
                .collect();
            let (opt, _) = optimal_split_g(&tasks, 2, &C).unwrap();
            let online = split_penalty_g(&online_split(&tasks, 2), &C);
            // The online split ignores the equal-size constraint, so it may beat the constrained
            // optimum; it never does worse than one extra switch per CPU here.
            assert!(online <= opt + (C.big_t_r + C.t_w), "{online} vs {opt}");
            if online > opt {
                worse += 1;
            }
        }
        assert!(worse < 200);
    }

    #[test]
    fn split_counts() {
        assert_eq!(multisets(4, 2), 5);
        assert_eq!(multisets(3, 3), 10);
        assert_eq!(multisets(0, 4), 1);
    }

    #[test]
    fn large_instances_are_refused() {
        let tasks: Vec<DfTask> = (0..40).map(|i| t(i, false)).collect();
        assert!(optimal_split_g(&tasks, 4, &C).is_none());
    }
}
