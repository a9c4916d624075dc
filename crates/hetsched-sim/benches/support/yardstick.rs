//! The yardstick: the least a discrete-event simulation of a scenario must do, to measure the
//! engine against.
//!
//! A binary-heap event queue keyed by (time, sequence), one round-robin run queue per core with the
//! workload's threads dealt out in order, and one quantum-end event per core that bills the
//! running thread (instructions at the core's clock, CPI 1) and rotates the queue. No caches, no
//! virtual runtime, no sleeps, no contention, no balancing: what is left is the cost of events
//! themselves, which the engine cannot go below.

use hetsched_core::Topology;
use hetsched_sim::Workload;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// What a yardstick run did.
#[derive(Clone, Copy, Debug)]
pub struct YardstickRun {
    /// Quantum-end events handled.
    pub events: u64,
    /// Instructions billed to every thread together (a checksum: the work cannot be skipped).
    pub instructions: f64,
}

/// Simulate `workload`'s threads on `topo`'s cores for `duration_ns` at `quantum_ns`.
pub fn run(
    topo: &Topology,
    workload: &Workload,
    quantum_ns: u64,
    duration_ns: u64,
) -> YardstickRun {
    let n = topo.num_cores();
    // Instructions per ns of each core: its class's clock (a class without one runs at its
    // capacity times 2 GHz, as in the engine).
    let rate: Vec<f64> = topo
        .cores()
        .iter()
        .map(|c| {
            let class = topo.class(c.class);
            class.effective_ghz().unwrap_or(2.0 * class.capacity)
        })
        .collect();
    let threads: usize = workload
        .apps
        .iter()
        .map(|a| a.copies as usize * a.num_threads() as usize)
        .sum();
    let mut billed = vec![0.0f64; threads];
    let mut queues: Vec<VecDeque<u32>> = vec![VecDeque::new(); n];
    for t in 0..threads {
        queues[t % n].push_back(t as u32);
    }
    let mut heap: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::with_capacity(n);
    let mut seq = 0u64;
    for core in 0..n {
        seq += 1;
        heap.push(Reverse((quantum_ns, seq, core as u32)));
    }
    let mut events = 0u64;
    while let Some(Reverse((now, _, core))) = heap.pop() {
        if now > duration_ns {
            break;
        }
        events += 1;
        let q = &mut queues[core as usize];
        if let Some(t) = q.pop_front() {
            billed[t as usize] += quantum_ns as f64 * rate[core as usize];
            q.push_back(t);
        }
        seq += 1;
        heap.push(Reverse((now + quantum_ns, seq, core)));
    }
    YardstickRun {
        events,
        instructions: billed.iter().sum(),
    }
}
