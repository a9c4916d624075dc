//! The performance estimate of HASS section 3: the time a thread would take for a fixed number of
//! instructions on a core of a class, from its signature and the class's clock, LLC and memory
//! latency. Only ratios between classes matter to the scheduler.

use crate::ids::ClassId;
use crate::signature::{Signature, SIGNATURE_INSTRUCTIONS};
use crate::topology::Topology;

/// Cycles per instruction assumed for the execution part (HASS section 3: "We have used a cost of
/// 1.5 cycles per instruction").
pub const HASS_CPI: f64 = 1.5;

/// What the estimate needs to know of a core class.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassModel {
    /// Effective clock, GHz (frequency times duty cycle).
    pub ghz: f64,
    /// The class's pipeline factor on CPI (1 on every machine of the paper, whose cores differ
    /// only in clock; HASS section 3 leaves pipeline differences to future work).
    pub cpi_factor: f64,
    /// Size and associativity of the class's last-level cache (0: none described).
    pub llc_bytes: u64,
    pub llc_assoc: u32,
    /// Memory latency seen from the class's cores (local node), ns: "discoverable by the OS".
    pub mem_latency_ns: f64,
}

impl ClassModel {
    /// The model of every class of a machine, in class order. A class without a clock runs at
    /// its capacity times a 2 GHz reference (the simulator's convention).
    pub fn of_machine(topo: &Topology) -> Vec<ClassModel> {
        (0..topo.classes().len())
            .map(|i| {
                let class = topo.class(ClassId(i as u32));
                let core = topo.class_cores(ClassId(i as u32)).first();
                let llc = core.and_then(|c| topo.llc_of(c));
                ClassModel {
                    ghz: class.effective_ghz().unwrap_or(2.0 * class.capacity),
                    cpi_factor: class.cpi_factor,
                    llc_bytes: llc.map_or(0, |c| c.size_bytes),
                    llc_assoc: llc.map_or(0, |c| c.assoc),
                    mem_latency_ns: core.map_or(0.0, |c| topo.latency_ns(c, topo.node_of(c))),
                }
            })
            .collect()
    }
}

/// Estimated time for 4096 instructions on a core of `class`, ns: execution time at
/// [`HASS_CPI`] at the class's clock, plus stall time = the signature's misses at the class's LLC
/// size and associativity times the memory latency (HASS section 3).
pub fn estimated_ns(sig: &Signature, class: &ClassModel) -> f64 {
    let execution = SIGNATURE_INSTRUCTIONS * HASS_CPI * class.cpi_factor / class.ghz;
    let stall = sig.misses_at(class.llc_bytes, class.llc_assoc) * class.mem_latency_ns;
    execution + stall
}

/// A thread's base rating on every class (HASS section 4): its expected performance, instructions
/// per ns, were it to have a core of that class to itself. Computed once per thread.
pub fn base_ratings(sig: &Signature, classes: &[ClassModel]) -> Vec<f64> {
    classes
        .iter()
        .map(|c| SIGNATURE_INSTRUCTIONS / estimated_ns(sig, c))
        .collect()
}
