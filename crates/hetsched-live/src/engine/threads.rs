//! Threads joining and leaving: a thread the tracker found (its user mask, counters and stat
//! file; a start the process budget refuses is watched through /proc alone), a thread gone, the
//! processes behind them (retired when their last thread is gone and they have ended), exec
//! renames, and the compaction that gives back what churn left allocated.

use super::*;

impl Engine {
    /// Process `pid` called exec: it goes by its new name from now on, and its threads get the
    /// new program's stored signature, if it has one, as a signature hint.
    pub fn process_renamed(&mut self, pid: u32) {
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        if let Some(stat) = self.proc.task_stat(pid, pid) {
            p.name = stat.comm;
        }
        if self.stored.is_none() {
            return;
        }
        let signature = self.stored_signature(pid);
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        let unchanged = match (&p.signature, &signature) {
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b) || a == b,
            _ => false,
        };
        p.signature = signature.clone();
        // The exec event can be read after the process was first seen already running the new
        // program: its threads carry this signature from their start.
        let Some(sig) = signature.filter(|_| !unchanged) else {
            return;
        };
        let tids: Vec<u32> = self
            .slots
            .iter()
            .filter(|s| s.alive && s.pid == pid)
            .map(|s| s.tid)
            .collect();
        for tid in tids {
            self.hint(tid, &Hint::Signature(sig.clone()));
        }
    }

    /// A thread the tracker found. Returns false when it is not managed after all (gone, or only
    /// allowed on isolated CPUs).
    pub fn add(&mut self, f: Found) -> bool {
        if self.manages(f.tid) {
            return true;
        }
        let Ok(current) = sys::get_affinity(f.tid) else {
            return false;
        };
        // A thread or process started by one we had moved inherits our mask, not the user's: it
        // gets its creator's original, and a journal entry, so it is restored like its creator.
        let packed = PackedMask::pack(&current);
        // A process whose creator is gone (a double fork: the parent exits right after the fork,
        // often before the child is seen) is known by the pin it carries instead.
        let (original, inherited) = match self.creator_original(&f, &packed) {
            Some(o) => (o, true),
            None => match self.orphan_original(&f, &packed) {
                Some(o) => (o, true),
                None => (current, false),
            },
        };
        let user = self.cpus.to_cores(&original).intersection(&self.managed);
        if user.is_empty() {
            return false;
        }
        // Its counters and its stat file, each while the process's descriptor budget allows:
        // past it a thread is watched through /proc alone (no counters, its stat opened at each
        // read), never left half-managed.
        let counter_fds = self.plan.fds_per_thread();
        let mut short = false;
        let counters = if counter_fds > 0 && sys::FD_BUDGET.take(counter_fds) {
            match self.plan.open(f.tid) {
                Ok(c) => Some(c),
                Err(e) => {
                    sys::FD_BUDGET.give_back(counter_fds);
                    if let SysError::Gone(_) = e {
                        return false;
                    }
                    tracing::debug!("counters: {e}");
                    None
                }
            }
        } else {
            short = counter_fds > 0;
            None
        };
        let stat = if sys::FD_BUDGET.take(1) {
            let f = File::open(self.proc.task_dir(f.pid, f.tid).join("stat")).ok();
            if f.is_none() {
                sys::FD_BUDGET.give_back(1);
            }
            f
        } else {
            short = true;
            None
        };
        let fds = counters.as_ref().map_or(0, |_| counter_fds) + u64::from(stat.is_some());
        if short && !self.fd_limit_reached {
            self.fd_limit_reached = true;
            self.notices.push(format!(
                "the open-file limit leaves {} descriptors for threads: from thread {} on, threads are watched through /proc alone (raise `ulimit -n` for counters on every thread)",
                sys::FD_BUDGET.limit(),
                self.live + 1
            ));
        }
        if self
            .procs
            .get(&f.pid)
            .is_some_and(|p| p.threads == 0 && !self.process_lives(f.pid, p.start_ticks))
        {
            // The pid is another process's now.
            self.retire_process(f.pid);
        }
        // A process seen for the first time: its program's stored signature, if any.
        let signature = if self.procs.contains_key(&f.pid) {
            None
        } else {
            self.stored_signature(f.pid)
        };
        let next_app = &mut self.next_app;
        let proc = &self.proc;
        let process = self.procs.entry(f.pid).or_insert_with(|| {
            let app = AppId(*next_app);
            *next_app = next_app.wrapping_add(1);
            // Named after its main thread (or this one, when the main thread is gone).
            let leader = proc.task_stat(f.pid, f.pid);
            LiveProcess {
                app,
                start_ticks: leader.as_ref().map_or(0, |s| s.start_ticks),
                name: leader
                    .or_else(|| proc.task_stat(f.pid, f.tid))
                    .map(|s| s.comm)
                    .unwrap_or_default(),
                threads: 0,
                signature,
            }
        });
        process.threads += 1;
        let app = process.app;
        let signature = process.signature.clone();
        let slot = Slot {
            fds,
            tid: f.tid,
            pid: f.pid,
            start_ticks: f.start_ticks,
            stat,
            counters,
            original: PackedMask::pack(&original),
            applied: inherited.then(|| PackedMask::pack(&current)),
            last_move_ns: None,
            class_ns: vec![0.0; self.topology.classes().len()],
            last_cpu_ns: 0.0,
            last_processor: None,
            placements_applied: 0,
            alive: true,
            idle_streak: 0,
            next_read: 0,
            last_read_ns: self.now_ns,
            reads: 0,
        };
        let nodes = self.topology.nodes().len();
        // An exited thread's id is reused: policies take `on_thread_start` of an id as a new thread.
        let id = match self.free.pop() {
            Some(id) => {
                self.obs[id.index()] = ThreadObs::new(id, app, user, nodes);
                self.slots[id.index()] = slot;
                id
            }
            None => {
                let id = ThreadId(self.obs.len() as u32);
                self.obs.push(ThreadObs::new(id, app, user, nodes));
                self.slots.push(slot);
                id
            }
        };
        self.live += 1;
        self.threads_seen += 1;
        self.threads_peak = self.threads_peak.max(self.live);
        self.by_tid.insert(f.tid, id);
        if let Some(sig) = signature {
            // Known before the policy hears of the thread, as a signature in a workload file.
            self.signatures_seen = true;
            self.obs[id.index()].signature = Some(sig);
        }
        if inherited {
            self.obs[id.index()].allowed = self.cpus.to_cores(&current).intersection(&self.managed);
            if let Some(j) = self.journal.as_mut() {
                // Written with the next batch of changes, or at the next interval.
                j.record(f.tid, f.start_ticks, &original, &current, &current);
                self.journal_dirty = true;
            }
        }
        self.refresh_one(id.index());
        // Counted where it runs, as if it had been there at the last read: the cores' counts
        // and the threads' states stay one picture between reads.
        if let (ThreadState::Runnable | ThreadState::Running, Some(c)) =
            (self.obs[id.index()].state, self.obs[id.index()].cpu)
        {
            self.cores[c.index()].runnable += 1;
        }
        let placed = match self.call(|p, v, _| p.on_thread_start(v, id)) {
            Some(Some(cpus)) => Some(cpus),
            // Not placed by the policy: an inherited pin is not the thread's, so it gets its
            // user's mask back at once (never a sibling's or creator's placement).
            _ if inherited => Some(self.obs[id.index()].user_allowed.clone()),
            _ => None,
        };
        if let Some(cpus) = placed {
            // Counted at once on the least loaded core of its placement, as the simulator counts
            // a thread where it starts (a new thread found asleep is about to run): the next
            // thread of the same pass sees it there, so a burst of new threads spreads instead
            // of all taking the core that looked idlest at the last read. The next interval
            // reads the cores afresh.
            let o = &mut self.obs[id.index()];
            if o.state == ThreadState::Blocked {
                o.state = ThreadState::Runnable;
                o.cpu = None;
            }
            self.settle(id.index(), &cpus);
            // Applied with the rest of the batch, in [`sync_journal`](Self::sync_journal): one
            // journal write for a process that brings ten thousand threads, not one each.
            self.first_placements.push(Placement { thread: id, cpus });
        }
        true
    }

    /// A thread the tracker found in scope after [`restore_all`](Self::restore_all) (a managed
    /// thread made it between the last look and its own restore): if it carries a pin the engine
    /// set, it gets the original mask behind it, as its creator did: its creator's (a thread of
    /// the same process, or its parent) when the engine knew the creator, else, for a process
    /// whose parent exited at once (a double fork's grandchild), that of the pin held when it
    /// started. Any other thread is left as it is. True when a mask was given back.
    pub fn restore_late(&mut self, f: &Found) -> bool {
        if self.manages(f.tid) {
            return false;
        }
        let Ok(current) = sys::get_affinity(f.tid) else {
            return false;
        };
        let packed = PackedMask::pack(&current);
        let Some(original) = self
            .creator_original(f, &packed)
            .or_else(|| self.pin_original(&packed, f.start_ticks))
        else {
            return false;
        };
        let given = sys::set_affinity(f.tid, &original).is_ok();
        if given {
            self.restored.restored += 1;
        }
        given
    }

    /// A thread is gone: the policy is told, what it did is folded into the totals, and its
    /// slot and id wait for the next new thread.
    pub fn remove(&mut self, tid: u32) {
        let Some(id) = self.by_tid.remove(&tid) else {
            return;
        };
        let s = &mut self.slots[id.index()];
        if !s.alive {
            return;
        }
        s.alive = false;
        if let Some(held) = s.applied.clone() {
            self.release_pin(&held);
        }
        let s = &mut self.slots[id.index()];
        s.stat = None;
        s.counters = None;
        sys::FD_BUDGET.give_back(s.fds);
        let pid = s.pid;
        self.uncount(id.index());
        let o = &mut self.obs[id.index()];
        o.state = ThreadState::Exited;
        o.cpu = None;
        // Bounded memory: an exited thread keeps only its fixed-size record.
        o.resident_bytes = Vec::new();
        o.signature = None;
        if let Some(j) = self.journal.as_mut() {
            j.forget(tid);
        }
        self.call(|p, v, _| p.on_thread_exit(v, id));
        self.live -= 1;
        let s = &mut self.slots[id.index()];
        let name = self.procs.get(&pid).map_or("", |p| p.name.as_str());
        self.totals.thread(name, s);
        if let Some(p) = self.procs.get_mut(&pid) {
            p.threads -= 1;
            let start = p.start_ticks;
            if p.threads == 0 && !self.process_lives(pid, start) {
                self.retire_process(pid);
            }
        }
        self.free.push(id);
    }

    /// A thread whose mask was `original` now holds `applied`, set by the engine.
    pub(super) fn note_pin(&mut self, applied: &OsMask, original: &PackedMask) {
        let applied = PackedMask::pack(applied);
        let now = crate::procfs::boot_ticks();
        if let Some(p) = self
            .pins
            .iter_mut()
            .find(|p| p.applied == applied && p.original == *original)
        {
            p.released_ticks = p.released_ticks.max(now);
            return;
        }
        if self.pins.len() >= MAX_PINS {
            if let Some(oldest) = self
                .pins
                .iter()
                .enumerate()
                .min_by_key(|(_, p)| p.released_ticks)
                .map(|(i, _)| i)
            {
                self.pins.swap_remove(oldest);
            }
        }
        self.pins.push(Pin {
            applied,
            original: original.clone(),
            since_ticks: now,
            released_ticks: now,
        });
    }

    /// A thread stopped holding `applied` (it exited, was placed elsewhere, or was restored).
    pub(super) fn release_pin(&mut self, applied: &PackedMask) {
        let now = crate::procfs::boot_ticks();
        for p in self.pins.iter_mut().filter(|p| p.applied == *applied) {
            p.released_ticks = p.released_ticks.max(now);
        }
    }

    fn pin_held(&self, applied: &PackedMask) -> bool {
        self.slots
            .iter()
            .any(|s| s.alive && s.applied.as_ref() == Some(applied))
    }

    fn window(&self, p: &Pin) -> PinWindow {
        PinWindow {
            mask: p.applied.unpack(),
            since_ticks: p.since_ticks,
            until_ticks: if self.pin_held(&p.applied) {
                u64::MAX
            } else {
                p.released_ticks
            },
        }
    }

    /// The masks the engine set and when they were held, for the tracker to recognise a process
    /// that inherited one from a creator that is gone.
    pub fn pins(&self) -> impl Iterator<Item = PinWindow> + '_ {
        self.pins.iter().map(|p| self.window(p))
    }

    /// The original mask behind the pin that new process `f` inherited from a creator that is
    /// gone: its main thread has exactly a mask the engine set, it started while a thread held
    /// that mask, and its parent has exited or is the reaper it was handed to (init, or hetsched
    /// as the subreaper of `run`'s tree). Of several such pins, the one held last.
    fn orphan_original(&self, f: &Found, current: &PackedMask) -> Option<OsMask> {
        if f.tid != f.pid || self.pins.is_empty() {
            return None;
        }
        let parent_gone = f.ppid == 1
            || f.ppid == std::process::id()
            || self.proc.process_stat(f.ppid).is_none_or(|s| s.is_dead());
        if !parent_gone {
            return None;
        }
        self.pin_original(current, f.start_ticks)
    }

    /// The original mask of the creator of `f` (a thread of its process, or its parent) when `f`
    /// carries a mask the engine set on that creator: the one it holds now, or one it held when
    /// `f` started (the creator may have been placed again since, before `f` was seen).
    fn creator_original(&self, f: &Found, current: &PackedMask) -> Option<OsMask> {
        self.slots
            .iter()
            .filter(|s| s.pid == f.pid || s.pid == f.ppid)
            .find(|s| {
                (s.alive && s.applied.as_ref() == Some(current))
                    || self.pins.iter().any(|p| {
                        p.applied == *current
                            && p.original == s.original
                            && self.window(p).covers(f.start_ticks)
                    })
            })
            .map(|s| s.original.unpack())
    }

    /// The original mask behind pin `current` for a thread started at `start_ticks`: of the pins
    /// the engine set with that mask and held when it started, the one held last.
    fn pin_original(&self, current: &PackedMask, start_ticks: u64) -> Option<OsMask> {
        self.pins
            .iter()
            .filter(|p| p.applied == *current)
            .map(|p| (p, self.window(p)))
            .filter(|(_, w)| w.covers(start_ticks))
            .max_by_key(|(_, w)| w.until_ticks)
            .map(|(p, _)| p.original.unpack())
    }

    /// Forget the pins no thread has held for [`PIN_MEMORY_S`].
    pub(super) fn forget_old_pins(&mut self) {
        let now = crate::procfs::boot_ticks();
        let limit = PIN_MEMORY_S * crate::procfs::clock_ticks_per_s();
        let slots = &self.slots;
        self.pins.retain(|p| {
            now.saturating_sub(p.released_ticks) < limit
                || slots
                    .iter()
                    .any(|s| s.alive && s.applied.as_ref() == Some(&p.applied))
        });
    }

    fn process_lives(&self, pid: u32, start_ticks: u64) -> bool {
        self.proc
            .process_stat(pid)
            .is_some_and(|s| s.start_ticks == start_ticks && !s.is_dead())
    }

    /// A process is gone: count it under its name.
    fn retire_process(&mut self, pid: u32) {
        if let Some(p) = self.procs.remove(&pid) {
            self.totals.row(&p.name).processes += 1;
        }
    }

    /// Retire the processes without managed threads that have ended since.
    pub(super) fn sweep_processes(&mut self) {
        let gone: Vec<u32> = self
            .procs
            .iter()
            .filter(|(&pid, p)| p.threads == 0 && !self.process_lives(pid, p.start_ticks))
            .map(|(&pid, _)| pid)
            .collect();
        for pid in gone {
            self.retire_process(pid);
        }
    }

    /// Drop the exited slots at the end of the table and give back what churn left allocated:
    /// after a burst of threads the engine returns to the size of what it manages now.
    pub(super) fn compact(&mut self) {
        let before = self.slots.len();
        while self.slots.last().is_some_and(|s| !s.alive) {
            self.slots.pop();
            self.obs.pop();
        }
        let n = self.slots.len();
        if n < before {
            self.free.retain(|id| id.index() < n);
        }
        // Lowest ids last, taken first: the table keeps shrinking from its end.
        self.free.sort_unstable_by(|a, b| b.cmp(a));
        fn oversized(capacity: usize, len: usize) -> bool {
            capacity > 2 * len + 64
        }
        let mut shrunk = n < before;
        if oversized(self.slots.capacity(), n) {
            self.slots.shrink_to_fit();
            self.obs.shrink_to_fit();
            shrunk = true;
        }
        if oversized(self.free.capacity(), self.free.len()) {
            self.free.shrink_to_fit();
        }
        if oversized(self.by_tid.capacity(), self.by_tid.len()) {
            self.by_tid.shrink_to_fit();
            shrunk = true;
        }
        self.sweep_processes();
        if oversized(self.procs.capacity(), self.procs.len()) {
            self.procs.shrink_to_fit();
        }
        if shrunk {
            sys::release_free_memory();
        }
    }
}
