//! The client and the C ABI against a socket standing in for the daemon.

use hetsched_hint::c_api::{hetsched_df_enter, hetsched_df_leave, hetsched_hint_version};
use hetsched_hint::client::current_tid;
use hetsched_hint::wire::{WireHint, MAX_MESSAGE_BYTES};
use hetsched_hint::{Client, SOCKET_ENV};
use std::os::unix::net::UnixDatagram;

fn receive(sock: &UnixDatagram) -> WireHint {
    let mut buf = [0u8; MAX_MESSAGE_BYTES + 1];
    let n = sock.recv(&mut buf).unwrap();
    WireHint::decode(&buf[..n]).unwrap()
}

#[test]
fn the_c_abi_sends_enter_and_leave_with_the_threads_current_fragment() {
    let dir = std::env::temp_dir().join(format!("hetsched-hint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hint.sock");
    let _ = std::fs::remove_file(&path);
    let daemon = UnixDatagram::bind(&path).unwrap();
    // The C ABI reads the variable once, at its first call (this is the only test doing so).
    std::env::set_var(SOCKET_ENV, &path);
    assert_eq!(hetsched_hint_version(), 1);
    let tid = current_tid();
    assert_eq!(hetsched_df_enter(7), 0);
    assert_eq!(
        receive(&daemon),
        WireHint::DataFragment {
            tid,
            current: None,
            next: Some(7)
        }
    );
    assert_eq!(hetsched_df_enter(9), 0);
    assert_eq!(
        receive(&daemon),
        WireHint::DataFragment {
            tid,
            current: Some(7),
            next: Some(9)
        }
    );
    assert_eq!(hetsched_df_leave(7), -libc_einval(), "not in DF 7 any more");
    assert_eq!(hetsched_df_leave(9), 0);
    assert_eq!(
        receive(&daemon),
        WireHint::DataFragment {
            tid,
            current: Some(9),
            next: None
        }
    );
    // Another thread has its own current fragment and its own tid.
    let other = std::thread::spawn(|| (hetsched_df_enter(3), current_tid()))
        .join()
        .unwrap();
    assert_eq!(other.0, 0);
    assert_ne!(other.1, tid);
    assert_eq!(
        receive(&daemon),
        WireHint::DataFragment {
            tid: other.1,
            current: None,
            next: Some(3)
        }
    );
    std::fs::remove_dir_all(&dir).ok();
}

fn libc_einval() -> i32 {
    22
}

#[test]
fn a_missing_daemon_is_reported_not_fatal() {
    let err = Client::connect(std::path::Path::new("/nonexistent/hetsched.sock")).unwrap_err();
    assert!(
        err.to_string().starts_with("hetsched daemon unreachable"),
        "{err}"
    );
}
