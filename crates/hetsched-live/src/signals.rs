//! Signals as file descriptor events (`signalfd`), so the backend's one loop sees a SIGTERM, a
//! child's exit and a hint in the same `poll`. The signals are blocked in the calling thread, which
//! must be the process's only thread when [`Signals::take`] runs (threads started later inherit the
//! mask); programs the backend launches get an empty mask back ([`unblock_in_child`]).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// The signals the backend handles itself.
pub const HANDLED: [libc::c_int; 5] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGCHLD,
];

/// One received signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    pub signo: i32,
    /// Sent by a process with kill(2) (not by the kernel, as a terminal's ^C is).
    pub from_process: bool,
}

/// The signal descriptor.
#[derive(Debug)]
pub struct Signals {
    fd: OwnedFd,
}

fn handled_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        for s in HANDLED {
            libc::sigaddset(&raw mut set, s);
        }
        set
    }
}

impl Signals {
    /// Block [`HANDLED`] in this thread and read them from a descriptor instead.
    pub fn take() -> io::Result<Signals> {
        let set = handled_set();
        // SAFETY: set is initialised; a null old-set pointer is allowed.
        if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &raw const set, std::ptr::null_mut()) }
            != 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: set is initialised; -1 asks for a new descriptor.
        let fd =
            unsafe { libc::signalfd(-1, &raw const set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor nothing else owns.
        Ok(Signals {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Every pending signal.
    pub fn drain(&self) -> Vec<Received> {
        let mut out = Vec::new();
        loop {
            // SAFETY: signalfd_siginfo is plain data.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let want = size_of::<libc::signalfd_siginfo>();
            // SAFETY: info is valid for `want` bytes.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), (&raw mut info).cast(), want) };
            if n as usize != want {
                return out;
            }
            out.push(Received {
                signo: info.ssi_signo as i32,
                from_process: info.ssi_code == libc::SI_USER || info.ssi_code == libc::SI_QUEUE,
            });
        }
    }
}

impl AsRawFd for Signals {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// For `Command::pre_exec`: give the launched program an empty signal mask.
pub fn unblock_in_child() -> io::Result<()> {
    // SAFETY: async-signal-safe calls on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        if libc::sigprocmask(libc::SIG_SETMASK, &raw const set, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Wait until one of `fds` is readable or `timeout` passes; returns which are readable.
pub fn wait_readable(fds: &[RawFd], timeout: Duration) -> Vec<bool> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // Rounded up: a timeout rounded down to 0 would spin until the deadline.
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: p is valid for its length.
    let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
    if n <= 0 {
        return vec![false; fds.len()];
    }
    p.iter()
        .map(|x| x.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
        .collect()
}

/// Make this process the reaper of its orphaned descendants, so a launched tree stays visible
/// (and waitable) when a middle process exits.
pub fn become_subreaper() {
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    /// The shell's convention: the code, or 128 + the signal.
    pub fn shell_code(self) -> i32 {
        match self {
            Exit::Code(c) => c,
            Exit::Signal(s) => 128 + s,
        }
    }
}

/// Reap every exited child; returns the exit of `main_child` if it was among them.
pub fn reap(main_child: u32) -> Option<Exit> {
    let mut found = None;
    loop {
        let mut status = 0;
        // SAFETY: status is a valid int.
        let pid = unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG) };
        if pid <= 0 {
            return found;
        }
        if pid as u32 == main_child {
            found = Some(if libc::WIFEXITED(status) {
                Exit::Code(libc::WEXITSTATUS(status))
            } else {
                Exit::Signal(libc::WTERMSIG(status))
            });
        }
    }
}

/// Send `signo` to process `pid`.
pub fn send(pid: u32, signo: i32) {
    // SAFETY: kill has no memory preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, signo);
    }
}
