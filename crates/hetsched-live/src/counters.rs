//! Per-thread counters from `perf_event_open(2)`.
//!
//! At start the backend probes which events this machine offers ([`CounterPlan::probe`]) by
//! opening each on its own thread: the generic hardware events (cycles, instructions, cache
//! references and misses, which the kernel maps to the LLC on x86), an FP event where the CPU has
//! one (AMD family 15h `CYCLES_FPU_EMPTY`, BulldOver section 3.1; Intel `FP_ARITH_INST_RETIRED`,
//! an instruction count standing in for busy cycles), and the software events that always exist
//! (task-clock, cpu-migrations). On Intel hybrid parts every hardware event is opened once per core
//! PMU (`cpu_core`, `cpu_atom`) and the two are summed: a thread counts on whichever kind of core
//! it runs.
//!
//! Each thread gets one counter group per PMU, read with one `read(2)` per group
//! (`PERF_FORMAT_GROUP`); values are scaled by time enabled / time running when the kernel
//! multiplexed the group.

use crate::sys::SysError;
use hetsched_core::observe::Counters;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_RAW: u32 = 4;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const PERF_COUNT_HW_CACHE_REFERENCES: u64 = 2;
const PERF_COUNT_HW_CACHE_MISSES: u64 = 3;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_COUNT_SW_CPU_MIGRATIONS: u64 = 4;
const PERF_FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
const PERF_FORMAT_TOTAL_TIME_RUNNING: u64 = 2;
const PERF_FORMAT_GROUP: u64 = 8;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
/// On hybrid parts a generic hardware event names its PMU in the config's upper half
/// (include/uapi/linux/perf_event.h, `PERF_PMU_TYPE_SHIFT`).
const PERF_PMU_TYPE_SHIFT: u32 = 32;
/// AMD family 15h PMC event 0x001, CYCLES_FPU_EMPTY (BKDG for family 15h, section 3.24).
const AMD_15H_CYCLES_FPU_EMPTY: u64 = 0x001;
/// Intel FP_ARITH_INST_RETIRED (event 0xC7), every umask: scalar and packed, single and double
/// (Intel SDM volume 3B, Skylake and later).
const INTEL_FP_ARITH_ALL: u64 = 0xFFC7;

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5` (112 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
}

/// What a counter feeds in [`Counters`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Cycles,
    Instructions,
    LlcRefs,
    LlcMisses,
    /// Counted FP work: `fp_busy_cycles` directly.
    FpBusy,
    /// Cycles the FPU was empty: `fp_busy_cycles = cycles - this`.
    FpEmpty,
    TaskClock,
    Migrations,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Cycles => "cycles",
            Role::Instructions => "instructions",
            Role::LlcRefs => "llc-references",
            Role::LlcMisses => "llc-misses",
            Role::FpBusy => "fp-arith-inst-retired",
            Role::FpEmpty => "cycles-fpu-empty",
            Role::TaskClock => "task-clock",
            Role::Migrations => "cpu-migrations",
        }
    }
    pub fn is_hardware(self) -> bool {
        !matches!(self, Role::TaskClock | Role::Migrations)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct EventSpec {
    role: Role,
    type_: u32,
    config: u64,
}

/// The events every managed thread gets, grouped by PMU.
#[derive(Clone, Debug)]
pub struct CounterPlan {
    groups: Vec<Vec<EventSpec>>,
    exclude_kernel: bool,
    /// Names of the hardware PMUs used (`cpu`, or `cpu_core` and `cpu_atom`).
    pub pmus: Vec<String>,
}

fn open_event(
    spec: EventSpec,
    tid: i32,
    group_fd: i32,
    exclude_kernel: bool,
) -> io::Result<OwnedFd> {
    let attr = PerfEventAttr {
        type_: spec.type_,
        size: size_of::<PerfEventAttr>() as u32,
        config: spec.config,
        read_format: PERF_FORMAT_TOTAL_TIME_ENABLED
            | PERF_FORMAT_TOTAL_TIME_RUNNING
            | PERF_FORMAT_GROUP,
        flags: if exclude_kernel {
            FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV
        } else {
            0
        },
        ..Default::default()
    };
    // SAFETY: attr is a valid perf_event_attr of the size it states; the kernel copies it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &raw const attr,
            tid as libc::pid_t,
            -1 as libc::c_int,
            group_fd as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        // SAFETY: the kernel returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }
}

fn read_u32(path: &Path) -> Option<u32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl CounterPlan {
    /// The events this machine offers, found by opening each on the calling thread. `sys_root` is
    /// the directory holding `sys/` (for the PMU list) and `cpuinfo` the text of /proc/cpuinfo.
    pub fn probe(sys_root: &Path, cpuinfo: &str) -> CounterPlan {
        let exclude_kernel = fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
            .is_some_and(|p| p >= 2)
            // SAFETY: geteuid has no preconditions.
            && unsafe { libc::geteuid() } != 0;
        let me = crate::sys::gettid() as i32;
        let works = |spec: EventSpec| open_event(spec, me, -1, exclude_kernel).is_ok();
        let devices = sys_root.join("sys/bus/event_source/devices");
        // Hybrid: one PMU per core type, each with its own type number.
        let mut pmus: Vec<(String, Option<u32>)> = ["cpu_core", "cpu_atom"]
            .iter()
            .filter_map(|n| {
                Some((
                    n.to_string(),
                    Some(read_u32(&devices.join(n).join("type"))?),
                ))
            })
            .collect();
        if pmus.is_empty() {
            pmus.push(("cpu".into(), None));
        }
        let vendor = |v: &str| {
            cpuinfo
                .lines()
                .any(|l| l.starts_with("vendor_id") && l.contains(v))
        };
        let family: Option<u32> = cpuinfo
            .lines()
            .find(|l| l.starts_with("cpu family"))
            .and_then(|l| l.split(':').nth(1)?.trim().parse().ok());
        let mut groups = Vec::new();
        let mut used_pmus = Vec::new();
        for (name, ty) in &pmus {
            let mut g = Vec::new();
            for (role, config) in [
                (Role::Cycles, PERF_COUNT_HW_CPU_CYCLES),
                (Role::Instructions, PERF_COUNT_HW_INSTRUCTIONS),
                (Role::LlcRefs, PERF_COUNT_HW_CACHE_REFERENCES),
                (Role::LlcMisses, PERF_COUNT_HW_CACHE_MISSES),
            ] {
                let config = config | ty.map_or(0, |t| (t as u64) << PERF_PMU_TYPE_SHIFT);
                let spec = EventSpec {
                    role,
                    type_: PERF_TYPE_HARDWARE,
                    config,
                };
                if works(spec) {
                    g.push(spec);
                }
            }
            let fp = if vendor("AuthenticAMD") && family == Some(0x15) {
                Some((Role::FpEmpty, AMD_15H_CYCLES_FPU_EMPTY))
            } else if vendor("GenuineIntel") {
                Some((Role::FpBusy, INTEL_FP_ARITH_ALL))
            } else {
                None
            };
            if let Some((role, config)) = fp {
                let spec = EventSpec {
                    role,
                    type_: ty.unwrap_or(PERF_TYPE_RAW),
                    config,
                };
                if !g.is_empty() && works(spec) {
                    g.push(spec);
                }
            }
            if !g.is_empty() {
                used_pmus.push(name.clone());
                groups.push(g);
            }
        }
        let mut soft = Vec::new();
        for (role, config) in [
            (Role::TaskClock, PERF_COUNT_SW_TASK_CLOCK),
            (Role::Migrations, PERF_COUNT_SW_CPU_MIGRATIONS),
        ] {
            let spec = EventSpec {
                role,
                type_: PERF_TYPE_SOFTWARE,
                config,
            };
            if works(spec) {
                soft.push(spec);
            }
        }
        // Software events ride in the first group (a hardware group accepts software members).
        match groups.first_mut() {
            Some(g) => g.extend(soft),
            None if !soft.is_empty() => groups.push(soft),
            None => {}
        }
        CounterPlan {
            groups,
            exclude_kernel,
            pmus: used_pmus,
        }
    }

    /// A plan with no events (perf unavailable): every value comes from /proc.
    pub fn none() -> CounterPlan {
        CounterPlan {
            groups: Vec::new(),
            exclude_kernel: false,
            pmus: Vec::new(),
        }
    }

    /// The roles counted, each once.
    pub fn roles(&self) -> Vec<Role> {
        let mut v: Vec<Role> = Vec::new();
        for r in self.groups.iter().flatten().map(|e| e.role) {
            if !v.contains(&r) {
                v.push(r);
            }
        }
        v
    }

    pub fn has(&self, role: Role) -> bool {
        self.groups.iter().flatten().any(|e| e.role == role)
    }

    pub fn has_hardware(&self) -> bool {
        self.groups.iter().flatten().any(|e| e.role.is_hardware())
    }

    /// Open the plan's counters on thread `tid`.
    /// Descriptors [`open`](Self::open) takes per thread.
    pub fn fds_per_thread(&self) -> u64 {
        self.groups.iter().map(|g| g.len() as u64).sum()
    }

    pub fn open(&self, tid: u32) -> Result<ThreadCounters, SysError> {
        let mut groups = Vec::with_capacity(self.groups.len());
        for g in &self.groups {
            let mut fds: Vec<OwnedFd> = Vec::with_capacity(g.len());
            for spec in g {
                let leader = fds.first().map_or(-1, AsRawFd::as_raw_fd);
                match open_event(*spec, tid as i32, leader, self.exclude_kernel) {
                    Ok(fd) => fds.push(fd),
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                        return Err(SysError::Gone(tid))
                    }
                    Err(e) => return Err(SysError::Other { tid, source: e }),
                }
            }
            if !fds.is_empty() {
                groups.push((fds, g.iter().map(|e| e.role).collect()));
            }
        }
        Ok(ThreadCounters { groups })
    }
}

/// One thread's open counter groups: every descriptor, leader first (closing a member's
/// descriptor would take it out of the group), and the role of each.
#[derive(Debug)]
pub struct ThreadCounters {
    groups: Vec<(Vec<OwnedFd>, Vec<Role>)>,
}

impl ThreadCounters {
    /// Read every group (cumulative since open, scaled for multiplexing); `None` when nothing could
    /// be read. Fields the plan does not count are 0.
    pub fn read(&self) -> Option<Counters> {
        let mut out = Counters::default();
        let mut buf = [0u64; 3 + 8];
        let mut any = false;
        let mut fp_empty = None;
        for (fds, roles) in &self.groups {
            let want = (3 + roles.len()) * 8;
            // SAFETY: buf is valid for its length, which is at least `want`.
            let n = unsafe { libc::read(fds[0].as_raw_fd(), buf.as_mut_ptr().cast(), want) };
            if n as usize != want || buf[0] as usize != roles.len() {
                continue;
            }
            any = true;
            let (enabled, running) = (buf[1] as f64, buf[2] as f64);
            let scale = if running > 0.0 {
                enabled / running
            } else {
                0.0
            };
            for (i, role) in roles.iter().enumerate() {
                let v = buf[3 + i] as f64 * scale;
                match role {
                    Role::Cycles => out.cycles += v,
                    Role::Instructions => out.instructions += v,
                    Role::LlcRefs => out.llc_refs += v,
                    Role::LlcMisses => out.llc_misses += v,
                    Role::FpBusy => out.fp_busy_cycles += v,
                    Role::FpEmpty => *fp_empty.get_or_insert(0.0) += v,
                    Role::TaskClock => out.cpu_time_ns = buf[3 + i] as f64,
                    Role::Migrations => out.migrations = buf[3 + i] as u32,
                }
            }
        }
        if let Some(empty) = fp_empty {
            out.fp_busy_cycles = (out.cycles - empty).max(0.0);
        }
        any.then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_clock_counts_a_busy_thread() {
        let plan = CounterPlan::probe(
            Path::new("/"),
            &fs::read_to_string("/proc/cpuinfo").unwrap_or_default(),
        );
        if !plan.has(Role::TaskClock) {
            eprintln!("perf_event_open unavailable here; skipped");
            return;
        }
        // The thread's own CPU clock is the reference: the test holds on a loaded machine,
        // where 50 ms of wall time may be far less CPU time.
        let thread_cpu_ns = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: ts is a valid timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
            ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
        };
        let c = plan.open(crate::sys::gettid()).unwrap();
        let (t, cpu0) = (std::time::Instant::now(), thread_cpu_ns());
        let mut x = 1u64;
        while thread_cpu_ns() - cpu0 < 50e6 && t.elapsed() < std::time::Duration::from_secs(10) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let v = c.read().unwrap();
        let reference = thread_cpu_ns() - cpu0;
        let ns = v.cpu_time_ns;
        assert!(
            ns > 0.8 * reference && ns < 1.25 * reference + 1e6,
            "task-clock {ns} ns, the thread's CPU clock {reference} ns"
        );
        if plan.has(Role::Instructions) {
            let i = v.instructions;
            assert!(i > 1e6, "{i}");
        }
    }
}
