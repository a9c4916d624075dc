//! Applying the policy's answers: placements as affinities (within the user's mask, with
//! hysteresis and the journal first), page moves, and restoring every mask at the end.

use super::*;

impl Engine {
    pub(super) fn move_pages(&mut self) {
        let moves = std::mem::take(&mut self.page_moves);
        for m in moves {
            let Some((&pid, _)) = self.procs.iter().find(|(_, p)| p.app == m.app) else {
                continue;
            };
            tracing::info!(
                "{}: move up to {} MiB of pid {pid} to node {}",
                self.policy_name,
                m.max_bytes >> 20,
                m.to.0
            );
            if !self.config.dry_run {
                self.pages.submit(pid, m.to.0, m.max_bytes);
            }
        }
        if self.pages.pending() > 0 {
            self.pages.run(self.config.page_budget);
        }
    }

    /// Apply pending placements (see [`Apply`] for the rules of each kind). A placement that the
    /// dwell rule or the move cap holds back is kept and tried again at each interval (right after
    /// the read, before the policy is called) until it is applied or the policy places the thread
    /// anew, so what the policy believes it did comes true; meanwhile the view shows the thread
    /// where the policy put it. Each applied placement updates the view at once (the thread counts
    /// on its new core), so the policy's next callback sees it, as in the simulator.
    pub(super) fn apply(&mut self, kind: Apply) {
        let pending = std::mem::take(&mut self.pending);
        // Thread, mask to set, and the cores the policy chose (before widening).
        let mut todo: Vec<(usize, OsMask, CpuSet)> = Vec::new();
        // Where each thread is in `todo`: a batch of thousands of new threads stays linear.
        let mut at: HashMap<usize, usize> = HashMap::new();
        for p in pending {
            let i = p.thread.index();
            if kind != Apply::Retry {
                self.decisions.placements += 1;
                // The policy's newest word on a thread replaces a placement held back earlier.
                self.deferred.retain(|d| d.thread != p.thread);
            }
            if i >= self.slots.len() || !self.slots[i].alive {
                self.decisions.vanished += 1;
                continue;
            }
            let chosen = p.cpus.intersection(&self.obs[i].user_allowed);
            let cpus = if self.config.work_conserving {
                widen_upward(&self.topology, &p.cpus)
            } else {
                p.cpus.clone()
            };
            let target = cpus.intersection(&self.obs[i].user_allowed);
            if target.is_empty() {
                self.decisions.outside_user_mask += 1;
                continue;
            }
            let mask = self.cpus.to_os(&target);
            let s = &self.slots[i];
            let current = s.expected_mask();
            if mask == current || at.get(&i).is_some_and(|&k| todo[k].1 == mask) {
                if kind != Apply::Retry {
                    self.decisions.unchanged += 1;
                }
                continue;
            }
            if kind != Apply::First {
                let dwell = u64::try_from(self.config.min_dwell.as_nanos()).unwrap_or(u64::MAX);
                let held_by_dwell = s
                    .last_move_ns
                    .is_some_and(|t| self.now_ns < t.saturating_add(dwell));
                let held_by_cap = self.moves_this_interval >= self.config.max_moves;
                if held_by_dwell || held_by_cap {
                    tracing::debug!(
                        "{:.3} s: thread {} held back ({})",
                        self.now_ns as f64 * 1e-9,
                        s.tid,
                        if held_by_dwell { "dwell" } else { "move cap" }
                    );
                    if kind != Apply::Retry {
                        if held_by_dwell {
                            self.decisions.held_by_dwell += 1;
                        } else {
                            self.decisions.held_by_cap += 1;
                        }
                    }
                    // The policy decided it: until it is made, the view shows the thread where
                    // the policy put it, so the next decisions build on this one instead of
                    // undoing it (a move is held back only as an affinity, not as a belief).
                    self.settle(i, &chosen);
                    self.deferred.push(p);
                    continue;
                }
            }
            self.moves_this_interval += 1;
            // A later placement of the same thread replaces the earlier one.
            match at.get(&i) {
                Some(&k) => todo[k] = (i, mask, chosen),
                None => {
                    at.insert(i, todo.len());
                    todo.push((i, mask, chosen));
                }
            }
        }
        if todo.is_empty() {
            return;
        }
        if self.config.dry_run {
            for (i, mask, chosen) in todo {
                let s = &mut self.slots[i];
                tracing::info!(
                    "dry run: thread {} ({}) -> CPUs {}",
                    s.tid,
                    self.procs.get(&s.pid).map_or("", |p| p.name.as_str()),
                    mask.to_list()
                );
                s.applied = Some(PackedMask::pack(&mask));
                s.last_move_ns = Some(self.now_ns);
                self.decisions.applied += 1;
                self.settle(i, &chosen);
            }
            return;
        }
        // A thread whose mask is not what we left is the program's again.
        todo.retain(|(i, _, _)| {
            let i = *i;
            let s = &mut self.slots[i];
            let expected = s.expected_mask();
            match sys::get_affinity(s.tid) {
                Ok(now) if now == expected => true,
                Ok(now) => {
                    s.original = PackedMask::pack(&now);
                    s.applied = None;
                    self.obs[i].user_allowed = self.cpus.to_cores(&now).intersection(&self.managed);
                    self.obs[i].allowed = self.obs[i].user_allowed.clone();
                    self.decisions.adopted_user_changes += 1;
                    false
                }
                Err(_) => {
                    self.decisions.vanished += 1;
                    false
                }
            }
        });
        // Journal first, then act.
        if let Some(j) = self.journal.as_mut() {
            for (i, mask, _) in &todo {
                let s = &self.slots[*i];
                j.record(
                    s.tid,
                    s.start_ticks,
                    &s.original.unpack(),
                    &s.expected_mask(),
                    mask,
                );
            }
            if let Err(e) = j.flush() {
                tracing::error!(
                    "cannot write the affinity journal {}: {e}; not moving threads",
                    j.path().display()
                );
                return;
            }
        }
        for (i, mask, chosen) in todo {
            let s = &mut self.slots[i];
            match sys::set_affinity(s.tid, &mask) {
                Ok(()) => {
                    tracing::debug!(
                        "{:.3} s: thread {} -> CPUs {} ({kind:?})",
                        self.now_ns as f64 * 1e-9,
                        s.tid,
                        mask.to_list()
                    );
                    let before = s.applied.replace(PackedMask::pack(&mask));
                    let original = s.original.clone();
                    s.last_move_ns = Some(self.now_ns);
                    s.placements_applied += 1;
                    self.decisions.applied += 1;
                    if let Some(b) = before {
                        self.release_pin(&b);
                    }
                    self.note_pin(&mask, &original);
                    let cores = self.cpus.to_cores(&mask);
                    self.obs[i].allowed = cores.intersection(&self.obs[i].user_allowed);
                    self.settle(i, &chosen);
                }
                Err(SysError::Gone(_)) => self.decisions.vanished += 1,
                Err(e) => tracing::warn!("{e}"),
            }
        }
    }

    /// Thread `i` was placed on `chosen`: until the next read it counts where it will run, its
    /// core if that is in the set, else the least loaded core of the set.
    pub(super) fn settle(&mut self, i: usize, chosen: &CpuSet) {
        if let Some(df) = self.obs[i].data_fragment {
            let name = self
                .procs
                .get(&self.slots[i].pid)
                .map_or("", |p| p.name.as_str());
            self.totals.fragment(name, df, false, Some(chosen));
        }
        let o = &self.obs[i];
        if o.cpu.is_some_and(|c| chosen.contains(c)) {
            return;
        }
        let Some(to) = chosen
            .iter()
            .min_by_key(|c| (self.cores[c.index()].runnable, c.0))
        else {
            return;
        };
        let id = o.id;
        if matches!(o.state, ThreadState::Runnable | ThreadState::Running) {
            self.uncount(i);
            let t = &mut self.cores[to.index()];
            t.runnable += 1;
            let o = &mut self.obs[i];
            if t.current.is_none() {
                t.current = Some(id);
                o.state = ThreadState::Running;
            } else {
                o.state = ThreadState::Runnable;
            }
        }
        self.obs[i].cpu = Some(to);
    }

    /// Thread `i` no longer counts on the core it was counted on (if it was runnable there); its
    /// state and CPU are the caller's to set.
    pub(super) fn uncount(&mut self, i: usize) {
        let o = &self.obs[i];
        if let (ThreadState::Runnable | ThreadState::Running, Some(c)) = (o.state, o.cpu) {
            let core = &mut self.cores[c.index()];
            core.runnable = core.runnable.saturating_sub(1);
            if core.current == Some(o.id) {
                core.current = None;
            }
        }
    }

    /// Placements held back earlier, tried again.
    pub(super) fn retry_deferred(&mut self) {
        if self.deferred.is_empty() {
            return;
        }
        let later = std::mem::replace(&mut self.pending, std::mem::take(&mut self.deferred));
        self.apply(Apply::Retry);
        self.pending = later;
    }

    /// Give every thread back the mask it had (where it still has ours).
    pub fn restore_all(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            let r = j.restore_all(&self.proc);
            self.restored.restored += r.restored;
            self.restored.gone += r.gone;
            self.restored.changed_by_others += r.changed_by_others;
        }
        let held: Vec<PackedMask> = self
            .slots
            .iter()
            .filter(|s| s.alive)
            .filter_map(|s| s.applied.clone())
            .collect();
        for m in &held {
            self.release_pin(m);
        }
        for (s, o) in self.slots.iter_mut().zip(self.obs.iter_mut()) {
            s.applied = None;
            o.allowed = o.user_allowed.clone();
        }
    }

    /// Apply the first placements of the threads added since the last call, and write journal
    /// entries recorded since the last write (masks new threads inherited). Call after a batch
    /// of [`add`](Self::add)s.
    pub fn sync_journal(&mut self) {
        if !self.first_placements.is_empty() {
            // Placements the policy made since stay behind the first ones (apply keeps the last
            // placement of a thread).
            let later = std::mem::replace(
                &mut self.pending,
                std::mem::take(&mut self.first_placements),
            );
            self.apply(Apply::First);
            self.pending = later;
        }
        if self.journal_dirty {
            self.journal_dirty = false;
            if let Some(Err(e)) = self.journal.as_ref().map(Journal::flush) {
                tracing::error!("cannot write the affinity journal: {e}");
            }
        }
    }
}
