//! Thin, safe wrappers over the system calls the backend makes: affinity, page migration,
//! scheduling class. Every call names the thread it acts on; ESRCH (the thread is gone) comes back
//! as [`Gone`](SysError::Gone), which callers treat as normal.

use hetsched_core::{CoreId, CpuSet};
use std::io;

/// Why a call on a thread did not happen.
#[derive(Debug, thiserror::Error)]
pub enum SysError {
    /// The thread exited (ESRCH): normal, not an error.
    #[error("thread {0} is gone")]
    Gone(u32),
    #[error("thread {tid}: {source}")]
    Other { tid: u32, source: io::Error },
}

fn sys_err(tid: u32) -> SysError {
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        SysError::Gone(tid)
    } else {
        SysError::Other { tid, source: e }
    }
}

/// A kernel CPU mask, kept whole (offline CPUs included) so a restore gives back exactly what was
/// there.
#[derive(Clone, Copy)]
pub struct OsMask(libc::cpu_set_t);

/// 64-bit words in a `cpu_set_t` (glibc's is 1,024 bits of `unsigned long`).
const MASK_WORDS: usize = size_of::<libc::cpu_set_t>() / 8;

impl OsMask {
    /// The mask as words: CPU `i` is bit `i % 64` of word `i / 64`.
    fn words(&self) -> &[u64; MASK_WORDS] {
        // SAFETY: cpu_set_t is an array of unsigned long (8-byte aligned plain bits), exactly
        // MASK_WORDS of them.
        unsafe { &*(&raw const self.0).cast::<[u64; MASK_WORDS]>() }
    }

    fn words_mut(&mut self) -> &mut [u64; MASK_WORDS] {
        // SAFETY: as in `words`; any bit pattern is a valid cpu_set_t.
        unsafe { &mut *(&raw mut self.0).cast::<[u64; MASK_WORDS]>() }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: cpu_set_t is plain bits with no padding; viewing it as bytes is sound.
        unsafe {
            std::slice::from_raw_parts(
                (&raw const self.0).cast::<u8>(),
                size_of::<libc::cpu_set_t>(),
            )
        }
    }
}

impl PartialEq for OsMask {
    /// The same CPUs: one comparison of the 128 bytes, not 1,024 bit tests (the engine compares
    /// masks for every thread it adds against the threads it has, and for every placement).
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}
impl Eq for OsMask {}

impl std::fmt::Debug for OsMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OsMask({})", self.to_list())
    }
}

impl OsMask {
    pub fn empty() -> Self {
        // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
        OsMask(unsafe { std::mem::zeroed() })
    }
    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> Self {
        let mut m = OsMask::empty();
        for c in cpus {
            if (c as usize) < libc::CPU_SETSIZE as usize {
                // SAFETY: c is below CPU_SETSIZE.
                unsafe { libc::CPU_SET(c as usize, &mut m.0) };
            }
        }
        m
    }
    pub fn contains(&self, cpu: u32) -> bool {
        // SAFETY: CPU_ISSET checks the index against the set size.
        (cpu as usize) < libc::CPU_SETSIZE as usize
            && unsafe { libc::CPU_ISSET(cpu as usize, &self.0) }
    }
    pub fn cpus(&self) -> impl Iterator<Item = u32> + '_ {
        (0..libc::CPU_SETSIZE as u32).filter(|&c| self.contains(c))
    }
    pub fn is_empty(&self) -> bool {
        self.cpus().next().is_none()
    }
    /// Kernel cpulist syntax (`0-3,8`).
    pub fn to_list(&self) -> String {
        let v: Vec<u32> = self.cpus().collect();
        let mut out = String::new();
        let mut i = 0;
        while i < v.len() {
            let mut j = i;
            while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
                j += 1;
            }
            if !out.is_empty() {
                out.push(',');
            }
            if j > i {
                out.push_str(&format!("{}-{}", v[i], v[j]));
            } else {
                out.push_str(&v[i].to_string());
            }
            i = j + 1;
        }
        out
    }
    /// Parse a cpulist.
    pub fn parse_list(text: &str) -> Option<OsMask> {
        CpuSet::parse_list(text)
            .ok()
            .map(|s| OsMask::from_cpus(s.iter().map(|c| c.0)))
    }
}

/// An [`OsMask`] as the engine keeps one per thread: the first 128 CPUs inline, the whole mask
/// boxed only when a CPU above 127 is in it (24 bytes a mask instead of 128 on all but the
/// largest machines; lossless either way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PackedMask {
    Small([u64; 2]),
    Whole(Box<OsMask>),
}

impl PackedMask {
    pub fn pack(mask: &OsMask) -> Self {
        let words = mask.words();
        if words[2..].iter().all(|&w| w == 0) {
            PackedMask::Small([words[0], words[1]])
        } else {
            PackedMask::Whole(Box::new(*mask))
        }
    }

    pub fn unpack(&self) -> OsMask {
        match self {
            PackedMask::Small(w) => {
                let mut m = OsMask::empty();
                m.words_mut()[..2].copy_from_slice(w);
                m
            }
            PackedMask::Whole(m) => **m,
        }
    }
}

/// The affinity of thread `tid`.
pub fn get_affinity(tid: u32) -> Result<OsMask, SysError> {
    let mut m = OsMask::empty();
    // SAFETY: the pointer and size describe a valid cpu_set_t.
    let r = unsafe {
        libc::sched_getaffinity(
            tid as libc::pid_t,
            size_of::<libc::cpu_set_t>(),
            &raw mut m.0,
        )
    };
    if r == 0 {
        Ok(m)
    } else {
        Err(sys_err(tid))
    }
}

/// Set the affinity of thread `tid`.
pub fn set_affinity(tid: u32, mask: &OsMask) -> Result<(), SysError> {
    // SAFETY: the pointer and size describe a valid cpu_set_t.
    let r = unsafe {
        libc::sched_setaffinity(
            tid as libc::pid_t,
            size_of::<libc::cpu_set_t>(),
            &raw const mask.0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(sys_err(tid))
    }
}

/// The calling thread's id.
pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

/// Mapping between the model's dense core ids and the kernel's CPU numbers.
#[derive(Clone, Debug)]
pub struct CpuMap {
    os_of: Vec<u32>,
}

impl CpuMap {
    /// From the topology's `os_cpu` of each core.
    pub fn new(topology: &hetsched_core::Topology) -> Self {
        CpuMap {
            os_of: topology.cores().iter().map(|c| c.os_cpu).collect(),
        }
    }
    pub fn os_cpu(&self, core: CoreId) -> u32 {
        self.os_of[core.index()]
    }
    pub fn core_of(&self, os_cpu: u32) -> Option<CoreId> {
        self.os_of
            .iter()
            .position(|&c| c == os_cpu)
            .map(|i| CoreId(i as u32))
    }
    /// The kernel mask of a set of cores.
    pub fn to_os(&self, cpus: &CpuSet) -> OsMask {
        OsMask::from_cpus(cpus.iter().map(|c| self.os_cpu(c)))
    }
    /// The cores of a kernel mask (CPUs the model does not know are dropped).
    pub fn to_cores(&self, mask: &OsMask) -> CpuSet {
        mask.cpus().filter_map(|c| self.core_of(c)).collect()
    }
}

/// Make the calling thread SCHED_FIFO at `priority` (1..=99).
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: param is a valid sched_param; 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const param) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Raise the open-file limit as far as allowed (the backend holds descriptors per thread): to
/// the system's ceiling (`fs.nr_open`, at most 2^20) with the privilege to raise the hard limit,
/// else the soft limit to the hard one. Sets the [`FdBudget`] from the result.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let ceiling: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
        .min(1 << 20);
    // SAFETY: lim is a valid rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) == 0 {
            let want = libc::rlimit {
                rlim_cur: ceiling.max(lim.rlim_max),
                rlim_max: ceiling.max(lim.rlim_max),
            };
            if want.rlim_max > lim.rlim_max
                && libc::setrlimit(libc::RLIMIT_NOFILE, &raw const want) == 0
            {
                lim = want;
            } else if lim.rlim_cur < lim.rlim_max {
                lim.rlim_cur = lim.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &raw const lim);
            }
        }
    }
    FD_BUDGET.set_limit(lim.rlim_cur);
    lim.rlim_cur
}

/// Descriptors kept free of per-thread use: sockets, journal writes, /proc listings.
pub const FD_RESERVE: u64 = 256;

/// The descriptors this process may hold for the threads it manages, shared by every engine in
/// it: the open-file limit less [`FD_RESERVE`]. A thread that would pass it is left to the kernel
/// (unmanaged) rather than half-watched. Unlimited until [`raise_fd_limit`] sets it.
pub struct FdBudget {
    limit: std::sync::atomic::AtomicU64,
    used: std::sync::atomic::AtomicU64,
}

/// The process's budget.
pub static FD_BUDGET: FdBudget = FdBudget {
    limit: std::sync::atomic::AtomicU64::new(u64::MAX),
    used: std::sync::atomic::AtomicU64::new(0),
};

impl FdBudget {
    fn set_limit(&self, open_files: u64) {
        self.limit.store(
            open_files.saturating_sub(FD_RESERVE),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The descriptors allowed for threads.
    pub fn limit(&self) -> u64 {
        self.limit.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Take `n` descriptors; false (nothing taken) when that would pass the limit.
    pub fn take(&self, n: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.used
            .fetch_update(Relaxed, Relaxed, |u| {
                (u.saturating_add(n) <= self.limit()).then_some(u + n)
            })
            .is_ok()
    }

    pub fn give_back(&self, n: u64) {
        self.used.fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Large allocations (128 KiB and up) each get pages of their own from the kernel, always, not
/// only until glibc's threshold adapts upward: the tables that grow with the threads managed then
/// grow in place (`mremap`) instead of being copied, so a burst of threads does not hold the old
/// and the new table at once, and freed tables go back to the system at once (`mallopt(3)`,
/// `M_MMAP_THRESHOLD`). Call once at start. Elsewhere a no-op.
pub fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets the allocator's parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// A table holding this much more room than entries is worth shrinking after a burst (the
/// tracker's and the journal's tables).
pub fn oversized(capacity: usize, len: usize) -> bool {
    capacity > 4 * len + 1024
}

/// Give the heap's free memory back to the system (glibc keeps what freed threads' records held;
/// `malloc_trim(3)`). Elsewhere a no-op.
pub fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Memory of the calling process, kB: resident now and at its peak (`VmRSS` and `VmHWM` of
/// /proc/self/status; 0 when not readable).
pub fn process_memory_kb() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU time the calling process has used, s (user + system, all threads).
pub fn process_cpu_s() -> f64 {
    // SAFETY: ru is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// `MPOL_MF_MOVE` (include/uapi/linux/mempolicy.h): move pages used only by this process.
const MPOL_MF_MOVE: libc::c_long = 1 << 1;

/// `move_pages(2)` on `pid`: move each page to the node in `nodes` (or, with `nodes` empty, only
/// report where each page is). `status` gets a node or a negative errno per page.
pub fn move_pages(pid: u32, pages: &[usize], nodes: &[i32], status: &mut [i32]) -> io::Result<()> {
    assert!(status.len() == pages.len() && (nodes.is_empty() || nodes.len() == pages.len()));
    let nodes_ptr = if nodes.is_empty() {
        std::ptr::null()
    } else {
        nodes.as_ptr()
    };
    // SAFETY: the arrays are valid for `pages.len()` elements; the kernel only reads the addresses
    // (they are in the target's address space) and writes `status`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            nodes_ptr,
            status.as_mut_ptr(),
            MPOL_MF_MOVE,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_masks_are_the_masks_they_packed() {
        for cpus in [
            vec![],
            vec![0],
            vec![0, 63, 64, 127],
            vec![3, 128],
            vec![1023],
            (0..1024).step_by(7).collect(),
        ] {
            let m = OsMask::from_cpus(cpus.iter().copied());
            let p = PackedMask::pack(&m);
            assert_eq!(p.unpack(), m, "{cpus:?}");
            let small = cpus.iter().all(|&c| c < 128);
            assert_eq!(matches!(p, PackedMask::Small(_)), small, "{cpus:?}");
            assert_eq!(p.unpack().cpus().collect::<Vec<_>>(), cpus);
        }
    }

    #[test]
    fn masks_round_trip_through_lists() {
        let m = OsMask::parse_list("0-2,5,7-8").unwrap();
        assert_eq!(m.to_list(), "0-2,5,7-8");
        assert!(m.contains(5) && !m.contains(4));
        assert!(OsMask::empty().is_empty());
    }

    #[test]
    fn masks_compare_by_their_cpus() {
        assert_eq!(
            OsMask::from_cpus([0, 5]),
            OsMask::parse_list("0,5").unwrap()
        );
        assert_ne!(OsMask::from_cpus([0, 5]), OsMask::from_cpus([0, 6]));
        assert_ne!(OsMask::from_cpus([1023]), OsMask::empty());
    }

    #[test]
    fn own_affinity_reads_and_writes_back() {
        let tid = gettid();
        let before = get_affinity(tid).unwrap();
        set_affinity(tid, &before).unwrap();
        assert_eq!(get_affinity(tid).unwrap(), before);
    }

    #[test]
    fn a_missing_thread_is_gone_not_an_error() {
        // pid_max is at most 2^22; this id cannot exist.
        match get_affinity(1 << 23) {
            Err(SysError::Gone(_)) => {}
            other => panic!("{other:?}"),
        }
    }
}
