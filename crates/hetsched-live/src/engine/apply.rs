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

    /// Apply pending placements. `first`: placements of new threads, exempt from hysteresis.
    pub(super) fn apply(&mut self, first: bool) {
        let pending = std::mem::take(&mut self.pending);
        let mut todo: Vec<(usize, OsMask)> = Vec::new();
        // Where each thread is in `todo`: a batch of thousands of new threads stays linear.
        let mut at: HashMap<usize, usize> = HashMap::new();
        for p in pending {
            self.decisions.placements += 1;
            let i = p.thread.index();
            if i >= self.slots.len() || !self.slots[i].alive {
                self.decisions.vanished += 1;
                continue;
            }
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
                self.decisions.unchanged += 1;
                continue;
            }
            if !first {
                let dwell = self.config.min_dwell.as_nanos() as u64;
                if s.last_move_ns.is_some_and(|t| self.now_ns < t + dwell) {
                    self.decisions.held_by_dwell += 1;
                    continue;
                }
                if self.moves_this_interval >= self.config.max_moves {
                    self.decisions.held_by_cap += 1;
                    continue;
                }
            }
            self.moves_this_interval += 1;
            // A later placement of the same thread replaces the earlier one.
            match at.get(&i) {
                Some(&k) => todo[k].1 = mask,
                None => {
                    at.insert(i, todo.len());
                    todo.push((i, mask));
                }
            }
        }
        if todo.is_empty() {
            return;
        }
        if self.config.dry_run {
            for (i, mask) in todo {
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
            }
            return;
        }
        // A thread whose mask is not what we left is the program's again.
        todo.retain(|&(i, _)| {
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
            for &(i, mask) in &todo {
                let s = &self.slots[i];
                j.record(
                    s.tid,
                    s.start_ticks,
                    &s.original.unpack(),
                    &s.expected_mask(),
                    &mask,
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
        for (i, mask) in todo {
            let s = &mut self.slots[i];
            match sys::set_affinity(s.tid, &mask) {
                Ok(()) => {
                    s.applied = Some(PackedMask::pack(&mask));
                    s.last_move_ns = Some(self.now_ns);
                    s.placements_applied += 1;
                    self.decisions.applied += 1;
                    let cores = self.cpus.to_cores(&mask);
                    self.obs[i].allowed = cores.intersection(&self.obs[i].user_allowed);
                }
                Err(SysError::Gone(_)) => self.decisions.vanished += 1,
                Err(e) => tracing::warn!("{e}"),
            }
        }
    }

    /// Give every thread back the mask it had (where it still has ours).
    pub fn restore_all(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            let r = j.restore_all(&self.proc);
            self.restored.restored += r.restored;
            self.restored.gone += r.gone;
            self.restored.changed_by_others += r.changed_by_others;
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
            self.apply(true);
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
