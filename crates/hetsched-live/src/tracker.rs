//! Which threads are managed: the launched process tree (`run`), or the processes that match the
//! daemon's rules. The tracker learns of processes and threads from the process events connector
//! when it can have it, and from a scan of /proc that runs every interval anyway: the fallback, and
//! the reconciliation after any lost event.
//!
//! Never managed: kernel threads (PF_KTHREAD), threads the kernel pins (PF_NO_SETAFFINITY), zombies,
//! the tracker's own process, and anything outside the scope.

use crate::connector::{Connector, ProcEvent};
use crate::procfs::{Proc, TaskStat};
use crate::sys::{self, OsMask};
use serde::Deserialize;
use std::collections::{HashMap, HashSet};

/// With the connector, the reconciling scan of /proc runs every this many intervals (3 s at the
/// default interval); without it, every interval.
pub const FULL_SCAN_EVERY: u64 = 30;

/// The longest command name the kernel keeps (`TASK_COMM_LEN` less its terminating zero).
pub const MAX_COMM_BYTES: usize = 15;

/// Looks for threads started during the restore at a stop ([`Tracker::late_starts`]).
const LATE_LOOKS: usize = 4;

/// A daemon rule's match: every field given must hold. Values that could never match, or would
/// match every process, are refused when the configuration is read (the error names the line).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// The command name (`/proc/<pid>/comm`, 15 bytes at most), exactly.
    #[serde(default, deserialize_with = "comm_name")]
    pub comm: Option<String>,
    /// The executable's path, exactly.
    #[serde(default, deserialize_with = "exe_path")]
    pub exe: Option<String>,
    /// A cgroup path prefix (`/user.slice`), matched by whole path components.
    #[serde(default, deserialize_with = "cgroup_prefix")]
    pub cgroup: Option<String>,
    /// The real user id.
    pub uid: Option<u32>,
}

fn comm_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let c = String::deserialize(d)?;
    if c.is_empty() {
        return Err(serde::de::Error::custom(
            "empty: no process has an empty command name",
        ));
    }
    if c.len() > MAX_COMM_BYTES {
        return Err(serde::de::Error::custom(format!(
            "{c:?} is {} bytes; the kernel keeps at most {MAX_COMM_BYTES} of a command name (`{}` would match), so it never matches",
            c.len(),
            truncate_comm(&c)
        )));
    }
    Ok(Some(c))
}

/// The command name the kernel keeps of `name`: its first 15 bytes (on a character boundary).
fn truncate_comm(name: &str) -> &str {
    let mut end = MAX_COMM_BYTES.min(name.len());
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

fn exe_path<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let e = String::deserialize(d)?;
    if e.is_empty() {
        return Err(serde::de::Error::custom(
            "empty: no process runs an executable without a path",
        ));
    }
    Ok(Some(e))
}

fn cgroup_prefix<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let c = String::deserialize(d)?;
    if std::path::Path::new(&c)
        .components()
        .all(|p| p == std::path::Component::RootDir)
    {
        return Err(serde::de::Error::custom(format!(
            "{c:?} would match every process; give a cgroup path such as \"/user.slice\""
        )));
    }
    Ok(Some(c))
}

/// Whether cgroup path `path` is `prefix` or lies under it, by whole components
/// (`/app-1` holds `/app-1/x`, not `/app-10`).
pub fn cgroup_under(path: &str, prefix: &str) -> bool {
    std::path::Path::new(path).starts_with(prefix)
}

/// A mask an engine set on threads, with the time it was held (clock ticks after boot, as the
/// start times in /proc): a process started within that time with exactly that mask may have
/// inherited it from a thread that held it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinWindow {
    pub mask: OsMask,
    /// When it was first set.
    pub since_ticks: u64,
    /// When a thread last stopped holding it; `u64::MAX` while one does.
    pub until_ticks: u64,
}

/// Start times are in whole clock ticks, and a pin's times are read from another clock: this
/// much slack either side.
const PIN_SLACK_TICKS: u64 = 2;

impl PinWindow {
    /// Whether a process started at `start_ticks` can have been created by a thread holding it.
    pub fn covers(&self, start_ticks: u64) -> bool {
        start_ticks + PIN_SLACK_TICKS >= self.since_ticks
            && start_ticks <= self.until_ticks.saturating_add(PIN_SLACK_TICKS)
    }
}

impl Match {
    pub fn is_empty(&self) -> bool {
        self.comm.is_none() && self.exe.is_none() && self.cgroup.is_none() && self.uid.is_none()
    }

    fn matches(&self, proc: &Proc, pid: u32, comm: &str) -> bool {
        if self.comm.as_deref().is_some_and(|c| c != comm) {
            return false;
        }
        if let Some(exe) = &self.exe {
            if proc.exe(pid).as_deref() != Some(std::path::Path::new(exe)) {
                return false;
            }
        }
        if let Some(prefix) = &self.cgroup {
            if !proc.cgroup(pid).is_some_and(|c| cgroup_under(&c, prefix)) {
                return false;
            }
        }
        if let Some(uid) = self.uid {
            if proc.uid(pid) != Some(uid) {
                return false;
            }
        }
        true
    }
}

/// What to manage.
#[derive(Clone, Debug)]
pub enum Scope {
    /// The process `root` and all its descendants (`run`).
    Tree { root: u32 },
    /// Processes matching a rule; a process belongs to the first rule it matches, and a process
    /// started by a managed one to its creator's rule, whether it matches or not (`daemon`).
    Rules(Vec<Match>),
}

/// A managed thread, as the tracker found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub pid: u32,
    pub tid: u32,
    /// Start time, clock ticks after boot: with `tid`, a name no other thread will have.
    pub start_ticks: u64,
    /// The rule it matched (always 0 for a tree).
    pub group: usize,
    /// The parent of its process.
    pub ppid: u32,
}

#[derive(Clone, Copy, Debug)]
struct ProcEntry {
    start_ticks: u64,
    group: usize,
    /// Its process group when it was taken in: an orphan is taken for one of its descendants
    /// only in the process group of a managed process ([`Tracker::orphan_group`]).
    pgrp: u32,
    /// Its thread count when its threads were last listed (`u32::MAX`: never).
    listed_threads: u32,
}

impl ProcEntry {
    fn new(stat: &TaskStat, group: usize) -> Self {
        ProcEntry {
            start_ticks: stat.start_ticks,
            group,
            pgrp: stat.pgrp,
            listed_threads: u32::MAX,
        }
    }
}

/// What changed since the last call. Threads started are in (process, thread) id order, so a
/// process's main thread, and usually a creator, comes before what it created
/// ([`Changes::sort`]).
#[derive(Debug, Default)]
pub struct Changes {
    pub started: Vec<Found>,
    /// Thread ids that are gone (exited, or their process left the scope).
    pub exited: Vec<u32>,
    /// Managed processes that called exec (their name changed).
    pub renamed: Vec<u32>,
}

impl Changes {
    /// Order `started` by process, then thread id.
    pub fn sort(&mut self) {
        self.started.sort_by_key(|f| (f.pid, f.tid));
    }
}

/// The tracker.
pub struct Tracker {
    proc: Proc,
    scope: Scope,
    own_pid: u32,
    /// Managed processes.
    procs: HashMap<u32, ProcEntry>,
    /// Processes seen and found outside the scope, by start time (a reused id is looked at anew).
    outside: HashMap<u32, u64>,
    threads: HashMap<u32, Found>,
    /// Threads found untouchable, never reported.
    untouchable: HashSet<u32>,
    connector: Option<Connector>,
    events: Vec<ProcEvent>,
    /// Children of managed processes already gone when their fork event was read, by rule, until
    /// their exit event: what they forked before exiting (a double fork's grandchild) comes
    /// after, and is theirs.
    gone_children: HashMap<u32, usize>,
    /// Events were lost since the last scan: it drops every managed process gone from /proc.
    reconcile: bool,
    /// Events received from the connector, and times it lost some.
    pub events_seen: u64,
    pub events_lost: u64,
    /// Scans of /proc so far.
    pub scans: u64,
    calls: u64,
    /// Masks the engines set, by rule: an orphan started with one of them joins that rule.
    pins: Vec<(usize, PinWindow)>,
}

impl Tracker {
    /// A tracker of `scope` over `proc`; with `use_connector`, subscribe to process events if the
    /// kernel lets us.
    pub fn new(proc: Proc, scope: Scope, use_connector: bool) -> Tracker {
        let connector = if use_connector {
            Connector::subscribe()
                .map_err(|e| {
                    tracing::info!("process events connector unavailable ({e}); polling /proc");
                })
                .ok()
        } else {
            None
        };
        let mut procs = HashMap::new();
        if let Scope::Tree { root } = scope {
            if let Some(stat) = proc.process_stat(root) {
                procs.insert(root, ProcEntry::new(&stat, 0));
            }
        }
        Tracker {
            proc,
            scope,
            own_pid: std::process::id(),
            procs,
            outside: HashMap::new(),
            threads: HashMap::new(),
            untouchable: HashSet::new(),
            connector,
            events: Vec::new(),
            gone_children: HashMap::new(),
            reconcile: false,
            events_seen: 0,
            events_lost: 0,
            scans: 0,
            calls: 0,
            pins: Vec::new(),
        }
    }

    /// The masks each rule's engine set and when ([`Scope::Rules`] only): a new process whose
    /// parent exited (it was reparented to init or to us) and whose mask is one of them,
    /// started while it was held, was created by a managed process and joins its rule.
    pub fn set_pins(&mut self, pins: Vec<(usize, PinWindow)>) {
        self.pins = pins;
    }

    /// The rule of a pin process `pid` inherited, when its creator is gone and how it came to be
    /// is not known otherwise: without the connector (or after it lost events) a managed
    /// process's child that outlived its parent between two scans is found with ppid 1 and a mask
    /// we set. A mask alone is no proof (a user's `taskset -c 0 job &` has the same), so it must
    /// also be in the process group of a managed process of that rule, as a forked child is unless
    /// it left it. With the connector's complete stream every fork was seen as it happened and no
    /// process is taken on a guess.
    fn orphan_group(&self, pid: u32, stat: &TaskStat) -> Option<usize> {
        if self.pins.is_empty() || (self.connector.is_some() && self.events_lost == 0) {
            return None;
        }
        let orphan = stat.ppid == 1
            || stat.ppid == self.own_pid
            || self
                .proc
                .process_stat(stat.ppid)
                .is_none_or(|p| p.is_dead());
        if !orphan {
            return None;
        }
        let mask = sys::get_affinity(pid).ok()?;
        self.pins
            .iter()
            .filter(|(_, p)| p.mask == mask && p.covers(stat.start_ticks))
            .map(|&(g, _)| g)
            .find(|&g| {
                self.procs
                    .values()
                    .any(|e| e.group == g && e.pgrp == stat.pgrp)
            })
    }

    /// The connector's descriptor, to wait on; `None` when polling only.
    pub fn event_fd(&self) -> Option<std::os::fd::RawFd> {
        self.connector.as_ref().map(std::os::fd::AsRawFd::as_raw_fd)
    }

    pub fn uses_connector(&self) -> bool {
        self.connector.is_some()
    }

    pub fn proc(&self) -> &Proc {
        &self.proc
    }

    /// The managed threads now.
    pub fn threads(&self) -> impl Iterator<Item = &Found> {
        self.threads.values()
    }

    pub fn is_managed_process(&self, pid: u32) -> bool {
        self.procs.contains_key(&pid)
    }

    /// Which rule a new process falls under, if any.
    fn classify(&self, pid: u32) -> Option<(TaskStat, Option<usize>)> {
        let stat = self.proc.process_stat(pid)?;
        if pid == self.own_pid || stat.is_untouchable() {
            return Some((stat, None));
        }
        let group = match &self.scope {
            Scope::Tree { root } => {
                let in_tree = pid == *root
                    || self.procs.contains_key(&stat.ppid)
                    // Orphans of the tree reparent to us (we are its subreaper).
                    || (stat.ppid == self.own_pid && *root != self.own_pid);
                in_tree.then_some(0)
            }
            // A child of a managed process is its parent's, as the connector's fork event makes
            // it; then the rules; then a pin inherited from a creator that is gone.
            Scope::Rules(rules) => self
                .procs
                .get(&stat.ppid)
                .map(|p| p.group)
                .or_else(|| {
                    rules
                        .iter()
                        .position(|m| m.matches(&self.proc, pid, &stat.comm))
                })
                .or_else(|| self.orphan_group(pid, &stat)),
        };
        Some((stat, group))
    }

    /// Take pending connector events and turn them into changes at once: a new thread of a
    /// managed process, a new child of one, a process whose exec makes it match a rule, a managed
    /// thread's exit. Returns true when events were lost and a full [`scan`](Self::scan) is due.
    pub fn take_events(&mut self, changes: &mut Changes) -> bool {
        let Some(c) = &self.connector else {
            return false;
        };
        self.events.clear();
        let complete = c.drain(&mut self.events);
        if !complete {
            self.events_lost += 1;
            // Their exit events may be among those lost; the scan that follows looks anew.
            self.gone_children.clear();
            self.reconcile = true;
        }
        self.events_seen += self.events.len() as u64;
        for ev in std::mem::take(&mut self.events) {
            match ev {
                ProcEvent::Fork {
                    parent_pid,
                    child_pid,
                    child_tid,
                } => {
                    // A child of a managed process (or of one already gone) joins its parent's
                    // group before it can exit again unseen, even if a scan that ran ahead of
                    // this event took it for an outsider (its parent gone, it looked like an
                    // orphan); anything else is looked at once.
                    let parent_group = self
                        .procs
                        .get(&parent_pid)
                        .map(|p| p.group)
                        .or_else(|| self.gone_children.get(&parent_pid).copied())
                        .filter(|_| child_pid == child_tid);
                    if let Some(e) = self.procs.get(&child_pid).copied() {
                        self.found_thread(child_pid, child_tid, e.group, changes);
                    } else if let Some(g) = parent_group {
                        self.outside.remove(&child_pid);
                        if !self.add_process(child_pid, g, changes) {
                            self.gone_children.insert(child_pid, g);
                        }
                    } else if !self.outside.contains_key(&child_pid) {
                        match self.classify(child_pid) {
                            Some((_, Some(g))) => {
                                let _ = self.add_process(child_pid, g, changes);
                            }
                            Some((stat, None)) => {
                                self.outside.insert(child_pid, stat.start_ticks);
                            }
                            None => {}
                        }
                    }
                }
                ProcEvent::Exec { pid } => {
                    if self.procs.contains_key(&pid) {
                        changes.renamed.push(pid);
                    }
                    // Rules match on comm and exe, which exec changes.
                    if matches!(self.scope, Scope::Rules(_)) && !self.procs.contains_key(&pid) {
                        self.outside.remove(&pid);
                        if let Some((_, Some(group))) = self.classify(pid) {
                            let _ = self.add_process(pid, group, changes);
                        }
                    }
                }
                ProcEvent::Exit { pid, tid } => {
                    if pid == tid {
                        // Its fork events all came before this one.
                        self.gone_children.remove(&pid);
                        self.procs.remove(&pid);
                    }
                    if self.threads.remove(&tid).is_some() {
                        changes.exited.push(tid);
                    }
                }
            }
        }
        !complete
    }

    /// Everything that happened up to now, before the affinities are given back: the
    /// connector's pending events (a full scan as well when it lost some), or without it a full
    /// scan. A child a managed thread forked a moment ago carries its pin, and is restored with
    /// the rest only if it is known by then.
    pub fn catch_up(&mut self, changes: &mut Changes) {
        let lost = self.take_events(changes);
        if self.connector.is_none() || lost {
            self.scan(changes);
        }
    }

    /// After the engines gave every affinity back: the threads that managed ones started between
    /// the last look and their own restore (they inherited a pin), each handed to `late`; looked
    /// for again until a look finds none, at most [`LATE_LOOKS`] times (a thread started after
    /// its creator's restore inherits the restored mask, so a few looks suffice).
    pub fn late_starts(&mut self, changes: &mut Changes, mut late: impl FnMut(Found)) {
        for _ in 0..LATE_LOOKS {
            self.catch_up(changes);
            changes.exited.clear();
            changes.renamed.clear();
            if changes.started.is_empty() {
                return;
            }
            changes.sort();
            for f in changes.started.drain(..) {
                late(f);
            }
        }
    }

    /// Take process `pid` into rule `group` with its threads; false when it is gone already.
    fn add_process(&mut self, pid: u32, group: usize, changes: &mut Changes) -> bool {
        let Some(stat) = self.proc.process_stat(pid) else {
            return false;
        };
        self.procs.insert(pid, ProcEntry::new(&stat, group));
        for tid in self.proc.tids(pid) {
            self.found_thread(pid, tid, group, changes);
        }
        true
    }

    /// A thread of a managed process that the tracker has not seen yet (a hint may arrive before
    /// the event of the thread's creation): take it in now.
    pub fn adopt(&mut self, tid: u32) -> Option<Found> {
        if self.threads.contains_key(&tid) {
            return None;
        }
        let pid = self.proc.tgid_of(tid)?;
        let mut changes = Changes::default();
        match self.procs.get(&pid) {
            Some(e) => {
                let group = e.group;
                self.found_thread(pid, tid, group, &mut changes);
            }
            // A process of the scope not seen yet (its fork event may be on its way too).
            None => {
                if let Some((_, Some(group))) = self.classify(pid) {
                    let _ = self.add_process(pid, group, &mut changes);
                }
            }
        }
        changes.started.retain(|f| f.tid == tid);
        changes.started.pop()
    }

    fn found_thread(&mut self, pid: u32, tid: u32, group: usize, changes: &mut Changes) {
        if self.threads.contains_key(&tid) || self.untouchable.contains(&tid) {
            return;
        }
        if let Some(f) = examine(&self.proc, &mut self.untouchable, pid, tid, group) {
            changes.started.push(f);
            self.threads.insert(tid, f);
        }
    }

    /// Once an interval: with the connector, every [`FULL_SCAN_EVERY`]th call reconciles (the
    /// events did the rest); without it, every call looks for new processes and lists the threads
    /// of processes whose thread count changed, and every [`FULL_SCAN_EVERY`]th lists them all.
    pub fn periodic(&mut self, changes: &mut Changes) {
        self.calls += 1;
        self.shrink();
        let full = self.calls % FULL_SCAN_EVERY == 1;
        if self.connector.is_some() && !full {
            return;
        }
        self.scan_inner(changes, full);
    }

    /// Give back what a burst of threads left allocated in the tables (bounded memory: the tracker
    /// returns to the size of what it tracks now).
    fn shrink(&mut self) {
        let mut shrunk = false;
        if sys::oversized(self.threads.capacity(), self.threads.len()) {
            self.threads.shrink_to_fit();
            shrunk = true;
        }
        if sys::oversized(self.untouchable.capacity(), self.untouchable.len()) {
            self.untouchable.shrink_to_fit();
            shrunk = true;
        }
        if sys::oversized(self.procs.capacity(), self.procs.len()) {
            self.procs.shrink_to_fit();
            shrunk = true;
        }
        if sys::oversized(self.outside.capacity(), self.outside.len()) {
            self.outside.shrink_to_fit();
            shrunk = true;
        }
        if sys::oversized(self.gone_children.capacity(), self.gone_children.len()) {
            self.gone_children.shrink_to_fit();
            shrunk = true;
        }
        if sys::oversized(self.events.capacity(), self.events.len()) {
            self.events.shrink_to_fit();
            shrunk = true;
        }
        if shrunk {
            sys::release_free_memory();
        }
    }

    /// Reconcile with /proc now: find new processes and threads of the scope, drop those gone.
    pub fn scan(&mut self, changes: &mut Changes) {
        self.scan_inner(changes, true);
    }

    fn scan_inner(&mut self, changes: &mut Changes, full: bool) {
        self.scans += 1;
        // With the connector, the events queued so far first: a process is then listed below
        // only with its creator known (a scan that ran ahead of a fork event took the child of a
        // double fork, its parent gone, for an orphan outside the scope).
        let by_events = match self.connector {
            // Events lost, now or since the last scan, set `reconcile`.
            Some(_) => {
                let _ = self.take_events(changes);
                !std::mem::take(&mut self.reconcile)
            }
            None => false,
        };
        let pids = match self.proc.pids() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("cannot list {}: {e}", self.proc.root().display());
                return;
            }
        };
        let alive: HashSet<u32> = pids.iter().copied().collect();
        // Processes gone, or replaced by another with the same id; the others' thread counts.
        // While the connector's stream is complete a managed process leaves at its exit event,
        // which comes after every fork event of its (one of which may still be queued), so an
        // exiting or vanished one stays until then; a reused id leaves at once.
        let mut counts: HashMap<u32, u32> = HashMap::with_capacity(self.procs.len());
        let proc = &self.proc;
        self.procs.retain(|pid, e| {
            let stat = alive
                .contains(pid)
                .then(|| proc.process_stat(*pid))
                .flatten();
            match stat {
                Some(s) if s.start_ticks == e.start_ticks => {
                    counts.insert(*pid, s.num_threads);
                    !s.is_dead() || by_events
                }
                Some(_) => false,
                None => by_events,
            }
        });
        self.outside.retain(|pid, _| alive.contains(pid));
        // New processes: parents before children, so one pass finds a whole new subtree.
        let mut fresh: Vec<u32> = pids
            .into_iter()
            .filter(|p| !self.procs.contains_key(p) && !self.outside.contains_key(p))
            .collect();
        fresh.sort_unstable();
        let mut pending = fresh;
        loop {
            let mut progressed = false;
            let mut still = Vec::new();
            for pid in pending {
                match self.classify(pid) {
                    Some((stat, Some(group))) => {
                        self.procs.insert(pid, ProcEntry::new(&stat, group));
                        progressed = true;
                    }
                    Some((stat, None)) => still.push((pid, stat.start_ticks)),
                    None => {}
                }
            }
            // Again while some were taken in: their children follow them.
            if !progressed {
                for (pid, start) in still {
                    self.outside.insert(pid, start);
                }
                break;
            }
            pending = still.into_iter().map(|(p, _)| p).collect();
        }
        // Threads.
        let mut now: HashMap<u32, Found> = HashMap::with_capacity(self.threads.len());
        let mut unchanged: HashSet<u32> = HashSet::new();
        for (&pid, e) in &mut self.procs {
            let count = counts.get(&pid).copied();
            if !full && count.is_some() && count == Some(e.listed_threads) {
                unchanged.insert(pid);
                continue;
            }
            if let Some(c) = count {
                e.listed_threads = c;
            }
            for tid in self.proc.tids(pid) {
                if self.untouchable.contains(&tid) {
                    continue;
                }
                if let Some(f) = self.threads.get(&tid) {
                    if f.pid == pid {
                        now.insert(tid, *f);
                        continue;
                    }
                }
                if let Some(f) = examine(&self.proc, &mut self.untouchable, pid, tid, e.group) {
                    changes.started.push(f);
                    now.insert(tid, f);
                }
            }
        }
        // Processes whose thread count did not change keep the threads they had.
        for (tid, f) in &self.threads {
            if unchanged.contains(&f.pid) {
                now.insert(*tid, *f);
            }
        }
        for (tid, f) in &self.threads {
            match now.get(tid) {
                Some(n) if n.start_ticks == f.start_ticks => {}
                _ => changes.exited.push(*tid),
            }
        }
        self.untouchable
            .retain(|t| alive.contains(t) || now.contains_key(t));
        self.threads = now;
    }
}

/// A thread not seen before: `None` when it is gone (between a listing and the read), dead, or
/// untouchable (then remembered in `untouchable`, so it is never read again).
fn examine(
    proc: &Proc,
    untouchable: &mut HashSet<u32>,
    pid: u32,
    tid: u32,
    group: usize,
) -> Option<Found> {
    let stat = proc.task_stat(pid, tid)?;
    if stat.is_dead() {
        return None;
    }
    if stat.is_untouchable() {
        untouchable.insert(tid);
        return None;
    }
    Some(Found {
        pid,
        tid,
        start_ticks: stat.start_ticks,
        group,
        ppid: stat.ppid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn finds_a_child_tree_and_its_exit() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 5 & sleep 5; wait"])
            .spawn()
            .unwrap();
        let root = child.id();
        let mut t = Tracker::new(Proc::default(), Scope::Tree { root }, false);
        let mut ch = Changes::default();
        // The grandchild may take a moment to appear.
        for _ in 0..50 {
            t.scan(&mut ch);
            if t.procs.len() >= 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // sh and two sleeps; a scan that lands between a fork and its exec may also see the
        // shell's short-lived copy, which exits right away.
        assert!(
            (3..=4).contains(&t.procs.len()),
            "sh and two sleeps: {}",
            t.procs.len()
        );
        assert!(ch.started.iter().any(|f| f.tid == root));
        assert!(!t.is_managed_process(std::process::id()));
        child.kill().unwrap();
        child.wait().unwrap();
        let mut ch = Changes::default();
        t.scan(&mut ch);
        assert!(ch.exited.contains(&root));
        assert!(!t.is_managed_process(root));
    }

    #[test]
    fn cgroup_prefixes_match_whole_components() {
        assert!(cgroup_under("/app-1", "/app-1"));
        assert!(cgroup_under("/app-1/x.scope", "/app-1"));
        assert!(cgroup_under("/app-1/x.scope", "/app-1/"));
        assert!(!cgroup_under("/app-10", "/app-1"));
        assert!(!cgroup_under(
            "/user.slice/user-1000.slice",
            "/user.slice/user-1"
        ));
        assert!(cgroup_under("/user.slice/user-1000.slice", "/user.slice"));
    }

    /// Without the connector as with it, a process started by a managed one belongs to its
    /// parent's rule, whatever its name (before, the /proc scan matched it by the rules alone
    /// and left it outside).
    #[test]
    fn a_child_of_a_managed_process_joins_its_rule_without_the_connector() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 5 & wait"])
            .spawn()
            .unwrap();
        let root = child.id();
        let proc = Proc::default();
        // The scan comes once the child runs `sleep` (not the shell's copy, which the rule
        // would match by its name).
        let mut sleep = None;
        for _ in 0..500 {
            let kids = std::fs::read_to_string(format!("/proc/{root}/task/{root}/children"))
                .unwrap_or_default();
            sleep = kids
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .find(|&p| proc.process_stat(p).is_some_and(|s| s.comm == "sleep"));
            if sleep.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let sleep = sleep.expect("the shell started sleep");
        let rules = vec![Match {
            comm: Some("sh".into()),
            uid: Some(proc.uid(std::process::id()).unwrap()),
            ..Default::default()
        }];
        let mut t = Tracker::new(proc, Scope::Rules(rules), false);
        let mut ch = Changes::default();
        t.scan(&mut ch);
        let found = ch.started.iter().find(|f| f.pid == sleep).copied();
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(sleep as i32, libc::SIGKILL) };
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(t.is_managed_process(root));
        assert_eq!(found.map(|f| f.group), Some(0), "the sleep is its parent's");
    }

    #[test]
    fn rules_match_on_comm() {
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        let rules = vec![
            Match {
                comm: Some("no-such-comm".into()),
                ..Default::default()
            },
            Match {
                comm: Some("sleep".into()),
                uid: Some(Proc::default().uid(std::process::id()).unwrap()),
                ..Default::default()
            },
        ];
        let mut t = Tracker::new(Proc::default(), Scope::Rules(rules), false);
        let mut ch = Changes::default();
        t.scan(&mut ch);
        let f = ch.started.iter().find(|f| f.pid == child.id()).copied();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(f.map(|f| f.group), Some(1));
        // Kernel threads never appear.
        assert!(ch.started.iter().all(|f| f.pid != 2));
    }
}
