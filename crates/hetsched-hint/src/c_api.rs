//! The C ABI (`include/hetsched_hint.h`). Each thread's current data fragment is remembered here,
//! so a C program only says which fragment it enters and leaves. Functions return 0 or a negative
//! errno, never wait for the daemon, and never fail the program (the header lists the codes).

use crate::client::{current_tid, Client, HintError};
use std::cell::Cell;
use std::sync::OnceLock;

static CLIENT: OnceLock<Client> = OnceLock::new();

thread_local! {
    static CURRENT: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The process's client: the socket is named at the first call; the daemon behind it may come
/// and go.
fn client() -> &'static Client {
    CLIENT.get_or_init(|| Client::lazy(&Client::socket_from_env()))
}

fn send(current: Option<u64>, next: Option<u64>) -> i32 {
    match client().data_fragment(current_tid(), current, next) {
        Ok(()) => 0,
        Err(HintError::Unreachable(e)) => -e.raw_os_error().unwrap_or(libc::ENOTCONN),
        Err(HintError::Dropped) => -libc::EAGAIN,
        Err(HintError::Invalid(_)) => -libc::EINVAL,
    }
}

/// Hints dropped so far because the daemon's queue was full.
#[no_mangle]
pub extern "C" fn hetsched_hint_dropped() -> u64 {
    client().dropped()
}

/// The calling thread starts working on data fragment `df` (leaving its current one, if any).
#[no_mangle]
pub extern "C" fn hetsched_df_enter(df: u64) -> i32 {
    let current = CURRENT.with(|c| c.replace(Some(df)));
    send(current, Some(df))
}

/// The calling thread stops working on data fragment `df`.
#[no_mangle]
pub extern "C" fn hetsched_df_leave(df: u64) -> i32 {
    let current = CURRENT.with(Cell::get);
    if current != Some(df) {
        return -libc::EINVAL;
    }
    CURRENT.with(|c| c.set(None));
    send(Some(df), None)
}

/// The hint format version this library speaks.
#[no_mangle]
pub extern "C" fn hetsched_hint_version() -> u32 {
    crate::wire::VERSION as u32
}
