//! Page migration in bounded, timed batches. A policy's [`PageMove`](hetsched_core::PageMove)
//! becomes a job: walk the process's private writable mappings (`/proc/<pid>/maps`), ask where each
//! page is (`move_pages` with no target), move those not on the target node, at most
//! [`BATCH_PAGES`] a call, and stop for this interval when the time budget is spent. A job resumes
//! where it stopped. Whole-process `migrate_pages` is never used: it can stall a large program for
//! minutes.
//!
//! Live pages carry no access heat (that needs sampling hardware this backend does not assume), so
//! pages are taken in address order, which is allocation order for the heap: the simulator's
//! "newest first" becomes "oldest first" here, a documented difference.

use crate::sys;
use std::collections::VecDeque;
use std::fs;
use std::time::{Duration, Instant};

/// Pages per `move_pages` call.
pub const BATCH_PAGES: usize = 512;

/// One writable private mapping: [start, end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: usize,
    pub end: usize,
}

/// The private writable mappings of a `/proc/<pid>/maps` text: heap, stacks, anonymous memory and
/// the data of files mapped privately (what a process has written belongs to it).
pub fn parse_maps(text: &str) -> Vec<Region> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let perms = f.next()?;
            if !(perms.starts_with("rw") && perms.ends_with('p')) {
                return None;
            }
            let path = l.split_whitespace().nth(5).unwrap_or("");
            if path == "[vvar]" || path == "[vsyscall]" || path == "[vdso]" {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some(Region {
                start: usize::from_str_radix(a, 16).ok()?,
                end: usize::from_str_radix(b, 16).ok()?,
            })
        })
        .collect()
}

#[derive(Debug)]
struct Job {
    pid: u32,
    to: i32,
    left_bytes: u64,
    regions: Vec<Region>,
    region: usize,
    offset: usize,
}

/// Page moves in progress.
#[derive(Debug, Default)]
pub struct PageMover {
    jobs: VecDeque<Job>,
    pub moved_bytes: u64,
    pub failed_pages: u64,
    page_size: usize,
}

impl PageMover {
    pub fn new() -> Self {
        // SAFETY: sysconf has no preconditions.
        let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        PageMover {
            page_size: if ps > 0 { ps as usize } else { 4096 },
            ..Default::default()
        }
    }

    pub fn pending(&self) -> usize {
        self.jobs.len()
    }

    /// Queue a move of up to `max_bytes` of `pid`'s pages to `node`. A newer move of the same
    /// process replaces an unfinished one.
    pub fn submit(&mut self, pid: u32, node: u32, max_bytes: u64) {
        self.jobs.retain(|j| j.pid != pid);
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return;
        };
        self.jobs.push_back(Job {
            pid,
            to: node as i32,
            left_bytes: max_bytes,
            regions: parse_maps(&text),
            region: 0,
            offset: 0,
        });
    }

    /// Work on the queue until `budget` is spent; returns the bytes moved.
    pub fn run(&mut self, budget: Duration) -> u64 {
        let start = Instant::now();
        let mut moved = 0u64;
        let ps = self.page_size;
        let mut pages = Vec::with_capacity(BATCH_PAGES);
        let mut status = vec![0i32; BATCH_PAGES];
        while let Some(job) = self.jobs.front_mut() {
            if start.elapsed() >= budget {
                break;
            }
            if job.left_bytes < ps as u64 || job.region >= job.regions.len() {
                self.jobs.pop_front();
                continue;
            }
            // The next batch of addresses.
            pages.clear();
            while pages.len() < BATCH_PAGES && job.region < job.regions.len() {
                let r = job.regions[job.region];
                let addr = r.start + job.offset;
                if addr >= r.end {
                    job.region += 1;
                    job.offset = 0;
                    continue;
                }
                pages.push(addr);
                job.offset += ps;
            }
            if pages.is_empty() {
                continue;
            }
            let st = &mut status[..pages.len()];
            // Where are they? Negative status: not present (never touched) or not movable.
            if sys::move_pages(job.pid, &pages, &[], st).is_err() {
                self.jobs.pop_front(); // the process is gone, or we may not touch it
                continue;
            }
            let room = (job.left_bytes / ps as u64) as usize;
            let todo: Vec<usize> = pages
                .iter()
                .zip(st.iter())
                .filter(|(_, &s)| s >= 0 && s != job.to)
                .map(|(&a, _)| a)
                .take(room)
                .collect();
            if todo.is_empty() {
                continue;
            }
            let nodes = vec![job.to; todo.len()];
            let st = &mut status[..todo.len()];
            if sys::move_pages(job.pid, &todo, &nodes, st).is_err() {
                self.jobs.pop_front();
                continue;
            }
            let ok = st.iter().filter(|&&s| s == job.to).count();
            self.failed_pages += (todo.len() - ok) as u64;
            let bytes = (ok * ps) as u64;
            job.left_bytes = job.left_bytes.saturating_sub((todo.len() * ps) as u64);
            moved += bytes;
        }
        self.moved_bytes += moved;
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_keeps_private_writable_mappings_only() {
        let text = "\
55e0a000-55e0b000 r--p 00000000 08:01 1 /usr/bin/x
55e0c000-55e0d000 rw-p 00002000 08:01 1 /usr/bin/x
55e0e000-55e2f000 rw-p 00000000 00:00 0 [heap]
7f00000-7f10000 rw-s 00000000 00:05 9 /dev/shm/y
7f20000-7f30000 rw-p 00000000 00:00 0
7ffd000-7ffe000 rw-p 00000000 00:00 0 [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]
";
        let r = parse_maps(text);
        assert_eq!(r.len(), 4);
        assert_eq!(
            r[1],
            Region {
                start: 0x55e0e000,
                end: 0x55e2f000
            }
        );
    }

    #[test]
    fn moving_own_pages_to_their_node_moves_nothing_and_finishes() {
        // On any machine node 0 exists; pages already there stay. The job must end, not spin.
        let buf = vec![1u8; 1 << 20];
        let mut m = PageMover::new();
        m.submit(std::process::id(), 0, 1 << 30);
        let node_count = fs::read_dir("/sys/devices/system/node")
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("node"))
                    .count()
            })
            .unwrap_or(1);
        m.run(Duration::from_secs(5));
        assert_eq!(m.pending(), 0);
        if node_count == 1 {
            assert_eq!(m.moved_bytes, 0);
        }
        assert_eq!(buf[12345], 1);
    }
}
