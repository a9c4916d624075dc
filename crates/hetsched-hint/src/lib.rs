//! hetsched-hint: how an application tells the hetsched daemon what its threads do.
//!
//! - [`wire`]: the versioned message format (one datagram a hint), shared by this client and the
//!   daemon.
//! - [`Client`]: the Rust API; [`c_api`]: the same as a C ABI (`include/hetsched_hint.h`).
//!
//! A thread announces the data fragment (DF) it starts working on and the one it leaves (Pinter &
//! Zalmanovici section 4.1: the application id, current and next DF); the application id is the
//! sending process, which the daemon learns from the socket's peer credentials, so a process can
//! only hint its own threads.

#![warn(missing_docs)]

pub mod c_api;
pub mod client;
pub mod wire;

pub use client::{Client, HintError, DEFAULT_SOCKET, SOCKET_ENV};
