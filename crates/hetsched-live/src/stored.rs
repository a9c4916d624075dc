//! Signatures of managed programs from the signature store ([`hetsched_signature::store`]), and
//! the one `run --signature FILE` gives the launched program: what a policy that places by
//! signatures (`hass`, `hetsched`) learns of a program when it starts, besides the signature hints
//! applications send.
//!
//! A process's executable is the file /proc/PID/exe opens (the very file it runs, even if its
//! path was replaced since), keyed by the link's text (the canonical path) and the SHA-256 of the
//! content. Hashing is the costly part, so hashes are kept per file identity (device, inode, size,
//! modification time), and entries per key with the entry file's size and modification time, so
//! a re-recorded entry is read again; both tables hold at most [`CACHE_ENTRIES`]. A missing entry
//! is normal (no signature); a malformed one is logged once and skipped.

use crate::procfs::Proc;
use hetsched_core::Signature;
use hetsched_signature::store::{ExecutableKey, Store};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

/// Most executables whose hash, and most store entries, are kept (ours: a daemon sees a few
/// hundred distinct programs; more only costs hashing again).
pub const CACHE_ENTRIES: usize = 256;

/// Counts of store lookups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StoreCounts {
    /// Processes whose executable was looked up (a process's exec is a new lookup).
    pub lookups: u64,
    /// Of those, found in the store (or given by `--signature`).
    pub found: u64,
    /// No entry for the executable (never recorded, or recorded from other content).
    pub missing: u64,
    /// An entry that could not be used (malformed, too large, another executable's), or an
    /// executable that could not be read or was too large to hash.
    pub rejected: u64,
}

/// A table of at most [`CACHE_ENTRIES`], the oldest insertion leaving first.
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K: Clone + Eq + Hash, V> Bounded<K, V> {
    fn new() -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }

    fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
            if self.order.len() > CACHE_ENTRIES {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// A file as the kernel knows it: the same identity, the same content (short of a write that
/// keeps the size and the modification time, which a build does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileId {
    fn of(m: &std::fs::Metadata) -> FileId {
        FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        }
    }
}

/// A store entry as last read: its file's identity then, and its signature (`None`: unusable).
struct Entry {
    file: FileId,
    signature: Option<Arc<Signature>>,
}

/// Where an engine's threads get signatures when their programs start.
pub struct StoredSignatures {
    store: Option<Store>,
    /// `run --signature FILE`: the launched process and its signature.
    launched: Option<(u32, Arc<Signature>)>,
    proc: Proc,
    hashes: Bounded<FileId, String>,
    entries: Bounded<ExecutableKey, Entry>,
    pub counts: StoreCounts,
}

impl StoredSignatures {
    /// Signatures from `store` (if any), and `launched`'s for its process.
    pub fn new(store: Option<Store>, launched: Option<(u32, Arc<Signature>)>, proc: Proc) -> Self {
        StoredSignatures {
            store,
            launched,
            proc,
            hashes: Bounded::new(),
            entries: Bounded::new(),
            counts: StoreCounts::default(),
        }
    }

    /// The signature of process `pid`'s program as it runs now: the launched program's given
    /// one, else its executable's store entry; `None` without either.
    pub fn for_process(&mut self, pid: u32) -> Option<Arc<Signature>> {
        self.counts.lookups += 1;
        if let Some((root, sig)) = &self.launched {
            if *root == pid {
                self.counts.found += 1;
                return Some(sig.clone());
            }
        }
        self.store.as_ref()?;
        let key = match self.key_of(pid) {
            Ok(Some(k)) => k,
            // Gone: nothing to place.
            Ok(None) => {
                self.counts.missing += 1;
                return None;
            }
            Err(e) => {
                tracing::debug!("signature store: pid {pid}: {e}");
                self.counts.rejected += 1;
                return None;
            }
        };
        let path = self.store.as_ref()?.entry_path(&key);
        let Ok(meta) = std::fs::metadata(&path) else {
            self.counts.missing += 1;
            return None;
        };
        let file = FileId::of(&meta);
        if let Some(e) = self.entries.get(&key).filter(|e| e.file == file) {
            let sig = e.signature.clone();
            self.count(sig.is_some());
            return sig;
        }
        let signature = match hetsched_signature::store::read_entry(&path, &key) {
            Ok(Some(s)) => Some(Arc::new(s)),
            Ok(None) => {
                self.counts.missing += 1;
                return None;
            }
            Err(e) => {
                // Logged once per entry file as it is now; the program runs without a signature.
                tracing::warn!("signature store: skipping {e}");
                None
            }
        };
        if signature.is_some() {
            tracing::info!(
                "signature store: {} (pid {pid}) has the signature {}",
                key.path.display(),
                path.display()
            );
        }
        self.count(signature.is_some());
        self.entries.insert(
            key,
            Entry {
                file,
                signature: signature.clone(),
            },
        );
        signature
    }

    fn count(&mut self, found: bool) {
        if found {
            self.counts.found += 1;
        } else {
            self.counts.rejected += 1;
        }
    }

    /// The store key of process `pid`'s executable; `Ok(None)` when the process is gone.
    fn key_of(&mut self, pid: u32) -> std::io::Result<Option<ExecutableKey>> {
        let link = self.proc.pid_dir(pid).join("exe");
        let path: PathBuf = match std::fs::read_link(&link) {
            Ok(p) => p,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let file = match std::fs::File::open(&link) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        let id = FileId::of(&meta);
        if let Some(h) = self.hashes.get(&id) {
            return Ok(Some(ExecutableKey {
                path,
                sha256: h.clone(),
                bytes: meta.len(),
            }));
        }
        let key = ExecutableKey::of_file(path, file)?;
        self.hashes.insert(id, key.sha256.clone());
        Ok(Some(key))
    }

    /// Executables hashed and entries held now (each at most [`CACHE_ENTRIES`]).
    pub fn cached(&self) -> (usize, usize) {
        (self.hashes.len(), self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_stay_bounded() {
        let mut b: Bounded<u32, u32> = Bounded::new();
        for i in 0..(CACHE_ENTRIES as u32 * 3) {
            b.insert(i, i);
        }
        assert_eq!(b.len(), CACHE_ENTRIES);
        assert_eq!(b.order.len(), CACHE_ENTRIES);
        // The oldest left first.
        assert!(b.get(&0).is_none());
        assert_eq!(
            b.get(&(CACHE_ENTRIES as u32 * 3 - 1)),
            Some(&(CACHE_ENTRIES as u32 * 3 - 1))
        );
    }

    #[test]
    fn this_process_is_looked_up_by_its_executable_and_cached() {
        let dir = std::env::temp_dir().join(format!("hs-stored-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::new(&dir);
        let me = std::process::id();
        let mut s = StoredSignatures::new(Some(store.clone()), None, Proc::default());
        assert_eq!(s.for_process(me), None, "nothing recorded yet");
        assert_eq!(s.counts.missing, 1);
        // Record this test binary's entry.
        let key = ExecutableKey::of_path(&std::env::current_exe().unwrap()).unwrap();
        let mut doc = serde_json::Map::new();
        doc.insert("schema_version".into(), 2.into());
        doc.insert(
            "misses_per_4096".into(),
            serde_json::json!([[9.0], [9.0], [9.0], [9.0]]),
        );
        doc.insert("sizes_bytes".into(), serde_json::json!([1024]));
        store.save(&key, doc).unwrap();
        let sig = s.for_process(me).expect("found");
        assert_eq!(sig.misses_at(1024, 4), 9.0);
        assert_eq!(s.cached(), (1, 1));
        // Looked up again: from the tables, the same signature.
        let again = s.for_process(me).unwrap();
        assert!(Arc::ptr_eq(&sig, &again));
        // A corrupt entry is skipped, not fatal.
        std::fs::write(store.entry_path(&key), "{ not json").unwrap();
        assert_eq!(s.for_process(me), None);
        assert_eq!(s.counts.rejected, 1);
        // A gone process is no signature.
        assert_eq!(s.for_process(u32::MAX - 3), None);
        // The launched program's given signature comes first.
        let given = Arc::new(Signature::from_row("given", &[5.0]));
        let mut l = StoredSignatures::new(Some(store), Some((me, given.clone())), Proc::default());
        assert!(Arc::ptr_eq(&l.for_process(me).unwrap(), &given));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
