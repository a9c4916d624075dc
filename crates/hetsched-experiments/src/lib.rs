//! hetsched-experiments: the five papers' experiments reproduced on the simulator, each row the
//! paper's value beside ours and whether ours holds; the matrix of every policy on every paper's
//! scenario; the static-best oracle (HASS section 5) and the papers' own simplified models.
//!
//! The simulator (`hetsched-sim`) holds the engine, the performance model, workloads and
//! baselines; this crate only composes runs of it.

pub mod paper_models;
pub mod reproduce;
pub mod static_best;
