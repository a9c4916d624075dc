//! Parsers for the /proc files the live backend reads, and the reads themselves. Parsers take text
//! (tested on fixtures); readers take the proc root, so tests can point them at a fixture tree.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// `PF_KTHREAD` in `/proc/<pid>/stat` flags (include/linux/sched.h): a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;
/// `PF_NO_SETAFFINITY`: the kernel forbids changing this thread's affinity.
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;
/// `PF_EXITING`: set at the start of `do_exit` (kernel/exit.c), before the task is a zombie.
pub const PF_EXITING: u64 = 0x0000_0004;

/// The fields of `/proc/<pid>/task/<tid>/stat` the backend uses (proc(5) numbering).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskStat {
    /// Field 2, without the parentheses.
    pub comm: String,
    /// Field 3: R running or runnable, S/D sleeping, Z zombie, T/t stopped, X dead, I idle.
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Field 5: its process group.
    pub pgrp: u32,
    /// Field 9: PF_* flags.
    pub flags: u64,
    /// Fields 14 + 15: user and system time, clock ticks.
    pub cpu_ticks: u64,
    /// Field 20: threads in the process.
    pub num_threads: u32,
    /// Field 22: start time after boot, clock ticks. With the id it names a thread uniquely (ids
    /// are reused; start times of one id are not).
    pub start_ticks: u64,
    /// Field 39: the CPU it last ran on.
    pub processor: u32,
}

impl TaskStat {
    /// A kernel thread, or one whose affinity the kernel pins: never to be touched.
    pub fn is_untouchable(&self) -> bool {
        self.flags & (PF_KTHREAD | PF_NO_SETAFFINITY) != 0
    }
    /// Exiting (`do_exit` has begun: a short-lived parent of a double fork is often caught
    /// here), exited but not yet reaped, or being torn down.
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x') || self.flags & PF_EXITING != 0
    }
}

/// Parse one stat line. `None` for anything that is not one (a thread torn down mid-read gives
/// an empty file). Runs for every managed thread every interval, so it allocates nothing but the
/// name and walks the fields once.
pub fn parse_stat(text: &str) -> Option<TaskStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    if close < open {
        return None;
    }
    let comm = text[open + 1..close].to_string();
    let mut state = None;
    let (mut ppid, mut pgrp, mut flags, mut utime, mut stime, mut start, mut processor) =
        (None, None, None, None, None, None, None);
    let mut num_threads = None;
    // Field numbers as in proc(5): 3 is the state.
    for (n, f) in (3usize..).zip(text[close + 1..].split_ascii_whitespace()) {
        let num = || f.parse::<u64>().ok();
        match n {
            3 => state = f.chars().next(),
            4 => ppid = num(),
            5 => pgrp = num(),
            9 => flags = num(),
            14 => utime = num(),
            15 => stime = num(),
            20 => num_threads = num(),
            22 => start = num(),
            39 => {
                processor = num();
                break;
            }
            _ => {}
        }
    }
    Some(TaskStat {
        comm,
        state: state?,
        ppid: ppid? as u32,
        pgrp: pgrp? as u32,
        flags: flags?,
        cpu_ticks: utime? + stime?,
        num_threads: num_threads? as u32,
        start_ticks: start?,
        processor: processor? as u32,
    })
}

/// Resident bytes per NUMA node from `/proc/<pid>/numa_maps`: the `N<node>=<pages>` counts of
/// every mapping times its `kernelpagesize_kB` (4 KiB when absent). Nodes beyond `nodes` are
/// ignored.
pub fn parse_numa_maps(text: &str, nodes: usize) -> Vec<u64> {
    let mut bytes = vec![0u64; nodes];
    for line in text.lines() {
        let mut page_kb = 4u64;
        let mut counts: Vec<(usize, u64)> = Vec::new();
        for word in line.split_whitespace() {
            if let Some(v) = word.strip_prefix("kernelpagesize_kB=") {
                page_kb = v.parse().unwrap_or(4);
            } else if let Some(rest) = word.strip_prefix('N') {
                if let Some((n, pages)) = rest.split_once('=') {
                    if let (Ok(n), Ok(p)) = (n.parse::<usize>(), pages.parse::<u64>()) {
                        counts.push((n, p));
                    }
                }
            }
        }
        for (n, p) in counts {
            if n < nodes {
                bytes[n] += p * page_kb * 1024;
            }
        }
    }
    bytes
}

/// The real user id from `/proc/<pid>/status` (`Uid:` line, first value).
pub fn parse_status_uid(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The cgroup v2 path (`0::/path`) or, without one, the first v1 path from `/proc/<pid>/cgroup`.
pub fn parse_cgroup(text: &str) -> Option<String> {
    let mut first = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(_), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if id == "0" {
            return Some(path.to_string());
        }
        if first.is_none() && path != "/" {
            first = Some(path.to_string());
        }
    }
    first
}

/// The proc root and paths below it.
#[derive(Clone, Debug)]
pub struct Proc {
    root: PathBuf,
}

impl Default for Proc {
    fn default() -> Self {
        Proc::new("/proc")
    }
}

impl Proc {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Proc { root: root.into() }
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn pid_dir(&self, pid: u32) -> PathBuf {
        self.root.join(pid.to_string())
    }
    pub fn task_dir(&self, pid: u32, tid: u32) -> PathBuf {
        self.pid_dir(pid).join("task").join(tid.to_string())
    }

    /// Every process id now.
    pub fn pids(&self) -> io::Result<Vec<u32>> {
        Ok(fs::read_dir(&self.root)?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect())
    }

    /// The thread ids of `pid` (empty when it is gone).
    pub fn tids(&self, pid: u32) -> Vec<u32> {
        fs::read_dir(self.pid_dir(pid).join("task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect()
    }

    /// The process's stat (its main thread's), or `None` when it is gone.
    pub fn process_stat(&self, pid: u32) -> Option<TaskStat> {
        parse_stat(&fs::read_to_string(self.pid_dir(pid).join("stat")).ok()?)
    }

    pub fn task_stat(&self, pid: u32, tid: u32) -> Option<TaskStat> {
        parse_stat(&fs::read_to_string(self.task_dir(pid, tid).join("stat")).ok()?)
    }

    pub fn uid(&self, pid: u32) -> Option<u32> {
        parse_status_uid(&fs::read_to_string(self.pid_dir(pid).join("status")).ok()?)
    }

    pub fn exe(&self, pid: u32) -> Option<PathBuf> {
        fs::read_link(self.pid_dir(pid).join("exe")).ok()
    }

    pub fn cgroup(&self, pid: u32) -> Option<String> {
        parse_cgroup(&fs::read_to_string(self.pid_dir(pid).join("cgroup")).ok()?)
    }

    /// Resident bytes per node, or `None` when the file cannot be read (gone, or no permission).
    pub fn numa_bytes(&self, pid: u32, nodes: usize) -> Option<Vec<u64>> {
        Some(parse_numa_maps(
            &fs::read_to_string(self.pid_dir(pid).join("numa_maps")).ok()?,
            nodes,
        ))
    }

    /// Whether `tid` is a thread of process `pid`.
    pub fn is_thread_of(&self, pid: u32, tid: u32) -> bool {
        self.task_dir(pid, tid).exists()
    }

    /// The process `tid` belongs to (its `Tgid`), or `None` when no such thread exists.
    pub fn tgid_of(&self, tid: u32) -> Option<u32> {
        let text = fs::read_to_string(self.pid_dir(tid).join("status")).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("Tgid:"))?
            .trim()
            .parse()
            .ok()
    }
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), for the tick fields of stat.
pub fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Clock ticks since boot now, on the clock of the start times in stat (`CLOCK_BOOTTIME`).
pub fn boot_ticks() -> u64 {
    // SAFETY: timespec is plain data; clock_gettime writes it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock and a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &raw mut ts) };
    let ns = ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128;
    (ns * u128::from(clock_ticks_per_s()) / 1_000_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parentheses_in_comm() {
        let line = "4242 (my (weird) prog) S 1 4100 4242 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 2 0 \
                    2909541 3133440 383 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 \
                    0 0 0 0 0 0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.comm, "my (weird) prog");
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.pgrp, 4100);
        assert_eq!(s.flags, 4194560);
        assert_eq!(s.cpu_ticks, 10);
        assert_eq!(s.num_threads, 2);
        assert_eq!(s.start_ticks, 2909541);
        assert_eq!(s.processor, 1);
        assert!(!s.is_untouchable());
    }

    #[test]
    fn kernel_threads_are_untouchable() {
        let line = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 2 0 0 \
                    18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 0 0 0 0 0 0 0 0 0 \
                    0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert!(s.is_untouchable(), "flags {:#x}", s.flags);
    }

    #[test]
    fn truncated_stat_is_none() {
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_stat("12 (x) R 1 2 3"), None);
    }

    #[test]
    fn numa_maps_sums_pages_per_node_with_page_size() {
        let text = "7f00 default anon=3 dirty=3 N0=2 N1=1 kernelpagesize_kB=4\n\
                    7f10 bind:1 anon=1 N1=1 kernelpagesize_kB=2048\n\
                    7f20 default file=/x mapped=5 N3=5 kernelpagesize_kB=4\n";
        let b = parse_numa_maps(text, 2);
        assert_eq!(b, vec![2 * 4096, 4096 + 2048 * 1024]);
    }

    #[test]
    fn status_uid_and_cgroup() {
        assert_eq!(
            parse_status_uid("Name:\tx\nUid:\t1000\t1000\t1000\t1000\n"),
            Some(1000)
        );
        assert_eq!(
            parse_cgroup("4:memory:/a/b\n0::/user.slice/x.scope\n").as_deref(),
            Some("/user.slice/x.scope")
        );
        assert_eq!(
            parse_cgroup("4:memory:/a/b\n1:cpu:/\n").as_deref(),
            Some("/a/b")
        );
    }

    #[test]
    fn reads_this_process() {
        let p = Proc::default();
        let me = std::process::id();
        let s = p.process_stat(me).unwrap();
        assert!(matches!(s.state, 'R' | 'S'), "{}", s.state);
        assert!(p.tids(me).contains(&me));
        assert_eq!(p.tgid_of(me), Some(me));
        assert!(p.uid(me).is_some());
    }
}
