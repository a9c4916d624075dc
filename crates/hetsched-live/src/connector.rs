//! The kernel's process events connector (netlink `NETLINK_CONNECTOR`, `CN_IDX_PROC`): fork, exec
//! and exit of every task, as they happen. It needs CAP_NET_ADMIN and the initial network
//! namespace; where it cannot be had the tracker polls /proc alone. Events can be lost (the socket
//! buffer overflows: ENOBUFS); the tracker's periodic scan reconciles.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `PROC_CN_MCAST_LISTEN` (include/uapi/linux/cn_proc.h).
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_EVENT_FORK: u32 = 0x0000_0001;
const PROC_EVENT_EXEC: u32 = 0x0000_0002;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;
/// `struct nlmsghdr`.
const NLMSG_HDR: usize = 16;
/// `struct cn_msg` without its data.
const CN_MSG_HDR: usize = 20;
/// `struct proc_event` up to its union: what, cpu, timestamp_ns.
const PROC_EVENT_HDR: usize = 16;

/// One task event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcEvent {
    /// `child_tid` of process `child_pid` was created by a thread of `parent_pid`. A new process
    /// when `child_tid == child_pid`, else a new thread.
    Fork {
        parent_pid: u32,
        child_pid: u32,
        child_tid: u32,
    },
    /// Process `pid` executed a new program.
    Exec { pid: u32 },
    /// Task `tid` of process `pid` exited.
    Exit { pid: u32, tid: u32 },
}

/// A subscribed connector socket (non-blocking).
#[derive(Debug)]
pub struct Connector {
    fd: OwnedFd,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Parse the events in one received datagram (one or more netlink messages).
pub fn parse_events(buf: &[u8], out: &mut Vec<ProcEvent>) {
    let mut off = 0;
    while off + NLMSG_HDR <= buf.len() {
        let Some(len) = u32_at(buf, off).map(|l| l as usize) else {
            return;
        };
        if len < NLMSG_HDR || off + len > buf.len() {
            return;
        }
        let msg = &buf[off..off + len];
        let ev = NLMSG_HDR + CN_MSG_HDR;
        if let Some(what) = u32_at(msg, ev) {
            let d = ev + PROC_EVENT_HDR;
            let parsed = match what {
                PROC_EVENT_FORK => (|| {
                    Some(ProcEvent::Fork {
                        parent_pid: u32_at(msg, d + 4)?,
                        child_tid: u32_at(msg, d + 8)?,
                        child_pid: u32_at(msg, d + 12)?,
                    })
                })(),
                PROC_EVENT_EXEC => u32_at(msg, d + 4).map(|pid| ProcEvent::Exec { pid }),
                PROC_EVENT_EXIT => (|| {
                    Some(ProcEvent::Exit {
                        tid: u32_at(msg, d)?,
                        pid: u32_at(msg, d + 4)?,
                    })
                })(),
                _ => None,
            };
            out.extend(parsed);
        }
        // Messages are padded to 4 bytes (NLMSG_ALIGN).
        off += (len + 3) & !3;
    }
}

impl Connector {
    /// Subscribe to process events. Fails without CAP_NET_ADMIN or outside the initial network
    /// namespace.
    pub fn subscribe() -> io::Result<Connector> {
        // SAFETY: plain socket creation; the descriptor is owned below.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_CONNECTOR,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // A program starting a thousand threads sends a thousand events at once; a large buffer
        // keeps them (the forced variant needs CAP_NET_ADMIN, which the connector needs anyway).
        let bytes: libc::c_int = 8 << 20;
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
            // SAFETY: a valid option value of the size given.
            let r = unsafe {
                libc::setsockopt(
                    raw,
                    libc::SOL_SOCKET,
                    opt,
                    (&raw const bytes).cast(),
                    size_of::<libc::c_int>() as u32,
                )
            };
            if r == 0 {
                break;
            }
        }
        // SAFETY: sockaddr_nl is plain data; zero is a valid start.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        addr.nl_pid = 0;
        addr.nl_groups = libc::CN_IDX_PROC;
        // SAFETY: addr is a valid sockaddr_nl of the size given.
        if unsafe {
            libc::bind(
                raw,
                (&raw const addr).cast::<libc::sockaddr>(),
                size_of::<libc::sockaddr_nl>() as u32,
            )
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        // nlmsghdr + cn_msg + the operation.
        let total = NLMSG_HDR + CN_MSG_HDR + 4;
        let mut msg = Vec::with_capacity(total);
        msg.extend_from_slice(&(total as u32).to_ne_bytes()); // nlmsg_len
        msg.extend_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes()); // nlmsg_type
        msg.extend_from_slice(&0u16.to_ne_bytes()); // nlmsg_flags
        msg.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_seq
        msg.extend_from_slice(&std::process::id().to_ne_bytes()); // nlmsg_pid
        msg.extend_from_slice(&libc::CN_IDX_PROC.to_ne_bytes()); // cb_id.idx
        msg.extend_from_slice(&libc::CN_VAL_PROC.to_ne_bytes()); // cb_id.val
        msg.extend_from_slice(&0u32.to_ne_bytes()); // seq
        msg.extend_from_slice(&0u32.to_ne_bytes()); // ack
        msg.extend_from_slice(&4u16.to_ne_bytes()); // len
        msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
        msg.extend_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
        // SAFETY: msg is valid for its length.
        if unsafe { libc::send(raw, msg.as_ptr().cast(), msg.len(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Connector { fd })
    }

    /// Read every pending event. Returns false when events were lost (the caller rescans).
    pub fn drain(&self, out: &mut Vec<ProcEvent>) -> bool {
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: buf is valid for its length.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) => true,
                    Some(libc::EINTR) => continue,
                    _ => false, // ENOBUFS: events lost
                };
            }
            if n == 0 {
                return true;
            }
            parse_events(&buf[..n as usize], out);
        }
    }
}

impl AsRawFd for Connector {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(what: u32, data: &[u32]) -> Vec<u8> {
        let len = NLMSG_HDR + CN_MSG_HDR + PROC_EVENT_HDR + 4 * data.len();
        let mut m = vec![0u8; len];
        m[..4].copy_from_slice(&(len as u32).to_ne_bytes());
        let ev = NLMSG_HDR + CN_MSG_HDR;
        m[ev..ev + 4].copy_from_slice(&what.to_ne_bytes());
        for (i, v) in data.iter().enumerate() {
            let o = ev + PROC_EVENT_HDR + 4 * i;
            m[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        }
        m
    }

    #[test]
    fn parses_fork_exec_exit_in_one_datagram() {
        let mut buf = message(PROC_EVENT_FORK, &[10, 10, 11, 11]);
        buf.extend(message(PROC_EVENT_EXEC, &[11, 11]));
        buf.extend(message(PROC_EVENT_EXIT, &[12, 11, 0, 17]));
        buf.extend([1, 2, 3]); // a torn tail is ignored
        let mut out = Vec::new();
        parse_events(&buf, &mut out);
        assert_eq!(
            out,
            vec![
                ProcEvent::Fork {
                    parent_pid: 10,
                    child_pid: 11,
                    child_tid: 11
                },
                ProcEvent::Exec { pid: 11 },
                ProcEvent::Exit { pid: 11, tid: 12 },
            ]
        );
    }

    #[test]
    fn a_bad_length_stops_parsing() {
        let mut buf = message(PROC_EVENT_EXEC, &[5, 5]);
        buf[..4].copy_from_slice(&9999u32.to_ne_bytes());
        let mut out = Vec::new();
        parse_events(&buf, &mut out);
        assert!(out.is_empty());
    }
}
