//! Duty-cycle emulation of slow cores on symmetric hardware, the way the AMPS paper made its slow
//! cores with clock modulation (Li et al. section 4.1): on each slow CPU a SCHED_FIFO thread takes
//! the CPU for (1 - duty) of every short period and sleeps the rest, so whatever else runs there
//! gets `duty` of the CPU, in slices short enough to look like a slower clock.
//!
//! The emulated machine is written as a machine file ([`emulated_machine_toml`]) in the state
//! directory, so `hetsched run` on the same machine sees the slow cores. The kernel limits real-time
//! threads to `sched_rt_runtime_us` of every `sched_rt_period_us` (95% by default), which bounds
//! how slow a core can be made: duty ≥ 0.05.

use crate::sys::{self, OsMask};
use hetsched_core::Topology;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Default modulation period: short against a scheduler tick, long against the cost of a switch.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(1);
/// Shortest period, µs: below it the switches cost more than the slices they make.
pub const MIN_PERIOD_US: u64 = 100;
/// Longest period, µs: past it the "slower clock" is a CPU stalled for whole stretches.
pub const MAX_PERIOD_US: u64 = 100_000;
/// A stealing thread looks for the stop at least this often, whatever the period.
pub const STOP_CHECK: Duration = Duration::from_millis(10);
/// Priority of the stealing threads: above every normal thread, below the kernel's own RT threads
/// (which run at 50 and 99).
pub const STEALER_PRIORITY: i32 = 10;
/// Lowest duty the kernel's default real-time throttling (950 ms of every 1 s) allows.
pub const MIN_DUTY: f64 = 0.05;

/// Why emulation cannot start.
#[derive(Debug, thiserror::Error)]
pub enum EmulateError {
    #[error(
        "--duty {0}: must be in [{MIN_DUTY}, 1) (the kernel throttles real-time threads at 95%)"
    )]
    BadDuty(f64),
    #[error("--slow {0}: names every CPU; at least one must stay fast")]
    AllSlow(String),
    #[error("--slow {0}: CPU {1} is not online")]
    NotOnline(String, u32),
    #[error("--slow: no CPUs given")]
    Empty,
    #[error("cannot make CPU {cpu} slow: {source} (SCHED_FIFO needs root or CAP_SYS_NICE)")]
    Thread { cpu: u32, source: std::io::Error },
}

/// Running emulation: one stealing thread per slow CPU. Stops on drop.
pub struct DutyCycle {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    pub slow: Vec<u32>,
    pub duty: f64,
}

/// Check the request against the online CPUs (kernel numbers).
pub fn check(slow_list: &str, slow: &[u32], duty: f64, online: &[u32]) -> Result<(), EmulateError> {
    if !(MIN_DUTY..1.0).contains(&duty) {
        return Err(EmulateError::BadDuty(duty));
    }
    if slow.is_empty() {
        return Err(EmulateError::Empty);
    }
    if let Some(&c) = slow.iter().find(|c| !online.contains(c)) {
        return Err(EmulateError::NotOnline(slow_list.into(), c));
    }
    if online.iter().all(|c| slow.contains(c)) {
        return Err(EmulateError::AllSlow(slow_list.into()));
    }
    Ok(())
}

/// Take `cpu` for (1 - duty) of every period until `stop`, which is looked at while spinning
/// and at least every [`STOP_CHECK`] while sleeping.
fn steal(cpu: u32, duty: f64, period: Duration, stop: &AtomicBool) {
    let busy = period.mul_f64(1.0 - duty);
    let mut next = Instant::now();
    'periods: while !stop.load(Ordering::Relaxed) {
        let start = next;
        let busy_until = start.checked_add(busy);
        while busy_until.is_none_or(|t| Instant::now() < t) {
            if stop.load(Ordering::Relaxed) {
                break 'periods;
            }
            std::hint::spin_loop();
        }
        let Some(end) = start.checked_add(period) else {
            break;
        };
        next = end;
        if next <= Instant::now() {
            next = Instant::now(); // fell behind (throttled): start a fresh period
            continue;
        }
        loop {
            let now = Instant::now();
            if next <= now {
                break;
            }
            if stop.load(Ordering::Relaxed) {
                break 'periods;
            }
            std::thread::sleep((next - now).min(STOP_CHECK));
        }
    }
    tracing::debug!("duty-cycle thread of CPU {cpu} stops");
}

impl DutyCycle {
    /// Start a stealing thread on each of `slow` (kernel CPU numbers). Fails, with every started
    /// thread stopped, when one cannot be pinned or made real-time.
    pub fn start(slow: &[u32], duty: f64, period: Duration) -> Result<DutyCycle, EmulateError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut dc = DutyCycle {
            stop: stop.clone(),
            threads: Vec::new(),
            slow: slow.to_vec(),
            duty,
        };
        for &cpu in slow {
            let (tx, rx) = std::sync::mpsc::channel();
            let stop = stop.clone();
            let h = std::thread::Builder::new()
                .name(format!("hs-slow-{cpu}"))
                .spawn(move || {
                    let setup = sys::set_affinity(sys::gettid(), &OsMask::from_cpus([cpu]))
                        .map_err(|e| std::io::Error::other(e.to_string()))
                        .and_then(|()| sys::set_fifo(STEALER_PRIORITY));
                    let ok = setup.is_ok();
                    let _ = tx.send(setup);
                    if ok {
                        steal(cpu, duty, period, &stop);
                    }
                })
                .map_err(|source| EmulateError::Thread { cpu, source })?;
            dc.threads.push(h);
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(source)) => return Err(EmulateError::Thread { cpu, source }),
                Err(_) => {
                    return Err(EmulateError::Thread {
                        cpu,
                        source: std::io::Error::other("thread died"),
                    })
                }
            }
        }
        Ok(dc)
    }

    /// Stop every stealing thread and wait for them.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for DutyCycle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A machine file for `topology` (this machine) with the cores on kernel CPUs `slow` in a class
/// `slow` of the given duty, the rest in `fast`. Caches, SMT groups and nodes are kept.
pub fn emulated_machine_toml(topology: &Topology, slow: &[u32], duty: f64) -> String {
    use std::fmt::Write;
    let list = |cores: &[hetsched_core::CoreId]| -> String {
        cores
            .iter()
            .copied()
            .collect::<hetsched_core::CpuSet>()
            .to_list()
    };
    let mut s = String::new();
    let _ = writeln!(s, "# Written by `hetsched emulate`; removed when it stops.");
    let _ = writeln!(
        s,
        "name = \"{} (emulated)\"",
        topology.name().replace('"', "'")
    );
    let _ = writeln!(
        s,
        "description = \"this machine with CPUs {} at duty {duty} (duty-cycle emulation)\"",
        OsMask::from_cpus(slow.iter().copied()).to_list()
    );
    let nodes = topology.nodes();
    if nodes.len() == 1 {
        let _ = writeln!(s, "memory_latency_ns = {}", nodes[0].latency_ns[0]);
    }
    let freq = topology.classes().iter().find_map(|c| c.freq_ghz);
    for (name, d) in [("fast", 1.0), ("slow", duty)] {
        let _ = writeln!(s, "\n[[classes]]\nname = \"{name}\"");
        match freq {
            Some(f) => {
                let _ = writeln!(s, "freq_ghz = {f}");
            }
            // Without a clock, the relative throughput says the same.
            None => {
                let _ = writeln!(s, "capacity = {d}");
            }
        }
        let _ = writeln!(s, "duty = {d}");
    }
    let (slow_cores, fast_cores): (Vec<_>, Vec<_>) = topology
        .cores()
        .iter()
        .map(|c| c.id)
        .partition(|&id| slow.contains(&topology.core(id).os_cpu));
    for (cores, class) in [(&fast_cores, "fast"), (&slow_cores, "slow")] {
        let _ = writeln!(
            s,
            "\n[[cores]]\ncpus = \"{}\"\nclass = \"{class}\"",
            list(cores)
        );
    }
    let mut seen_smt = std::collections::BTreeSet::new();
    for c in topology.cores() {
        if c.siblings.len() > 1 {
            let mut sib = c.siblings.clone();
            sib.sort();
            if seen_smt.insert(sib.clone()) {
                let _ = writeln!(s, "\n[[smt]]\ncpus = \"{}\"", list(&sib));
            }
        }
    }
    for c in topology.caches() {
        let _ = writeln!(
            s,
            "\n[[caches]]\nlevel = {}\nsize = {}\nassoc = {}\nline_bytes = {}\ncpus = \"{}\"",
            c.level,
            c.size_bytes,
            c.assoc,
            c.line_bytes,
            list(&c.cpus)
        );
    }
    if nodes.len() > 1 {
        for n in nodes {
            let _ = writeln!(
                s,
                "\n[[nodes]]\ncpus = \"{}\"\ndistance = {:?}\nlatency_ns = {:?}",
                list(&n.cpus),
                n.distance,
                n.latency_ns
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::machine_file::parse_machine;
    use hetsched_core::presets::machine_preset;

    #[test]
    fn refuses_bad_requests() {
        let online = [0, 1];
        assert!(matches!(
            check("0-1", &[0, 1], 0.5, &online),
            Err(EmulateError::AllSlow(_))
        ));
        assert!(matches!(
            check("1", &[1], 1.0, &online),
            Err(EmulateError::BadDuty(_))
        ));
        assert!(matches!(
            check("1", &[1], 0.01, &online),
            Err(EmulateError::BadDuty(_))
        ));
        assert!(matches!(
            check("5", &[5], 0.5, &online),
            Err(EmulateError::NotOnline(_, 5))
        ));
        assert!(check("1", &[1], 0.5, &online).is_ok());
    }

    /// A stealing thread stops within a few milliseconds of being told, even in the middle of
    /// a long period, spinning or sleeping (before, it looked once a period).
    #[test]
    fn stealing_stops_soon_whatever_the_period() {
        for duty in [0.05, 0.95] {
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            let h = std::thread::spawn(move || steal(0, duty, Duration::from_secs(3600), &s));
            std::thread::sleep(Duration::from_millis(30));
            let t = Instant::now();
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap();
            assert!(
                t.elapsed() < Duration::from_millis(500),
                "{:?}",
                t.elapsed()
            );
        }
    }

    #[test]
    fn the_emulated_machine_file_parses_with_the_slow_class() {
        let t = machine_preset("ding-4f12s").unwrap().unwrap();
        let text = emulated_machine_toml(&t, &[1, 2], 0.25);
        // A machine that reports no clock (a VM) gets capacities instead.
        let spec = hetsched_core::topology::TopologySpec {
            name: "vm".into(),
            classes: vec![hetsched_core::topology::ClassSpec {
                origin: "c".into(),
                name: "cpu".into(),
                capacity: Some(1.0),
                ..Default::default()
            }],
            cores: vec![hetsched_core::topology::CoresSpec {
                origin: "c".into(),
                cpus: hetsched_core::CpuSet::all(2),
                class: "cpu".into(),
            }],
            memory_latency_ns: Some(90.0),
            ..Default::default()
        };
        let vm = Topology::build(spec).unwrap();
        let e = parse_machine(&emulated_machine_toml(&vm, &[1], 0.5), "vm").unwrap();
        assert!(
            e.relative_speed(hetsched_core::CoreId(1)) < e.relative_speed(hetsched_core::CoreId(0))
        );
        let e = parse_machine(&text, "emulated").unwrap();
        assert_eq!(e.num_cores(), t.num_cores());
        let slow = e.classes().iter().position(|c| c.name == "slow").unwrap();
        assert_eq!(e.classes()[slow].duty, 0.25);
        let slow_cores: Vec<u32> = e
            .cores()
            .iter()
            .filter(|c| c.class.index() == slow)
            .map(|c| c.id.0)
            .collect();
        assert_eq!(slow_cores, vec![1, 2]);
        assert_eq!(e.nodes().len(), t.nodes().len());
        assert_eq!(e.caches().len(), t.caches().len());
    }
}
