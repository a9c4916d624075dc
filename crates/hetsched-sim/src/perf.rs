//! The performance model: how long an instruction takes for a thread on a core, given what shares
//! the core's caches, FPU and memory. Pure functions; the engine supplies the inputs.
//!
//! Time per instruction of thread t on core c (DESIGN.md "Simulator model"):
//!
//! ```text
//!   ns/instr = cpi_t × cpi_factor_c / f_c × fpu_slow  +  mpki_t(llc_share) / 1000 × lat(t, c) / mlp_t
//! ```
//!
//! - `cpi_t`: the phase's cycles per instruction with a perfect LLC; `cpi_factor_c` the class's
//!   pipeline factor; `f_c` the effective clock (GHz × duty cycle), so a 50% duty-cycle core issues
//!   half the cycles per second (AMPS section 3, clock modulation) while memory latency, in ns, is
//!   unchanged: memory-bound threads gain less from a fast core (HASS section 3).
//! - `mpki_t(s)`: the thread's miss curve at its share `s` of the LLC; co-runners split an LLC in
//!   proportion to their footprints (a thread whose footprint fits keeps it all).
//! - `lat(t, c)`: memory latency weighted by where the thread's pages live (AMPS Table 1), plus
//!   each node's queueing delay when its memory has a bandwidth ([`queueing_delay_ns`]); `mlp_t`
//!   the misses the phase overlaps (1 for dependent misses).
//! - `fpu_slow = 1 + fp_t × fp_mate` while a module mate is FP-busy: two threads that keep a shared
//!   FPU busy all the time each get half of it (BulldOver section 2: a module "behaves ... more like
//!   a single-core with SMT for floating point"), and the product is the chance both want it in
//!   the same cycle.
//!
//! Penalties (`cold_refill_ns`, `CONTEXT_SWITCH_NS`) are paid before the thread makes progress.

/// Direct cost of a context switch, ns: ~2 µs measured on Linux for a switch with no cache
/// disturbance (Li, Ding, Shen, "Quantifying the cost of context switch", ExpCS 2007). The indirect
/// cost (cache refill) is modelled separately by the warm-cache model.
pub const CONTEXT_SWITCH_NS: f64 = 2_000.0;

/// Outstanding cache misses a core overlaps while refilling a cold cache: 10 line-fill buffers
/// (Intel 64 and IA-32 Architectures Optimization Reference Manual, Nehalem/Sandy Bridge L1D fill
/// buffers). A refill of N lines costs N × latency / 10.
pub const REFILL_MLP: f64 = 10.0;

/// Page migration throughput, bytes per second: about 5% of a Nehalem-EX socket's 25.6 GB/s.
/// Yan et al. ("Nimble Page Management for Tiered Memory Systems", ASPLOS 2019, section 1) find
/// that Linux's single-threaded migration of 4 KiB pages leaves up to 95% of the memory bandwidth
/// unused. The copy is charged to the thread that owns the pages (it waits on them).
pub const PAGE_MIGRATION_BYTES_PER_S: f64 = 1.28e9;

/// Weight of the newest measurement when a node's queueing delay is updated at a tick (the rest is
/// the previous delay): the closed loop of latency and traffic settles without oscillating.
pub const QUEUE_DAMPING: f64 = 0.5;

/// The queueing delay a node's memory adds to every access, ns, for the next tick, from the traffic
/// it served in the last one. In a closed system a request waits at least for the `N` requests in
/// flight ahead of it to be served: `latency ≥ max(L0, N × line / B)`, the asymptotic bound of
/// operational analysis (Lazowska et al., *Quantitative System Performance*, 1984, chapter 5),
/// with `N = X × L / line` by Little's law (`X` the traffic served at latency `L`). So the target
/// latency is `max(L0, ρ L)` with `ρ = X / B`: below saturation no delay, at saturation exactly
/// enough that the node serves `B`. `previous` is the delay in force during the measurement.
pub fn queueing_delay_ns(
    served_bytes: f64,
    interval_ns: f64,
    bandwidth_bytes_per_ns: f64,
    unloaded_ns: f64,
    previous: f64,
) -> f64 {
    if interval_ns <= 0.0 || bandwidth_bytes_per_ns <= 0.0 {
        return previous;
    }
    let rho = served_bytes / interval_ns / bandwidth_bytes_per_ns;
    let latency = unloaded_ns + previous;
    let target = (rho * latency - unloaded_ns).max(0.0);
    previous + QUEUE_DAMPING * (target - previous)
}

/// Time per instruction, ns.
#[inline]
pub fn ns_per_instruction(
    cpi: f64,
    cpi_factor: f64,
    eff_ghz: f64,
    fpu_slow: f64,
    mpki: f64,
    mem_latency_ns: f64,
) -> f64 {
    cpi * cpi_factor / eff_ghz * fpu_slow + mpki / 1000.0 * mem_latency_ns
}

/// Slowdown of the compute part from sharing an FPU with a mate of FP fraction `fp_mate`.
#[inline]
pub fn fpu_slowdown(fp_self: f64, fp_mate: f64) -> f64 {
    1.0 + fp_self * fp_mate
}

/// The LLC capacity a thread with footprint `ws` gets when the running threads' footprints on that
/// LLC sum to `sum_ws` (this thread included) and the LLC holds `capacity` bytes.
#[inline]
pub fn llc_share(ws: f64, sum_ws: f64, capacity: f64) -> f64 {
    if sum_ws <= capacity || sum_ws <= 0.0 {
        ws.min(capacity).max(0.0)
    } else {
        capacity * ws / sum_ws
    }
}

/// Extra time per instruction, ns, from sharing a cache below the LLC (a Bulldozer module's L2,
/// BulldOver section 3.A): the misses a thread suffers there beyond those it has with the cache to
/// itself (`mpki_shared - mpki_alone`, per kilo-instruction) hit the LLC at `next_latency_ns`. A
/// phase's CPI already includes its misses with the whole cache, so alone the penalty is 0.
#[inline]
pub fn shared_cache_penalty_ns(mpki_shared: f64, mpki_alone: f64, next_latency_ns: f64) -> f64 {
    (mpki_shared - mpki_alone).max(0.0) / 1000.0 * next_latency_ns
}

/// Time to refill `missing_bytes` of cold cache from memory at `mem_latency_ns`, ns.
#[inline]
pub fn cold_refill_ns(missing_bytes: f64, line_bytes: f64, mem_latency_ns: f64) -> f64 {
    missing_bytes / line_bytes * mem_latency_ns / REFILL_MLP
}

/// Average memory latency of a thread whose pages are spread as `bytes_per_node`, seen from a core
/// whose node has the latency row `latency_row` (AMPS Table 1). With no pages yet, local memory.
pub fn weighted_latency(bytes_per_node: &[f64], latency_row: &[f64], core_node: usize) -> f64 {
    let total: f64 = bytes_per_node.iter().sum();
    if total <= 0.0 {
        return latency_row[core_node];
    }
    bytes_per_node
        .iter()
        .zip(latency_row)
        .map(|(b, l)| b * l)
        .sum::<f64>()
        / total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::MissCurve;

    /// A CPU-bound thread runs twice as fast on a core twice as fast; a memory-bound one gains much
    /// less (HASS section 3; DESIGN.md).
    #[test]
    fn cpu_bound_doubles_memory_bound_gains_little() {
        let lat = 79.0; // AMPS Table 1, SMP
        let cpu_bound = |ghz| ns_per_instruction(1.0, 1.0, ghz, 1.0, 0.0, lat);
        let nearly_cpu_bound = |ghz| ns_per_instruction(1.0, 1.0, ghz, 1.0, 0.1, lat);
        assert!(nearly_cpu_bound(1.33) / nearly_cpu_bound(2.66) > 1.95);
        let mem_bound = |ghz| ns_per_instruction(1.0, 1.0, ghz, 1.0, 30.0, lat);
        let cpu_speedup = cpu_bound(1.33) / cpu_bound(2.66);
        let mem_speedup = mem_bound(1.33) / mem_bound(2.66);
        assert!(
            (cpu_speedup - 2.0).abs() < 1e-12,
            "cpu-bound speedup {cpu_speedup}"
        );
        assert!(mem_speedup < 1.3, "memory-bound speedup {mem_speedup}");
        assert!(mem_speedup > 1.0);
    }

    /// Remote pages cost the paper's latency ratio: a thread whose misses all go to a 2-hop node
    /// stalls 176/68 times longer than with local pages (AMPS Table 1).
    #[test]
    fn remote_pages_cost_the_latency_ratio() {
        let row = [68.0, 146.0, 176.0];
        let local = weighted_latency(&[1e9, 0.0, 0.0], &row, 0);
        let two_hop = weighted_latency(&[0.0, 0.0, 1e9], &row, 0);
        assert_eq!(local, 68.0);
        assert_eq!(two_hop, 176.0);
        let stall = |l| ns_per_instruction(0.0, 1.0, 1.0, 1.0, 20.0, l);
        assert!((stall(two_hop) / stall(local) - 176.0 / 68.0).abs() < 1e-12);
        assert_eq!(weighted_latency(&[0.0, 0.0, 0.0], &row, 1), 146.0);
        assert_eq!(
            weighted_latency(&[1.0, 1.0, 0.0], &row, 0),
            (68.0 + 146.0) / 2.0
        );
    }

    #[test]
    fn shared_fpu_halves_two_fp_bound_threads_and_spares_integer_ones() {
        assert_eq!(fpu_slowdown(1.0, 1.0), 2.0);
        assert_eq!(fpu_slowdown(1.0, 0.0), 1.0);
        assert_eq!(fpu_slowdown(0.0, 1.0), 1.0);
    }

    #[test]
    fn llc_sharing_shrinks_the_share_and_raises_misses() {
        let cap = 8.0 * 1024.0 * 1024.0;
        assert_eq!(llc_share(2e6, 4e6, cap), 2e6);
        let s = llc_share(8e6, 16e6, cap);
        assert!((s - cap / 2.0).abs() < 1.0);
        let curve = MissCurve::Knee {
            mpki_max: 40.0,
            mpki_min: 1.0,
            ws_bytes: 8 << 20,
        };
        assert!(curve.mpki(s) > curve.mpki(llc_share(8e6, 8e6, cap)));
    }

    /// A node serving more than its bandwidth at the unloaded latency slows its accesses until the
    /// traffic it would serve is its bandwidth; below saturation it adds nothing.
    #[test]
    fn queueing_delay_settles_where_the_node_serves_its_bandwidth() {
        let (l0, b, line, mlp) = (130.0, 25.6, 64.0, 10.0);
        // 8 streaming threads, each with `mlp` misses in flight: traffic at latency L.
        let traffic = |lat: f64| 8.0 * mlp * line / lat;
        let mut delay = 0.0;
        for _ in 0..40 {
            let interval = 4e6;
            delay = queueing_delay_ns(traffic(l0 + delay) * interval, interval, b, l0, delay);
        }
        let served = traffic(l0 + delay);
        assert!((served / b - 1.0).abs() < 0.01, "served {served} GB/s");
        // Two threads stay below saturation: no delay.
        let light = |lat: f64| 2.0 * mlp * line / lat;
        assert_eq!(queueing_delay_ns(light(l0) * 1e6, 1e6, b, l0, 0.0), 0.0);
    }

    #[test]
    fn refill_cost() {
        // 1 MiB at 80 ns with 10 misses in flight: 16384 lines x 8 ns.
        assert!((cold_refill_ns(1048576.0, 64.0, 80.0) - 16384.0 * 8.0).abs() < 1e-6);
    }
}
