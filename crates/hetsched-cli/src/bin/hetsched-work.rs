//! `hetsched-work`: the workload programs of `hetsched-workloads` (CPU-bound integer, FP-heavy,
//! memory streaming, OpenMP-like, shared buffers, sleepers, thread churn, hint sender).

fn main() {
    hetsched_workloads::main();
}
