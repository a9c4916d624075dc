//! Observing the threads: counters and /proc read into each thread's observation, and the
//! pages each thread has on each node.

use super::*;

impl Engine {
    /// Read one thread: its counters, and its stat (state, CPU) unless the counters show that a
    /// thread last seen asleep has had no CPU since: then it still sleeps where it slept, and the
    /// costlier stat read is skipped.
    pub(super) fn refresh_one(&mut self, i: usize) {
        let s = &mut self.slots[i];
        let o = &mut self.obs[i];
        let counted = s.counters.as_ref().and_then(ThreadCounters::read);
        let task_clock = self.plan.has(Role::TaskClock) && counted.is_some();
        let mut c = counted.unwrap_or_default();
        s.reads += 1;
        let used = c.cpu_time_ns - s.last_cpu_ns;
        let since = self.now_ns.saturating_sub(s.last_read_ns) as f64;
        let nearly_idle = used == 0.0
            || (used <= IDLE_CPU_SHARE * since && !s.reads.is_multiple_of(STAT_EVERY_READS));
        if task_clock && o.state == ThreadState::Blocked && nearly_idle {
            if let Some(core) = s.last_processor.and_then(|p| self.cpus.core_of(p)) {
                if !self.plan.has(Role::Migrations) {
                    c.migrations = o.counters.migrations;
                }
                if used > 0.0 {
                    s.class_ns[self.topology.core(core).class.index()] += used;
                    s.last_cpu_ns = c.cpu_time_ns;
                }
                o.counters = c;
                return;
            }
        }
        let mut buf = [0u8; 1024];
        // Without a descriptor of its own (the budget ran out) the stat is opened for this read.
        let opened;
        let file = match &s.stat {
            Some(f) => Some(f),
            None => {
                opened = File::open(self.proc.task_dir(s.pid, s.tid).join("stat")).ok();
                opened.as_ref()
            }
        };
        let stat = file
            .and_then(|f| f.read_at(&mut buf, 0).ok())
            .and_then(|n| std::str::from_utf8(&buf[..n]).ok())
            .and_then(parse_stat);
        let Some(stat) = stat else {
            o.state = ThreadState::Blocked; // gone: the tracker reports it at the next scan
            return;
        };
        let cpu = self.cpus.core_of(stat.processor);
        if !task_clock {
            c.cpu_time_ns = stat.cpu_ticks as f64 * self.ns_per_tick;
        }
        if !self.plan.has(Role::Migrations) {
            let moved = s.last_processor.is_some_and(|p| p != stat.processor);
            c.migrations = o.counters.migrations + u32::from(moved);
        }
        s.last_processor = Some(stat.processor);
        let delta = c.cpu_time_ns - s.last_cpu_ns;
        if delta > 0.0 {
            if let Some(core) = cpu {
                s.class_ns[self.topology.core(core).class.index()] += delta;
            }
            s.last_cpu_ns = c.cpu_time_ns;
        }
        o.counters = c;
        o.cpu = cpu;
        o.state = match stat.state {
            'R' => ThreadState::Runnable,
            _ => ThreadState::Blocked,
        };
        // A process is named after its main thread, whose name exec changes.
        if s.tid == s.pid {
            if let Some(p) = self.procs.get_mut(&s.pid).filter(|p| p.name != stat.comm) {
                p.name = stat.comm;
            }
        }
    }

    /// Read the threads due for a read, and the cores' load from them.
    pub(super) fn refresh(&mut self) {
        self.ticks += 1;
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if !s.alive || s.next_read > self.ticks {
                continue;
            }
            let (cpu_before, read_before) = (s.last_cpu_ns, s.last_read_ns);
            self.refresh_one(i);
            let s = &mut self.slots[i];
            s.last_read_ns = self.now_ns;
            // Asleep now, and used under 1% of a CPU since the last read: idle for reading.
            let used = s.last_cpu_ns - cpu_before;
            let slept = self.obs[i].state == ThreadState::Blocked
                && used <= IDLE_CPU_SHARE * (self.now_ns - read_before) as f64;
            if slept {
                s.idle_streak = (s.idle_streak + 1).min(16);
                s.next_read = self.ticks + (1u64 << (s.idle_streak - 1)).min(MAX_IDLE_READ_GAP);
            } else {
                s.idle_streak = 0;
                s.next_read = self.ticks + 1;
            }
        }
        if self.topology.nodes().len() > 1 && self.now_ns >= self.next_residency_ns {
            self.next_residency_ns = self.now_ns + self.config.residency_period.as_nanos() as u64;
            self.refresh_residency();
        }
        for c in &mut self.cores {
            *c = CoreObs::default();
        }
        for o in &mut self.obs {
            if o.state != ThreadState::Runnable {
                continue;
            }
            if let Some(cpu) = o.cpu {
                let core = &mut self.cores[cpu.index()];
                core.runnable += 1;
                if core.current.is_none() {
                    core.current = Some(o.id);
                    o.state = ThreadState::Running;
                }
            }
        }
    }

    /// Per-node resident bytes from numa_maps, per process, split evenly over its live threads
    /// (the kernel does not say which thread touched a page).
    pub(super) fn refresh_residency(&mut self) {
        let nodes = self.topology.nodes().len();
        let mut per_pid: HashMap<u32, (Vec<u64>, u64)> = HashMap::new();
        for s in self.slots.iter().filter(|s| s.alive) {
            per_pid.entry(s.pid).or_insert_with(|| (Vec::new(), 0)).1 += 1;
        }
        for (pid, v) in &mut per_pid {
            v.0 = self
                .proc
                .numa_bytes(*pid, nodes)
                .unwrap_or_else(|| vec![0; nodes]);
        }
        for (i, s) in self.slots.iter().enumerate() {
            if let (true, Some((bytes, n))) = (s.alive, per_pid.get(&s.pid)) {
                self.obs[i].resident_bytes = bytes.iter().map(|b| b / n.max(&1)).collect();
            }
        }
    }
}
