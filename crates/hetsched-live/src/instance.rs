//! One instance per state directory. The daemon and `emulate` take an exclusive `flock` on a lock
//! file in the state directory before they touch any socket or state file; a second one finds the
//! lock held, names the holder's pid, and changes nothing. The kernel drops the lock when the
//! holder exits, however it exits, so a crash never leaves a stale lock behind.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error("already running (pid {pid}) over {}", dir.display())]
    AlreadyRunning {
        /// The holder's pid, as it wrote it (`?` when unreadable).
        pid: String,
        /// The state directory.
        dir: PathBuf,
    },
    /// The state directory is not there and cannot be made (the error names it).
    #[error("{0}")]
    StateDir(io::Error),
    /// The lock file could not be made or locked.
    #[error("{}: {source}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
}

/// The held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct InstanceLock {
    file: File,
}

impl InstanceLock {
    /// Take the lock `<dir>/<name>.lock` and write our pid in it.
    pub fn acquire(dir: &Path, name: &str) -> Result<InstanceLock, LockError> {
        let path = dir.join(format!("{name}.lock"));
        let io_err = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        crate::journal::ensure_state_dir(dir).map_err(LockError::StateDir)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err)?;
        // SAFETY: flock on a descriptor we own.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                return Err(LockError::AlreadyRunning {
                    pid: if pid.is_empty() {
                        "?".into()
                    } else {
                        pid.into()
                    },
                    dir: dir.to_path_buf(),
                });
            }
            return Err(io_err(e));
        }
        file.set_len(0).map_err(io_err)?;
        file.rewind().map_err(io_err)?;
        writeln!(file, "{}", std::process::id()).map_err(io_err)?;
        Ok(InstanceLock { file })
    }
}

impl Drop for InstanceLock {
    fn drop(&mut self) {
        // The pid goes with the lock, so a reader never names a process that no longer holds it.
        let _ = self.file.set_len(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid_until_it_lets_go() {
        let dir = std::env::temp_dir().join(format!("hetsched-lock-{}", std::process::id()));
        let first = InstanceLock::acquire(&dir, "daemon").unwrap();
        // flock locks belong to the open file description: a second open in this process
        // conflicts as another process's would.
        match InstanceLock::acquire(&dir, "daemon") {
            Err(LockError::AlreadyRunning { pid, .. }) => {
                assert_eq!(pid, std::process::id().to_string());
            }
            other => panic!("expected AlreadyRunning, got {other:?}"),
        }
        // Another name is another lock.
        let other = InstanceLock::acquire(&dir, "emulate").unwrap();
        drop(first);
        let again = InstanceLock::acquire(&dir, "daemon").unwrap();
        drop((again, other));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
