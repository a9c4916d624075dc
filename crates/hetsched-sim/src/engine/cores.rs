//! Cores: run queues (CFS-like: least virtual runtime first), dispatch and undispatch, billing of
//! the running thread's work, and its rate from the current contention.

use super::state::PageRun;
use super::{ceil_ns, Event, Simulation};
use crate::perf::{self, CONTEXT_SWITCH_NS};
use hetsched_core::{CoreId, ThreadId, ThreadState};

impl<'a> Simulation<'a> {
    /// Put a runnable thread on a core's queue.
    pub(super) fn enqueue(&mut self, t: ThreadId, c: CoreId) {
        let core = c;
        if let Some(last) = self.threads[t].last_core {
            if last != core {
                self.migrations += 1;
                self.obs[t].counters.migrations += 1;
                if self.cores[last].class != self.cores[c].class {
                    self.class_moves[self.threads[t].cur as usize] += 1;
                }
            }
        }
        self.threads[t].last_core = Some(core);
        // CFS: a thread joins at the queue's min_vruntime plus its lag, with at most one quantum
        // of credit for having slept.
        let lag = self.threads[t].lag.max(-(self.cfg.quantum_ns as i64));
        self.threads[t].vruntime = self.cores[c].min_vruntime + lag;
        self.obs[t].state = ThreadState::Runnable;
        self.obs[t].cpu = Some(core);
        let vr = self.threads[t].vruntime;
        self.queue_push(c, vr, t);
        self.core_obs[c].runnable += 1;
        if self.cores[c].current.is_none() {
            self.need_pick.push(c);
        }
        if self.core_obs[c].runnable > 1 {
            self.queued_behind = true;
        }
    }

    /// Queue `t` on `c` with virtual runtime `vr` (the run queue and the counts that follow it).
    pub(super) fn queue_push(&mut self, c: CoreId, vr: i64, t: ThreadId) {
        self.queues[c].push(vr, t);
        self.queued.insert(c);
        self.waiting_may_move += self.may_move[t] as u32;
    }

    /// Queue `t` on non-empty `c` with virtual runtime `vr` and take the queue's least, as
    /// [`Self::queue_push`] then [`Self::pick_next`] would without a batch by data fragment to
    /// follow (no batching, or `c`'s last thread works on no fragment).
    pub(super) fn queue_push_pop(&mut self, c: CoreId, vr: i64, t: ThreadId) -> ThreadId {
        debug_assert!(!self.queues[c].is_empty());
        debug_assert!(
            !self.batch_by_df
                || self.cores[c]
                    .last_thread
                    .is_none_or(|last| self.obs[last].data_fragment.is_none())
        );
        let next = self.queues[c].push_pop_first(vr, t);
        self.waiting_may_move += self.may_move[t] as u32;
        self.waiting_may_move -= self.may_move[next] as u32;
        next
    }

    /// Thread `t` has left `c`'s run queue: the counts that follow the queue.
    fn left_queue(&mut self, c: CoreId, t: ThreadId) {
        if self.queues[c].is_empty() {
            self.queued.remove(c);
        }
        self.waiting_may_move -= self.may_move[t] as u32;
    }

    /// Restrict thread `t` to `allowed` (not empty, within its user mask).
    pub(super) fn set_allowed(&mut self, t: ThreadId, allowed: hetsched_core::CpuSet) {
        let (may_move, summary, reach) = self.allowed_facts(&allowed);
        if self.obs[t].state == ThreadState::Runnable && may_move != self.may_move[t] {
            // Waiting in a queue: the count of waiting threads that may move follows.
            if may_move {
                self.waiting_may_move += 1;
            } else {
                self.waiting_may_move -= 1;
            }
        }
        self.may_move[t] = may_move;
        self.allowed_summary[t] = summary;
        self.allowed_reach[t] = reach;
        self.obs[t].allowed = allowed;
    }

    /// The dense facts kept of a thread's allowed set, read where the set itself would be a cache
    /// miss: whether it may move (two cores or more), its summary and its reach.
    pub(super) fn allowed_facts(
        &self,
        allowed: &hetsched_core::CpuSet,
    ) -> (bool, u64, crate::baseline::Reach) {
        (
            allowed.len() >= 2,
            crate::baseline::summarise(allowed, self.summary_span),
            crate::baseline::Reach::of(allowed, self.topo.num_cores()),
        )
    }

    /// Take a queued (not running) thread off its core's queue.
    pub(super) fn dequeue_waiting(&mut self, t: ThreadId, c: CoreId) {
        if self.queues[c].remove(t).is_some() {
            self.left_queue(c, t);
            self.core_obs[c].runnable -= 1;
            self.threads[t].lag = self.threads[t].vruntime - self.cores[c].min_vruntime;
        }
    }

    /// Start running `t` (already counted in the core's runnable) on idle core `c`.
    pub(super) fn dispatch(&mut self, t: ThreadId, c: CoreId) {
        debug_assert!(self.cores[c].current.is_none());
        self.cores[c].current = Some(t);
        self.cores[c].last_bill = self.now;
        self.cores[c].dispatched_at = self.now;
        self.core_obs[c].current = Some(t);
        self.idle.remove(c);
        self.obs[t].state = ThreadState::Running;
        self.obs[t].cpu = Some(c);
        let mut penalty = 0.0;
        if self.cores[c].last_thread != Some(t) {
            penalty += CONTEXT_SWITCH_NS;
        }
        self.cores[c].last_thread = Some(t);
        let phase = self.phase_of(t);
        // The thread's footprint joins the LLC's first: the share `set_rate` prices it at is then
        // known, and its miss-curve value is fetched from the memo while the rest is worked out.
        let ws_bytes = self.phase_info(t).ws_bytes;
        let footprint = self.cores[c].llc.map(|l| {
            let st = &mut self.llcs[l];
            let ws = ws_bytes.min(st.capacity);
            st.sum_ws += ws;
            let share = perf::llc_share(ws, st.sum_ws, st.capacity);
            self.cores[c].cur_ws = ws;
            self.mpki_memo.prefetch(self.threads[t].cur, share);
            (l, ws)
        });
        self.refresh_phase_cache(t, c);
        if let Some((l, ws)) = footprint {
            let cap = self.llcs[l].capacity;
            let surviving = if self.threads[t].warm_llc == Some(l) {
                ws.min((cap - (self.llcs[l].fill - self.threads[t].warm_fill)).max(0.0))
            } else {
                0.0
            };
            let missing = ws - surviving;
            let lat = self.cores[c].cur_lat;
            penalty += perf::cold_refill_ns(missing, self.llcs[l].line, lat);
            self.note_fill(t, l, missing, false);
        }
        if let Some(l2) = self.l2_of(c) {
            let ws = self
                .phase_info(t)
                .ws_bytes
                .min(self.shared_l2s[l2].capacity);
            self.shared_l2s[l2].sum_ws += ws;
            self.cores[c].cur_l2_ws = ws;
        }
        if phase.data_fragment.is_some() {
            penalty += self.df_refill(t, c);
        }
        self.threads[t].penalty_ns += penalty;
        self.set_rate(c);
    }

    /// Stop the running thread on `c`, billing it first. Returns it.
    pub(super) fn undispatch(&mut self, c: CoreId) -> ThreadId {
        self.bill(c);
        self.close_segment(c);
        let t = self.cores[c].current.take().unwrap_or(ThreadId(0));
        self.core_obs[c].current = None;
        self.core_obs[c].runnable -= 1;
        self.idle.insert(c);
        self.cores[c].gen += 1;
        if let Some(l) = self.cores[c].llc {
            self.llcs[l].sum_ws -= self.cores[c].cur_ws;
            self.threads[t].warm_llc = Some(l);
            self.threads[t].warm_fill = self.llcs[l].fill;
            // Data-fragment copy stays warm from now.
            if let Some(d) = self.cores[c].cur_df {
                let a = self.threads[t].app;
                let fill = self.llcs[l].fill;
                if let Some(copy) = self.apps[a].dfs[d as usize]
                    .copies
                    .iter_mut()
                    .find(|(ll, _)| *ll == l)
                {
                    copy.1 = fill;
                }
            }
        }
        self.cores[c].cur_ws = 0.0;
        if let Some(l2) = self.l2_of(c) {
            self.shared_l2s[l2].sum_ws -= self.cores[c].cur_l2_ws;
            self.cores[c].cur_l2_ws = 0.0;
        }
        t
    }

    /// Remove the queued thread with the least virtual runtime (ties: lowest id). When the policy
    /// asks for batching by data fragment (Pinter's priority groups), a queued thread of the same
    /// application and fragment as the core's last thread goes first, as long as its virtual
    /// runtime is within one quantum of the queue's least: a group runs in succession, and no
    /// thread falls more than a quantum behind its fair share.
    pub(super) fn pick_next(&mut self, c: CoreId) -> Option<ThreadId> {
        if self.batch_by_df {
            if let Some(last) = self.cores[c].last_thread {
                if let Some(df) = self.obs[last].data_fragment {
                    let app = self.threads[last].app;
                    let limit = self.queues[c]
                        .min_vruntime()
                        .saturating_add(self.cfg.quantum_ns as i64);
                    let mate = self.queues[c]
                        .entries()
                        .filter(|&(vr, t)| {
                            vr <= limit
                                && self.threads[t].app == app
                                && self.obs[t].data_fragment == Some(df)
                        })
                        .min();
                    if let Some((_, t)) = mate {
                        self.queues[c].remove(t);
                        self.left_queue(c, t);
                        return Some(t);
                    }
                }
            }
        }
        let t = self.queues[c].pop_first()?;
        self.left_queue(c, t);
        Some(t)
    }

    /// Bill the running thread of `c` up to now.
    pub(super) fn bill(&mut self, c: CoreId) {
        let Some(t) = self.cores[c].current else {
            return;
        };
        let dt = (self.now - self.cores[c].last_bill) as f64;
        if dt <= 0.0 {
            return;
        }
        self.cores[c].last_bill = self.now;
        let core = &self.cores[c];
        let (eff_ghz, ns_per_instr, mpki, cpi_factor) = (
            core.eff_ghz,
            core.ns_per_instr,
            core.cur_mpki,
            core.cpi_factor,
        );
        // The phase's own values: the thread's phase is the one priced at its dispatch or phase
        // load, as the core's rate is.
        let info = self.phase_info(t);
        let (phase, ideal, refs_pki) = (info.phase, info.ideal_ns_per_instr, info.refs_pki);
        let th = &mut self.threads[t];
        let pen = dt.min(th.penalty_ns);
        th.penalty_ns -= pen;
        let instr = ((dt - pen) / ns_per_instr).min(th.remaining);
        th.remaining -= instr;
        th.vruntime += dt as i64;
        th.ideal_ns += instr * ideal;
        let cnt = &mut self.obs[t].counters;
        cnt.cycles += dt * eff_ghz;
        cnt.instructions += instr;
        cnt.cpu_time_ns += dt;
        cnt.fp_busy_cycles += instr * phase.cpi * cpi_factor * phase.fp_fraction;
        cnt.llc_refs += instr * refs_pki / 1000.0;
        let misses = instr * mpki / 1000.0;
        // Ding et al. equation 5: the lines the thread's L2 evictions write into the LLC are its
        // LLC references; in steady state each demand miss evicts one of its own lines (its share
        // of the LLC is full). Refills after a move grow the share and evict nobody's of its own.
        let traffic = &mut self.obs[t].llc_traffic;
        traffic.fills += instr * refs_pki / 1000.0;
        traffic.evictions += misses;
        if self.l2_of(c).is_some() {
            self.l2_misses[self.threads[t].cur as usize] +=
                instr * self.cores[c].cur_l2_mpki / 1000.0;
        }
        if let Some(l) = self.cores[c].llc {
            let bytes = misses * self.llcs[l].line;
            self.note_fill(t, l, bytes, true);
        } else {
            self.obs[t].counters.llc_misses += misses;
            self.llc_misses += misses;
            self.serve_from_memory(t, misses, 64.0, true);
        }
        if phase.alloc_bytes > 0 {
            let b = instr / phase.instructions * phase.alloc_bytes as f64;
            let node = self.cores[c].node as usize;
            self.node_bytes.of_mut(t)[node] += b;
            self.threads[t].total_bytes += b;
            let a = self.threads[t].app;
            self.apps[a].bytes_per_node[node] += b;
            self.apps[a].total_bytes += b;
            let owner = t;
            match self.apps[a].pages.back_mut() {
                Some(run) if run.owner == owner && run.node == node => run.bytes += b,
                _ => self.apps[a].pages.push_back(PageRun {
                    owner,
                    node,
                    bytes: b,
                }),
            }
            self.memory_placed = true;
            self.cores[c].cur_lat = self.mem_latency(t, c);
            self.obs[t].resident_bytes[node] = self.node_bytes.of(t)[node] as u64;
            self.changes.note_resident(t);
        }
        // min_vruntime: the smallest of the running and queued threads, never decreasing.
        let m = self.threads[t].vruntime.min(self.queues[c].min_vruntime());
        if m > self.cores[c].min_vruntime {
            self.cores[c].min_vruntime = m;
        }
    }

    /// Recompute the running thread's rate on `c` and schedule its phase end if it falls before the
    /// next tick.
    pub(super) fn set_rate(&mut self, c: CoreId) {
        let Some(t) = self.cores[c].current else {
            return;
        };
        let info = self.phase_info(t);
        let (phase, curve) = (info.phase, info.curve);
        let core = &self.cores[c];
        let share = match core.llc {
            Some(l) => {
                let st = &self.llcs[l];
                perf::llc_share(core.cur_ws, st.sum_ws, st.capacity)
            }
            None => 0.0,
        };
        // The miss curve is evaluated only when the share changed, and then only at a share
        // not met before.
        let mpki = if share == core.cur_share {
            core.cur_mpki
        } else {
            let phase_index = self.threads[t].cur;
            self.mpki_memo.mpki(phase_index, &curve, share)
        };
        let mut fpu_slow = 1.0;
        if phase.fp_fraction > 0.0 {
            let mates_fp: f64 = self
                .fpu_mates(c)
                .iter()
                .filter_map(|m| self.cores[*m].current)
                .map(|o| self.phase_of(o).fp_fraction)
                .sum();
            fpu_slow = perf::fpu_slowdown(phase.fp_fraction, mates_fp.min(1.0));
        }
        let core = &self.cores[c];
        let mut ns = perf::ns_per_instruction(
            phase.cpi,
            core.cpi_factor,
            core.eff_ghz,
            fpu_slow,
            mpki,
            core.cur_lat / phase.mlp,
        );
        if let Some(l2) = self.l2_of(c) {
            let st = &self.shared_l2s[l2];
            let l2_mpki = curve.mpki(perf::llc_share(core.cur_l2_ws, st.sum_ws, st.capacity));
            ns += perf::shared_cache_penalty_ns(l2_mpki, core.cur_l2_alone, st.next_latency_ns);
            self.cores[c].cur_l2_mpki = l2_mpki;
        }
        let core = &mut self.cores[c];
        core.ns_per_instr = ns;
        core.cur_mpki = mpki;
        core.cur_share = share;
        core.gen += 1;
        let th = &self.threads[t];
        // Integer time plus at least 1 ns: f64 sums at 1e10 ns cannot resolve sub-ns rests.
        let end = self.now + ceil_ns(th.penalty_ns + th.remaining * ns).max(1);
        if end <= self.next_tick {
            let gen = core.gen;
            self.push(end, Event::PhaseEnd { core: c, gen });
        }
    }
}
