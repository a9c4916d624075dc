//! The C ABI (`include/hetsched_hint.h`). Each thread's current data fragment is remembered here,
//! so a C program only says which fragment it enters and leaves. Functions return 0, or a negative
//! errno: `-ENOTCONN` when no daemon listens (the program runs on regardless), `-EINVAL` for a
//! `leave` of a fragment the thread is not in.

use crate::client::{current_tid, Client, HintError};
use std::cell::Cell;
use std::sync::OnceLock;

static CLIENT: OnceLock<Option<Client>> = OnceLock::new();

thread_local! {
    static CURRENT: Cell<Option<u64>> = const { Cell::new(None) };
}

fn client() -> Option<&'static Client> {
    CLIENT.get_or_init(|| Client::from_env().ok()).as_ref()
}

fn send(current: Option<u64>, next: Option<u64>) -> i32 {
    let Some(c) = client() else {
        return -libc::ENOTCONN;
    };
    match c.data_fragment(current_tid(), current, next) {
        Ok(()) => 0,
        Err(HintError::Unreachable(e)) => -e.raw_os_error().unwrap_or(libc::ENOTCONN),
        Err(HintError::Invalid(_)) => -libc::EINVAL,
    }
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
