use super::*;
use crate::observe::{CoreObs, ThreadObs, ThreadState};
use crate::presets::machine_preset;
use crate::topology::Topology;

/// Threads with data fragments on a machine; core loads follow the policy's pins.
struct State {
    topo: Topology,
    threads: Vec<ThreadObs>,
    now: u64,
}

impl State {
    fn new(machine: &str) -> Self {
        State {
            topo: machine_preset(machine).unwrap().unwrap(),
            threads: Vec::new(),
            now: 0,
        }
    }
    fn cores(&self) -> Vec<CoreObs> {
        let mut c = vec![CoreObs::default(); self.topo.num_cores()];
        for t in self.threads.iter().filter(|t| is_runnable(t.state)) {
            if let Some(cpu) = t.cpu {
                c[cpu.index()].runnable += 1;
            }
        }
        c
    }
    fn start(&mut self, p: &mut DataSharing, app: u32, df: Option<u64>) -> ThreadId {
        let id = ThreadId(self.threads.len() as u32);
        let mut t = ThreadObs::new(id, AppId(app), self.topo.all_cores(), 1);
        t.data_fragment = df;
        self.threads.push(t);
        self.now += 1;
        let cores = self.cores();
        let view = crate::policies::fixture::view(&self.topo, &self.threads, &cores, self.now);
        let set = p.on_thread_start(&view, id);
        let t = &mut self.threads[id.index()];
        t.state = ThreadState::Runnable;
        t.cpu = set.as_ref().and_then(CpuSet::first).or(Some(CoreId(0)));
        if let Some(s) = set {
            t.allowed = s;
        }
        id
    }
    fn apply(&mut self, out: &[Placement]) {
        for p in out {
            let t = &mut self.threads[p.thread.index()];
            t.allowed = p.cpus.clone();
            if !t.allowed.contains(t.cpu.unwrap()) {
                t.cpu = t.allowed.first();
            }
        }
    }
    fn hint(&mut self, p: &mut DataSharing, t: ThreadId, next: Option<u64>) -> Vec<Placement> {
        let current = self.threads[t.index()].data_fragment;
        self.threads[t.index()].data_fragment = next;
        self.now += 1;
        let cores = self.cores();
        let view = crate::policies::fixture::view(&self.topo, &self.threads, &cores, self.now);
        let mut out = Vec::new();
        p.on_hint(&view, t, &Hint::DataFragment { current, next }, &mut out);
        self.apply(&out);
        out
    }
    fn rebalance(&mut self, p: &mut DataSharing) -> Vec<Placement> {
        self.now += DS_BALANCE_PERIOD_NS;
        let cores = self.cores();
        let view = crate::policies::fixture::view(&self.topo, &self.threads, &cores, self.now);
        let mut out = Vec::new();
        p.rebalance(&view, &mut out);
        self.apply(&out);
        out
    }
}

#[test]
fn new_dfs_go_to_the_least_loaded_cpu_and_known_dfs_join_their_group() {
    let mut s = State::new("amps-smp");
    let mut p = DataSharing::new();
    let a = s.start(&mut p, 0, Some(1));
    let b = s.start(&mut p, 0, Some(2));
    let c = s.start(&mut p, 0, Some(1));
    let d = s.start(&mut p, 0, Some(3));
    assert_eq!(p.cpu_of(a), Some(CoreId(0)));
    assert_eq!(p.cpu_of(b), Some(CoreId(1)), "least loaded, lowest id");
    assert_eq!(p.cpu_of(c), Some(CoreId(0)), "known DF: its group's CPU");
    assert_eq!(p.cpu_of(d), Some(CoreId(2)));
    assert_eq!(p.group_sizes(AppId(0), 1), vec![(CoreId(0), 2)]);
    // The same DF number in another application is another fragment.
    let e = s.start(&mut p, 7, Some(1));
    assert_eq!(p.cpu_of(e), Some(CoreId(3)));
    // No DF: unmanaged.
    let f = s.start(&mut p, 0, None);
    assert_eq!(p.cpu_of(f), None);
    assert!(p.batches_by_data_fragment());
}

#[test]
fn changing_df_leaves_the_group_and_arrives_again() {
    let mut s = State::new("pinter-smp");
    let mut p = DataSharing::new();
    let a = s.start(&mut p, 0, Some(1));
    let b = s.start(&mut p, 0, Some(2));
    assert_eq!(
        (p.cpu_of(a), p.cpu_of(b)),
        (Some(CoreId(0)), Some(CoreId(1)))
    );
    // a moves to DF 2: it joins b's group on CPU 1; DF 1's group is empty and removed.
    let out = s.hint(&mut p, a, Some(2));
    assert_eq!(out, vec![Placement::pin(a, CoreId(1))]);
    assert_eq!(p.group_sizes(AppId(0), 2), vec![(CoreId(1), 2)]);
    assert!(p.group_sizes(AppId(0), 1).is_empty());
    assert_eq!(p.stats.groups_removed, 1);
    // a leaves every DF: unmanaged again, free to run anywhere.
    let out = s.hint(&mut p, a, None);
    assert_eq!(out, vec![Placement::new(a, s.topo.all_cores())]);
    assert_eq!(p.cpu_of(a), None);
    // A thread that dies leaves its group.
    let cores = s.cores();
    let view = crate::policies::fixture::view(&s.topo, &s.threads, &cores, s.now);
    p.on_thread_exit(&view, b);
    assert!(p.group_sizes(AppId(0), 2).is_empty());
}

#[test]
fn a_sleeper_keeps_its_group_and_wakes_on_its_cpu() {
    let mut s = State::new("pinter-smp");
    let mut p = DataSharing::new();
    let a = s.start(&mut p, 0, Some(1));
    s.threads[a.index()].state = ThreadState::Blocked;
    s.rebalance(&mut p);
    // Still pinned to its group's CPU, which is where the backend wakes it.
    assert_eq!(s.threads[a.index()].allowed.to_list(), "0");
    assert_eq!(p.cpu_of(a), Some(CoreId(0)));
}

#[test]
fn the_balancer_moves_whole_groups_then_splits_when_it_must() {
    let mut s = State::new("pinter-smp");
    let mut p = DataSharing::new();
    // Three DFs of two threads each: new DFs alternate between the two CPUs by load.
    let groups: Vec<Vec<ThreadId>> = (0..3)
        .map(|df| (0..2).map(|_| s.start(&mut p, 0, Some(df))).collect())
        .collect();
    // DF 0 on CPU 0, DF 1 on CPU 1, DF 2 on CPU 0 (4 vs 2 runnable).
    assert_eq!(p.cpu_of(groups[2][0]), Some(CoreId(0)));
    // Not imbalanced: 4 vs 2 is past 25% and two apart, so one group of two would overshoot
    // (2 * 2 > 2): nothing moves yet.
    assert!(s.rebalance(&mut p).is_empty());
    // DF 0 grows to 4: 6 vs 2. A group of two now moves whole.
    for _ in 0..2 {
        s.start(&mut p, 0, Some(0));
    }
    let out = s.rebalance(&mut p);
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(out.iter().all(|pl| pl.cpus.to_list() == "1"));
    assert_eq!(p.stats.group_moves, 1);
    // One big group of 8 on CPU 0 against nothing on CPU 1: no whole group fits, so after the
    // imbalance persists, the group is split in two.
    let mut s = State::new("pinter-smp");
    let mut p = DataSharing::new();
    let big: Vec<ThreadId> = (0..8).map(|_| s.start(&mut p, 0, Some(5))).collect();
    assert!(big.iter().all(|&t| p.cpu_of(t) == Some(CoreId(0))));
    for _ in 0..SPLIT_AFTER - 1 {
        assert!(s.rebalance(&mut p).is_empty());
    }
    let out = s.rebalance(&mut p);
    assert_eq!(out.len(), 4);
    assert_eq!(p.stats.group_splits, 1);
    assert_eq!(
        p.group_sizes(AppId(0), 5),
        vec![(CoreId(0), 4), (CoreId(1), 4)]
    );
    // The next thread of that DF joins the less populated of its groups.
    let late = s.start(&mut p, 0, Some(5));
    assert_eq!(p.cpu_of(late), Some(CoreId(0)));
}

/// Split at arrival (`hetsched`'s fragments part): eight threads of one DF on an idle 8-CPU
/// machine each found a group of their own, one a CPU; the paper's policy puts all eight on one
/// CPU. With every CPU already running two threads, groups of the DF hold three (the fair share of
/// 16 + 1 runnable threads on 8 CPUs) before another is founded.
#[test]
fn groups_split_at_arrival_hold_a_fair_share_of_a_cpu() {
    let mut paper = State::new("amps-smp");
    let mut p = DataSharing::new();
    let cpus: Vec<_> = (0..8).map(|_| paper.start(&mut p, 1, Some(7))).collect();
    let on = |s: &State, ts: &[ThreadId]| {
        let mut c: Vec<CoreId> = ts
            .iter()
            .map(|t| s.threads[t.index()].cpu.unwrap())
            .collect();
        c.sort();
        c.dedup();
        c.len()
    };
    assert_eq!(on(&paper, &cpus), 1, "the paper's groups");
    let mut s = State::new("amps-smp");
    let mut q = DataSharing::splitting_at_arrival();
    let spread: Vec<_> = (0..8).map(|_| s.start(&mut q, 1, Some(7))).collect();
    assert_eq!(on(&s, &spread), 8, "one group a CPU");
    let mut s = State::new("amps-smp");
    let mut q = DataSharing::splitting_at_arrival();
    for i in 0..16 {
        s.start(&mut q, 100 + i, None);
        let c = CoreId(i / 2);
        let t = s.threads.last_mut().unwrap();
        t.cpu = Some(c);
    }
    let df: Vec<_> = (0..6).map(|_| s.start(&mut q, 1, Some(7))).collect();
    let sizes: Vec<u32> = q.group_sizes(AppId(1), 7).iter().map(|g| g.1).collect();
    assert_eq!(sizes, vec![3, 3], "{df:?}");
}
