//! Every placement policy, registered in one place ([`POLICIES`], [`policy_by_name`]).

pub mod linux_default;

use crate::policy::Policy;

/// (CLI name, one-line description) of every implemented policy, baseline first.
pub const POLICIES: &[(&str, &str)] = &[(
    "linux-default",
    "baseline: no placement; the backend's homogeneous balancer (Linux CFS-like) does everything",
)];

/// Names of every implemented policy.
pub fn policy_names() -> impl Iterator<Item = &'static str> {
    POLICIES.iter().map(|(n, _)| *n)
}

/// A new policy object by CLI name.
pub fn policy_by_name(name: &str) -> Option<Box<dyn Policy>> {
    match name {
        "linux-default" => Some(Box::new(linux_default::LinuxDefault)),
        _ => None,
    }
}
