//! hetsched-live: the Linux backend. The same policy objects the simulator runs, on real threads.
//!
//! - [`sysfs`]: the machine, discovered.
//! - [`tracker`] (with [`connector`] and [`procfs`]): which threads are managed.
//! - [`counters`]: what they do (`perf_event_open`, with /proc as the fallback).
//! - [`engine`]: the policy loop, its hysteresis and its safety rules.
//! - [`sys`], [`journal`], [`pages`]: affinity, the restore journal, page migration.
//! - [`hints`]: the hint socket's receiving side; [`socket_file`]: the files of the sockets; [`stored`]: signatures from the signature store.
//! - [`emulate`]: slow cores made on symmetric hardware by duty cycling.
//! - [`doctor`]: what this machine and these privileges give the backend.
//! - [`run`], [`daemon`] (with [`signals`] and [`event_loop`]): the two ways to drive engines.

pub mod connector;
pub mod counters;
pub mod daemon;
pub mod doctor;
pub mod emulate;
pub mod engine;
pub mod event_loop;
pub mod hints;
pub mod instance;
pub mod journal;
pub mod pages;
pub mod procfs;
pub mod run;
pub mod signals;
pub mod socket_file;
pub mod stored;
pub mod sys;
pub mod sysfs;
pub mod tracker;

pub use sysfs::{discover, Discovery};
