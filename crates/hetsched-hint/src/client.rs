//! The Rust API: a datagram socket to the daemon, one message a hint.

use crate::wire::{WireError, WireHint};
use std::os::unix::net::UnixDatagram;
use std::path::Path;

/// Environment variable naming the daemon's hint socket.
pub const SOCKET_ENV: &str = "HETSCHED_HINT_SOCKET";
/// The daemon's hint socket when the variable is not set.
pub const DEFAULT_SOCKET: &str = "/run/hetsched/hint.sock";

/// Why a hint was not sent.
#[derive(Debug)]
pub enum HintError {
    /// No daemon listens at the socket (or it cannot be reached).
    Unreachable(std::io::Error),
    /// The hint is outside the format's limits.
    Invalid(WireError),
}

impl std::fmt::Display for HintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HintError::Unreachable(e) => write!(f, "hetsched daemon unreachable: {e}"),
            HintError::Invalid(e) => write!(f, "invalid hint: {e}"),
        }
    }
}

impl std::error::Error for HintError {}

/// A connection to the daemon's hint socket.
#[derive(Debug)]
pub struct Client {
    sock: UnixDatagram,
}

/// The calling thread's kernel id (the `tid` of a hint).
pub fn current_tid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() as u32 }
}

impl Client {
    /// Connect to the socket at `path`.
    pub fn connect(path: &Path) -> Result<Client, HintError> {
        let sock = UnixDatagram::unbound().map_err(HintError::Unreachable)?;
        sock.connect(path).map_err(HintError::Unreachable)?;
        Ok(Client { sock })
    }

    /// Connect to `$HETSCHED_HINT_SOCKET`, or to [`DEFAULT_SOCKET`].
    pub fn from_env() -> Result<Client, HintError> {
        let path = std::env::var_os(SOCKET_ENV)
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| DEFAULT_SOCKET.into());
        Client::connect(&path)
    }

    /// Send one hint.
    pub fn send(&self, hint: &WireHint) -> Result<(), HintError> {
        let bytes = hint.encode().map_err(HintError::Invalid)?;
        self.sock.send(&bytes).map_err(HintError::Unreachable)?;
        Ok(())
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
