//! `hetsched signature --record -- CMD`: run a program under valgrind's lackey tool and read its
//! memory trace as it is made, through a FIFO, never writing it to disk. The program keeps its own
//! standard input and error, and its standard output unless the caller sends it elsewhere;
//! valgrind's log (the trace) goes to the FIFO. Valgrind exits as its program did (the same code,
//! or killed by the same signal), so the child's status is the program's.

use crate::trace::TraceError;
use std::ffi::CString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A program being traced: the child and the trace's read end.
pub struct Recording {
    pub child: Child,
    pub trace: File,
    dir: PathBuf,
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join("trace.fifo"));
        let _ = std::fs::remove_dir(&self.dir);
    }
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

/// Start `cmd` under `valgrind --tool=lackey --trace-mem=yes`, its standard output to `stdout`.
pub fn start(cmd: &[String], stdout: Stdio) -> Result<Recording, TraceError> {
    let Some(program) = cmd.first() else {
        return Err(TraceError::whole("--record needs a command after `--`"));
    };
    let valgrind = valgrind_path().ok_or_else(|| {
        TraceError::whole(
            "valgrind is not installed (it records the trace); install it: apt-get install valgrind",
        )
    })?;
    let dir = std::env::temp_dir().join(format!("hetsched-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| TraceError::whole(format!("cannot make {}: {e}", dir.display())))?;
    let fifo = dir.join("trace.fifo");
    make_fifo(&fifo)?;
    let child = Command::new(valgrind)
        .arg("--tool=lackey")
        .arg("--trace-mem=yes")
        .arg(format!("--log-file={}", fifo.display()))
        .arg(program)
        .args(&cmd[1..])
        .stdout(stdout)
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
        match rx.recv_timeout(std::time::Duration::from_millis(50)) {
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
    {
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl on a descriptor we own, with an integer argument.
        unsafe { libc::fcntl(trace.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES) };
    }
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
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}
