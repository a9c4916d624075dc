//! `amps`: the AMPS scheduler of Li, Baumberger, Koufaty and Hahn (SC '07),
//! asymmetry-aware load balancing, faster-core-first scheduling and NUMA-aware migration.
//!
//! AMPS replaces the kernel's balancer, so this policy decides every thread's core and pins it
//! there; within a core the backend time-shares (CFS when live, the simulator's fair queues).
//!
//! 1. **Scaled computing power** (section 2.2): `P = 1` for the slowest cores and `F × S` for a core
//!    `F` times faster, `S = 0.85` (section 3; configurable). [`Topology::scaled_power`].
//! 2. **Scaled load** `L = n / P`, `n` the core's run-queue length (running thread included); the
//!    system is balanced when `Lmax − Lmin ≤ 1` ([`scaled_load`], [`is_balanced`]).
//! 3. **Initial placement** (section 2.3.2): the core with the least *new* scaled load `(n+1)/P`.
//!    Ties go to the faster core while it stays under-utilised (new `L < 1`), and to the slower one
//!    from then on. The paper states "if tied, we choose the faster core" and, in the same
//!    paragraph, walks Figure 2(b) to a fourth thread on a slow core although `4/4 = 1/1`: its
//!    reason ("otherwise four threads would share the faster core and each would perform similarly
//!    to running on a slow core") only holds once the fast core is full, so we read the tie rule as
//!    faster-core-first, which section 2.3 defines for under-utilised cores ([`initial_core`]).
//!    Where the paper is silent, among equal idle cores, Linux's fork placement decides: the
//!    core with the fewest threads on its LLC, then in its module or SMT pipeline.
//! 4. **Dynamic migration** (section 2.3.2): threads, queued or running, move to cores of lower
//!    scaled load even if their core goes idle; never when the destination's scaled load after the
//!    move, `(n_d+1)/P_d`, would reach the source's before it, `n_s/P_s` (the paper says "greater
//!    than"; at equality nothing improves and the thread would move back at the next balance, so we
//!    require strictly less). The busiest source goes first, and among sources of equal scaled load
//!    the slower core counts as more loaded (section 3). Where the paper is silent, Linux's
//!    scheduling domains decide: a source gives its thread to the *nearest* core the move improves
//!    (same LLC, then same node, then any), the least loaded and then the faster among equally
//!    near ones; an idle core pulls from the nearest source it relieves, at once
//!    ([`Policy::on_core_idle`]: faster-core-first). Queued threads move before running ones
//!    (cheaper, section 2.3.3). Across nodes the kernel balances only periodically and only past
//!    its node-level imbalance threshold (`imbalance_pct = 125`; the node domain does not balance
//!    on new-idle), so an idle core pulls only within its node and a periodic move across nodes
//!    needs `n_s/P_s > 1.25 × n_d/P_d` and `n_s/P_s > (n_d+1)/P_d` ([`NODE_IMBALANCE`]). Without this, the first idle core
//!    to be served after a barrier pulled threads away from their memory on NUMA machines.
//! 5. **NUMA-aware migration** (section 2.4): a running thread moves only if the NUMA policy allows
//!    it ([`numa`]: `always`, `same-node`, `rss`). Not in the paper, and only where the combined
//!    policy asks ([`AmpsConfig::keep_siblings_home`]; `amps` itself reproduces the paper's `rss`,
//!    which moved an OpenMP program's threads across nodes thousands of times): under
//!    `same-node` and `rss`, a periodic balance also keeps a running thread of a multi-threaded
//!    process in the node that holds most of its memory, whatever the size (the kernel's
//!    balancer calls such a move cache-hot, `migrate_degrades_locality`). The prediction lets a
//!    barrier job's thread whose resident set is smaller than the LLC move to an idle fast core
//!    in another node near a phase's end; at the next barrier it then took a core at home from a
//!    sibling, which ran away from its pages, and the job ran 12% slower than under the kernel's
//!    balancer.
//! 6. **Throughput first** (ours; the paper is silent, its kernel host was not). A core delivers
//!    its speed `F` while it has a thread and nothing while idle, however many threads share it;
//!    so a move from a core of `n_s` threads to one of `n_d` changes the machine's throughput by
//!    `[n_d = 0]·F_d − [n_s = 1]·F_s` ([`throughput_gain`]), and nothing else does. Moves that
//!    raise it always happen: every idle core pulls a thread waiting elsewhere that may run on it,
//!    from the nearest core first and across nodes too, but only a thread no open idle core of
//!    its own node may take (the kernel's idle balance looks within a node before it looks
//!    across) and only unless section 2.4.2's overhead prediction calls the move costly (a
//!    thread pinned far from its memory for good loses more than the wait; `always` skips the
//!    prediction), else a thread running alone on a slower core
//!    that the scaled load would move (faster-core-first): of the idle core's node first, of
//!    another node only if it is its process's only thread (a thread with siblings would leave
//!    their shared data; the periodic balance's node threshold decides for it) and the overhead
//!    prediction allows; a new thread starts on an idle core if it may. Moves that lower
//!    it never happen: no thread leaves a core it runs alone on for a busy one. Between those,
//!    rules 3 and 4 decide, which only share out the same throughput among threads. The paper's
//!    scaled load counts a core `F` times faster as `F × S` slots, so with `F × S ≥ 2` it keeps
//!    two threads on the fast core while a slow core idles, since the idle core's load after a
//!    move (1) is not below the fast core's (`2/(F × S)`); raising the slow clock until
//!    `F × S < 2` then flips the placement, a cliff in throughput. The paper's Linux host hid
//!    this: its new-idle balance pulled a waiting thread to an idle core whatever AMPS's loads
//!    said. Per-thread progress agrees with the rule wherever it moves anything: the thread
//!    that moves to an idle core gets that core's whole speed, and those it leaves share theirs
//!    among fewer.
//!
//! Balancing runs at every timer interrupt (section 3: "At each timer interrupt, Linux checks if
//! load balancing is necessary"), [`AMPS_BALANCE_PERIOD_NS`], and when a core goes idle
//! (`load_balance_newidle`). Each move of rule 6 raises the summed speed of the busy cores, and
//! each other move keeps the busy cores and strictly lowers `Σ_c Σ_{k≤n_c} k/P_c`, so a balance
//! ends.

pub mod numa;
mod order;
mod scratch;
mod start;

pub use numa::NumaMode;
pub use start::initial_core;

use crate::cpuset::CpuSet;
use crate::ids::{AppId, CoreId, LlcId, NodeId, ThreadId};
use crate::observe::{ThreadState, View};
use crate::policy::{Placement, Policy};
use crate::topology::{Topology, AMPS_SCALING_FACTOR};
use numa::AllocationWatch;
use order::{BucketId, Bucketwise, CoreKey, CoreOrder, Keys};
use scratch::{Closed, Scratch};
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// The policy's name, as users pass it and as the registry lists it.
pub const NAME: &str = "amps";

/// Balance period: one timer interrupt at Linux 2.6's HZ = 250 (AMPS section 3, load balancing
/// "at each timer interrupt"; the paper's kernel is 2.6.16).
pub const AMPS_BALANCE_PERIOD_NS: u64 = 4_000_000;

/// `Machine::distance` of two cores in different nodes.
const ACROSS_NODES: u8 = 2;

/// A move across nodes needs the source's scaled load above this factor times the destination's
/// present load (and above its load after the move): the imbalance threshold of Linux 2.6's
/// node-level scheduling domain
/// (`imbalance_pct = 125` in `SD_NODE_INIT`), which the paper's kernel balanced with.
const NODE_IMBALANCE: f64 = 1.25;

/// Relative tolerance when comparing scaled loads (they are ratios of small integers and `P`).
const LOAD_EPS: f64 = 1e-9;

/// AMPS settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AmpsConfig {
    /// The scaling factor S of section 2.2 (0.85 in section 3).
    pub scaling: f64,
    /// The running-thread migration policy; `None`: the paper's default for the machine
    /// ([`NumaMode::default_for`]).
    pub numa: Option<NumaMode>,
    /// A periodic balance keeps a running thread of a multi-threaded process in the node that
    /// holds most of its memory (rule 5 of the module doc). Not in the paper, whose `rss` mode
    /// moved an OpenMP program's threads across nodes thousands of times (section 4.3), so off
    /// for `amps`; the combined policy sets it.
    pub keep_siblings_home: bool,
}

impl Default for AmpsConfig {
    fn default() -> Self {
        Self {
            scaling: AMPS_SCALING_FACTOR,
            numa: None,
            keep_siblings_home: false,
        }
    }
}

/// Scaled load `L = n / P` (section 2.2).
pub fn scaled_load(runnable: u32, power: f64) -> f64 {
    runnable as f64 / power
}

/// Balanced when `Lmax − Lmin ≤ 1` (section 2.2).
pub fn is_balanced(loads: impl IntoIterator<Item = f64>) -> bool {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for l in loads {
        lo = lo.min(l);
        hi = hi.max(l);
    }
    hi <= lo || hi - lo <= 1.0 + LOAD_EPS
}

/// The change in the machine's instruction throughput, in units of the slowest core's speed, when
/// one thread moves from a core of `n_src` runnable threads and speed `f_src` to a core of `n_dst`
/// and speed `f_dst` (rule 6 of the module doc): a core delivers its speed while it has a thread
/// and nothing while idle, however many threads share it, so only a core that starts or stops
/// being busy changes the total.
pub fn throughput_gain(n_src: u32, f_src: f64, n_dst: u32, f_dst: f64) -> f64 {
    let gained = if n_dst == 0 { f_dst } else { 0.0 };
    let lost = if n_src == 1 { f_src } else { 0.0 };
    gained - lost
}

/// What the policy knows of the machine, derived once from the topology.
#[derive(Clone, Debug)]
struct Machine {
    power: Vec<f64>,
    /// Relative speed `F` of each core (1 for the slowest).
    speed: Vec<f64>,
    numa: NumaMode,
    /// [`AmpsConfig::keep_siblings_home`].
    keep_siblings_home: bool,
    llc: Vec<Option<LlcId>>,
    node: Vec<NodeId>,
    /// Cores of each LLC and of each node.
    llc_cores: Vec<Vec<u32>>,
    node_cores: Vec<Vec<u32>>,
    /// Per core, the cores it shares a module or its SMT pipeline with.
    mates: Vec<Vec<u32>>,
    /// Every core in descending order of the key it has when it runs one thread ([`core_key`]),
    /// and each core's place in that order: where an idle core looks for a lone thread on a
    /// slower core ([`Scratch::pull_into_idle`]) without a pass over every core and a sort for
    /// each idle core.
    lone_order: Vec<u32>,
    lone_rank: Vec<u32>,
}

impl Machine {
    /// How crowded `c`'s surroundings are ([`initial_core`]): the threads on the other cores of
    /// its LLC, then on those it shares a module or its pipeline with. `llc_sums` memoises the
    /// LLCs' counts for one placement (`u32::MAX`: not yet counted).
    fn crowd(&self, runnable: impl Fn(CoreId) -> u32, llc_sums: &mut Vec<u32>, c: CoreId) -> u64 {
        let i = c.index();
        let on_llc = match self.llc[i] {
            Some(l) => {
                llc_sums.resize(self.llc_cores.len(), u32::MAX);
                let sum = &mut llc_sums[l.index()];
                if *sum == u32::MAX {
                    *sum = self.llc_cores[l.index()]
                        .iter()
                        .map(|&x| runnable(CoreId(x)))
                        .sum();
                }
                *sum - runnable(c)
            }
            None => 0,
        };
        let mates: u32 = self.mates[i].iter().map(|&m| runnable(CoreId(m))).sum();
        (u64::from(on_llc) << 32) | u64::from(mates)
    }

    /// Rule 6 lets `t` leave core `s` for an idle core `d`: within a node always, across nodes
    /// unless the overhead prediction calls the move costly ([`costly_across_nodes`]).
    fn pull_allowed(&self, view: &View<'_>, t: ThreadId, s: usize, d: usize) -> bool {
        self.distance(s, d) < ACROSS_NODES || !costly_across_nodes(self.numa, view, t, s, d)
    }

    /// Rule 6 lets idle core `d` pull `t`, waiting on core `s`: as [`Machine::pull_allowed`], and
    /// across nodes only when no other open idle core of `s`'s node (`runnable` gives each core's
    /// runnable threads as the caller counts them) may take it. The kernel's idle balance looks
    /// within a node before it looks across; were the idle cores that come first in this
    /// policy's order to take every node's waiting threads, a node whose cores come later would
    /// empty into theirs.
    fn pull_waiting_allowed(
        &self,
        view: &View<'_>,
        closed: &Closed,
        t: ThreadId,
        s: usize,
        d: usize,
        runnable: impl Fn(usize) -> u32,
    ) -> bool {
        if !self.pull_allowed(view, t, s, d) {
            return false;
        }
        if self.distance(s, d) < ACROSS_NODES {
            return true;
        }
        let allowed = &view.thread(t).user_allowed;
        !self.node_cores[self.node[s].index()].iter().any(|&c| {
            let c = c as usize;
            c != d
                && c != s
                && runnable(c) == 0
                && !closed.core(c)
                && allowed.contains(CoreId(c as u32))
        })
    }

    /// A periodic balance keeps running thread `t` of a multi-threaded process on core `s`
    /// rather than move it to core `d` in another node, away from the node holding most of its
    /// memory (rule 5, with [`AmpsConfig::keep_siblings_home`]; not under `always`). Its
    /// siblings' data and its own pages stay behind, and at the next barrier it would take a core
    /// at home from a sibling.
    fn keeps_home(
        &self,
        view: &View<'_>,
        members: &Members,
        t: ThreadId,
        s: usize,
        d: usize,
    ) -> bool {
        self.keep_siblings_home
            && self.numa != NumaMode::Always
            && !members.alone(t)
            && numa::leaves_home(
                view.topology,
                &view.thread(t).resident_bytes,
                CoreId(s as u32),
                CoreId(d as u32),
            )
    }

    /// A move from `s` to `d` does not lower the machine's throughput (rule 6).
    fn keeps_throughput(&self, runnable: &[u32], s: usize, d: usize) -> bool {
        throughput_gain(runnable[s], self.speed[s], runnable[d], self.speed[d]) >= -LOAD_EPS
    }

    /// How far apart two cores are for a migration, in the order of Linux's scheduling domains:
    /// 0 sharing an LLC, 1 in one node, 2 across nodes.
    fn distance(&self, a: usize, b: usize) -> u8 {
        if self.llc[a].is_some() && self.llc[a] == self.llc[b] {
            0
        } else if self.node[a] == self.node[b] {
            1
        } else {
            2
        }
    }
}

/// The AMPS policy.
#[derive(Clone, Debug, Default)]
pub struct Amps {
    config: AmpsConfig,
    machine: Option<Machine>,
    /// Per thread: the allocation-phase heuristic's state (section 2.4.3).
    alloc: AllocationWatch,
    scratch: Scratch,
    /// The periodic balance's core orders, kept for the next one's reuse.
    orders: Orders,
    /// Cores left to other threads ([`Amps::close`]).
    closed: Closed,
    /// Which threads each process has under the policy (rule 6's pull across nodes).
    members: Members,
}

/// The live threads of each process the policy was given, kept at thread start and exit.
#[derive(Clone, Debug, Default)]
pub(super) struct Members {
    /// Per thread: the process it is counted under.
    of: Vec<Option<AppId>>,
    /// Per process with a thread counted: how many (a process leaves when its last thread does,
    /// so a daemon's churn of processes keeps this to the live ones).
    count: BTreeMap<AppId, u32>,
}

impl Members {
    fn start(&mut self, t: ThreadId, app: AppId) {
        self.exit(t);
        let ti = t.index();
        if self.of.len() <= ti {
            self.of.resize(ti + 1, None);
        }
        self.of[ti] = Some(app);
        *self.count.entry(app).or_insert(0) += 1;
    }

    fn exit(&mut self, t: ThreadId) {
        let Some(app) = self.of.get_mut(t.index()).and_then(Option::take) else {
            return;
        };
        if let Some(n) = self.count.get_mut(&app) {
            *n -= 1;
            if *n == 0 {
                self.count.remove(&app);
            }
        }
    }

    /// `t` is the only thread of its process the policy holds: it shares no data with a thread
    /// it would leave behind.
    pub(super) fn alone(&self, t: ThreadId) -> bool {
        self.of
            .get(t.index())
            .copied()
            .flatten()
            .is_some_and(|a| self.count.get(&a) == Some(&1))
    }
}

/// The cores ordered for a periodic balance, kept up to date move by move and from one balance
/// to the next: by key ([`CoreKey`]) all of them, and those of each LLC and of each node, so that
/// the nearest destinations are read in order instead of sorted for every source; each bucket
/// carries the scaled load its cores would have with one more thread, whose least bounds which
/// sources can shed. Between two balances of a large machine only a few dozen
/// run-queue lengths change, so a balance refiles those cores rather than all of them. A new-idle
/// balance keeps none (`Default`).
#[derive(Clone, Debug, Default)]
struct Orders {
    /// Whether the orders are kept.
    kept: bool,
    /// The machine's cores when they were made (a periodic balance reuses them on the same
    /// machine).
    cores: usize,
    /// The keys of the orders' buckets.
    keys: Keys,
    all: CoreOrder,
    /// Per LLC and per node.
    llc: Vec<CoreOrder>,
    node: Vec<CoreOrder>,
    /// The run-queue length each core is filed under.
    filed: Vec<u32>,
    /// Per LLC, then per node: the least load a core there would have after a move, for one
    /// pass of a periodic balance (NaN until asked for).
    near_least: Vec<f64>,
}

impl Orders {
    /// Every core filed under its run-queue length now: on the machine the orders were made for,
    /// the cores whose length changed since refiled (the keys no core has any more forgotten); on
    /// another, new orders.
    fn refill(&mut self, machine: &Machine, sc: &Scratch) {
        let n = machine.power.len();
        if self.kept && self.cores == n {
            for c in 0..n {
                if self.filed[c] != sc.runnable[c] {
                    self.take(machine, c);
                    self.put(machine, sc, c);
                }
            }
            let all = &self.all;
            self.keys.forget_where(|b| all.is_empty_at(b));
            return;
        }
        let whole = || CoreOrder::new(0, n.saturating_sub(1) as u32);
        let of = |members: &Vec<u32>| {
            let lo = members.iter().copied().min().unwrap_or(0);
            CoreOrder::new(lo, members.iter().copied().max().unwrap_or(lo))
        };
        *self = Orders {
            kept: true,
            cores: n,
            keys: Keys::default(),
            all: whole(),
            llc: machine.llc_cores.iter().map(of).collect(),
            node: machine.node_cores.iter().map(of).collect(),
            filed: vec![0; n],
            near_least: Vec::new(),
        };
        for c in 0..n {
            self.put(machine, sc, c);
        }
    }

    /// The least scaled load a core would have with one more thread.
    fn min_after(&self) -> f64 {
        self.all.least(&self.keys, |_, after| after)
    }

    /// Put core `c` into (`into` true) or take it out of (`into` false) bucket `b` of every order
    /// it belongs to: the whole machine's, its LLC's and its node's.
    fn file(&mut self, machine: &Machine, c: usize, b: BucketId, into: bool) {
        let Orders {
            keys,
            all,
            llc,
            node,
            ..
        } = self;
        let llc = machine.llc[c].and_then(|l| llc.get_mut(l.index()));
        let node = node.get_mut(machine.node[c].index());
        for set in std::iter::once(all).chain(llc).chain(node) {
            if into {
                set.insert(keys, b, c as u32);
            } else {
                set.remove(keys, b, c as u32);
            }
        }
    }

    /// Take core `c`'s keys out, before its run-queue length changes.
    fn take(&mut self, machine: &Machine, c: usize) {
        if !self.kept {
            return;
        }
        let b = self.keys.id(core_key(&self.filed, &machine.power, c));
        self.file(machine, c, b, false);
    }

    /// Put core `c`'s keys back, after its run-queue length changed.
    fn put(&mut self, machine: &Machine, sc: &Scratch, c: usize) {
        if !self.kept {
            return;
        }
        self.filed[c] = sc.runnable[c];
        let b = self.keys.id(sc.key(&machine.power, c));
        self.file(machine, c, b, true);
    }
}

impl Amps {
    pub fn new(config: AmpsConfig) -> Self {
        Self {
            config,
            ..Default::default()
        }
    }

    /// Leave `cores` to `holders`, threads a combined policy places itself: no thread moves to
    /// them or starts there (a thread whose user mask holds only closed cores is left where the
    /// backend puts it), a periodic balance moves every other thread off them (each to the core
    /// it would start on), and the holders never move. With none closed, the policy is the
    /// paper's.
    pub fn close(&mut self, cores: &CpuSet, holders: &[ThreadId]) {
        self.closed.cores.clone_from(cores);
        self.closed.holders.clear();
        self.closed.holders.extend_from_slice(holders);
        self.closed.holders.sort_unstable();
    }

    /// The NUMA policy in force (after the first decision; before it, the configured one).
    pub fn numa_mode(&self) -> Option<NumaMode> {
        self.machine.as_ref().map(|m| m.numa).or(self.config.numa)
    }

    fn ensure_machine(&mut self, topology: &Topology) {
        let stale = self
            .machine
            .as_ref()
            .is_none_or(|m| m.power.len() != topology.num_cores());
        if stale {
            let mut machine = Machine {
                power: topology
                    .cores()
                    .iter()
                    .map(|c| topology.scaled_power(c.id, self.config.scaling))
                    .collect(),
                speed: topology
                    .cores()
                    .iter()
                    .map(|c| topology.relative_speed(c.id))
                    .collect(),
                numa: self
                    .config
                    .numa
                    .unwrap_or_else(|| NumaMode::default_for(topology)),
                keep_siblings_home: self.config.keep_siblings_home,
                llc: topology.cores().iter().map(|c| c.llc).collect(),
                node: topology.cores().iter().map(|c| c.node).collect(),
                llc_cores: (0..topology.num_llcs())
                    .map(|l| {
                        topology
                            .cores()
                            .iter()
                            .filter(|c| c.llc.map(LlcId::index) == Some(l))
                            .map(|c| c.id.0)
                            .collect()
                    })
                    .collect(),
                node_cores: topology
                    .nodes()
                    .iter()
                    .map(|nd| topology.node_cores(nd.id).iter().map(|c| c.0).collect())
                    .collect(),
                mates: topology
                    .cores()
                    .iter()
                    .map(|c| {
                        let mut m: Vec<u32> = topology
                            .module_mates(c.id)
                            .into_iter()
                            .chain(c.siblings.iter().copied())
                            .map(|x| x.0)
                            .collect();
                        m.sort_unstable();
                        m.dedup();
                        m
                    })
                    .collect(),
                lone_order: Vec::new(),
                lone_rank: Vec::new(),
            };
            let ones = vec![1; machine.power.len()];
            let mut order: Vec<u32> = (0..machine.power.len() as u32).collect();
            order.sort_unstable_by_key(|&c| Reverse(core_key(&ones, &machine.power, c as usize)));
            let mut rank = vec![0; order.len()];
            for (i, &c) in order.iter().enumerate() {
                rank[c as usize] = i as u32;
            }
            machine.lone_order = order;
            machine.lone_rank = rank;
            self.machine = Some(machine);
        }
    }

    /// Move threads to less loaded cores until no source that has not failed in this balance can
    /// shed a thread (rule 4 of the module doc). With `only`, just that core pulls (new-idle
    /// balance).
    fn balance(&mut self, view: &View<'_>, only: Option<CoreId>, out: &mut Vec<Placement>) {
        self.ensure_machine(view.topology);
        let Some(machine) = self.machine.as_ref() else {
            return;
        };
        let power = &machine.power[..];
        let n = power.len();
        if n != view.cores.len() {
            return;
        }
        let closed = &self.closed;
        if only.is_some_and(|d| closed.core(d.index())) {
            return;
        }
        if only.is_none() && !closed.strays(view) && !may_move(machine, view) {
            return;
        }
        let sc = &mut self.scratch;
        sc.fill(view);
        if only.is_none() {
            sc.vacate(view, machine, closed, out);
        }
        let mut order = match only {
            None => {
                let mut order = std::mem::take(&mut self.orders);
                order.refill(machine, sc);
                order
            }
            Some(_) => Orders::default(),
        };
        let max_moves = view.threads.len() + n;
        let mut moves = 0;
        let mut candidates: Vec<(u8, CoreKey)> = Vec::new();
        // Where the periodic balance's next pass starts: below the source of the last move. A
        // source found unable to shed is not tried again in this balance, and every source above
        // the last move's was found so; the last source and its destination are filed below it
        // after the move (the source lost a thread, the destination's load stays below the
        // source's before the move), and no other core's key changed.
        let mut below: Option<CoreKey> = None;
        // Idle cores first (rule 6): each pulls a waiting thread, or a running one it would run
        // faster; on a new-idle call only the core that went idle.
        let mut idle: Vec<usize> = Vec::new();
        let mut crowded: Vec<u32> = Vec::new();
        let mut busy: Vec<u32> = Vec::new();
        let mut fill = |sc: &mut Scratch,
                        order: &mut Orders,
                        moves: &mut usize,
                        candidates: &mut Vec<(u8, CoreKey)>,
                        out: &mut Vec<Placement>| {
            idle.clear();
            match only {
                Some(d) => idle.push(d.index()),
                None => idle.extend((0..n).filter(|&c| sc.runnable[c] == 0 && !closed.core(c))),
            }
            if idle.is_empty() {
                return;
            }
            // The cores with a thread waiting: a pull only ever takes from them (and leaves
            // them with one fewer), so none joins them in this pass. And the cores with a thread,
            // in `lone_order`'s order: those a lone thread can come from (the idle cores that
            // pull join them below).
            crowded.clear();
            crowded.extend((0..n as u32).filter(|&c| sc.runnable[c as usize] >= 2));
            busy.clear();
            busy.extend(
                machine
                    .lone_order
                    .iter()
                    .filter(|&&c| sc.runnable[c as usize] >= 1),
            );
            // The fastest idle core pulls first.
            idle.sort_unstable_by(|&a, &b| power[b].total_cmp(&power[a]).then(a.cmp(&b)));
            for &d in &idle {
                if sc.runnable[d] != 0 || *moves >= max_moves {
                    continue;
                }
                let Some((s, t, was_running)) = sc.pull_into_idle(
                    machine,
                    view,
                    self.alloc.phases(),
                    closed,
                    &self.members,
                    candidates,
                    &crowded,
                    &busy,
                    d,
                ) else {
                    continue;
                };
                let rank = |c: &u32| machine.lone_rank[*c as usize];
                if let Err(at) = busy.binary_search_by_key(&rank(&(d as u32)), rank) {
                    busy.insert(at, d as u32);
                }
                sc.apply_keyed(view, order, machine, t, was_running, s, d);
                out.push(Placement::pin(t, CoreId(d as u32)));
                *moves += 1;
            }
        };
        fill(sc, &mut order, &mut moves, &mut candidates, out);
        'balance: while moves < max_moves {
            if let Some(d) = only {
                // New-idle balance, once the core runs a thread: `d` pulls from the nearest source
                // it would relieve, the busiest (then slower) first among equally near ones, if
                // the move does not leave the source idle (rule 6).
                let d = d.index();
                let after = scaled_load(sc.runnable[d] + 1, power[d]);
                candidates.clear();
                // The cores nearer than another node: `d`'s node, and LLC mates elsewhere.
                let node = &machine.node_cores[machine.node[d].index()];
                let llc_elsewhere = machine.llc[d]
                    .map_or(&[][..], |l| &machine.llc_cores[l.index()][..])
                    .iter()
                    .filter(|&&s| machine.node[s as usize] != machine.node[d]);
                candidates.extend(node.iter().chain(llc_elsewhere).filter_map(|&s| {
                    let s = s as usize;
                    let k = sc.key(power, s);
                    let near = machine.distance(s, d);
                    let keeps = machine.keeps_throughput(&sc.runnable, s, d);
                    (s != d && near < ACROSS_NODES && keeps && improves(after, sc.load(power, s)))
                        .then_some((near, k))
                }));
                // Nearest first; within a distance, the greatest key (busiest, slower) first.
                candidates.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
                let dst = CoreId(d as u32);
                let found = candidates.iter().find_map(|&(_, k)| {
                    let s = k.2 as usize;
                    sc.movable(view, machine.numa, self.alloc.phases(), closed, s, dst)
                        .map(|m| (s, m))
                });
                let Some((s, (t, was_running))) = found else {
                    return;
                };
                sc.apply_keyed(view, &mut order, machine, t, was_running, s, d);
                out.push(Placement::pin(t, dst));
                moves += 1;
                continue 'balance;
            }
            // Periodic balance: the busiest source (the slower on ties) gives a thread to the
            // nearest core the move improves, the least loaded (then faster) among equally near.
            // No source at or below the least load any core would have after a move can shed.
            let min_after = order.min_after();
            // The least load a core in another node must be below for a pull across nodes:
            // its load after the move, and its load now by the node domain's threshold.
            let across = order.all.least(&order.keys, |load_d, after| {
                after.max(load_d * NODE_IMBALANCE)
            });
            // The least load after a move in each LLC and node, worked out when first asked for in
            // this pass.
            let near_least = &mut order.near_least;
            near_least.clear();
            near_least.resize(order.llc.len() + order.node.len(), f64::NAN);
            let mut least_in = |i: usize, members: &CoreOrder, keys: &Keys| {
                if near_least[i].is_nan() {
                    near_least[i] = members.least(keys, |_, after| after);
                }
                near_least[i]
            };
            let mut decision = None;
            for (lk, pk, sk) in order.all.iter_rev_below(&order.keys, below) {
                let s = sk as usize;
                let load = f64::from_bits(lk);
                if !improves(min_after, load) {
                    break;
                }
                // A source that no core of its LLC or node would relieve, nor any across nodes,
                // sheds nothing: found so without a search of its destinations. On a large
                // machine most sources above the least load anywhere are such.
                let near = machine.llc[s]
                    .map_or(f64::MAX, |l| {
                        least_in(l.index(), &order.llc[l.index()], &order.keys)
                    })
                    .min({
                        let k = machine.node[s].index();
                        least_in(order.llc.len() + k, &order.node[k], &order.keys)
                    });
                if !improves(near.min(across), load) {
                    continue;
                }
                // The load test goes by bucket of destinations (one load and power: all its
                // cores have the same load after the move), the other tests core by core in
                // `try_dest`. Past the first bucket too loaded now to improve, none can (loads
                // ascend, and a core's load after a move exceeds its load now); across nodes that
                // bound is the node domain's threshold.
                let bucket = |near: u8| {
                    move |load_d: f64, after: f64| {
                        let bound = if near == ACROSS_NODES {
                            load_d * NODE_IMBALANCE
                        } else {
                            load_d
                        };
                        if !improves(bound, load) {
                            return Bucketwise::Stop;
                        }
                        // Across nodes the source must also exceed the destination's present
                        // load by the node domain's threshold (`find_busiest_group` compares the
                        // busiest group with the local group's load as it is, not after the pull).
                        let needed = if near == ACROSS_NODES {
                            after.max(load_d * NODE_IMBALANCE)
                        } else {
                            after
                        };
                        if improves(needed, load) {
                            Bucketwise::Look
                        } else {
                            Bucketwise::Skip
                        }
                    }
                };
                // Within a bucket that passed, the order's ascending keys are the least loaded
                // (then faster) cores, so the first that takes the thread is the one.
                let try_dest = |d: usize, near: u8| {
                    if d == s
                        || closed.core(d)
                        || machine.distance(s, d) != near
                        || !machine.keeps_throughput(&sc.runnable, s, d)
                    {
                        return None;
                    }
                    let dst = CoreId(d as u32);
                    sc.movable(view, machine.numa, self.alloc.phases(), closed, s, dst)
                        .filter(|&(t, running)| {
                            !running
                                || near < ACROSS_NODES
                                || !machine.keeps_home(view, &self.members, t, s, d)
                        })
                        .map(|m| (dst, m))
                };
                // Within the LLC, then the node, then the whole machine, each in ascending key.
                let nearby = |members: &CoreOrder, near: u8| {
                    members
                        .find_ascending(&order.keys, bucket(near), |d| try_dest(d as usize, near))
                };
                let found = machine.llc[s]
                    .and_then(|l| nearby(&order.llc[l.index()], 0))
                    .or_else(|| nearby(&order.node[machine.node[s].index()], 1))
                    .or_else(|| nearby(&order.all, ACROSS_NODES));
                if let Some((dst, m)) = found {
                    decision = Some((s, dst, m, (lk, pk, sk)));
                    break;
                }
            }
            let Some((s, dst, (t, was_running), key)) = decision else {
                break;
            };
            below = Some(key);
            sc.apply_keyed(view, &mut order, machine, t, was_running, s, dst.index());
            out.push(Placement::pin(t, dst));
            moves += 1;
        }
        if only.is_none() {
            fill(sc, &mut order, &mut moves, &mut candidates, out);
            self.orders = order;
        }
    }
}

/// A pull of `t` from core `s` to core `d` in another node that AMPS's overhead prediction
/// (section 2.4.2) calls costly: its largest resident set is on `s`'s node and exceeds `d`'s LLC.
/// Under `always` nothing is.
fn costly_across_nodes(numa: NumaMode, view: &View<'_>, t: ThreadId, s: usize, d: usize) -> bool {
    numa != NumaMode::Always
        && numa::high_overhead(
            view.topology,
            &view.thread(t).resident_bytes,
            CoreId(s as u32),
            CoreId(d as u32),
        )
}

/// Whether a periodic balance can move anything, from the run-queue lengths alone: only if a core
/// idles (rule 6) or the busiest core's scaled load exceeds the least any core would have after a
/// move (rule 4: no source at or below that can shed). When neither holds the balance ends before
/// looking at a thread, so it is skipped at the cost of one pass over the cores.
fn may_move(machine: &Machine, view: &View<'_>) -> bool {
    let power = &machine.power[..];
    let (mut busiest, mut min_after) = (f64::MIN, f64::MAX);
    for (c, core) in view.cores.iter().enumerate() {
        if core.runnable == 0 {
            return true;
        }
        busiest = busiest.max(scaled_load(core.runnable, power[c]));
        min_after = min_after.min(scaled_load(core.runnable + 1, power[c]));
    }
    improves(min_after, busiest)
}

/// Core `c`'s order key when the cores' run-queue lengths are `runnable`.
pub(super) fn core_key(runnable: &[u32], power: &[f64], c: usize) -> CoreKey {
    (
        scaled_load(runnable[c], power[c]).to_bits(),
        Reverse(power[c].to_bits()),
        c as u32,
    )
}

/// A move to a core whose new scaled load is `after` improves a source of scaled load `load`
/// only if `after` is strictly less (rule 4).
fn improves(after: f64, load: f64) -> bool {
    after < load - LOAD_EPS * after.max(1.0)
}

impl Policy for Amps {
    fn needs(&self) -> &'static [crate::policy::Signal] {
        use crate::policy::Signal;
        &[Signal::NodeResidency]
    }

    fn name(&self) -> &str {
        NAME
    }

    fn rebalance_period_ns(&self) -> u64 {
        AMPS_BALANCE_PERIOD_NS
    }

    fn rebalance(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        self.ensure_machine(view.topology);
        if self
            .machine
            .as_ref()
            .is_some_and(|m| m.numa == NumaMode::Rss)
        {
            // The allocation-phase heuristic's timer interrupt (section 2.4.3): it looks at the
            // interrupted (running) threads. Only the `rss` policy reads the result.
            self.alloc.interrupt(view);
        }
        self.balance(view, None, out);
    }

    fn on_thread_start(&mut self, view: &View<'_>, thread: ThreadId) -> Option<CpuSet> {
        self.alloc.restart(thread);
        self.members.start(thread, view.thread(thread).app);
        self.ensure_machine(view.topology);
        let machine = self.machine.as_ref()?;
        let power = &machine.power;
        // A thread that already runs or waits somewhere (it joins from another policy's care)
        // leaves its core: that core counts without it.
        let obs = view.thread(thread);
        let here = obs
            .cpu
            .filter(|_| matches!(obs.state, ThreadState::Running | ThreadState::Runnable));
        let open;
        let allowed = if self.closed.cores.is_empty() {
            &obs.user_allowed
        } else {
            open = obs.user_allowed.difference(&self.closed.cores);
            &open
        };
        let mut llc_sums = Vec::new();
        // Read for every core at every start: a compare of plain integers, no branch.
        let here = here.map_or(u32::MAX, |c| c.0);
        let runnable = |c: CoreId| view.core(c).runnable.saturating_sub(u32::from(c.0 == here));
        initial_core(
            allowed,
            runnable,
            |c| power[c.index()],
            |c| machine.crowd(runnable, &mut llc_sums, c),
        )
        .map(CpuSet::single)
    }

    fn on_thread_exit(&mut self, _view: &View<'_>, thread: ThreadId) {
        self.members.exit(thread);
    }

    fn on_core_idle(&mut self, view: &View<'_>, core: CoreId, out: &mut Vec<Placement>) {
        self.balance(view, Some(core), out);
    }

    /// Every thread, but across nodes only where the overhead prediction allows and no idle core
    /// of its own node may take it (rule 6).
    fn conserves_work_for(&self, view: &View<'_>, thread: ThreadId, core: CoreId) -> bool {
        let Some(m) = self.machine.as_ref() else {
            return true;
        };
        let Some(src) = view.thread(thread).cpu else {
            return true;
        };
        m.pull_waiting_allowed(view, &self.closed, thread, src.index(), core.index(), |c| {
            view.cores[c].runnable
        })
    }
}

#[cfg(test)]
mod tests;
