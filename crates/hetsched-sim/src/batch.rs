//! Many runs at once: independent simulations spread over the machine's cores, results in job
//! order (each run is deterministic, so the order of completion changes nothing).

use crate::{simulate, RunResult, SimConfig, Workload};
use hetsched_core::{Policy, Topology};
use std::sync::Mutex;

/// One run to do: the policy is built inside the worker (policies are not shared between runs).
pub struct Job<'a> {
    /// The machine.
    pub topology: &'a Topology,
    /// The workload.
    pub workload: &'a Workload,
    /// Builds the run's policy.
    pub make_policy: Box<dyn Fn() -> Box<dyn Policy> + Send + Sync + 'a>,
    /// The run's settings (seed, duration, baseline).
    pub cfg: SimConfig,
    /// Shown in progress messages.
    pub label: String,
}

/// One thread per core this process may use (`available_parallelism`, at least 1).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// Run every job on up to [`default_threads`] threads; `progress(done, total, label)` is called
/// after each run. Results come back in job order.
pub fn run_jobs(
    jobs: &[Job<'_>],
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Vec<RunResult> {
    run_jobs_on(jobs, default_threads(), progress)
}

/// [`run_jobs`] on at most `threads` threads (1: one after the other, on a thread of its own).
pub fn run_jobs_on(
    jobs: &[Job<'_>],
    threads: usize,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Vec<RunResult> {
    let results: Mutex<Vec<Option<RunResult>>> = Mutex::new(vec![None; jobs.len()]);
    let next = Mutex::new(0usize);
    let done = Mutex::new(0usize);
    let workers = threads.min(jobs.len()).max(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = {
                    let mut n = next
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let i = *n;
                    *n += 1;
                    i
                };
                let Some(job) = jobs.get(i) else {
                    break;
                };
                let r = simulate(
                    job.topology,
                    job.workload,
                    (job.make_policy)(),
                    job.cfg.clone(),
                );
                results
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(r);
                let d = {
                    let mut d = done
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    *d += 1;
                    *d
                };
                progress(d, jobs.len(), &job.label);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .flatten()
        .collect()
}
