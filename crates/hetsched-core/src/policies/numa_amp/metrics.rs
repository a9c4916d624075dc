//! The metrics of Ding et al. (J. Systems Architecture 2014) as pure functions: the online AMP speedup factor
//! (equation 1), the cache-miss variation ratio (equation 2), contention degradation (equations 3
//! to 5), the contention degradation factor (equation 6), and the number of threads the fast cores
//! take under a fair load balance (Algorithm 3, line 1).

/// Floor of `μ` in the cache-miss variation ratio, misses per kilo-instruction (ours; the paper
/// gives none). A process with almost no LLC misses doubles its miss rate on noise (0.01 → 0.02
/// MPKI is "100%"), which would trigger a schedule every period; under 0.1 MPKI a thread is
/// CPU-bound on any machine we model (0.1 misses × 200 ns per 1000 instructions is 2% of a 1 GHz
/// core's time at CPI 1), so changes down there cannot change the AMP list's order in any way
/// that matters.
pub const CVR_FLOOR_MPKI: f64 = 0.1;

/// Cache-miss variation ratio, equation 2: `CVR = Δllcm / μ`, `μ` the smaller of the old and new
/// LLC miss rates (floored at [`CVR_FLOOR_MPKI`]).
pub fn cache_miss_variation_ratio(old_mpki: f64, new_mpki: f64) -> f64 {
    let mu = old_mpki.min(new_mpki).max(CVR_FLOOR_MPKI);
    (new_mpki - old_mpki).abs() / mu
}

/// CPU-bound factor in [0, 1] (section 3.3.1: "computed by the last level cache miss rate"): 1 for
/// a process without LLC misses, 0 for the most memory-bound process of the system. The paper's
/// factors are "relative among each other" (section 4.1), so the miss rate is normalised by the
/// largest one observed.
pub fn cpu_bound_factor(mpki: f64, max_mpki: f64) -> f64 {
    if max_mpki <= 0.0 {
        1.0
    } else {
        (1.0 - mpki / max_mpki).clamp(0.0, 1.0)
    }
}

/// Online AMP speedup factor, equation 1: `AMP_SF = CF + (THN_process ≤ N_fc ? 1 : 0)`; the larger,
/// the more the process gains from the fast cores.
///
/// The paper's text is ambiguous about the constant: it says the 1 is added "to make their AMP_SF
/// be larger. In this way, they would be hard to be selected to fit in faster cores", about
/// processes with more threads than fast cores, while the equation adds it to those with at most
/// as many. We follow the equation and read "larger" as the ranking direction: with CF in [0, 1],
/// every process that fits on the fast cores ranks above every process that does not, whatever
/// their miss rates, so a process with more threads than fast cores is only ever chosen when
/// every fitting process is already there, and then whole. That is the behaviour section 3.3.1
/// argues for (Fig. 5: a process split across core types gains nothing; synchronisation waits for
/// the slow threads), and the only reading under which both the equation and the argument hold.
pub fn amp_speedup_factor(cpu_bound: f64, threads: u32, fast_cores: usize) -> f64 {
    cpu_bound
        + if threads as usize <= fast_cores {
            1.0
        } else {
            0.0
        }
}

/// Eviction rate, equation 5: `ER = N_e / N_fe`. Without fill counts (a PMU without the events),
/// `misses / refs`, which equals it in steady state (each miss evicts a line of the thread's own
/// full share; each reference was a fill from L2). 1 (no reuse) when nothing was measured.
pub fn eviction_rate(evictions: f64, fills: f64, misses: f64, refs: f64) -> f64 {
    let er = if fills > 0.0 {
        evictions / fills
    } else if refs > 0.0 {
        misses / refs
    } else {
        1.0
    };
    // A rate of exactly 0 (nothing evicted) would make the degradation infinite.
    er.clamp(1e-3, 1.0)
}

/// Degradation of process A by co-runner B, equation 4: `Dg_AB = llcm_A × llcm_B / ER_A`.
pub fn pair_degradation(mpki_a: f64, er_a: f64, mpki_b: f64) -> f64 {
    mpki_a * mpki_b / er_a
}

/// Contention degradation factor, equation 6: `CDF = llcm / ER`.
pub fn contention_degradation_factor(mpki: f64, er: f64) -> f64 {
    mpki / er
}

/// Total degradation of a domain's processes, equation 3 summed over the domain: each process's
/// `Dg_A = Σ_B Dg_AB` over the others, given as (llcm, ER) pairs.
pub fn domain_degradation(procs: &[(f64, f64)]) -> f64 {
    let mut total = 0.0;
    for (i, &(mpki_a, er_a)) in procs.iter().enumerate() {
        for (j, &(mpki_b, _)) in procs.iter().enumerate() {
            if i != j {
                total += pair_degradation(mpki_a, er_a, mpki_b);
            }
        }
    }
    total
}

/// How many of `threads` threads the fast cores take under a fair load balance (Algorithm 3, line
/// 1): with no more threads than cores, one a core, the fast cores first (section 3.3.1, "schedule
/// fast core first"); with more, the fast cores' share of an even spread, `threads × fast / cores`
/// rounded, the balance of the Completely Fair Scheduler the paper starts from (section 1: each of
/// `n` processes gets `1/n` of a core). The AMP part decides *which* processes get the fast cores'
/// share, not how large it is: capacity-proportional shares (AMPS) would crowd the fast cores
/// (12 of 30 threads on 4 fast cores of Ding's machine) and slow every barrier-synchronised
/// process placed there.
pub fn fast_budget(threads: usize, fast_cores: usize, slow_cores: usize) -> usize {
    let cores = fast_cores + slow_cores;
    if threads <= cores {
        threads.min(fast_cores)
    } else {
        (threads * fast_cores + cores / 2) / cores
    }
}

/// Algorithm 3, line 2: from processes `(threads, score)` in the AMP list's order (the best first),
/// the ones the fast cores take: each whole, in order, while its threads fit in what is left of
/// `budget`; a process that does not fit is passed over and the next tried. Indices into the list.
pub fn choose_fast(sorted: &[u32], budget: usize) -> Vec<usize> {
    let mut left = budget;
    let mut chosen = Vec::new();
    for (i, &threads) in sorted.iter().enumerate() {
        let n = threads as usize;
        if n > 0 && n <= left {
            left -= n;
            chosen.push(i);
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cvr_is_the_change_over_the_smaller_rate() {
        // Equation 2: 2 → 3 MPKI is a change of 1 over μ = 2.
        assert_eq!(cache_miss_variation_ratio(2.0, 3.0), 0.5);
        assert_eq!(cache_miss_variation_ratio(3.0, 2.0), 0.5);
        // Under the floor, μ is the floor: 0.01 → 0.02 is not a 100% change.
        assert!((cache_miss_variation_ratio(0.01, 0.02) - 0.1).abs() < 1e-12);
        assert_eq!(cache_miss_variation_ratio(5.0, 5.0), 0.0);
    }

    #[test]
    fn speedup_factor_ranks_every_fitting_process_above_every_wide_one() {
        // The most memory-bound fitting process beats the most CPU-bound wide one.
        let fitting_memory_bound = amp_speedup_factor(cpu_bound_factor(30.0, 30.0), 2, 4);
        let wide_cpu_bound = amp_speedup_factor(cpu_bound_factor(0.0, 30.0), 8, 4);
        assert!(fitting_memory_bound >= wide_cpu_bound);
        assert_eq!(fitting_memory_bound, 1.0);
        assert_eq!(wide_cpu_bound, 1.0);
        // Among fitting processes, the one with fewer misses ranks higher.
        assert!(
            amp_speedup_factor(cpu_bound_factor(1.0, 30.0), 1, 4)
                > amp_speedup_factor(cpu_bound_factor(10.0, 30.0), 1, 4)
        );
        // Exactly as many threads as fast cores still fits.
        assert_eq!(amp_speedup_factor(0.5, 4, 4), 1.5);
        assert_eq!(cpu_bound_factor(3.0, 0.0), 1.0);
    }

    #[test]
    fn eviction_rate_and_cdf() {
        // A streaming process evicts every line it fills: ER 1, CDF its miss rate.
        let er = eviction_rate(100.0, 100.0, 100.0, 100.0);
        assert_eq!(er, 1.0);
        assert_eq!(contention_degradation_factor(20.0, er), 20.0);
        // One that reuses the LLC evicts a tenth: its CDF is ten times its miss rate.
        let er = eviction_rate(10.0, 100.0, 10.0, 100.0);
        assert!((er - 0.1).abs() < 1e-12);
        assert!((contention_degradation_factor(2.0, er) - 20.0).abs() < 1e-9);
        // Without fill counts, misses over references.
        assert_eq!(eviction_rate(0.0, 0.0, 5.0, 20.0), 0.25);
        assert_eq!(eviction_rate(0.0, 0.0, 0.0, 0.0), 1.0);
    }

    #[test]
    fn degradation_sums_pairs_in_a_domain() {
        // Equations 3-4 with A (llcm 4, ER 0.5), B (2, 1), C (1, 1):
        // Dg_A = 4*2/0.5 + 4*1/0.5 = 24; Dg_B = 2*4 + 2*1 = 10; Dg_C = 4 + 2 = 6.
        let d = domain_degradation(&[(4.0, 0.5), (2.0, 1.0), (1.0, 1.0)]);
        assert!((d - 40.0).abs() < 1e-9);
        assert_eq!(domain_degradation(&[(4.0, 0.5)]), 0.0);
        // A streaming process (high ER) is hurt less than one of equal misses that reuses data.
        assert!(pair_degradation(10.0, 1.0, 10.0) < pair_degradation(10.0, 0.2, 10.0));
    }

    #[test]
    fn fast_budget_fills_fast_cores_first_then_takes_an_even_share() {
        // Ding's machine: 4 fast, 12 slow.
        assert_eq!(fast_budget(2, 4, 12), 2);
        assert_eq!(fast_budget(4, 4, 12), 4);
        assert_eq!(fast_budget(8, 4, 12), 4);
        assert_eq!(fast_budget(16, 4, 12), 4);
        // 30 threads: 7.5 a side of 4 cores, rounded.
        assert_eq!(fast_budget(30, 4, 12), 8);
        assert_eq!(fast_budget(32, 4, 12), 8);
        assert_eq!(fast_budget(0, 4, 12), 0);
        assert_eq!(fast_budget(5, 0, 12), 0);
        assert_eq!(fast_budget(5, 4, 0), 5);
        assert_eq!(fast_budget(9, 4, 0), 9);
    }

    #[test]
    fn whole_processes_fill_the_budget_in_list_order() {
        // Budget 4: the 2-thread process, then the 3-thread one does not fit, then the 1 and 1.
        assert_eq!(choose_fast(&[2, 3, 1, 1, 1], 4), vec![0, 2, 3]);
        // A process wider than the budget never goes (it would be split).
        assert_eq!(choose_fast(&[8, 1], 4), vec![1]);
        assert!(choose_fast(&[2], 0).is_empty());
    }
}
