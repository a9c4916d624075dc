//! The Rust API: a datagram socket to the daemon, one message a hint, never waiting for it.

use crate::wire::{WireError, WireHint};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Environment variable naming the daemon's hint socket.
pub const SOCKET_ENV: &str = "HETSCHED_HINT_SOCKET";
/// The daemon's hint socket when the variable is not set.
pub const DEFAULT_SOCKET: &str = "/run/hetsched/hint.sock";

/// Why a hint was not sent.
#[derive(Debug)]
pub enum HintError {
    /// No daemon listens at the socket now (or it cannot be reached). The client tries again at
    /// a later send, at most once every [`RECONNECT_EVERY`].
    Unreachable(std::io::Error),
    /// The daemon's queue is full: the hint was dropped (counted in [`Client::dropped`]). Sending
    /// never waits for the daemon.
    Dropped,
    /// The hint is outside the format's limits.
    Invalid(WireError),
}

impl std::fmt::Display for HintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HintError::Unreachable(e) => write!(f, "hetsched daemon unreachable: {e}"),
            HintError::Dropped => write!(f, "hetsched daemon's queue is full: hint dropped"),
            HintError::Invalid(e) => write!(f, "invalid hint: {e}"),
        }
    }
}

impl std::error::Error for HintError {}

/// How often at most a client without a daemon tries to reach it again.
pub const RECONNECT_EVERY: Duration = Duration::from_secs(1);

/// A connection to the daemon's hint socket. Sending never blocks: a full queue drops the hint;
/// a daemon that is not there, restarts, or starts later is reached again at a later send.
#[derive(Debug)]
pub struct Client {
    path: PathBuf,
    sock: Mutex<Option<UnixDatagram>>,
    /// When the last connection attempt failed.
    failed_at: Mutex<Option<Instant>>,
    dropped: AtomicU64,
}

/// The calling thread's kernel id (the `tid` of a hint).
pub fn current_tid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() as u32 }
}

fn open(path: &Path) -> std::io::Result<UnixDatagram> {
    let sock = UnixDatagram::unbound()?;
    sock.connect(path)?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}

/// The daemon is not (or no longer) behind the socket.
fn is_unreachable(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNREFUSED | libc::ENOENT | libc::ENOTCONN | libc::ECONNRESET)
    )
}

impl Client {
    /// Connect to the socket at `path`; an error when no daemon listens there now.
    pub fn connect(path: &Path) -> Result<Client, HintError> {
        let sock = open(path).map_err(HintError::Unreachable)?;
        Ok(Client {
            path: path.to_path_buf(),
            sock: Mutex::new(Some(sock)),
            failed_at: Mutex::new(None),
            dropped: AtomicU64::new(0),
        })
    }

    /// A client of the socket at `path` that connects when it can: now if a daemon listens,
    /// else at a later send.
    pub fn lazy(path: &Path) -> Client {
        Client::connect(path).unwrap_or_else(|_| Client {
            path: path.to_path_buf(),
            sock: Mutex::new(None),
            failed_at: Mutex::new(Some(Instant::now())),
            dropped: AtomicU64::new(0),
        })
    }

    /// The socket named by `$HETSCHED_HINT_SOCKET`, or [`DEFAULT_SOCKET`].
    pub fn socket_from_env() -> PathBuf {
        std::env::var_os(SOCKET_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| DEFAULT_SOCKET.into())
    }

    /// Connect to `$HETSCHED_HINT_SOCKET`, or to [`DEFAULT_SOCKET`].
    pub fn from_env() -> Result<Client, HintError> {
        Client::connect(&Client::socket_from_env())
    }

    /// Hints dropped because the daemon's queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Send one hint, without waiting: see [`HintError`] for what can go wrong.
    pub fn send(&self, hint: &WireHint) -> Result<(), HintError> {
        let bytes = hint.encode().map_err(HintError::Invalid)?;
        let mut sock = self.sock.lock().unwrap_or_else(PoisonError::into_inner);
        if sock.is_none() {
            let mut failed = self
                .failed_at
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if failed.is_some_and(|t| t.elapsed() < RECONNECT_EVERY) {
                return Err(HintError::Unreachable(std::io::Error::from_raw_os_error(
                    libc::ENOTCONN,
                )));
            }
            match open(&self.path) {
                Ok(s) => {
                    *sock = Some(s);
                    *failed = None;
                }
                Err(e) => {
                    *failed = Some(Instant::now());
                    return Err(HintError::Unreachable(e));
                }
            }
        }
        let s = sock.as_ref().expect("connected above");
        match s.send(&bytes) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                Err(HintError::Dropped)
            }
            Err(e) if is_unreachable(&e) => {
                // The daemon went away (or restarted on a new socket): reconnect at a later send.
                *sock = None;
                *self
                    .failed_at
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = None;
                Err(HintError::Unreachable(e))
            }
            Err(e) => Err(HintError::Unreachable(e)),
        }
    }

    /// Thread `tid` leaves `current` and works on `next` (Pinter section 4.1).
    pub fn data_fragment(
        &self,
        tid: u32,
        current: Option<u64>,
        next: Option<u64>,
    ) -> Result<(), HintError> {
        self.send(&WireHint::DataFragment { tid, current, next })
    }
}
