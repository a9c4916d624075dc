//! The client and the C ABI against a socket standing in for the daemon.

use hetsched_hint::c_api::{hetsched_df_enter, hetsched_df_leave, hetsched_hint_version};
use hetsched_hint::client::current_tid;
use hetsched_hint::client::RECONNECT_EVERY;
use hetsched_hint::wire::{WireHint, MAX_MESSAGE_BYTES};
use hetsched_hint::{Client, HintError, SOCKET_ENV};
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

fn socket_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hetsched-hint-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hint.sock");
    let _ = std::fs::remove_file(&path);
    path
}

/// A daemon that stops reading (its queue full) never blocks the application: the hints beyond
/// the queue are dropped and counted (before, the 11th call blocked for good).
#[test]
fn a_daemon_that_stops_reading_never_blocks_the_sender() {
    let path = socket_path("full");
    let _daemon = UnixDatagram::bind(&path).unwrap();
    let client = Client::connect(&path).unwrap();
    let t = std::time::Instant::now();
    let mut dropped = 0;
    for df in 0..2000 {
        match client.data_fragment(1, None, Some(df)) {
            Ok(()) => {}
            Err(HintError::Dropped) => dropped += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
    assert!(dropped > 0);
    assert_eq!(client.dropped(), dropped);
}

/// A daemon that starts after the application's first hint, and one that restarts on a new
/// socket, gets the hints sent after it is there (before, the client never reconnected).
#[test]
fn a_daemon_that_starts_later_or_restarts_gets_the_hints() {
    let path = socket_path("later");
    let client = Client::lazy(&path);
    assert!(matches!(
        client.data_fragment(1, None, Some(1)),
        Err(HintError::Unreachable(_))
    ));
    let daemon = UnixDatagram::bind(&path).unwrap();
    std::thread::sleep(RECONNECT_EVERY + std::time::Duration::from_millis(100));
    client.data_fragment(1, None, Some(2)).unwrap();
    assert_eq!(
        receive(&daemon),
        WireHint::DataFragment {
            tid: 1,
            current: None,
            next: Some(2)
        }
    );
    // The daemon restarts: a new socket at the same path.
    drop(daemon);
    std::fs::remove_file(&path).unwrap();
    let daemon = UnixDatagram::bind(&path).unwrap();
    let t = std::time::Instant::now();
    while client.data_fragment(1, None, Some(3)).is_err() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(3),
            "never reconnected"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        receive(&daemon),
        WireHint::DataFragment {
            tid: 1,
            current: None,
            next: Some(3)
        }
    );
}
