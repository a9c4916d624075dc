//! `hetsched signature --record -- CMD`: run a program under valgrind's lackey tool and read its
//! memory trace as it is made, through a FIFO, never writing it to disk. The program keeps its own
//! standard input and error, and its standard output unless the caller sends it elsewhere;
//! valgrind's log (the trace) goes to the FIFO. Valgrind exits as its program did (the same code,
//! or killed by the same signal), so the child's status is the program's.
//!
//! The FIFO lives in a directory of its own, made for the recording with a random name, created
//! only if no such entry exists and readable by its owner alone (mode 0700), and removed with the
//! recording: nobody else can put anything in its place or read the trace.
//!
//! The recording ends when valgrind exits, not when the FIFO's last writer closes it: a process
//! the program leaves behind (started in the background, or a daemon) inherits valgrind's log
//! descriptor and keeps the FIFO open, but valgrind wrote every byte of the trace before it
//! exited, so what is in the FIFO then is the whole trace.

use crate::store;
use crate::trace::TraceError;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A program being traced: the child and the trace's read end.
pub struct Recording {
    pub child: Child,
    pub trace: File,
    /// The FIFO's directory, removed (with the FIFO) when the recording is dropped.
    dir: tempfile::TempDir,
}

impl Recording {
    /// The FIFO's directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The trace as it is made: reads wait for valgrind's writes, and end once valgrind has exited
    /// and what it wrote is read, whoever else still holds the FIFO open.
    pub fn reader(&self) -> io::Result<TraceReader> {
        let fifo = self.trace.try_clone()?;
        set_nonblocking(&fifo)?;
        Ok(TraceReader {
            fifo,
            pid: self.child.id(),
            left: None,
            short: false,
        })
    }
}

/// How long a read waits for the trace before it looks whether valgrind has exited.
const EXIT_POLL: Duration = Duration::from_millis(50);

/// How long a read that follows a short one (less than half of what was asked) lets the trace
/// gather first. Lackey writes its log a line at a time, and a reader that takes each line as
/// it comes makes a system call a line and wakes at every write: recording a 10 M-reference
/// trace cost 4.5 s of our CPU time that way, against 0.25 s to read the same trace from a
/// file. Valgrind writes lackey's log at 10-25 MB/s on this project's VM, 20-50 KB in a wait:
/// within the FIFO's 1 MiB ([`PIPE_BYTES`]), and its 64 KiB if it cannot grow. A read that finds
/// half of what it asked for or more is followed by no wait, so a faster writer is read as fast
/// as it writes.
const GATHER: Duration = Duration::from_millis(2);

/// The read end of a recording's trace ([`Recording::reader`]).
pub struct TraceReader {
    fifo: File,
    /// Valgrind's pid.
    pid: u32,
    /// Once valgrind has exited: the bytes of the trace still to read.
    left: Option<usize>,
    /// The last read found less than half of what it asked for ([`GATHER`]).
    short: bool,
}

impl Read for TraceReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if std::mem::take(&mut self.short) && self.left.is_none() {
            std::thread::sleep(GATHER);
        }
        loop {
            let want = match self.left {
                Some(0) => return Ok(0),
                Some(left) => buf.len().min(left),
                None => buf.len(),
            };
            match (&self.fifo).read(&mut buf[..want]) {
                Ok(n) => {
                    if let Some(left) = &mut self.left {
                        *left -= n.min(*left);
                    }
                    self.short = n < want / 2;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.left.is_some() {
                        return Ok(0);
                    }
                    if exited(self.pid) {
                        // Valgrind's writes were whole lines (one write a line, each within
                        // PIPE_BUF, so never split), all done before it exited: the trace is what
                        // the FIFO holds now. A process forked from the program without exec,
                        // traced into the same FIFO, may write more later; that is not read.
                        self.left = Some(bytes_waiting(&self.fifo)?);
                        continue;
                    }
                    wait_readable(&self.fifo, EXIT_POLL);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Whether process `pid`, our child, has exited (it is left to be reaped by its waiter; a child
/// no longer there to wait for has exited too).
fn exited(pid: u32) -> bool {
    // SAFETY: an all-zero siginfo_t is valid, and waitid writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid id type, a pointer to a siginfo_t we own, and flags; WNOWAIT leaves the
    // child to be reaped by its waiter.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &raw mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: waitid filled `info` (si_pid stays 0 when no child has changed state).
    rc != 0 || unsafe { info.si_pid() } != 0
}

/// Bytes waiting in the FIFO.
fn bytes_waiting(fifo: &File) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD on a descriptor we own writes one int.
    if unsafe { libc::ioctl(fifo.as_raw_fd(), libc::FIONREAD, &raw mut n) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as usize)
}

/// Wait until `fifo` has something to read, or `timeout` passes.
fn wait_readable(fifo: &File, timeout: Duration) {
    let mut p = libc::pollfd {
        fd: fifo.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&raw mut p, 1, timeout.as_millis() as libc::c_int) };
}

fn set_nonblocking(f: &File) -> io::Result<()> {
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, with integer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The FIFO's buffer, bytes: 1 MiB, the default of /proc/sys/fs/pipe-max-size (pipe(7)).
const PIPE_BYTES: libc::c_int = 1 << 20;

/// Whether `valgrind` is on the PATH.
pub fn valgrind_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("valgrind"))
        .find(|p| p.is_file())
}

/// Why a program cannot be started, as a shell says it: its exit status (127 when the program is
/// not found, 126 when it is found but cannot be run) and a line naming the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRunnable {
    pub status: u8,
    pub message: String,
}

/// The executable `program` names (a name with a `/` as given, else looked up on `PATH` as a
/// shell would), checked to be a file we may execute.
pub fn runnable(program: &str) -> Result<PathBuf, NotRunnable> {
    let not = |status, why: &str| NotRunnable {
        status,
        message: format!("cannot start {program:?}: {why}"),
    };
    let path = store::resolve_command(program).ok_or_else(|| not(127, "not found on PATH"))?;
    let meta = std::fs::metadata(&path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => not(127, "no such file"),
        _ => not(126, &e.to_string()),
    })?;
    if meta.is_dir() {
        return Err(not(126, "a directory"));
    }
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| not(127, "a path with a NUL byte"))?;
    // SAFETY: `c` is a valid NUL-terminated path; access reads it and touches no other memory.
    if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        return Err(not(126, "not executable (permission denied)"));
    }
    Ok(path)
}

/// Start `cmd` under `valgrind --tool=lackey --trace-mem=yes`, its standard output to `stdout`.
/// `in_child` runs in the child between fork and exec (`Command::pre_exec`), and may make only
/// async-signal-safe calls: a caller that blocks signals to read them from a descriptor gives the
/// program an empty mask there (`hetsched_live::signals::unblock_in_child`), as `run` does.
pub fn start(
    cmd: &[String],
    stdout: Stdio,
    in_child: fn() -> io::Result<()>,
) -> Result<Recording, TraceError> {
    let Some(program) = cmd.first() else {
        return Err(TraceError::whole("--record needs a command after `--`"));
    };
    let valgrind = valgrind_path().ok_or_else(|| {
        TraceError::whole(
            "valgrind is not installed (it records the trace); install it: apt-get install valgrind",
        )
    })?;
    let dir = tempfile::Builder::new()
        .prefix("hetsched-record-")
        .rand_bytes(12)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(|e| {
            TraceError::whole(format!(
                "cannot make a directory for the trace in {}: {e}",
                std::env::temp_dir().display()
            ))
        })?;
    let fifo = dir.path().join("trace.fifo");
    make_fifo(&fifo)?;
    let mut command = Command::new(valgrind);
    command
        .arg("--tool=lackey")
        .arg("--trace-mem=yes")
        .arg(format!("--log-file={}", fifo.display()))
        .arg(program)
        .args(&cmd[1..])
        .stdout(stdout);
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: `in_child` makes only async-signal-safe calls (its contract above).
        unsafe { command.pre_exec(in_child) };
    }
    let child = command
        .spawn()
        .map_err(|e| TraceError::whole(format!("cannot start valgrind: {e}")))?;
    let mut child = child;
    // Opening the read end waits for valgrind to open the write end; if valgrind exits first
    // (a program it cannot start), opening the write end here releases the wait, and the trace
    // reads as empty.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader_path = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(File::open(&reader_path));
    });
    let trace = loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(r) => {
                break r.map_err(|e| {
                    TraceError::whole(format!("cannot open {}: {e}", fifo.display()))
                })?
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Ok(Some(_)) = child.try_wait() {
                    use std::os::unix::fs::OpenOptionsExt;
                    let _ = std::fs::OpenOptions::new()
                        .write(true)
                        .custom_flags(libc::O_NONBLOCK)
                        .open(&fifo);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(TraceError::whole("the trace reader stopped"))
            }
        }
    };
    // A FIFO buffers 64 KiB by default (pipe(7)): valgrind, writing its log in small pieces, then
    // waits on every read of ours. A larger buffer lets both run on; failure to grow it (a limit
    // in /proc/sys/fs/pipe-max-size) changes only the speed.
    // SAFETY: fcntl on a descriptor we own, with an integer argument.
    unsafe { libc::fcntl(trace.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES) };
    Ok(Recording { child, trace, dir })
}

fn make_fifo(path: &Path) -> Result<(), TraceError> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| TraceError::whole("a temporary path with a NUL byte"))?;
    // SAFETY: `c` is a valid NUL-terminated path; mkfifo reads it and touches no other memory.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    if rc != 0 {
        return Err(TraceError::whole(format!(
            "cannot make a FIFO at {}: {}",
            path.display(),
            io::Error::last_os_error()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::FromRawFd;

    /// A writer that writes a line at a time, as lackey does, a little slower than the reader
    /// takes them: the reader lets lines gather between reads instead of making a read a line,
    /// and still reads every byte.
    #[test]
    fn a_trace_written_a_line_at_a_time_is_read_in_few_reads() {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array it is given.
        assert_eq!(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) },
            0
        );
        // SAFETY: both descriptors were just made and are owned by these files alone.
        let (read_end, mut write_end) =
            unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        // The write end blocks, as valgrind's log descriptor does (and neither end reaches the
        // child: the reader sees the end of the trace when the writer closes its end).
        // SAFETY: fcntl on a descriptor we own, with an integer argument.
        unsafe { libc::fcntl(fds[1], libc::F_SETFL, 0) };
        // A child that outlives the writer, standing in for valgrind.
        let mut child = Command::new("sleep").arg("10").spawn().unwrap();
        const LINES: usize = 3000;
        let line = b" L 04001000,8\n0123\n";
        let writer = std::thread::spawn(move || {
            for _ in 0..LINES {
                write_end.write_all(line).unwrap();
                std::thread::sleep(Duration::from_micros(50));
            }
        });
        let mut reader = TraceReader {
            fifo: read_end,
            pid: child.id(),
            left: None,
            short: false,
        };
        let mut buf = vec![0u8; 64 << 10];
        let (mut reads, mut bytes) = (0, 0);
        let started = std::time::Instant::now();
        loop {
            let n = reader.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            reads += 1;
            bytes += n;
        }
        let elapsed = started.elapsed();
        writer.join().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(bytes, LINES * line.len());
        // Every read after a short one waits GATHER first, however slowly the writer goes (a
        // loaded machine); a reader that takes each line as it comes makes a read a line, far
        // more than the time allows at one a GATHER.
        let allowed = (elapsed.as_secs_f64() / GATHER.as_secs_f64()) as usize + 2;
        assert!(
            reads <= allowed,
            "{reads} reads for {LINES} lines in {elapsed:?} (at most {allowed})"
        );
    }
}
