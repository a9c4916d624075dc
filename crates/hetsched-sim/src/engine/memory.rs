//! Memory: LLC warmth and refills, shared data fragments and their coherence, where a thread's
//! misses are served (pages per node), memory latency and bandwidth queueing, freeing and moving
//! pages.

use super::state::PageRun;
use super::{Simulation, NS_PER_S};
use crate::perf;
use hetsched_core::{AppId, CoreId, LlcId, PageMove, ThreadId, ThreadState};

impl<'a> Simulation<'a> {
    /// Per-phase values the hot path reads from the core rather than recomputing.
    pub(super) fn refresh_phase_cache(&mut self, t: ThreadId, c: CoreId) {
        let info = *self.phase_info(t);
        let lat = self.mem_latency(t, c);
        if let Some(l2) = self.l2_of(c) {
            self.cores[c].cur_l2_alone = info.curve.mpki(self.shared_l2s[l2].capacity);
        }
        let core = &mut self.cores[c];
        core.cur_lat = lat;
        core.cur_share = f64::NAN;
        core.cur_df = info.phase.data_fragment.map(|d| d as u32);
    }

    /// Record `bytes` brought into LLC `l` on behalf of thread `t`: demand misses while it runs
    /// (`demand`), or a refill after a move or a long absence.
    pub(super) fn note_fill(&mut self, t: ThreadId, l: LlcId, bytes: f64, demand: bool) {
        if bytes <= 0.0 {
            return;
        }
        self.llcs[l].fill += bytes;
        let line = self.llcs[l].line;
        let lines = bytes / line;
        self.obs[t].counters.llc_misses += lines;
        self.llc_misses += lines;
        self.serve_from_memory(t, lines, line, demand);
    }

    /// `lines` LLC misses of thread `t` go to memory: each node serves its share, in proportion to
    /// where the thread's pages (or, with none, its process's) live; before any page is placed, the
    /// node of the core it runs on. The shares are the pages' access heat. Demand misses are also
    /// the traffic a node queues ([`perf::queueing_delay_ns`]): they come at the rate the latency
    /// allows. A refill is booked at once although it takes `cold_refill_ns` to happen, so
    /// counting it as one tick's traffic would be a burst no memory sees; its cost is priced by
    /// the refill time alone.
    pub(super) fn serve_from_memory(&mut self, t: ThreadId, lines: f64, line: f64, demand: bool) {
        let nodes = self.bandwidth.len();
        let queued = demand && self.bandwidth_model;
        if nodes == 1 {
            if queued {
                self.node_traffic[0] += lines * line;
            }
            return;
        }
        let th = &self.threads[t];
        let spread = if !self.memory_placed {
            None
        } else if th.total_bytes > 0.0 {
            Some((self.node_bytes.of(t), th.total_bytes))
        } else {
            let app = &self.apps[th.app];
            (app.total_bytes > 0.0).then_some((&app.bytes_per_node[..], app.total_bytes))
        };
        let heat = &mut self.app_heat;
        let a = th.app.index();
        match spread {
            Some((per_node, total)) => {
                // A node without pages of the thread gets no share: its heat and traffic are
                // not touched (on a many-node machine, a cache line each).
                for (n, &b) in per_node.iter().enumerate().filter(|&(_, &b)| b != 0.0) {
                    let share = lines * b / total;
                    heat[n][a] += share;
                    if queued {
                        self.node_traffic[n] += share * line;
                    }
                }
            }
            None => {
                let node = self.obs[t].cpu.map_or(0, |c| self.cores[c].node as usize);
                // No heat is kept for a workload that never allocates (no pages to move).
                if let Some(h) = heat.get_mut(node) {
                    h[a] += lines;
                }
                if queued {
                    self.node_traffic[node] += lines * line;
                }
            }
        }
    }

    /// Refill cost of the thread's current data fragment on core `c`'s LLC, and the coherence
    /// bookkeeping (a writer invalidates other copies).
    pub(super) fn df_refill(&mut self, t: ThreadId, c: CoreId) -> f64 {
        let phase = self.phase_of(t);
        let (Some(d), Some(l)) = (phase.data_fragment, self.cores[c].llc) else {
            return 0.0;
        };
        let a = self.threads[t].app;
        let cap = self.llcs[l].capacity;
        let fill = self.llcs[l].fill;
        let df = &mut self.apps[a].dfs[d];
        let bytes = df.bytes.min(cap);
        let surviving = match df.copies.iter().find(|(ll, _)| *ll == l) {
            Some(&(_, at)) => bytes.min((cap - (fill - at)).max(0.0)),
            None => 0.0,
        };
        let missing = bytes - surviving;
        df.copies.retain(|(ll, _)| *ll != l);
        if phase.df_writes {
            df.copies.clear();
        }
        df.copies.push((l, fill + missing));
        let lat = self.cores[c].cur_lat;
        self.note_fill(t, l, missing, false);
        perf::cold_refill_ns(missing, self.llcs[l].line, lat)
    }

    /// Average memory latency for thread `t` running on core `c`.
    pub(super) fn mem_latency(&self, t: ThreadId, c: CoreId) -> f64 {
        let node = self.cores[c].node as usize;
        let row = &self.latency[node];
        if row.len() == 1 || !self.memory_placed {
            return row[node.min(row.len() - 1)];
        }
        let th = &self.threads[t];
        if th.total_bytes > 0.0 {
            return perf::weighted_latency(self.node_bytes.of(t), row, node);
        }
        // A thread that allocated nothing reads its app's memory.
        let app = &self.apps[th.app];
        if app.total_bytes > 0.0 {
            return perf::weighted_latency(&app.bytes_per_node, row, node);
        }
        row[node]
    }

    /// A thread of instance `a` frees `bytes` of the process's memory, oldest pages first. The
    /// owner-list rule of AMPS section 2.4.2: each freed page leaves the resident set of the thread
    /// that brought it in (the owner, same process), not of the thread that frees it; an owner that
    /// has exited is dropped from the list with no accounting.
    pub(super) fn free_memory(&mut self, a: AppId, mut bytes: f64) {
        while bytes > 0.0 {
            let Some(run) = self.apps[a].pages.front_mut() else {
                break;
            };
            let take = run.bytes.min(bytes);
            let (owner, node) = (run.owner, run.node);
            run.bytes -= take;
            if run.bytes <= 0.0 {
                self.apps[a].pages.pop_front();
            }
            bytes -= take;
            let app = &mut self.apps[a];
            app.bytes_per_node[node] = (app.bytes_per_node[node] - take).max(0.0);
            app.total_bytes = (app.total_bytes - take).max(0.0);
            if self.obs[owner].state != ThreadState::Exited {
                let th = &mut self.threads[owner];
                th.total_bytes = (th.total_bytes - take).max(0.0);
                let bytes = self.node_bytes.of_mut(owner);
                bytes[node] = (bytes[node] - take).max(0.0);
                self.obs[owner].resident_bytes[node] = bytes[node] as u64;
                self.changes.note_resident(owner);
            }
        }
    }

    /// Move up to `m.max_bytes` of the application's pages that are not on `m.to` there (Ding et
    /// al. section 3.3.2, sticky pages): from the node whose pages are accessed most first, and
    /// within a node the most recently allocated first (a phase works on what it allocated last).
    /// Each owner waits while its pages are copied ([`perf::PAGE_MIGRATION_BYTES_PER_S`]).
    pub(super) fn move_pages(&mut self, m: &PageMove) {
        let a = m.app;
        let to = m.to.index();
        if self.apps.get(a).is_none_or(|app| app.done) || to >= self.latency.len() {
            return;
        }
        // Access heat per node of the application's pages.
        let nodes = self.latency.len();
        let heat: Vec<f64> = self.app_heat.iter().map(|h| h[a.index()]).collect();
        let mut sources: Vec<usize> = (0..nodes)
            .filter(|&n| n != to && self.apps[a].bytes_per_node[n] > 0.0)
            .collect();
        sources.sort_by(|&x, &y| heat[y].total_cmp(&heat[x]).then(x.cmp(&y)));
        if sources.is_empty() || m.max_bytes == 0 {
            return;
        }
        // Bill the application's running threads before their memory changes under them.
        let running: Vec<CoreId> = self
            .cores
            .ids()
            .filter(|&c| {
                self.cores[c]
                    .current
                    .is_some_and(|t| self.threads[t].app == a)
            })
            .collect();
        for &c in &running {
            self.bill(c);
        }
        let mut budget = m.max_bytes as f64;
        let mut moved_by_owner: Vec<(ThreadId, f64)> = Vec::new();
        for src in sources {
            let mut i = self.apps[a].pages.len();
            while i > 0 && budget > 0.0 {
                i -= 1;
                let pages = &mut self.apps[a].pages;
                if pages[i].node != src {
                    continue;
                }
                let take = pages[i].bytes.min(budget);
                budget -= take;
                let owner = pages[i].owner;
                if take >= pages[i].bytes {
                    pages[i].node = to;
                } else {
                    pages[i].bytes -= take;
                    pages.insert(
                        i + 1,
                        PageRun {
                            owner,
                            node: to,
                            bytes: take,
                        },
                    );
                }
                let app = &mut self.apps[a];
                app.bytes_per_node[src] -= take;
                app.bytes_per_node[to] += take;
                if self.obs[owner].state != ThreadState::Exited {
                    let bytes = self.node_bytes.of_mut(owner);
                    bytes[src] = (bytes[src] - take).max(0.0);
                    bytes[to] += take;
                    self.obs[owner].resident_bytes[src] = bytes[src] as u64;
                    self.obs[owner].resident_bytes[to] = bytes[to] as u64;
                    self.changes.note_resident(owner);
                    moved_by_owner.push((owner, take));
                }
            }
        }
        for (owner, bytes) in moved_by_owner {
            self.threads[owner].penalty_ns +=
                bytes / perf::PAGE_MIGRATION_BYTES_PER_S * NS_PER_S as f64;
        }
        self.pages_moved_bytes += m.max_bytes as f64 - budget;
        for c in running {
            if let Some(t) = self.cores[c].current {
                self.cores[c].cur_lat = self.mem_latency(t, c);
                self.set_rate(c);
            }
        }
    }

    /// Bill every running thread up to now, then set each node's queueing delay for the next tick
    /// from the traffic its memory served in the last one ([`perf::queueing_delay_ns`]).
    pub(super) fn update_queueing(&mut self) {
        for c in self.cores.ids() {
            self.bill(c);
        }
        let interval = self.cfg.quantum_ns as f64;
        for n in 0..self.bandwidth.len() {
            let Some(b) = self.bandwidth[n] else {
                continue;
            };
            let delay = perf::queueing_delay_ns(
                self.node_traffic[n],
                interval,
                b,
                self.base_latency[n][n],
                self.queue_delay_ns[n],
            );
            self.queue_delay_ns[n] = delay;
            self.node_traffic[n] = 0.0;
            for (row, base) in self.latency.iter_mut().zip(&self.base_latency) {
                row[n] = base[n] + delay;
            }
        }
    }
}
