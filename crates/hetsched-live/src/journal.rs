//! The affinity journal: every thread whose affinity the backend changed, with the mask it had
//! before and the mask the backend set last, on disk before the change is made. It is what makes
//! restoring possible after a crash: on its next start, hetsched restores the entries of journals
//! whose owner is dead ([`recover_stale`]).
//!
//! A thread is named by its id and start time, so a reused id is never "restored". An entry is
//! restored only while the thread still has the mask the backend set: a program that changed its
//! own affinity since keeps its choice.

use crate::procfs::Proc;
use crate::sys::{self, OsMask, PackedMask, SysError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Environment variable overriding the state directory.
pub const STATE_DIR_ENV: &str = "HETSCHED_STATE_DIR";

/// Where journals, hint sockets and the emulated topology live: `$HETSCHED_STATE_DIR` (made
/// absolute against the current directory, so the programs hetsched starts and a later hetsched
/// started elsewhere find the same place; empty counts as unset), else `/run/hetsched` when it can
/// be created, else `$XDG_RUNTIME_DIR/hetsched`, else `/tmp/hetsched-<uid>`.
pub fn state_dir() -> PathBuf {
    if let Some(d) = state_dir_of(std::env::var_os(STATE_DIR_ENV)) {
        return d;
    }
    let run = PathBuf::from("/run/hetsched");
    if fs::create_dir_all(&run).is_ok() {
        return run;
    }
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        return PathBuf::from(x).join("hetsched");
    }
    // SAFETY: getuid has no preconditions.
    PathBuf::from(format!("/tmp/hetsched-{}", unsafe { libc::getuid() }))
}

/// The state directory a value of `$HETSCHED_STATE_DIR` names: `None` when unset or empty, else
/// the path made absolute against the current directory.
fn state_dir_of(value: Option<std::ffi::OsString>) -> Option<PathBuf> {
    let d = PathBuf::from(value.filter(|d| !d.is_empty())?);
    Some(std::path::absolute(&d).unwrap_or(d))
}

/// Make the state directory `dir` if it is missing, and check that no other user can have
/// written in it; an error names it.
pub fn ensure_state_dir(dir: &Path) -> io::Result<()> {
    let e = match fs::create_dir_all(dir) {
        Ok(()) if dir.is_dir() => return check_trusted(dir),
        Err(e) if !dir.exists() || dir.is_dir() => e,
        _ => io::Error::new(
            io::ErrorKind::AlreadyExists,
            "exists and is not a directory",
        ),
    };
    Err(io::Error::new(
        e.kind(),
        format!("state directory {} (${STATE_DIR_ENV}): {e}", dir.display()),
    ))
}

/// The state directory `dir` is owned by us or by root and writable by no one else. Journals in
/// it are restored with our privileges at every start ([`recover_stale`]), so a journal another
/// user planted there (in a `/tmp` directory made before ours, say) would have us set the
/// affinity of threads that are not theirs to touch.
fn check_trusted(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(dir)?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let why = if m.uid() != euid && m.uid() != 0 {
        Some(format!(
            "owned by uid {}, not by us (uid {euid}) or root",
            m.uid()
        ))
    } else if m.mode() & 0o022 != 0 {
        Some(format!(
            "writable by {} (mode {:o})",
            if m.mode() & 0o002 != 0 {
                "every user"
            } else {
                "its group"
            },
            m.mode() & 0o7777
        ))
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "state directory {} (${STATE_DIR_ENV}): {why}; its journals could have been written by another user, so it is not used",
                dir.display()
            ),
        )),
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
struct Entry {
    tid: u32,
    start_ticks: u64,
    /// cpulist before the first change.
    #[serde(with = "cpulist")]
    original: Option<PackedMask>,
    /// cpulist the backend set last (or is about to set: the entry is written first).
    #[serde(with = "cpulist")]
    applied: Option<PackedMask>,
    /// cpulist the thread had just before `applied`: a crash between writing the journal and the
    /// change leaves the thread with this one.
    #[serde(default, with = "cpulist")]
    before: Option<PackedMask>,
}

/// Masks on disk as kernel cpulists (`0-3,8`), in memory packed (no string per mask: a journal
/// of ten thousand threads). A list that does not parse reads as `None`, and its entry is skipped
/// at restore; the rest of the journal still counts.
mod cpulist {
    use crate::sys::{OsMask, PackedMask};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &Option<PackedMask>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&m.as_ref().map(|m| m.unpack().to_list()).unwrap_or_default())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PackedMask>, D::Error> {
        let text = String::deserialize(d)?;
        Ok(if text.is_empty() {
            None
        } else {
            OsMask::parse_list(&text).map(|m| PackedMask::pack(&m))
        })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, Default)]
struct JournalFile {
    owner_pid: u32,
    owner_start_ticks: u64,
    threads: Vec<Entry>,
}

/// This process's journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: JournalFile,
    index: BTreeMap<u32, usize>,
}

/// What a restore did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Restored {
    /// Threads given their original mask back.
    pub restored: u32,
    /// Threads gone (exited, or the id now names another thread).
    pub gone: u32,
    /// Threads whose mask someone else changed since; left as they are.
    pub changed_by_others: u32,
    /// Journals of dead owners found (each restored, then removed).
    pub journals: u32,
}

impl Restored {
    fn add(&mut self, o: Restored) {
        self.restored += o.restored;
        self.gone += o.gone;
        self.changed_by_others += o.changed_by_others;
        self.journals += o.journals;
    }
}

impl Journal {
    /// A new, empty journal of this process in `dir`, named after its pid.
    pub fn create(dir: &Path) -> io::Result<Journal> {
        fs::create_dir_all(dir)?;
        let pid = std::process::id();
        let start = Proc::default()
            .process_stat(pid)
            .map_or(0, |s| s.start_ticks);
        let j = Journal {
            path: dir.join(format!("affinity-{pid}.json")),
            file: JournalFile {
                owner_pid: pid,
                owner_start_ticks: start,
                threads: Vec::new(),
            },
            index: BTreeMap::new(),
        };
        j.flush()?;
        Ok(j)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Note that thread `tid`, whose mask before any change of ours was `original`, goes from
    /// `current` to `applied`. Call [`flush`](Self::flush) before making the change.
    pub fn record(
        &mut self,
        tid: u32,
        start_ticks: u64,
        original: &OsMask,
        current: &OsMask,
        applied: &OsMask,
    ) {
        match self.index.get(&tid) {
            Some(&i) if self.file.threads[i].start_ticks == start_ticks => {
                let e = &mut self.file.threads[i];
                e.before = Some(PackedMask::pack(current));
                e.applied = Some(PackedMask::pack(applied));
            }
            _ => {
                self.index.insert(tid, self.file.threads.len());
                self.file.threads.push(Entry {
                    tid,
                    start_ticks,
                    original: Some(PackedMask::pack(original)),
                    applied: Some(PackedMask::pack(applied)),
                    before: Some(PackedMask::pack(current)),
                });
            }
        }
    }

    /// Forget a thread (it exited, or was restored).
    pub fn forget(&mut self, tid: u32) {
        if let Some(i) = self.index.remove(&tid) {
            self.file.threads.swap_remove(i);
            if let Some(moved) = self.file.threads.get(i) {
                self.index.insert(moved.tid, i);
            }
            if sys::oversized(self.file.threads.capacity(), self.file.threads.len()) {
                self.file.threads.shrink_to_fit();
            }
        }
    }

    pub fn len(&self) -> usize {
        self.file.threads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.threads.is_empty()
    }

    /// Write the journal (atomically: a new file renamed over the old).
    pub fn flush(&self) -> io::Result<()> {
        let tmp = self.path.with_extension("json.tmp");
        // Streamed: a journal of many threads is never held as one string.
        let mut out = io::BufWriter::new(fs::File::create(&tmp)?);
        serde_json::to_writer(&mut out, &self.file).map_err(io::Error::other)?;
        io::Write::flush(&mut out)?;
        drop(out);
        fs::rename(&tmp, &self.path)
    }

    /// Restore every entry and delete the journal.
    pub fn restore_all(&mut self, proc: &Proc) -> Restored {
        let r = restore_entries(&self.file.threads, proc);
        self.file.threads.clear();
        self.index.clear();
        let _ = fs::remove_file(&self.path);
        r
    }
}

fn restore_entries(entries: &[Entry], proc: &Proc) -> Restored {
    let mut r = Restored::default();
    let journaled: std::collections::HashSet<u32> = entries.iter().map(|e| e.tid).collect();
    for e in entries {
        // /proc/<tid> resolves any thread id, not only process leaders.
        let same_thread = proc
            .process_stat(e.tid)
            .is_some_and(|s| s.start_ticks == e.start_ticks && !s.is_dead());
        if !same_thread {
            r.gone += 1;
            continue;
        }
        let (Some(original), Some(applied)) = (
            e.original.as_ref().map(PackedMask::unpack),
            e.applied.as_ref().map(PackedMask::unpack),
        ) else {
            continue;
        };
        // Ours if it has the mask we set, or, after a crash between the journal and the change,
        // the one it had before.
        let before = e.before.as_ref().map(PackedMask::unpack);
        match sys::get_affinity(e.tid) {
            Ok(now) if now != applied && Some(now) != before => {
                r.changed_by_others += 1;
                continue;
            }
            Ok(_) => {}
            Err(_) => {
                r.gone += 1;
                continue;
            }
        }
        match sys::set_affinity(e.tid, &original) {
            Ok(()) => r.restored += 1,
            Err(SysError::Gone(_)) => r.gone += 1,
            Err(e) => tracing::warn!("restoring affinity: {e}"),
        }
        // Threads the process created after this one was moved inherited the mask we set, and
        // some may never have been seen (created just before a crash, or before the exit): a
        // thread of the same process, not in the journal, with exactly that mask, gets the
        // original too. The same rule as the live engine's for inherited masks.
        let Some(pid) = proc.tgid_of(e.tid) else {
            continue;
        };
        for sib in proc.tids(pid) {
            if journaled.contains(&sib) || sys::get_affinity(sib).ok() != Some(applied) {
                continue;
            }
            match sys::set_affinity(sib, &original) {
                Ok(()) => r.restored += 1,
                Err(SysError::Gone(_)) => {}
                Err(e) => tracing::warn!("restoring affinity: {e}"),
            }
        }
    }
    r
}

/// Restore the threads of journals under `dir` whose owner is dead (a crashed or killed
/// hetsched), and delete those journals: the journals of `run` in `dir` itself and those of the
/// daemon's rule engines in its `rule-N` subdirectories, whatever rules are configured now. An
/// owner is alive only if its pid still names a process with the start time the journal records
/// (a reused pid is not the owner). Hint sockets of dead `run`s are removed, and so are rule
/// directories left empty. What was found is logged.
pub fn recover_stale(dir: &Path, proc: &Proc) -> Restored {
    let mut total = recover_dir(dir, proc);
    if let Ok(rd) = fs::read_dir(dir) {
        for ent in rd.flatten() {
            let path = ent.path();
            let is_rule_dir = ent
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("rule-"))
                && path.is_dir();
            if is_rule_dir {
                total.add(recover_dir(&path, proc));
                // Only succeeds when nothing is left in it.
                let _ = fs::remove_dir(&path);
            }
        }
    }
    if total.journals > 0 {
        tracing::warn!(
            "recovered {} journal(s) of a hetsched that did not stop cleanly under {}: {} thread(s) restored, {} gone, {} changed by others since",
            total.journals,
            dir.display(),
            total.restored,
            total.gone,
            total.changed_by_others
        );
    }
    total
}

/// [`recover_stale`] for the files of one directory.
fn recover_dir(dir: &Path, proc: &Proc) -> Restored {
    let mut total = Restored::default();
    let Ok(rd) = fs::read_dir(dir) else {
        return total;
    };
    let alive = |pid: u32, start: Option<u64>| {
        pid == std::process::id()
            || proc
                .process_stat(pid)
                .is_some_and(|s| start.is_none_or(|t| s.start_ticks == t) && !s.is_dead())
    };
    for ent in rd.flatten() {
        let path = ent.path();
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(pid) = name
            .strip_prefix("hint-")
            .and_then(|r| r.strip_suffix(".sock"))
            .and_then(|p| p.parse::<u32>().ok())
        {
            if !alive(pid, None) {
                let _ = fs::remove_file(&path);
            }
            continue;
        }
        if !(name.starts_with("affinity-") && name.ends_with(".json")) {
            continue;
        }
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let Ok(file) = serde_json::from_str::<JournalFile>(&text) else {
            tracing::warn!("{}: not a journal; left alone", path.display());
            continue;
        };
        if alive(file.owner_pid, Some(file.owner_start_ticks)) {
            continue;
        }
        let mut r = restore_entries(&file.threads, proc);
        r.journals = 1;
        total.add(r);
        let _ = fs::remove_file(&path);
    }
    total
}

/// Restore from the journal at `path` (the panic hook's path: no state but the file).
pub fn restore_from_file(path: &Path, proc: &Proc) -> Restored {
    let Ok(text) = fs::read_to_string(path) else {
        return Restored::default();
    };
    let Ok(file) = serde_json::from_str::<JournalFile>(&text) else {
        return Restored::default();
    };
    let r = restore_entries(&file.threads, proc);
    let _ = fs::remove_file(path);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_journal_restores_its_threads_and_only_those_unchanged() {
        let dir = std::env::temp_dir().join(format!("hs-journal-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let proc = Proc::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            tx.send(sys::gettid()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let me = std::process::id();
        let start = proc.process_stat(tid).unwrap().start_ticks;
        let original = sys::get_affinity(tid).unwrap();
        let first = original.cpus().next().unwrap();
        let pinned = OsMask::from_cpus([first]);
        sys::set_affinity(tid, &pinned).unwrap();
        // A journal left by a dead owner (pid 1 with a start time it does not have).
        let file = JournalFile {
            owner_pid: 1,
            owner_start_ticks: u64::MAX,
            threads: vec![
                Entry {
                    tid,
                    start_ticks: start,
                    original: Some(PackedMask::pack(&original)),
                    applied: Some(PackedMask::pack(&pinned)),
                    before: Some(PackedMask::pack(&original)),
                },
                // The id of a live thread with another start time: a reused id.
                Entry {
                    tid: me,
                    start_ticks: start + 12345,
                    original: Some(PackedMask::pack(&OsMask::from_cpus([0]))),
                    applied: Some(PackedMask::pack(&OsMask::from_cpus([0]))),
                    before: Some(PackedMask::pack(&OsMask::from_cpus([0]))),
                },
            ],
        };
        fs::write(
            dir.join("affinity-1.json"),
            serde_json::to_string(&file).unwrap(),
        )
        .unwrap();
        let r = recover_stale(&dir, &proc);
        assert_eq!(
            r,
            Restored {
                restored: 1,
                gone: 1,
                changed_by_others: 0,
                journals: 1,
            }
        );
        assert_eq!(sys::get_affinity(tid).unwrap(), original);
        assert!(!dir.join("affinity-1.json").exists());
        done_tx.send(()).unwrap();
        worker.join().unwrap();
        let _ = fs::remove_dir_all(&dir);
    }

    /// The on-disk form is cpulists: an older journal without `before`, and an entry whose list
    /// does not parse, still read (that entry alone is skipped at restore).
    #[test]
    fn journals_read_cpulists_and_survive_a_bad_one() {
        let text = r#"{"owner_pid":1,"owner_start_ticks":5,"threads":[
            {"tid":3,"start_ticks":4,"original":"0-1,4","applied":"1"},
            {"tid":4,"start_ticks":4,"original":"bogus","applied":"1","before":""}]}"#;
        let f: JournalFile = serde_json::from_str(text).unwrap();
        let original = f.threads[0].original.as_ref().unwrap().unpack();
        assert_eq!(original.cpus().collect::<Vec<_>>(), [0, 1, 4]);
        assert_eq!(f.threads[0].before, None);
        assert_eq!(f.threads[1].original, None);
        let back = serde_json::to_string(&f).unwrap();
        assert!(
            back.contains(r#""original":"0-1,4","applied":"1","before":"""#),
            "{back}"
        );
    }

    /// Journals of a dead daemon's rule engines are found whatever rules exist now; its rule
    /// directories go once empty, and a dead run's hint socket goes too.
    #[test]
    fn dead_rule_engines_journals_and_leftovers_are_found_and_removed() {
        let dir = std::env::temp_dir().join(format!("hs-journal-rules-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let dead = JournalFile {
            owner_pid: 1,
            owner_start_ticks: u64::MAX,
            threads: vec![Entry {
                tid: u32::MAX - 1,
                start_ticks: 1,
                original: Some(PackedMask::pack(&OsMask::from_cpus([0]))),
                applied: Some(PackedMask::pack(&OsMask::from_cpus([0]))),
                before: Some(PackedMask::pack(&OsMask::from_cpus([0]))),
            }],
        };
        for rule in ["rule-0", "rule-1"] {
            fs::create_dir_all(dir.join(rule)).unwrap();
            fs::write(
                dir.join(rule).join("affinity-1.json"),
                serde_json::to_string(&dead).unwrap(),
            )
            .unwrap();
        }
        // A rule directory with something else in it stays.
        fs::write(dir.join("rule-1").join("notes"), "keep").unwrap();
        // A hint socket of a pid that does not exist, and one of a live process (us).
        let gone_pid = u32::MAX - 7;
        fs::write(dir.join(format!("hint-{gone_pid}.sock")), "").unwrap();
        let ours = dir.join(format!("hint-{}.sock", std::process::id()));
        fs::write(&ours, "").unwrap();
        let r = recover_stale(&dir, &Proc::default());
        assert_eq!((r.journals, r.gone, r.restored), (2, 2, 0));
        assert!(!dir.join("rule-0").exists());
        assert!(dir.join("rule-1").exists() && !dir.join("rule-1/affinity-1.json").exists());
        assert!(!dir.join(format!("hint-{gone_pid}.sock")).exists());
        assert!(ours.exists());
        let _ = fs::remove_dir_all(&dir);
    }

    /// An empty `HETSCHED_STATE_DIR` counts as unset, a relative one is made absolute, and a
    /// state directory that is a file is an error naming it.
    #[test]
    fn the_state_directory_is_absolute_and_named_in_errors() {
        let d = state_dir_of(Some("rel/state".into())).unwrap();
        assert_eq!(d, std::env::current_dir().unwrap().join("rel/state"));
        assert_eq!(state_dir_of(Some("".into())), None);
        assert_eq!(state_dir_of(None), None);
        assert_eq!(
            state_dir_of(Some("/abs/state".into())),
            Some(PathBuf::from("/abs/state"))
        );
        let file = std::env::temp_dir().join(format!("hs-state-file-{}", std::process::id()));
        fs::write(&file, "").unwrap();
        let e = ensure_state_dir(&file).unwrap_err().to_string();
        assert!(
            e.contains(&file.display().to_string()) && e.contains("not a directory"),
            "{e}"
        );
        let _ = fs::remove_file(&file);
    }

    /// A state directory another user could write in is refused before any journal in it is
    /// read, with the reason; one of ours that only we write is taken.
    #[test]
    fn a_state_directory_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("hs-state-open-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).unwrap();
        let e = ensure_state_dir(&dir).unwrap_err().to_string();
        assert!(
            e.contains(&dir.display().to_string()) && e.contains("writable by every user"),
            "{e}"
        );
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o770)).unwrap();
        let e = ensure_state_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("writable by its group"), "{e}");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_state_dir(&dir).unwrap();
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_live_owners_journal_is_left_alone() {
        let dir = std::env::temp_dir().join(format!("hs-journal-live-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut j = Journal::create(&dir).unwrap();
        let m = OsMask::from_cpus([0]);
        j.record(1, 1, &m, &m, &m);
        j.flush().unwrap();
        let r = recover_stale(&dir, &Proc::default());
        assert_eq!(r, Restored::default());
        assert!(j.path().exists());
        j.forget(1);
        assert!(j.is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}
