//! The programs of `hetsched-work`: small real programs with known behaviour, for live tests and
//! demos, so they depend on nothing but this repository. Each does a fixed amount of work (so its
//! run time measures the speed it was given) and prints one JSON line on stdout at the end:
//! `{"program": ..., "threads": N, "wall_s": ...}`. The binary is built by the hetsched-cli
//! package (beside `hetsched`, so the live tests find both).

use clap::{Args, Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "hetsched-work",
    about = "Workload programs for hetsched's live tests"
)]
struct Cli {
    #[command(subcommand)]
    program: Program,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct Common {
    /// Write the process id here when started.
    #[arg(long, global = true)]
    pid_file: Option<PathBuf>,
    /// Write each worker thread's id here, one a line, in the workers' order.
    #[arg(long, global = true)]
    tid_file: Option<PathBuf>,
    /// Pin the whole process to this CPU first.
    #[arg(long, global = true)]
    pin: Option<u32>,
}

#[derive(Subcommand, Debug)]
enum Program {
    /// CPU-bound integer work (a multiply-add chain: no memory traffic).
    Int {
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Units of work per thread (one unit: 10^6 dependent integer steps, a few ms).
        #[arg(long, default_value_t = 200)]
        work: u64,
    },
    /// FP-heavy work (dependent fused multiply-adds on doubles).
    Fp {
        #[arg(long, default_value_t = 1)]
        threads: usize,
        #[arg(long, default_value_t = 200)]
        work: u64,
    },
    /// Memory streaming: each thread sums and writes its own array, passes times.
    Stream {
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Array per thread, MiB.
        #[arg(long, default_value_t = 64)]
        mib: usize,
        #[arg(long, default_value_t = 10)]
        passes: u32,
    },
    /// OpenMP-like: phases of parallel work ended by a barrier, each followed by a sequential part
    /// that one thread runs while the others wait at the next barrier (blocked, as OpenMP's
    /// passive wait policy does).
    Omp {
        #[arg(long, default_value_t = 2)]
        threads: usize,
        #[arg(long, default_value_t = 10)]
        phases: u32,
        /// Units per thread in each parallel part.
        #[arg(long, default_value_t = 20)]
        parallel_work: u64,
        /// Units of the sequential part.
        #[arg(long, default_value_t = 20)]
        serial_work: u64,
    },
    /// Phase-changing: each phase is `work` units of integer work (CPU-bound), then one pass
    /// over the thread's own array (memory-bound), `phases` times.
    Phases {
        #[arg(long, default_value_t = 1)]
        threads: usize,
        #[arg(long, default_value_t = 10)]
        phases: u32,
        /// Units of integer work in each phase.
        #[arg(long, default_value_t = 20)]
        work: u64,
        /// Array per thread, MiB, passed over once per phase.
        #[arg(long, default_value_t = 64)]
        mib: usize,
    },
    /// Threads sharing buffers: thread i works on buffer i % buffers, and (with --hint) tells
    /// hetsched which buffer (data fragment) it works on.
    Share {
        #[arg(long, default_value_t = 4)]
        threads: usize,
        #[arg(long, default_value_t = 2)]
        buffers: usize,
        /// KiB per buffer.
        #[arg(long, default_value_t = 512)]
        kib: usize,
        #[arg(long, default_value_t = 200)]
        passes: u32,
        #[arg(long)]
        hint: bool,
    },
    /// Many threads that mostly sleep (waking every `wake_ms` for a moment): for measuring what
    /// monitoring costs per thread.
    Sleepers {
        #[arg(long, default_value_t = 1000)]
        threads: usize,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        #[arg(long, default_value_t = 50)]
        wake_ms: u64,
    },
    /// Short-lived threads, started and ended continuously: for exit-during-decision races.
    Churn {
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Each thread's life.
        #[arg(long, default_value_t = 3)]
        lifetime_ms: u64,
        /// Threads alive at once.
        #[arg(long, default_value_t = 4)]
        width: usize,
    },
    /// Send one hint to a hint socket (optionally as another user first): for testing the
    /// socket's checks.
    SendHint {
        #[arg(long)]
        socket: PathBuf,
        /// The thread the hint is about.
        #[arg(long)]
        tid: u32,
        /// Drop to this user id before sending.
        #[arg(long)]
        uid: Option<u32>,
        /// Send this many bytes of garbage instead of a hint.
        #[arg(long)]
        garbage: Option<usize>,
    },
}

/// One unit of integer work: 10^6 dependent xorshift-multiply steps (no closed form a compiler
/// could find, no memory traffic).
fn int_unit(mut x: u64) -> u64 {
    for _ in 0..1_000_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    x
}

fn fp_unit(mut x: f64) -> f64 {
    for _ in 0..1_000_000 {
        x = x.mul_add(0.999_999_9, 1e-7);
    }
    x
}

/// Worker `i` writes its thread id on line `i` of the tid file: each waits for the workers
/// before it, so a test knows which thread is which worker.
fn note_tid(file: &Option<PathBuf>, turn: &(Mutex<usize>, Condvar), i: usize) {
    let Some(f) = file else {
        return;
    };
    let (next, cv) = turn;
    let mut next = next
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    while *next != i {
        next = cv
            .wait(next)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    if let Ok(mut out) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(f)
    {
        let _ = writeln!(out, "{tid}");
    }
    *next += 1;
    cv.notify_all();
}

fn spawn_workers(
    n: usize,
    tid_file: &Option<PathBuf>,
    work: impl Fn(usize) + Send + Sync + 'static,
) {
    let work = Arc::new(work);
    let turn = Arc::new((Mutex::new(0usize), Condvar::new()));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let work = work.clone();
            let file = tid_file.clone();
            let turn = turn.clone();
            std::thread::spawn(move || {
                note_tid(&file, &turn, i);
                work(i);
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}

/// Parse the command line and run the program it names.
pub fn main() {
    let cli = Cli::parse();
    if let Some(cpu) = cli.common.pin {
        // SAFETY: a zeroed cpu_set_t is empty; CPU_SET stays within it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set) != 0 {
                eprintln!("hetsched-work: cannot pin to CPU {cpu}");
                std::process::exit(2);
            }
        }
    }
    if let Some(f) = &cli.common.pid_file {
        let _ = std::fs::write(f, format!("{}\n", std::process::id()));
    }
    let tids = cli.common.tid_file.clone();
    let start = Instant::now();
    let (name, threads) = match cli.program {
        Program::Int { threads, work } => {
            spawn_workers(threads, &tids, move |i| {
                let mut x = 0x2545_F491_4F6C_DD1D ^ i as u64;
                for _ in 0..work {
                    x = int_unit(x);
                }
                std::hint::black_box(x);
            });
            ("int", threads)
        }
        Program::Fp { threads, work } => {
            spawn_workers(threads, &tids, move |i| {
                let mut x = i as f64;
                for _ in 0..work {
                    x = fp_unit(x);
                }
                std::hint::black_box(x);
            });
            ("fp", threads)
        }
        Program::Stream {
            threads,
            mib,
            passes,
        } => {
            spawn_workers(threads, &tids, move |_| {
                let mut a = vec![1u64; mib * 1024 * 1024 / 8];
                let mut sum = 0u64;
                for _ in 0..passes {
                    for v in &mut a {
                        sum = sum.wrapping_add(*v);
                        *v = sum;
                    }
                }
                std::hint::black_box(sum);
            });
            ("stream", threads)
        }
        Program::Omp {
            threads,
            phases,
            parallel_work,
            serial_work,
        } => {
            let barrier = Arc::new(Barrier::new(threads));
            spawn_workers(threads, &tids, move |i| {
                let mut x = 0x2545_F491_4F6C_DD1D ^ i as u64;
                for _ in 0..phases {
                    for _ in 0..parallel_work {
                        x = int_unit(x);
                    }
                    barrier.wait();
                    if i == 0 {
                        for _ in 0..serial_work {
                            x = int_unit(x);
                        }
                    }
                    barrier.wait();
                }
                std::hint::black_box(x);
            });
            ("omp", threads)
        }
        Program::Phases {
            threads,
            phases,
            work,
            mib,
        } => {
            spawn_workers(threads, &tids, move |i| {
                let mut a = vec![1u64; mib * 1024 * 1024 / 8];
                let mut x = 0x2545_F491_4F6C_DD1D ^ i as u64;
                for _ in 0..phases {
                    for _ in 0..work {
                        x = int_unit(x);
                    }
                    for v in &mut a {
                        x = x.wrapping_add(*v);
                        *v = x;
                    }
                }
                std::hint::black_box(x);
            });
            ("phases", threads)
        }
        Program::Share {
            threads,
            buffers,
            kib,
            passes,
            hint,
        } => {
            let buffers = buffers.max(1);
            let bufs: Arc<Vec<Mutex<Vec<u64>>>> = Arc::new(
                (0..buffers)
                    .map(|_| Mutex::new(vec![0u64; kib * 1024 / 8]))
                    .collect(),
            );
            spawn_workers(threads, &tids, move |i| {
                let df = i % buffers;
                if hint {
                    if let Ok(c) = hetsched_hint::Client::from_env() {
                        // SAFETY: gettid has no preconditions.
                        let tid = unsafe { libc::gettid() } as u32;
                        let _ = c.data_fragment(tid, None, Some(df as u64));
                    }
                }
                for _ in 0..passes {
                    let mut b = bufs[df]
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    for v in b.iter_mut() {
                        *v = v.wrapping_add(i as u64 + 1);
                    }
                }
            });
            ("share", threads)
        }
        Program::Sleepers {
            threads,
            seconds,
            wake_ms,
        } => {
            let end = start + Duration::from_secs_f64(seconds);
            spawn_workers(threads, &tids, move |_| {
                while Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(wake_ms));
                }
            });
            ("sleepers", threads)
        }
        Program::Churn {
            seconds,
            lifetime_ms,
            width,
        } => {
            let end = start + Duration::from_secs_f64(seconds);
            let mut started = 0usize;
            while Instant::now() < end {
                let batch: Vec<_> = (0..width)
                    .map(|_| {
                        std::thread::spawn(move || {
                            let t = Instant::now();
                            let mut x = 1u64;
                            while t.elapsed() < Duration::from_millis(lifetime_ms) {
                                x = x.wrapping_mul(3).wrapping_add(1);
                            }
                            std::hint::black_box(x);
                        })
                    })
                    .collect();
                started += batch.len();
                for h in batch {
                    let _ = h.join();
                }
            }
            ("churn", started)
        }
        Program::SendHint {
            socket,
            tid,
            uid,
            garbage,
        } => {
            if let Some(uid) = uid {
                // SAFETY: setgid/setuid have no memory preconditions.
                if unsafe { libc::setgid(uid) != 0 || libc::setuid(uid) != 0 } {
                    eprintln!("hetsched-work: cannot become uid {uid}");
                    std::process::exit(2);
                }
            }
            let sent = match garbage {
                Some(n) => std::os::unix::net::UnixDatagram::unbound()
                    .and_then(|s| s.send_to(&vec![0xA5u8; n], &socket))
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                None => hetsched_hint::Client::connect(&socket)
                    .and_then(|c| c.data_fragment(tid, None, Some(1)))
                    .map_err(|e| e.to_string()),
            };
            if let Err(e) = sent {
                eprintln!("hetsched-work: {e}");
                std::process::exit(1);
            }
            ("send-hint", 0)
        }
    };
    println!(
        "{{\"program\": \"{name}\", \"threads\": {threads}, \"wall_s\": {:.6}}}",
        start.elapsed().as_secs_f64()
    );
}
