//! `linux-default`: the baseline. It places nothing; the backend balances as stock Linux would (the
//! simulator's `baseline` module, the kernel when live).

use crate::observe::View;
use crate::policy::{Placement, Policy};

/// The policy's name, as users pass it and as the registry lists it.
pub const NAME: &str = "linux-default";

/// The baseline policy.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinuxDefault;

impl Policy for LinuxDefault {
    fn name(&self) -> &str {
        NAME
    }
    fn rebalance_period_ns(&self) -> u64 {
        u64::MAX
    }
    fn rebalance(&mut self, _view: &View<'_>, _out: &mut Vec<Placement>) {}
    fn is_baseline(&self) -> bool {
        true
    }
}
