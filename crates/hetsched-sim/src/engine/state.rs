//! The engine's state records (threads, cores, caches, application instances) and how they are
//! built from the machine model and the workload.

use super::NS_PER_S;
use crate::perf;
use crate::workload::{Phase, PreparedCurve, Workload};
use hetsched_core::prefetch::prefetch;
use hetsched_core::{AppId, CoreId, IdVec, LlcId, ThreadId, Topology};
use std::collections::{BTreeMap, VecDeque};

/// A thread's simulation state, two cache lines. The fields touched at every bill and dispatch
/// come first and fill one cache line: with 16,384 threads, a cache miss per field is what the
/// engine's speed is made of. The bytes it allocated per node are apart ([`NodeBytes`]), kept
/// only for a workload that allocates.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(crate) struct SimThread {
    /// The current phase: an index into `Simulation::phases`.
    pub(crate) cur: u32,
    /// Its process (read at every bill on a NUMA machine: the heat of the process's pages).
    pub(crate) app: AppId,
    pub(crate) remaining: f64,
    pub(crate) penalty_ns: f64,
    /// Virtual runtime, integer ns (billing is in whole ns, so integers are exact and compare
    /// fast in the queue scans).
    pub(crate) vruntime: i64,
    pub(crate) warm_fill: f64,
    pub(crate) ideal_ns: f64,
    /// Bytes it allocated, all nodes (its share of each node is in [`NodeBytes`]).
    pub(crate) total_bytes: f64,
    pub(crate) warm_llc: Option<LlcId>,
    // The second cache line: read when a phase ends (`group`, `phase`, `iter`, `spec`), at a
    // wake-up (`lag`, `last_core`), and when it starts or exits.
    /// Its thread group in the spec, and its phase there.
    pub(crate) group: u32,
    pub(crate) phase: u32,
    pub(crate) iter: u32,
    /// The workload spec of its process (also `apps[app].spec`, a cache miss further away).
    pub(crate) spec: u32,
    /// vruntime minus the core's min_vruntime when it left a queue (CFS normalisation).
    pub(crate) lag: i64,
    pub(crate) last_core: Option<CoreId>,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: Option<u64>,
    pub(crate) exit_after_barrier: bool,
}

/// The bytes each thread allocated on each node, `[thread][node]` in one flat vector. Only a
/// workload with a phase that allocates places memory (`Simulation::memory_placed`), and every
/// reader asks that first; for any other workload nothing is kept here (no node counted), and a
/// thread's record, its observation and the heap hold no per-node vector.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeBytes {
    /// Nodes counted per thread: the machine's, or 0 when the workload never allocates.
    nodes: usize,
    bytes: Vec<f64>,
}

impl NodeBytes {
    /// Per-node bytes of `nodes` nodes when `kept`, else none.
    pub(crate) fn new(nodes: usize, kept: bool) -> Self {
        NodeBytes {
            nodes: if kept { nodes } else { 0 },
            bytes: Vec::new(),
        }
    }

    /// Nodes counted per thread (0: none kept).
    pub(crate) fn nodes(&self) -> usize {
        self.nodes
    }

    /// Zero bytes on every node for the next thread.
    pub(crate) fn push_thread(&mut self) {
        self.bytes.resize(self.bytes.len() + self.nodes, 0.0);
    }

    /// Thread `t`'s bytes per node.
    #[inline]
    pub(crate) fn of(&self, t: ThreadId) -> &[f64] {
        &self.bytes[t.index() * self.nodes..(t.index() + 1) * self.nodes]
    }

    #[inline]
    pub(crate) fn of_mut(&mut self, t: ThreadId) -> &mut [f64] {
        &mut self.bytes[t.index() * self.nodes..(t.index() + 1) * self.nodes]
    }
}

/// A core's simulation state: what runs, at what rate, and the running phase's values the hot
/// path reads here rather than recomputing. Every core is billed at every tick, and on a machine
/// of 1,024 cores the cores' records alone are a quarter of the second-level cache: what a tick,
/// a bill, a rate change and a switch read comes first and fills two cache lines (128 bytes, a
/// record per two lines); the third holds what only machines with shared L2s or FPUs read
/// (`Simulation::l2_of`, `Simulation::fpu_mates`).
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(crate) struct SimCore {
    // First line: what a bill reads.
    pub(crate) current: Option<ThreadId>,
    pub(crate) last_bill: u64,
    pub(crate) ns_per_instr: f64,
    pub(crate) cur_mpki: f64,
    pub(crate) eff_ghz: f64,
    pub(crate) cpi_factor: f64,
    pub(crate) min_vruntime: i64,
    pub(crate) llc: Option<LlcId>,
    // Second line: a rate change and a switch.
    pub(crate) cur_ws: f64,
    /// LLC share the current mpki was computed for (NaN: none yet).
    pub(crate) cur_share: f64,
    /// Memory latency of the current thread, ns (sampled at dispatch and while it allocates).
    pub(crate) cur_lat: f64,
    pub(crate) gen: u64,
    pub(crate) dispatched_at: u64,
    /// Its NUMA node (index into the topology's nodes).
    pub(crate) node: u32,
    /// The core's class (index into the topology's classes).
    pub(crate) class: u32,
    pub(crate) last_thread: Option<ThreadId>,
    /// The data fragment the current thread works on (as priced at dispatch or phase load).
    pub(crate) cur_df: Option<u32>,
    // Third line, cold on most machines.
    pub(crate) fpu_mates: Vec<CoreId>,
    /// The shared cache below the LLC this core uses (a Bulldozer module's L2): index into
    /// `Simulation::shared_l2s`.
    pub(crate) l2: Option<usize>,
    /// The running thread's footprint in that cache, its misses there per kilo-instruction, and
    /// its misses with that cache to itself (fixed for the phase, priced at dispatch).
    pub(crate) cur_l2_ws: f64,
    pub(crate) cur_l2_mpki: f64,
    pub(crate) cur_l2_alone: f64,
}

/// A cache below the LLC shared by several cores: its co-runners' footprints shrink a thread's
/// share, and the extra misses hit the LLC at its latency.
#[derive(Clone, Debug)]
pub(crate) struct SharedL2 {
    pub(crate) capacity: f64,
    pub(crate) sum_ws: f64,
    /// Hit latency of the level above (the LLC), ns.
    pub(crate) next_latency_ns: f64,
}

/// A workload phase with the values the hot path would otherwise recompute at every dispatch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PhaseInfo<'a> {
    pub(crate) phase: &'a Phase,
    /// Its miss curve, ready to evaluate at every rate change.
    pub(crate) curve: PreparedCurve<'a>,
    /// Time per instruction alone on the fastest core (fairness metric).
    pub(crate) ideal_ns_per_instr: f64,
    /// LLC references per kilo-instruction (the miss curve's value at the smallest cache).
    pub(crate) refs_pki: f64,
    /// The phase's working set, bytes.
    pub(crate) ws_bytes: f64,
}

/// A last-level cache: its size and the bytes filled into it so far (the warmth clock).
#[derive(Clone, Debug)]
pub(crate) struct LlcState {
    pub(crate) capacity: f64,
    pub(crate) line: f64,
    pub(crate) fill: f64,
    pub(crate) sum_ws: f64,
}

/// A shared data fragment of one application instance.
#[derive(Clone, Debug)]
pub(crate) struct DfState {
    pub(crate) bytes: f64,
    /// (LLC, fill counter when the copy was last used) of each cached copy.
    pub(crate) copies: Vec<(LlcId, f64)>,
}

/// Pages of one owner on one node, allocated one after the other.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PageRun {
    pub(crate) owner: ThreadId,
    pub(crate) node: usize,
    pub(crate) bytes: f64,
}

/// One running copy of a workload application (a process).
#[derive(Clone, Debug)]
pub(crate) struct AppInstance {
    pub(crate) spec: usize,
    pub(crate) copy: u32,
    pub(crate) run: u32,
    pub(crate) start_ns: u64,
    pub(crate) live: u32,
    pub(crate) arrived: u32,
    pub(crate) waiting: Vec<ThreadId>,
    pub(crate) dfs: Vec<DfState>,
    /// Bytes the instance's threads allocated, per node.
    pub(crate) bytes_per_node: Vec<f64>,
    pub(crate) total_bytes: f64,
    /// The instance's resident memory in allocation order, with the thread that brought each run
    /// of pages in: the owner lists of AMPS section 2.4.2 (one owner per page, as in the common
    /// case the paper describes; consecutive pages of one owner on one node form one run).
    pub(crate) pages: VecDeque<PageRun>,
    /// Completed (every thread exited); recorded once.
    pub(crate) done: bool,
}

/// The fastest core's parameters, for the fairness metric's "alone on the best core" time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BestCore {
    eff_ghz: f64,
    cpi_factor: f64,
    llc_bytes: f64,
    latency_ns: f64,
}

/// Every LLC of the machine, empty.
pub(crate) fn build_llcs(topo: &Topology) -> IdVec<LlcId, LlcState> {
    IdVec::from_vec(
        (0..topo.num_llcs())
            .map(|i| {
                let c = topo.llc(LlcId(i as u32));
                LlcState {
                    capacity: c.size_bytes as f64,
                    line: c.line_bytes as f64,
                    fill: 0.0,
                    sum_ws: 0.0,
                }
            })
            .collect(),
    )
}

/// Every core of the machine, idle, with its clock, class and FPU mates.
pub(crate) fn build_cores(topo: &Topology) -> IdVec<CoreId, SimCore> {
    IdVec::from_vec(
        topo.cores()
            .iter()
            .map(|c| {
                let class = topo.class(c.class);
                // A class without a clock runs at its capacity times a 2 GHz reference.
                let eff_ghz = class.effective_ghz().unwrap_or(2.0 * class.capacity);
                let fpu_mates = match topo.module_of(c.id) {
                    Some(m) if m.shares_fpu => topo.module_mates(c.id),
                    _ => Vec::new(),
                };
                SimCore {
                    current: None,
                    last_bill: 0,
                    ns_per_instr: 1.0,
                    cur_mpki: 0.0,
                    eff_ghz,
                    cpi_factor: class.cpi_factor,
                    min_vruntime: 0,
                    llc: c.llc,
                    cur_ws: 0.0,
                    cur_share: f64::NAN,
                    cur_lat: 0.0,
                    gen: 0,
                    dispatched_at: 0,
                    node: c.node.0,
                    class: c.class.0,
                    last_thread: None,
                    cur_df: None,
                    fpu_mates,
                    l2: None,
                    cur_l2_ws: 0.0,
                    cur_l2_mpki: 0.0,
                    cur_l2_alone: 0.0,
                }
            })
            .collect(),
    )
}

/// The fastest core (by clock over CPI factor), with the largest cache and the nearest memory.
pub(crate) fn best_core(topo: &Topology, cores: &IdVec<CoreId, SimCore>) -> BestCore {
    let best = topo
        .cores()
        .iter()
        .max_by(|a, b| {
            let ca = &cores[a.id];
            let cb = &cores[b.id];
            (ca.eff_ghz / ca.cpi_factor).total_cmp(&(cb.eff_ghz / cb.cpi_factor))
        })
        .map(|c| c.id)
        .unwrap_or(CoreId(0));
    let bc = &cores[best];
    BestCore {
        eff_ghz: bc.eff_ghz,
        cpi_factor: bc.cpi_factor,
        llc_bytes: topo
            .caches()
            .iter()
            .map(|c| c.size_bytes)
            .max()
            .unwrap_or(0) as f64,
        latency_ns: topo
            .nodes()
            .iter()
            .map(|n| n.latency_ns[n.id.index()])
            .fold(f64::MAX, f64::min),
    }
}

/// Every phase of the workload flattened (spec by spec, group by group), and per spec, per thread
/// group, the index of its first phase there.
pub(crate) fn build_phases<'a>(
    workload: &'a Workload,
    best: &BestCore,
) -> (Vec<PhaseInfo<'a>>, Vec<Vec<u32>>) {
    let mut phases = Vec::new();
    let mut phase_base = Vec::with_capacity(workload.apps.len());
    for spec in &workload.apps {
        let mut bases = Vec::with_capacity(spec.threads.len());
        for group in &spec.threads {
            bases.push(phases.len() as u32);
            phases.extend(group.phases.iter().map(|phase| PhaseInfo {
                phase,
                curve: phase.miss.prepared(),
                ideal_ns_per_instr: ideal_ns_per_instr(phase, best),
                refs_pki: phase.miss.mpki_smallest(),
                ws_bytes: phase.miss.working_set_bytes() as f64,
            }));
        }
        phase_base.push(bases);
    }
    (phases, phase_base)
}

/// The shared caches below the LLC whose LLC has a known hit latency (module L2s); sets each
/// core's `l2`.
pub(crate) fn build_shared_l2s(
    topo: &Topology,
    cores: &mut IdVec<CoreId, SimCore>,
) -> Vec<SharedL2> {
    let mut shared_l2s: Vec<SharedL2> = Vec::new();
    let mut l2_of_cache: BTreeMap<usize, usize> = BTreeMap::new();
    for core in topo.cores() {
        let Some(llc) = topo.llc_of(core.id) else {
            continue;
        };
        let (Some(next_latency_ns), true) = (llc.hit_latency_ns, llc.level > 1) else {
            continue;
        };
        let below = topo
            .caches()
            .iter()
            .position(|k| k.level == llc.level - 1 && k.cpus.contains(&core.id));
        let Some(idx) = below.filter(|&i| topo.caches()[i].cpus.len() > 1) else {
            continue;
        };
        let slot = *l2_of_cache.entry(idx).or_insert_with(|| {
            shared_l2s.push(SharedL2 {
                capacity: topo.caches()[idx].size_bytes as f64,
                sum_ws: 0.0,
                next_latency_ns,
            });
            shared_l2s.len() - 1
        });
        cores[core.id].l2 = Some(slot);
    }
    shared_l2s
}

/// Memory bandwidth of each node in bytes per ns, where the machine gives one.
pub(crate) fn node_bandwidths(topo: &Topology) -> Vec<Option<f64>> {
    topo.nodes()
        .iter()
        .map(|n| n.bandwidth_bytes_per_s.map(|b| b / NS_PER_S as f64))
        .collect()
}

/// Time per instruction of a phase alone on the fastest core with the whole LLC and local memory.
fn ideal_ns_per_instr(phase: &Phase, best: &BestCore) -> f64 {
    let share = (phase.miss.working_set_bytes() as f64).min(best.llc_bytes);
    perf::ns_per_instruction(
        phase.cpi,
        best.cpi_factor,
        best.eff_ghz,
        1.0,
        phase.miss.mpki(share),
        best.latency_ns / phase.mlp,
    )
}

/// The miss curves' values at the LLC shares already asked for, by (phase, share): a curve is a
/// pure function of the share, and on a machine of many cores the same few phases meet the same
/// sums of working sets again and again, so most rate changes find their value here instead of
/// evaluating the curve. Direct-mapped; an entry holds its whole key, so a value found is the
/// value the curve gives, bit for bit.
pub(crate) struct MpkiMemo {
    entries: Vec<MemoEntry>,
}

#[derive(Clone, Copy)]
struct MemoEntry {
    share_bits: u64,
    phase: u32,
    mpki: f64,
}

/// Entries of the memo (a power of two): 96 KiB of 24-byte entries, within the second-level cache.
const MEMO_ENTRIES: usize = 1 << 12;

/// The entry of the memo a (phase, share) key goes to.
#[inline]
fn slot(phase: u32, share_bits: u64) -> usize {
    let h = (share_bits ^ (phase as u64).rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> (64 - MEMO_ENTRIES.trailing_zeros())) as usize
}

impl MpkiMemo {
    pub(crate) fn new() -> Self {
        MpkiMemo {
            entries: vec![
                MemoEntry {
                    share_bits: 0,
                    phase: u32::MAX,
                    mpki: 0.0,
                };
                MEMO_ENTRIES
            ],
        }
    }

    /// Bring into cache the entry [`MpkiMemo::mpki`] will read for `phase` at `share` (a hint; no
    /// effect on results).
    #[inline]
    pub(crate) fn prefetch(&self, phase: u32, share: f64) {
        prefetch(&self.entries[slot(phase, share.to_bits())]);
    }

    /// `curve` (the miss curve of phase `phase`) at `share` bytes of cache.
    #[inline]
    pub(crate) fn mpki(&mut self, phase: u32, curve: &PreparedCurve<'_>, share: f64) -> f64 {
        let share_bits = share.to_bits();
        let e = &mut self.entries[slot(phase, share_bits)];
        if e.phase == phase && e.share_bits == share_bits {
            return e.mpki;
        }
        let mpki = curve.mpki(share);
        *e = MemoEntry {
            share_bits,
            phase,
            mpki,
        };
        mpki
    }
}

#[cfg(test)]
mod tests {
    use super::{slot, MpkiMemo, SimCore, SimThread};
    use crate::workload::MissCurve;
    use hetsched_core::rng::SeededRng;
    use hetsched_core::LlcId;
    use std::mem::{offset_of, size_of};

    /// A thread's record is two cache lines, the first holding what a bill and a dispatch touch;
    /// a core's holds what a tick reads in its first two lines, the shared-L2 and FPU-mate fields
    /// on the third.
    #[test]
    fn records_keep_their_cache_lines() {
        assert_eq!(size_of::<SimThread>(), 128);
        assert_eq!(
            offset_of!(SimThread, warm_llc) + size_of::<Option<LlcId>>(),
            64
        );
        assert_eq!(offset_of!(SimThread, group), 64);
        assert_eq!(size_of::<SimCore>(), 192);
        assert!(offset_of!(SimCore, cur_df) + size_of::<Option<u32>>() <= 128);
        assert_eq!(offset_of!(SimCore, fpu_mates), 128);
    }

    /// Whatever the order of asking, and with far more keys than entries (so that entries are
    /// overwritten), the memo gives each curve's own value, bit for bit; and where two phases'
    /// keys at one share go to the same entry, neither is given the other's value.
    #[test]
    fn the_memo_gives_each_curves_own_value() {
        // Many phases, each its own curve.
        let mut curves: Vec<MissCurve> = (0..256u32)
            .map(|i| MissCurve::Knee {
                mpki_max: 1.0 + f64::from(i),
                mpki_min: 0.1 + f64::from(i) / 8.0,
                ws_bytes: (512 << 10) << (i % 10),
            })
            .collect();
        curves.push(MissCurve::Table {
            mpki: vec![30.0, 20.0, 12.0, 5.0, 1.0],
        });
        let prepared: Vec<_> = curves.iter().map(MissCurve::prepared).collect();
        let mut memo = MpkiMemo::new();
        let mut rng = SeededRng::new(3);
        let check = |memo: &mut MpkiMemo, phase: usize, share: f64| {
            let got = memo.mpki(phase as u32, &prepared[phase], share);
            assert_eq!(
                got.to_bits(),
                curves[phase].mpki(share).to_bits(),
                "phase {phase}, share {share}"
            );
        };
        // A few shares asked again and again, among many asked once.
        let shares: Vec<f64> = (0..64).map(|i| f64::from(i + 1) * 131_072.0).collect();
        for i in 0..200_000 {
            let phase = rng.below(curves.len());
            let share = if i % 3 == 0 {
                shares[rng.below(shares.len())]
            } else {
                rng.unit() * f64::from(64u32 << 20)
            };
            check(&mut memo, phase, share);
        }
        // Two phases whose keys at one share go to the same entry: each gets its own value.
        let share = 3.0 * f64::from(1u32 << 20);
        let other = (1..u32::MAX)
            .find(|&p| slot(p, share.to_bits()) == slot(0, share.to_bits()))
            .expect("a colliding phase");
        let knee = MissCurve::Knee {
            mpki_max: 9.0,
            mpki_min: 3.0,
            ws_bytes: 8 << 20,
        };
        let (p0, p1) = (curves[0].prepared(), knee.prepared());
        assert_ne!(p0.mpki(share), p1.mpki(share));
        assert_eq!(memo.mpki(0, &p0, share), p0.mpki(share));
        assert_eq!(memo.mpki(other, &p1, share), p1.mpki(share));
        assert_eq!(memo.mpki(0, &p0, share), p0.mpki(share));
        // Every phase at the same share in turn.
        for _ in 0..2_000 {
            let share = rng.unit() * f64::from(8u32 << 20);
            for phase in 0..curves.len() {
                check(&mut memo, phase, share);
            }
        }
    }
}
