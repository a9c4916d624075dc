//! The daemon side of the hint socket: a Unix datagram socket that receives the
//! [`hetsched_hint::wire`] messages. The kernel attaches the sender's credentials to every datagram
//! (`SO_PASSCRED`, `SCM_CREDENTIALS`: the datagram form of `SO_PEERCRED`, checked by the kernel, not
//! claimed by the sender), so a hint is accepted only when its thread belongs to the sending
//! process, or the sender is root. Malformed and oversized messages are counted and dropped.

use crate::procfs::Proc;
use crate::socket_file::BoundSocket;
use hetsched_core::policy::Hint;
use hetsched_core::signature::Signature;
use hetsched_hint::wire::{WireHint, MAX_MESSAGE_BYTES};
use serde::Serialize;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::Arc;

/// Counts of what arrived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HintCounts {
    pub accepted: u64,
    /// Well-formed, but the sender may not hint that thread, or it is not managed.
    pub rejected: u64,
    /// Not a hint: bad format, or longer than the largest hint.
    pub malformed: u64,
    /// About a thread that had exited by the time the hint was read (a thread leaving its
    /// fragment as it ends): nothing to do, and not an error.
    pub gone: u64,
}

/// A hint that passed the checks.
#[derive(Clone, Debug, PartialEq)]
pub struct Received {
    pub tid: u32,
    pub sender_pid: u32,
    pub hint: Hint,
}

/// The listening socket.
#[derive(Debug)]
pub struct HintServer {
    sock: UnixDatagram,
    /// Its file, removed with the server while it is still this socket.
    file: BoundSocket,
    pub counts: HintCounts,
}

/// The sender's credentials of one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub pid: u32,
    pub uid: u32,
}

/// Whether a sender may hint thread `tid`: root may hint any thread; anyone else only the threads
/// of its own process.
pub fn may_hint(cred: Credentials, tid: u32, proc: &Proc) -> bool {
    cred.uid == 0 || proc.is_thread_of(cred.pid, tid)
}

/// The policy-side hint of a wire message.
pub fn to_hint(w: WireHint) -> (u32, Hint) {
    match w {
        WireHint::DataFragment { tid, current, next } => {
            (tid, Hint::DataFragment { current, next })
        }
        WireHint::Signature {
            tid,
            sizes_bytes,
            assoc,
            misses_per_4096,
        } => (
            tid,
            Hint::Signature(Arc::new(Signature {
                name: format!("hint from thread {tid}"),
                sizes_bytes,
                assoc,
                misses: misses_per_4096
                    .into_iter()
                    .map(|r| r.into_iter().map(f64::from).collect())
                    .collect(),
            })),
        ),
    }
}

impl HintServer {
    /// Listen at `path`, which must be free ([`crate::socket_file::prepare`] makes it so: no
    /// file is replaced here). The socket is writable by everyone: the credentials check, not the
    /// file mode, decides who may hint what.
    pub fn bind(path: &Path) -> io::Result<HintServer> {
        let sock = UnixDatagram::bind(path)?;
        let file = BoundSocket::new(path)?;
        sock.set_nonblocking(true)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
        let one: libc::c_int = 1;
        // SAFETY: a valid option value of the size given.
        if unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PASSCRED,
                (&raw const one).cast(),
                size_of::<libc::c_int>() as u32,
            )
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(HintServer {
            sock,
            file,
            counts: HintCounts::default(),
        })
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.sock.as_raw_fd()
    }

    /// One datagram with its credentials; `None` when nothing is pending. `truncated` when it was
    /// longer than the buffer.
    fn recv_one(&self, buf: &mut [u8]) -> Option<(usize, bool, Option<Credentials>)> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // Room for one SCM_CREDENTIALS message (CMSG_SPACE of a ucred), 8-aligned.
        let mut cbuf = [0u64; 8];
        // SAFETY: msghdr is plain data; zero is a valid start.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&cbuf);
        // SAFETY: msg points at valid buffers for their stated lengths.
        let n = unsafe { libc::recvmsg(self.sock.as_raw_fd(), &raw mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            return None;
        }
        let truncated = msg.msg_flags & libc::MSG_TRUNC != 0;
        let mut cred = None;
        // SAFETY: the CMSG macros walk the control buffer the kernel filled, within its length.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_CREDENTIALS {
                    let u: libc::ucred = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    cred = Some(Credentials {
                        pid: u.pid as u32,
                        uid: u.uid,
                    });
                }
                c = libc::CMSG_NXTHDR(&raw const msg, c);
            }
        }
        Some((n as usize, truncated, cred))
    }

    /// Take every pending datagram. `manages(tid)` says whether a thread is managed; hints that
    /// pass every check go to `out`.
    pub fn drain(
        &mut self,
        proc: &Proc,
        mut manages: impl FnMut(u32) -> bool,
        out: &mut Vec<Received>,
    ) {
        let mut buf = vec![0u8; MAX_MESSAGE_BYTES + 1];
        while let Some((n, truncated, cred)) = self.recv_one(&mut buf) {
            if truncated || n > MAX_MESSAGE_BYTES {
                self.counts.malformed += 1;
                continue;
            }
            let wire = match WireHint::decode(&buf[..n]) {
                Ok(w) => w,
                Err(e) => {
                    tracing::debug!("hint dropped: {e}");
                    self.counts.malformed += 1;
                    continue;
                }
            };
            let (tid, hint) = to_hint(wire);
            let Some(cred) = cred else {
                self.counts.rejected += 1;
                continue;
            };
            if proc.tgid_of(tid).is_none() {
                self.counts.gone += 1;
                continue;
            }
            if !may_hint(cred, tid, proc) || !manages(tid) {
                tracing::debug!(
                    "hint about thread {tid} from pid {} uid {} rejected",
                    cred.pid,
                    cred.uid
                );
                self.counts.rejected += 1;
                continue;
            }
            self.counts.accepted += 1;
            out.push(Received {
                tid,
                sender_pid: cred.pid,
                hint,
            });
        }
    }
}

impl HintServer {
    /// [`drain`](Self::drain) for a backend loop: a hint may name a thread of a managed process
    /// that `tracker` has not seen yet (the thread can send before the event of its creation is
    /// read); such a thread is taken in on the spot and listed in `changes`, which the caller
    /// applies before delivering `out`.
    pub fn drain_tracked(
        &mut self,
        tracker: &mut crate::tracker::Tracker,
        manages: impl Fn(u32) -> bool,
        changes: &mut crate::tracker::Changes,
        out: &mut Vec<Received>,
    ) {
        out.clear();
        let proc = tracker.proc().clone();
        self.drain(
            &proc,
            |t| {
                manages(t)
                    || tracker.adopt(t).is_some_and(|f| {
                        changes.started.push(f);
                        true
                    })
            },
            out,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_hint::Client;

    #[test]
    fn own_thread_accepted_garbage_and_oversize_counted() {
        let path = std::env::temp_dir().join(format!("hs-hint-{}.sock", std::process::id()));
        let mut server = HintServer::bind(&path).unwrap();
        let client = Client::connect(&path).unwrap();
        let me = crate::sys::gettid();
        client.data_fragment(me, None, Some(7)).unwrap();
        let raw = UnixDatagram::unbound().unwrap();
        raw.send_to(b"garbage", &path).unwrap();
        raw.send_to(&vec![0u8; MAX_MESSAGE_BYTES + 100], &path)
            .unwrap();
        // A well-formed hint about a thread nobody manages.
        client.data_fragment(1, Some(1), None).unwrap();
        // A thread leaving its fragment as it ends: gone when read.
        client.data_fragment(u32::MAX - 7, Some(1), None).unwrap();
        let mut out = Vec::new();
        server.drain(&Proc::default(), |t| t == me, &mut out);
        assert_eq!(
            server.counts,
            HintCounts {
                accepted: 1,
                rejected: 1,
                malformed: 2,
                gone: 1,
            }
        );
        assert_eq!(
            out[0].hint,
            Hint::DataFragment {
                current: None,
                next: Some(7)
            }
        );
        assert_eq!(out[0].sender_pid, std::process::id());
    }

    #[test]
    fn only_root_may_hint_other_processes() {
        let proc = Proc::default();
        let me = std::process::id();
        let user = Credentials { pid: me, uid: 1000 };
        assert!(may_hint(user, me, &proc));
        assert!(!may_hint(user, 1, &proc), "pid 1's thread is not ours");
        assert!(may_hint(Credentials { pid: me, uid: 0 }, 1, &proc));
    }
}
