//! The files of the sockets the backend listens on. A path is taken only when nothing is there,
//! or a stale socket is (a socket file no process listens on any more); anything else, a regular
//! file, a directory, a link, or a socket a live process answers on, is refused and left as it
//! is. A missing parent directory is made only under the state directory. At the end the file
//! is removed only while it is still the socket this process bound (the same device and inode),
//! never a file another process put there since.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Why a socket path cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum SocketPathError {
    /// Something other than a socket is there.
    #[error("{}: exists and is not a socket; refusing to replace it", .0.display())]
    NotASocket(PathBuf),
    /// A live process listens there.
    #[error("{}: in use (a running process answers on this socket)", .0.display())]
    InUse(PathBuf),
    /// The directory is missing and outside the state directory.
    #[error("{}: directory {} does not exist (only directories under the state directory {} are made)", .path.display(), .dir.display(), .state_dir.display())]
    NoDirectory {
        path: PathBuf,
        dir: PathBuf,
        state_dir: PathBuf,
    },
    /// Looking at the path failed.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl SocketPathError {
    /// A mistake in what was asked for (a path that names something else, a directory that does
    /// not exist), not a failure of the moment.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Self::NotASocket(_) | Self::NoDirectory { .. })
    }
}

impl From<SocketPathError> for io::Error {
    fn from(e: SocketPathError) -> io::Error {
        let kind = match &e {
            SocketPathError::NotASocket(_) => io::ErrorKind::AlreadyExists,
            SocketPathError::InUse(_) => io::ErrorKind::AddrInUse,
            SocketPathError::NoDirectory { .. } => io::ErrorKind::NotFound,
            SocketPathError::Io { source, .. } => source.kind(),
        };
        io::Error::new(kind, e.to_string())
    }
}

/// Make `path` free for a new socket: its directory exists (made when it lies under
/// `state_dir`), and nothing is at the path but, at most, a stale socket, which is removed.
pub fn prepare(path: &Path, state_dir: &Path) -> Result<(), SocketPathError> {
    let io_err = |source| SocketPathError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::symlink_metadata(dir) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if !dir.starts_with(state_dir) {
                return Err(SocketPathError::NoDirectory {
                    path: path.to_path_buf(),
                    dir: dir.to_path_buf(),
                    state_dir: state_dir.to_path_buf(),
                });
            }
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        Err(e) => return Err(io_err(e)),
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(e)),
    };
    if !meta.file_type().is_socket() {
        return Err(SocketPathError::NotASocket(path.to_path_buf()));
    }
    if is_live(path).map_err(io_err)? {
        return Err(SocketPathError::InUse(path.to_path_buf()));
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err(e)),
        _ => Ok(()),
    }
}

/// Whether a process listens on the socket file at `path`: a connection is accepted (or waits
/// in a full queue), or a socket of the other type is bound there. Only a refused connection
/// means nobody is there. The connection never blocks.
pub fn is_live(path: &Path) -> io::Result<bool> {
    // SAFETY: sockaddr_un is plain data; zero is a valid start.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "path too long for a socket",
        ));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: socket has no memory preconditions.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: addr is a valid sockaddr_un of the size given.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&raw const addr).cast(),
            size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => Ok(false),
        Some(libc::EAGAIN | libc::EINPROGRESS | libc::EPROTOTYPE) => Ok(true),
        _ => Err(e),
    }
}

/// A socket file this process bound: removed when dropped, if it is still that socket.
#[derive(Debug)]
pub struct BoundSocket {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl BoundSocket {
    /// The socket just bound at `path`.
    pub fn new(path: &Path) -> io::Result<BoundSocket> {
        let m = std::fs::symlink_metadata(path)?;
        Ok(BoundSocket {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file at the path is still the socket bound.
    fn still_ours(&self) -> bool {
        std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.file_type().is_socket() && m.dev() == self.dev && m.ino() == self.ino)
    }
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        if self.still_ours() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::{UnixDatagram, UnixListener};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hs-sockfile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn only_a_stale_socket_is_replaced() {
        let dir = scratch("stale");
        let state = dir.join("state");
        // Nothing there: free.
        prepare(&dir.join("a.sock"), &state).unwrap();
        // A regular file, a directory and a link stay, and are named.
        let file = dir.join("notes.txt");
        std::fs::write(&file, "keep").unwrap();
        let e = prepare(&file, &state).unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("notes.txt"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
        std::fs::create_dir(dir.join("d")).unwrap();
        assert!(matches!(
            prepare(&dir.join("d"), &state),
            Err(SocketPathError::NotASocket(_))
        ));
        std::os::unix::fs::symlink(&file, dir.join("link")).unwrap();
        assert!(matches!(
            prepare(&dir.join("link"), &state),
            Err(SocketPathError::NotASocket(_))
        ));
        assert!(file.exists() && dir.join("d").is_dir());
        // A live stream socket and a live datagram socket are in use; once closed, stale.
        let s = dir.join("s.sock");
        let l = UnixListener::bind(&s).unwrap();
        assert!(matches!(
            prepare(&s, &state),
            Err(SocketPathError::InUse(_))
        ));
        let g = dir.join("g.sock");
        let d = UnixDatagram::bind(&g).unwrap();
        assert!(matches!(
            prepare(&g, &state),
            Err(SocketPathError::InUse(_))
        ));
        drop((l, d));
        prepare(&s, &state).unwrap();
        prepare(&g, &state).unwrap();
        assert!(!s.exists() && !g.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn directories_are_made_under_the_state_directory_only() {
        let dir = scratch("dirs");
        let state = dir.join("state");
        let e = prepare(&dir.join("elsewhere/x/a.sock"), &state).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(!dir.join("elsewhere").exists());
        prepare(&state.join("sub/a.sock"), &state).unwrap();
        assert!(state.join("sub").is_dir());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_the_socket_bound_is_removed() {
        let dir = scratch("owned");
        let p = dir.join("a.sock");
        let l = UnixListener::bind(&p).unwrap();
        let bound = BoundSocket::new(&p).unwrap();
        drop(bound);
        assert!(!p.exists());
        drop(l);
        // Replaced by another file since: left alone.
        let l = UnixListener::bind(&p).unwrap();
        let bound = BoundSocket::new(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "someone else's").unwrap();
        drop(bound);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "someone else's");
        drop(l);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
