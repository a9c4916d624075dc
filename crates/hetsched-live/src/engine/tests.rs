use super::*;

use crate::tracker::Found;
use hetsched_core::policy::Policy;
use std::sync::mpsc;

/// A policy that pins every live thread to `core` at each rebalance, or panics when asked.
struct Scripted {
    core: std::sync::Arc<std::sync::atomic::AtomicU32>,
    panic: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Policy for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn rebalance_period_ns(&self) -> u64 {
        1
    }
    fn rebalance(&mut self, view: &View<'_>, out: &mut Vec<Placement>) {
        assert!(
            !self.panic.load(std::sync::atomic::Ordering::Relaxed),
            "scripted failure"
        );
        let core = CoreId(self.core.load(std::sync::atomic::Ordering::Relaxed));
        for t in view
            .threads
            .iter()
            .filter(|t| t.state != ThreadState::Exited)
        {
            out.push(Placement::pin(t.id, core));
        }
    }
}

/// Threads of this test process that sleep until told to end.
struct Sleepers {
    tids: Vec<u32>,
    stop: Vec<mpsc::Sender<()>>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Sleepers {
    fn new(n: usize) -> Sleepers {
        let mut s = Sleepers {
            tids: Vec::new(),
            stop: Vec::new(),
            handles: Vec::new(),
        };
        for _ in 0..n {
            let (tx, rx) = mpsc::channel();
            let (stop_tx, stop_rx) = mpsc::channel::<()>();
            s.handles.push(std::thread::spawn(move || {
                tx.send(sys::gettid()).unwrap();
                let _ = stop_rx.recv();
            }));
            s.tids.push(rx.recv().unwrap());
            s.stop.push(stop_tx);
        }
        s
    }
    fn end(self) {
        drop(self.stop);
        for h in self.handles {
            h.join().unwrap();
        }
    }
}

fn two_class_machine() -> Topology {
    let n = crate::discover(std::path::Path::new("/"))
        .topology
        .num_cores();
    hetsched_core::machine_file::parse_machine(
        &format!(
            "name = \"t\"\nmemory_latency_ns = 90.0\n[[classes]]\nname = \"fast\"\ncapacity = 1.0\n\
             [[classes]]\nname = \"slow\"\ncapacity = 0.5\n[[cores]]\ncpus = \"0\"\nclass = \"fast\"\n\
             [[cores]]\ncpus = \"1-{}\"\nclass = \"slow\"\n",
            n - 1
        ),
        "test",
    )
    .unwrap()
}

fn engine_for(
    threads: &Sleepers,
    config: EngineConfig,
    dir: &std::path::Path,
) -> (
    Engine,
    std::sync::Arc<std::sync::atomic::AtomicU32>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let topology = two_class_machine();
    let cpus = CpuMap::new(&crate::discover(std::path::Path::new("/")).topology);
    let core = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(1));
    let panic = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let policy = Box::new(Scripted {
        core: core.clone(),
        panic: panic.clone(),
    });
    let journal = if config.dry_run {
        None
    } else {
        Some(Journal::create(dir).unwrap())
    };
    let mut e = Engine::new(
        topology,
        cpus,
        &CpuSet::new(),
        policy,
        CounterPlan::none(),
        config,
        journal,
    );
    add_all(&mut e, threads);
    (e, core, panic)
}

fn needs_two_cpus() -> bool {
    let n = crate::discover(std::path::Path::new("/"))
        .topology
        .num_cores();
    n >= 2 && sys::get_affinity(sys::gettid()).is_ok_and(|m| m.cpus().count() >= 2)
}

#[test]
fn dwell_and_the_move_cap_hold_threads_back_and_finish_restores() {
    if !needs_two_cpus() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hs-engine-dwell-{}", std::process::id()));
    let th = Sleepers::new(3);
    let original = sys::get_affinity(th.tids[0]).unwrap();
    let config = EngineConfig {
        min_dwell: Duration::from_millis(500),
        max_moves: 2,
        work_conserving: false,
        ..Default::default()
    };
    let (mut e, core, _) = engine_for(&th, config, &dir);
    e.tick(1_000_000);
    // Three threads want core 1; the cap lets two move.
    let d = e.decisions();
    assert_eq!((d.applied, d.held_by_cap), (2, 1), "{d:?}");
    let on = |tid: u32| sys::get_affinity(tid).unwrap().to_list();
    let slow_os = e.cpus.os_cpu(CoreId(1)).to_string();
    let moved: Vec<u32> = th
        .tids
        .iter()
        .copied()
        .filter(|&t| on(t) == slow_os)
        .collect();
    assert_eq!(moved.len(), 2);
    // Next interval: the third moves; the two moved ones now asked for core 0 are held by
    // their dwell time.
    e.tick(2_000_000);
    assert_eq!(e.decisions().applied, 3);
    core.store(0, std::sync::atomic::Ordering::Relaxed);
    e.tick(3_000_000);
    assert!(e.decisions().held_by_dwell >= 2, "{:?}", e.decisions());
    // After the dwell they move (two an interval).
    e.tick(600_000_000);
    e.tick(601_000_000);
    let fast_os = e.cpus.os_cpu(CoreId(0)).to_string();
    assert!(th.tids.iter().all(|&t| on(t) == fast_os));
    let summary = e.finish();
    assert_eq!(summary.restore.restored, 3);
    assert!(th
        .tids
        .iter()
        .all(|&t| sys::get_affinity(t).unwrap() == original));
    th.end();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_panicking_policy_is_disabled_and_affinities_restored() {
    if !needs_two_cpus() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hs-engine-panic-{}", std::process::id()));
    let th = Sleepers::new(2);
    let original = sys::get_affinity(th.tids[0]).unwrap();
    let config = EngineConfig {
        work_conserving: false,
        ..Default::default()
    };
    let (mut e, _, panic) = engine_for(&th, config, &dir);
    e.tick(1_000_000);
    assert_eq!(e.decisions().applied, 2);
    assert_ne!(sys::get_affinity(th.tids[0]).unwrap(), original);
    panic.store(true, std::sync::atomic::Ordering::Relaxed);
    e.tick(2_000_000);
    assert!(th
        .tids
        .iter()
        .all(|&t| sys::get_affinity(t).unwrap() == original));
    let s = e.finish();
    assert!(s
        .policy_disabled
        .as_deref()
        .is_some_and(|m| m.contains("scripted failure")));
    // Further intervals do nothing.
    th.end();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_mask_the_program_set_itself_is_adopted_not_overwritten() {
    if !needs_two_cpus() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hs-engine-adopt-{}", std::process::id()));
    let th = Sleepers::new(1);
    let tid = th.tids[0];
    let config = EngineConfig {
        min_dwell: Duration::ZERO,
        work_conserving: false,
        ..Default::default()
    };
    let (mut e, core, _) = engine_for(&th, config, &dir);
    e.tick(1_000_000);
    assert_eq!(e.decisions().applied, 1);
    // The program pins its thread to CPU 0 itself.
    let own = OsMask::from_cpus([e.cpus.os_cpu(CoreId(0))]);
    sys::set_affinity(tid, &own).unwrap();
    // The policy asks for a change: the engine finds the program's mask, adopts it as the
    // user's and leaves it.
    core.store(0, std::sync::atomic::Ordering::Relaxed);
    e.tick(2_000_000);
    assert_eq!(e.decisions().adopted_user_changes, 1);
    assert_eq!(sys::get_affinity(tid).unwrap(), own);
    core.store(1, std::sync::atomic::Ordering::Relaxed);
    e.tick(3_000_000);
    // Core 1 is outside the program's mask now.
    assert!(e.decisions().outside_user_mask >= 1, "{:?}", e.decisions());
    let s = e.finish();
    assert_eq!(s.restore.restored, 0);
    assert_eq!(sys::get_affinity(tid).unwrap(), own);
    th.end();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn widening_adds_faster_cores_of_the_same_node_only() {
    // Two nodes, each with one fast core (0, 2) and one slow core (1, 3).
    let t = hetsched_core::machine_file::parse_machine(
        r#"
name = "two-by-two"
[[classes]]
name = "fast"
capacity = 1.0
[[classes]]
name = "slow"
capacity = 0.5
[[cores]]
cpus = "0,2"
class = "fast"
[[cores]]
cpus = "1,3"
class = "slow"
[[nodes]]
cpus = "0-1"
distance = [10, 20]
latency_ns = [80.0, 140.0]
[[nodes]]
cpus = "2-3"
distance = [20, 10]
latency_ns = [140.0, 80.0]
"#,
        "test",
    )
    .unwrap();
    let w = widen_upward(&t, &CpuSet::single(CoreId(3)));
    assert_eq!(w.to_list(), "2-3");
    let w = widen_upward(&t, &[CoreId(1), CoreId(3)].into_iter().collect());
    assert_eq!(w.to_list(), "0-3");
    // A placement onto a fast core stays as it is.
    assert_eq!(widen_upward(&t, &CpuSet::single(CoreId(0))).to_list(), "0");
}

fn add_all(e: &mut Engine, threads: &Sleepers) {
    let proc = Proc::default();
    let pid = std::process::id();
    for &tid in &threads.tids {
        let st = proc.task_stat(pid, tid).unwrap();
        assert!(e.add(Found {
            pid,
            tid,
            start_ticks: st.start_ticks,
            group: 0,
            ppid: st.ppid,
        }));
    }
}

#[test]
fn exited_threads_leave_their_slots_to_new_ones_and_the_summary_counts_them_all() {
    let dir = std::env::temp_dir().join(format!("hetsched-slots-{}", std::process::id()));
    let first = Sleepers::new(8);
    let config = EngineConfig {
        dry_run: true,
        ..EngineConfig::default()
    };
    let (mut e, _, _) = engine_for(&first, config, &dir);
    let mut waves = vec![first];
    // Waves of 8 threads that come and go, with a wave of 600 in the middle: the slots follow
    // what is live, and shrink back after the burst.
    for (k, n) in [8, 8, 600, 8, 8, 8].into_iter().enumerate() {
        let next = Sleepers::new(n);
        add_all(&mut e, &next);
        e.tick((k as u64 + 1) * 100_000_000);
        for w in waves.drain(..) {
            for &tid in &w.tids {
                e.remove(tid);
            }
            w.end();
        }
        // Compaction waits for the next interval.
        e.tick((k as u64 + 1) * 100_000_000 + 50_000_000);
        assert_eq!(e.live_threads(), n);
        assert!(
            e.slots_held() <= n.max(8) + COMPACT_FREE_SLOTS + 8,
            "wave {k}: {} slots for {n} live threads",
            e.slots_held()
        );
        waves.push(next);
    }
    let summary = e.finish();
    let seen = 8 + 8 + 8 + 600 + 8 + 8 + 8;
    assert_eq!(summary.threads_seen, seen);
    assert_eq!(summary.threads_peak, 608);
    // One process (this test), all its threads under its name.
    assert_eq!(summary.processes.len(), 1, "{:?}", summary.processes);
    assert_eq!(summary.processes[0].processes, 1);
    assert_eq!(summary.processes[0].threads, seen);
    for w in waves {
        w.end();
    }
}

/// Four threads found in one pass, under AMPS on a machine of one class: each is counted where
/// it is placed before the next one is, so they spread over the CPUs (before, the cores read at
/// the last interval looked equally idle to all four, and all four went to CPU 0).
#[test]
fn threads_found_together_spread_instead_of_piling_on_one_cpu() {
    if !needs_two_cpus() {
        return;
    }
    let n = crate::discover(std::path::Path::new("/"))
        .topology
        .num_cores();
    let mut e = dry_engine(
        one_class_machine(),
        hetsched_core::policies::policy_by_name("amps").unwrap(),
    );
    let threads = Sleepers::new(4);
    add_all(&mut e, &threads);
    e.sync_journal();
    let mut per_cpu = vec![0; n];
    for s in e.slots.iter().filter(|s| s.alive) {
        let mask = s
            .applied
            .as_ref()
            .expect("AMPS places every new thread")
            .unpack();
        let cpus: Vec<u32> = mask.cpus().collect();
        assert_eq!(cpus.len(), 1, "{mask:?}");
        per_cpu[cpus[0] as usize] += 1;
    }
    let most = *per_cpu.iter().max().unwrap();
    assert!(most <= 4usize.div_ceil(n.min(4)), "{per_cpu:?}");
    threads.end();
}

fn one_class_machine() -> Topology {
    let n = crate::discover(std::path::Path::new("/"))
        .topology
        .num_cores();
    hetsched_core::machine_file::parse_machine(
        &format!(
            "name = \"one\"\nmemory_latency_ns = 90.0\n[[classes]]\nname = \"cpu\"\ncapacity = 1.0\n\
             [[cores]]\ncpus = \"0-{}\"\nclass = \"cpu\"\n",
            n - 1
        ),
        "test",
    )
    .unwrap()
}

fn dry_engine(topology: Topology, policy: Box<dyn Policy>) -> Engine {
    let cpus = CpuMap::new(&crate::discover(std::path::Path::new("/")).topology);
    Engine::new(
        topology,
        cpus,
        &CpuSet::new(),
        policy,
        CounterPlan::none(),
        EngineConfig {
            dry_run: true,
            work_conserving: false,
            ..EngineConfig::default()
        },
        None,
    )
}

/// The CPU a thread is pinned to (dry run: the mask the engine would have set).
fn pinned_cpu(e: &Engine, tid: u32) -> Option<u32> {
    let s = &e.slots[e.by_tid[&tid].index()];
    let cpus: Vec<u32> = s.applied.as_ref()?.unpack().cpus().collect();
    (cpus.len() == 1).then(|| cpus[0])
}

/// Two fragments of one program, hinted one after the other between two intervals: the second
/// group goes to the other CPU, because the first group's thread already counts where it was
/// placed (before, the loads read at the last interval made both groups land on one CPU).
#[test]
fn fragment_groups_hinted_together_land_on_different_cpus() {
    if !needs_two_cpus() {
        return;
    }
    let mut e = dry_engine(
        one_class_machine(),
        hetsched_core::policies::policy_by_name("data-sharing").unwrap(),
    );
    let threads = Sleepers::new(4);
    add_all(&mut e, &threads);
    e.sync_journal();
    // Asleep by the read: the groups are placed by the hints alone.
    std::thread::sleep(Duration::from_millis(50));
    e.tick(100_000_000);
    for (k, &tid) in threads.tids.iter().enumerate() {
        let df = (k % 2) as u64;
        e.hint(
            tid,
            &Hint::DataFragment {
                current: None,
                next: Some(df),
            },
        );
    }
    let cpu: Vec<u32> = threads
        .tids
        .iter()
        .map(|&t| pinned_cpu(&e, t).expect("every hinted thread is pinned"))
        .collect();
    assert_eq!(cpu[0], cpu[2], "fragment 0 is one group: {cpu:?}");
    assert_eq!(cpu[1], cpu[3], "fragment 1 is one group: {cpu:?}");
    assert_ne!(cpu[0], cpu[1], "the two groups share a CPU: {cpu:?}");
    threads.end();
}

/// A policy that says each placement it is given once, at its next rebalance.
struct Once(std::sync::Arc<std::sync::Mutex<Vec<Placement>>>);

impl Policy for Once {
    fn name(&self) -> &str {
        "once"
    }
    fn rebalance_period_ns(&self) -> u64 {
        1
    }
    fn rebalance(&mut self, _view: &View<'_>, out: &mut Vec<Placement>) {
        out.append(&mut self.0.lock().unwrap());
    }
}

/// A move the dwell rule holds back is made once the dwell has passed, without the policy asking
/// again (before, it was dropped while the policy believed it done).
#[test]
fn a_move_held_by_the_dwell_rule_is_made_later() {
    if !needs_two_cpus() {
        return;
    }
    let asks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut e = dry_engine(two_class_machine(), Box::new(Once(asks.clone())));
    let threads = Sleepers::new(1);
    add_all(&mut e, &threads);
    let tid = threads.tids[0];
    let id = e.by_tid[&tid];
    asks.lock().unwrap().push(Placement::pin(id, CoreId(1)));
    e.tick(10_000_000);
    assert_eq!(pinned_cpu(&e, tid), Some(1));
    // 50 ms later: within the 200 ms dwell.
    asks.lock().unwrap().push(Placement::pin(id, CoreId(0)));
    e.tick(60_000_000);
    assert_eq!(pinned_cpu(&e, tid), Some(1));
    assert_eq!(e.decisions().held_by_dwell, 1);
    e.tick(160_000_000);
    assert_eq!(pinned_cpu(&e, tid), Some(1));
    e.tick(260_000_000);
    assert_eq!(
        pinned_cpu(&e, tid),
        Some(0),
        "the held move is made once the dwell is over"
    );
    assert_eq!(e.decisions().held_by_dwell, 1, "a retry is not a new hold");
    assert_eq!(e.decisions().placements, 2);
    threads.end();
}

/// Per thread: its signature's misses at 1 MiB, 16 ways, when the policy saw it (`None`: none).
type Notes<T> = std::sync::Arc<std::sync::Mutex<Vec<(ThreadId, T)>>>;

/// A policy that places by signatures and notes, per thread id, the signature it saw at the
/// thread's start and the signature hints it got.
struct SignatureNotes {
    starts: Notes<Option<f64>>,
    hints: Notes<f64>,
}

impl Policy for SignatureNotes {
    fn name(&self) -> &str {
        "signature-notes"
    }
    fn needs(&self) -> &'static [Signal] {
        &[Signal::Signatures]
    }
    fn rebalance(&mut self, _view: &View<'_>, _out: &mut Vec<Placement>) {}
    fn on_thread_start(&mut self, view: &View<'_>, thread: ThreadId) -> Option<CpuSet> {
        let sig = view.thread(thread).signature.as_ref();
        self.starts
            .lock()
            .unwrap()
            .push((thread, sig.map(|s| s.misses_at(1 << 20, 16))));
        None
    }
    fn on_hint(
        &mut self,
        _view: &View<'_>,
        thread: ThreadId,
        hint: &Hint,
        _out: &mut Vec<Placement>,
    ) {
        if let Hint::Signature(s) = hint {
            self.hints
                .lock()
                .unwrap()
                .push((thread, s.misses_at(1 << 20, 16)));
        }
    }
}

#[test]
fn stored_signatures_reach_new_threads_at_start_and_a_process_that_execs_through_the_hint_path() {
    use hetsched_signature::store::{ExecutableKey, Store};
    let dir = std::env::temp_dir().join(format!("hetsched-stored-engine-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::new(dir.join("store"));
    let starts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let hints = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let new_engine = || {
        let mut e = Engine::new(
            two_class_machine(),
            CpuMap::new(&crate::discover(std::path::Path::new("/")).topology),
            &CpuSet::new(),
            Box::new(SignatureNotes {
                starts: starts.clone(),
                hints: hints.clone(),
            }),
            CounterPlan::none(),
            EngineConfig {
                dry_run: true,
                ..EngineConfig::default()
            },
            None,
        );
        e.set_stored_signatures(StoredSignatures::new(
            Some(store.clone()),
            None,
            Proc::default(),
        ));
        e
    };
    // What the policy heard at each thread's start: its signature's first value, if any.
    let started = || {
        starts
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.1)
            .collect::<Vec<_>>()
    };
    // Nothing recorded for this test binary yet: its threads start without a signature.
    let first = Sleepers::new(2);
    let mut e = new_engine();
    add_all(&mut e, &first);
    assert_eq!(started(), vec![None, None]);
    // The program is recorded, then the process "execs" (this test process stands in for one
    // whose new program has an entry): each managed thread gets the signature as a hint.
    let key = ExecutableKey::of_path(&std::env::current_exe().unwrap()).unwrap();
    let mut doc = serde_json::Map::new();
    doc.insert("schema_version".into(), 2.into());
    doc.insert(
        "misses_per_4096".into(),
        serde_json::json!([[42.0], [42.0], [42.0], [42.0]]),
    );
    doc.insert("sizes_bytes".into(), serde_json::json!([1 << 20]));
    store.save(&key, doc).unwrap();
    e.process_renamed(std::process::id());
    let got: Vec<(ThreadId, f64)> = hints.lock().unwrap().clone();
    assert_eq!(got, vec![(ThreadId(0), 42.0), (ThreadId(1), 42.0)]);
    // An exec event read after the process was seen running the program already: its threads
    // have the signature, and get no second one.
    e.process_renamed(std::process::id());
    assert_eq!(hints.lock().unwrap().len(), 2);
    let counts = e.stored_counts().unwrap();
    assert_eq!((counts.lookups, counts.found, counts.missing), (3, 2, 1));
    // A process seen afresh by another engine: its threads carry the signature from their start,
    // before the policy hears of them, and no hint is needed.
    starts.lock().unwrap().clear();
    hints.lock().unwrap().clear();
    let mut e2 = new_engine();
    add_all(&mut e2, &first);
    assert_eq!(started(), vec![Some(42.0), Some(42.0)]);
    assert!(hints.lock().unwrap().is_empty());
    // One lookup for the process, not one per thread.
    assert_eq!(e2.stored_counts().unwrap().lookups, 1);
    let summary = e2.finish();
    assert_eq!(summary.stored_signatures.unwrap().found, 1);
    // A policy that does not place by signatures looks nothing up.
    let (mut e3, _, _) = engine_for(
        &first,
        EngineConfig {
            dry_run: true,
            ..EngineConfig::default()
        },
        &dir,
    );
    e3.set_stored_signatures(StoredSignatures::new(Some(store), None, Proc::default()));
    assert!(e3.stored_counts().is_none());
    e.finish();
    e3.finish();
    first.end();
    let _ = std::fs::remove_dir_all(&dir);
}
