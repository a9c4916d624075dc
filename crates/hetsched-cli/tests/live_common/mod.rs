//! What the live integration tests share: whether they may run, and how they watch threads.

use std::time::{Duration, Instant};

/// Root, which the live backend needs (affinity of other processes, emulation).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A thread's affinity as the kernel reports it (`Cpus_allowed_list`), or `None` when gone.
pub fn mask_of(tid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|s| s.trim().to_string())
}

/// Whether `f` holds within `limit`, asked every 10 ms.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}
