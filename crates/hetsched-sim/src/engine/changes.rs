//! The logs of threads whose resident pages ([`hetsched_core::View::resident_changed`]) or whose
//! lifecycle ([`hetsched_core::View::lifecycle_changed`]) changed since the policy's last periodic
//! balance: each thread once a log, so that a policy keeping per-thread state pays for what
//! changed, not for every thread, at each balance. A thread only billed, queued or dispatched is
//! in neither: noting those (every tick of every core) cost the engine's hot path more than any
//! policy saved by reading them.

use hetsched_core::{IdVec, ThreadId};

/// The two logs a view hands over.
#[derive(Debug, Default)]
pub(crate) struct ChangeLogs {
    resident: ChangeLog,
    lifecycle: ChangeLog,
}

impl ChangeLogs {
    /// A thread has just been created (a start is a change of every kind).
    pub(crate) fn add_thread(&mut self, t: ThreadId) {
        self.resident.add_thread(t);
        self.lifecycle.add_thread(t);
    }

    /// `t`'s resident pages changed ([`hetsched_core::View::resident_changed`]).
    pub(crate) fn note_resident(&mut self, t: ThreadId) {
        self.resident.note(t);
    }

    /// `t` blocked, woke, exited or changed data fragment
    /// ([`hetsched_core::View::lifecycle_changed`]).
    pub(crate) fn note_lifecycle(&mut self, t: ThreadId) {
        self.lifecycle.note(t);
    }

    /// Those whose resident pages changed.
    pub(crate) fn resident(&self) -> &[ThreadId] {
        self.resident.threads()
    }

    /// Those whose lifecycle changed.
    pub(crate) fn lifecycle(&self) -> &[ThreadId] {
        self.lifecycle.threads()
    }

    /// Start new logs.
    pub(crate) fn clear(&mut self) {
        self.resident.clear();
        self.lifecycle.clear();
    }
}

/// Threads noted since the last [`ChangeLog::clear`], each once.
#[derive(Debug, Default)]
pub(crate) struct ChangeLog {
    threads: Vec<ThreadId>,
    /// Per thread: in `threads` now (a dense array: read at every bill, it stays in cache).
    noted: IdVec<ThreadId, bool>,
}

impl ChangeLog {
    /// A thread has just been created (it is noted: a start is a change).
    pub(crate) fn add_thread(&mut self, t: ThreadId) {
        debug_assert_eq!(t.index(), self.noted.len());
        self.noted.push(false);
        self.note(t);
    }

    /// Something of `t`'s observation changed.
    #[inline]
    pub(crate) fn note(&mut self, t: ThreadId) {
        let noted = &mut self.noted[t];
        if !*noted {
            *noted = true;
            self.threads.push(t);
        }
    }

    /// The threads noted since the last clear.
    pub(crate) fn threads(&self) -> &[ThreadId] {
        &self.threads
    }

    /// Start a new log.
    pub(crate) fn clear(&mut self) {
        for t in self.threads.drain(..) {
            self.noted[t] = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_is_logged_once_until_cleared() {
        let mut log = ChangeLog::default();
        for i in 0..3 {
            log.add_thread(ThreadId(i));
        }
        log.note(ThreadId(1));
        assert_eq!(log.threads(), &[ThreadId(0), ThreadId(1), ThreadId(2)]);
        log.clear();
        assert!(log.threads().is_empty());
        log.note(ThreadId(2));
        log.note(ThreadId(2));
        log.note(ThreadId(0));
        assert_eq!(log.threads(), &[ThreadId(2), ThreadId(0)]);
    }
}
