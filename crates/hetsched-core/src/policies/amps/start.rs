//! Where a new thread starts (AMPS section 2.3.2, rules 3 and 6 of the module doc of
//! [`super`]): one pass over the allowed cores.

use super::{scaled_load, LOAD_EPS};
use crate::cpuset::CpuSet;
use crate::ids::CoreId;

/// The core a new thread starts on (section 2.3.2, rules 3 and 6 of the module doc): an idle core
/// if `allowed` has one (an idle core adds its speed to the machine's throughput, a busy one adds
/// nothing); among those, or among busy cores when none idles, least new scaled load; ties to the
/// faster core while the new load is below 1, to the slower one after; among idle cores, then
/// the least `crowd` (how many threads run beside the core on the caches and the module it
/// shares: Linux's fork placement, `sched_balance_find_dst_group`, takes the idlest group and
/// `select_idle_core` a core whose siblings idle); then the lower id.
pub fn initial_core(
    allowed: &CpuSet,
    runnable: impl Fn(CoreId) -> u32,
    power: impl Fn(CoreId) -> f64,
    mut crowd: impl FnMut(CoreId) -> u64,
) -> Option<CoreId> {
    // One pass: the best of all cores until an idle one is seen, then the best idle core (busy
    // cores are then never wanted). On a large machine whose cores are all busy, nearly every
    // core at every thread start either has the best's runnable count and power (a tie the best
    // keeps) or a load above the band that ties with the best's: each is passed over after a
    // compare or two, the best kept in registers.
    let mut cores = allowed.iter();
    let (mut any, mut idle) = (StartBest::NONE, StartBest::NONE);
    for c in cores.by_ref() {
        let n = runnable(c);
        let p = power(c);
        if n == 0 {
            idle.consider(c, n, p, &mut crowd);
            break;
        }
        if n == any.runnable && p == any.power {
            continue;
        }
        any.consider(c, n, p, &mut crowd);
    }
    for c in cores {
        if runnable(c) == 0 {
            idle.consider(c, 0, power(c), &mut crowd);
        }
    }
    idle.core.or(any.core)
}

/// The best core [`initial_core`] has seen so far, and the band of new loads that tie with its
/// own (within [`LOAD_EPS`] of it, relatively).
struct StartBest {
    core: Option<CoreId>,
    runnable: u32,
    power: f64,
    /// Loads below this beat it; loads above `above` lose to it.
    below: f64,
    above: f64,
    /// Its crowd, once asked for.
    crowd: Option<u64>,
}

impl StartBest {
    const NONE: StartBest = StartBest {
        core: None,
        runnable: 0,
        power: 0.0,
        below: f64::INFINITY,
        above: f64::INFINITY,
        crowd: None,
    };

    /// Core `c`, with `n` runnable threads and power `p`, replaces the best if the rule prefers
    /// it (`crowd` asked on ties between idle cores only, and for the best core once).
    #[inline(always)]
    fn consider(&mut self, c: CoreId, n: u32, p: f64, crowd: &mut impl FnMut(CoreId) -> u64) {
        let l = scaled_load(n + 1, p);
        if l > self.above {
            return;
        }
        let better = match self.core {
            None => true,
            Some(b) => {
                if l < self.below {
                    true
                } else if p > self.power + LOAD_EPS {
                    l < 1.0 - LOAD_EPS
                } else if p < self.power - LOAD_EPS {
                    l >= 1.0 - LOAD_EPS
                } else if n == 0 {
                    let m = crowd(c);
                    m < *self.crowd.get_or_insert_with(|| crowd(b))
                } else {
                    false
                }
            }
        };
        if better {
            *self = StartBest::new(c, n, l, p);
        }
    }

    fn new(core: CoreId, runnable: u32, load: f64, power: f64) -> Self {
        let band = LOAD_EPS * load.max(1.0);
        StartBest {
            core: Some(core),
            runnable,
            power,
            below: load - band,
            above: load + band,
            crowd: None,
        }
    }
}
