//! hetsched-live: the Linux backend. This crate starts with what every live command needs first:
//! discovering the machine it runs on from sysfs ([`sysfs::discover`]).

pub mod sysfs;

pub use sysfs::{discover, Discovery};
